//! Fuzz harnesses for the engine. The `cargo fuzz` targets (`fuzz/fuzz_targets/`) are one line
//! each that call these; the tests run them over proptest's inputs and over a committed seed
//! corpus, so CI exercises them without a nightly toolchain (rustls' layout).
//!
//! [`nic_ingress`] reads its input as a script of commands against a NIC with three connected
//! QPs (RC, UC and UD): datagrams, verbs and the passing of time. It panics, which is what a
//! fuzzer reports, when the NIC panics or breaks one of the invariants it checks after every
//! command:
//!
//! - every datagram fed is counted once in `rx_packets`, and ends up either accepted or dropped
//!   under one reason (`rx_accepted + rx_dropped() == rx_packets`);
//! - every completion names a work request that was posted on that QP and queue, and none
//!   completes twice;
//! - everything `poll_transmit` writes parses with roce-wire, carries a good ICRC for the
//!   `Transmit`'s addresses, and goes to the peer; the output of one call is finite;
//! - after `handle_timeout(now)`, no deadline is due at `now` any more.
//!
//! Under `cfg(fuzzing)` roce-wire accepts every ICRC, so a fuzzer's packets reach the QPs. One
//! command also seals the ICRC (and aims the packet at a QP), so inputs built without
//! `cfg(fuzzing)` (proptest's) get there too.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_wire::{PseudoHeader, Qpn, RocePacket, RoceRepr, icrc};

use crate::Connect;
use crate::config::Mtu;
use crate::cq::{CqHandle, Cqe, WcOpcode};
use crate::mr::{Access, MemoryRegion};
use crate::qp::{AddressVector, QpAttr, QpInit};
use crate::qp::{QpState, QpType};
use crate::wr::{RecvWr, Remote, SendOp, SendWr, Sge, UdDest};
use crate::{Datagram, Duration, Ecn, Instant, MAX_DATAGRAM, Nic, NicConfig, Psn, Transmit};

/// Runs the script `data` against a fresh NIC and checks the invariants of the module
/// documentation after every command. Never returns an error: a broken invariant panics.
///
/// Each command is one byte `c` followed by its arguments. Missing argument bytes read as zero,
/// and a datagram's length is cut to what is left of the input.
///
/// | `c % 8` | arguments | what |
/// |---|---|---|
/// | 0 | `len: u16 le`, `len` bytes | a datagram from the peer as it is (`c & 8`: the backend hid the IPv4 ID) |
/// | 1 | `len: u16 le`, `len` bytes | a datagram to QP `(c >> 3) % 4` (RC, UC, UD, none): transport bits, TVer, P_Key, DestQP and the UD Q_Key (unless `c & 0x20`) set for it, ICRC sealed |
/// | 2 | `sel, flags, len: u16 le, offset` | `post_send` on QP `sel % 3`, operation `(sel / 3) % 8` |
/// | 3 | `sel, len: u16 le, offset` | `post_recv` on QP `sel % 3` |
/// | 4 | `exp` | time passes by 2^(`exp` % 21) µs, then `handle_timeout` |
/// | 5 | | time jumps to `poll_timeout`, then `handle_timeout` |
/// | 6 | `sel` | `modify_qp` on QP `sel % 3`: to ERR, SQD, RTS, or RESET and connected again |
/// | 7 | | a spurious `handle_timeout` |
pub fn nic_ingress(data: &[u8]) {
    run(data);
}

/// [`nic_ingress`], returning how far the script got into the NIC.
pub(crate) fn run(data: &[u8]) -> Summary {
    let mut harness = Harness::new();
    let mut input = Input(data);
    while let Some(command) = input.byte() {
        match command % 8 {
            0 => {
                let len = usize::from(input.u16());
                let bytes = input.take(len);
                let ip_id = (command & 8 == 0).then_some(0);
                harness.feed(bytes, ip_id);
            }
            1 => {
                let len = usize::from(input.u16());
                let mut bytes = input.take(len).to_vec();
                let target = usize::from((command >> 3) % 4);
                harness.shape(&mut bytes, target, command & 0x20 == 0);
                harness.feed(&bytes, Some(0));
            }
            2 => {
                let (sel, flags, len, offset) =
                    (input.byte0(), input.byte0(), input.u16(), input.byte0());
                harness.post_send(sel, flags, len, offset);
            }
            3 => {
                let (sel, len, offset) = (input.byte0(), input.u16(), input.byte0());
                harness.post_recv(sel, len, offset);
            }
            4 => {
                let exp = input.byte0() % 21;
                harness.now += Duration::from_micros(1 << exp);
                harness.timeout();
            }
            5 => {
                if let Some(at) = harness.nic.poll_timeout() {
                    harness.now = harness.now.max(at);
                }
                harness.timeout();
            }
            6 => {
                let sel = input.byte0();
                harness.modify(sel);
            }
            _ => harness.timeout(),
        }
        harness.drain();
    }
    harness.summary
}

/// What a run reached: tests use it to check that inputs get past the ingress checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    /// Datagrams fed.
    pub(crate) fed: u64,
    /// Work requests the NIC took.
    pub(crate) posted: u64,
    /// Datagrams the NIC sent.
    pub(crate) transmits: u64,
    /// Completions polled.
    pub(crate) completions: u64,
}

/// Our address.
pub(crate) const US: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
/// The peer's address.
pub(crate) const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
/// The peer's UDP source port.
const PEER_PORT: u16 = 0xc000;
/// The peer's QPs, connected to ours: RC, UC, UD.
pub(crate) const PEER_QPNS: [Qpn; 3] = [Qpn::new(0x91), Qpn::new(0x92), Qpn::new(0x93)];
/// The UD QP's Q_Key.
pub(crate) const QKEY: u32 = 0x1111_1111;
/// Where the peer's memory is, as our WRs name it.
const PEER_REGION: Remote = Remote {
    addr: 0x7f00_0000_0000,
    rkey: 0x77,
};
/// The first PSN our responders expect and our requesters send.
pub(crate) const RQ_PSN: Psn = Psn::new(0x10);
/// The first PSN of our requesters.
pub(crate) const SQ_PSN: Psn = Psn::new(0x0080_0000);
/// Bytes of the NIC's one memory region.
pub(crate) const REGION_LEN: usize = 16 * 1024;
/// More transmits than one call can cause: 64 READ responses (16 KiB at MTU 256), a window of
/// 128 PSNs, 16 UC or UD messages of 16 packets.
const MAX_TRANSMITS_PER_CALL: usize = 4096;

/// A NIC with an RC, a UC and a UD QP in RTS (RC and UC at path MTU 256), one region with every
/// right, one CQ, and the bookkeeping that checks the invariants.
#[derive(Debug)]
pub(crate) struct Harness {
    pub(crate) nic: Nic,
    pub(crate) now: Instant,
    pub(crate) mr: MemoryRegion,
    pub(crate) cq: CqHandle,
    /// RC, UC, UD.
    pub(crate) qps: [Qpn; 3],
    /// Work requests posted and not completed yet: QP, and whether on the receive queue.
    posted: HashMap<u64, (Qpn, bool)>,
    next_wr_id: u64,
    buf: Vec<u8>,
    pub(crate) summary: Summary,
}

impl Harness {
    pub(crate) fn new() -> Self {
        Self::with(NicConfig::default())
    }

    /// A harness whose NIC has `config`, addressed as the harness needs.
    pub(crate) fn with(config: NicConfig) -> Self {
        let mut nic = Nic::new(NicConfig {
            addrs: vec![US],
            ..config
        });
        let pd = nic.alloc_pd();
        let cq = nic.create_cq(1024);
        let mr = nic
            .reg_mr(pd, REGION_LEN, Access::ALL)
            .expect("a region with local write");
        let qps = [QpType::Rc, QpType::Uc, QpType::Ud].map(|qp_type| {
            let init = QpInit::new(qp_type, pd, cq, 16);
            nic.create_qp(&init).expect("room for three QPs")
        });
        let mut harness = Self {
            nic,
            now: Instant::ZERO,
            mr,
            cq,
            qps,
            posted: HashMap::new(),
            next_wr_id: 1,
            buf: vec![0; MAX_DATAGRAM],
            summary: Summary::default(),
        };
        for index in 0..3 {
            harness.connect(index);
        }
        harness
    }

    /// RESET → INIT → RTR → RTS with the attributes each QP type takes.
    fn connect(&mut self, index: usize) {
        let qp_type = [QpType::Rc, QpType::Uc, QpType::Ud][index];
        let connect = Connect {
            qp_type,
            mtu: Mtu::Mtu256,
            qkey: QKEY,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 1,
            // 4.096 µs × 2: the timer fires within a few commands.
            timeout: 1,
            retry_cnt: 3,
            rnr_retry: 2,
            ..Connect::rc(
                AddressVector::new(US, PEER),
                PEER_QPNS[index.min(1)],
                RQ_PSN,
                SQ_PSN,
            )
        };
        self.nic
            .connect_qp(self.qps[index], &connect)
            .expect("the harness's QPs connect");
    }

    /// Hands one datagram from the peer to the NIC.
    pub(crate) fn feed(&mut self, payload: &[u8], ip_id: Option<u16>) {
        let datagram = Datagram {
            src: SocketAddr::new(PEER, PEER_PORT),
            dst: SocketAddr::new(US, roce_wire::ROCE_V2_UDP_PORT),
            ecn: Ecn::NotEct,
            ip_id,
            segment: 0,
            payload,
        };
        self.summary.fed += 1;
        self.nic.handle_datagram(self.now, datagram);
    }

    /// Aims raw bytes at one of our QPs (`target` 3: at no QP) and seals their ICRC.
    fn shape(&self, bytes: &mut [u8], target: usize, fix_qkey: bool) {
        let (qpn, transport) = match target {
            0 => (self.qps[0], Some(0x00)),
            1 => (self.qps[1], Some(0x20)),
            2 => (self.qps[2], Some(0x60)),
            _ => (Qpn::new(0x4242), None),
        };
        if let (Some(opcode), Some(transport)) = (bytes.get_mut(0), transport) {
            *opcode = (*opcode & 0x1f) | transport;
        }
        // SE | M | PadCnt | TVer: TVer 0.
        if let Some(flags) = bytes.get_mut(1) {
            *flags &= 0xf0;
        }
        if let Some(pkey) = bytes.get_mut(2..4) {
            pkey.copy_from_slice(&roce_wire::bth::DEFAULT_PKEY.to_be_bytes());
        }
        if let Some(dest_qp) = bytes.get_mut(5..8) {
            dest_qp.copy_from_slice(&qpn.value().to_be_bytes()[1..]);
        }
        // The DETH follows the BTH in UD SENDs: its Q_Key first.
        if target == 2
            && fix_qkey
            && let Some(qkey) = bytes.get_mut(12..16)
        {
            qkey.copy_from_slice(&QKEY.to_be_bytes());
        }
        icrc::seal(&pseudo_header(PEER, PEER_PORT, US), bytes);
    }

    /// Posts a send WR built from the command's arguments; records it if the NIC takes it.
    fn post_send(&mut self, sel: u8, flags: u8, len: u16, offset: u8) {
        let index = usize::from(sel % 3);
        let remote = Remote {
            addr: PEER_REGION.addr + u64::from(offset) * 8,
            ..PEER_REGION
        };
        let op = match (sel / 3) % 8 {
            0 => SendOp::Send,
            1 => SendOp::SendWithImm(u32::from(flags)),
            2 => SendOp::SendWithInv(PEER_REGION.rkey),
            3 => SendOp::RdmaWrite(remote),
            4 => SendOp::RdmaWriteWithImm(remote, 7),
            5 => SendOp::RdmaRead(remote),
            6 => SendOp::CompareSwap {
                remote,
                compare: 0,
                swap: 1,
            },
            _ => SendOp::FetchAdd { remote, add: 1 },
        };
        let mut wr = SendWr::new(self.next_wr_id, op, self.sge(u32::from(len) % 4097, offset));
        wr.signaled = flags & 1 == 0;
        wr.inline = flags & 2 != 0;
        wr.solicited = flags & 4 != 0;
        if index == 2 {
            wr.ud = Some(UdDest {
                ip: PEER,
                qpn: PEER_QPNS[2],
                // The high bit: send the QP's own Q_Key.
                qkey: if flags & 8 == 0 { QKEY } else { 0x8000_0000 },
            });
        }
        self.post(index, Some(wr), None);
    }

    /// Posts a receive WR built from the command's arguments; records it if the NIC takes it.
    fn post_recv(&mut self, sel: u8, len: u16, offset: u8) {
        let wr = RecvWr {
            wr_id: self.next_wr_id,
            sgl: [self.sge(u32::from(len) % 4097, offset)].into(),
        };
        self.post(usize::from(sel % 3), None, Some(wr));
    }

    /// Posts a send or a receive WR on QP `index`.
    pub(crate) fn post(&mut self, index: usize, send: Option<SendWr>, recv: Option<RecvWr>) {
        let qpn = self.qps[index];
        let (wr_id, result, is_recv) = match (send, recv) {
            (Some(wr), _) => (wr.wr_id, self.nic.post_send(qpn, wr), false),
            (None, Some(wr)) => (wr.wr_id, self.nic.post_recv(qpn, wr), true),
            (None, None) => return,
        };
        self.next_wr_id = self.next_wr_id.max(wr_id) + 1;
        if result.is_ok() {
            let earlier = self.posted.insert(wr_id, (qpn, is_recv));
            assert!(earlier.is_none(), "the harness reused wr_id {wr_id}");
            self.summary.posted += 1;
        }
    }

    /// An SGE of `len` bytes in our region, at `offset` × 48 (the last one still fits 4 KiB).
    pub(crate) fn sge(&self, len: u32, offset: u8) -> Sge {
        Sge {
            addr: self.mr.addr() + u64::from(offset) * 48,
            length: len,
            lkey: self.mr.lkey(),
        }
    }

    fn modify(&mut self, sel: u8) {
        let index = usize::from(sel % 3);
        let to = |state| QpAttr {
            qp_state: Some(state),
            ..QpAttr::default()
        };
        // Refusals (SQD → SQD with nothing to drain, RTS from ERR, …) are API misuse: ignored.
        let _ = match (sel / 3) % 4 {
            0 => self.nic.modify_qp(self.qps[index], &to(QpState::Err)),
            1 => self.nic.modify_qp(self.qps[index], &to(QpState::Sqd)),
            2 => self.nic.modify_qp(self.qps[index], &to(QpState::Rts)),
            _ => {
                let reset = self.nic.modify_qp(self.qps[index], &to(QpState::Reset));
                if reset.is_ok() {
                    // RESET drops the queues without completions.
                    let qpn = self.qps[index];
                    self.posted.retain(|_, (q, _)| *q != qpn);
                    self.connect(index);
                }
                reset
            }
        };
    }

    /// `handle_timeout(now)`; afterwards nothing may be due at `now`, or a driver would spin.
    pub(crate) fn timeout(&mut self) {
        self.nic.handle_timeout(self.now);
        if let Some(at) = self.nic.poll_timeout() {
            assert!(
                at > self.now,
                "deadline {at} still due after handle_timeout({})",
                self.now
            );
        }
    }

    /// Drains every output and checks the invariants.
    pub(crate) fn drain(&mut self) {
        let mut drained = false;
        for _ in 0..MAX_TRANSMITS_PER_CALL {
            let Some(transmit) = self.nic.poll_transmit(self.now, &mut self.buf) else {
                drained = true;
                break;
            };
            check_transmit(&transmit, &self.buf);
            self.summary.transmits += 1;
        }
        assert!(
            drained,
            "poll_transmit gave {MAX_TRANSMITS_PER_CALL} packets after one call"
        );
        while let Some(cqe) = self.nic.poll_completion(self.cq) {
            self.check_completion(&cqe);
            self.summary.completions += 1;
        }
        let stats = self.nic.stats();
        assert_eq!(stats.rx_packets, self.summary.fed, "rx_packets");
        assert_eq!(
            stats.rx_accepted + stats.rx_dropped(),
            stats.rx_packets,
            "a datagram neither accepted nor dropped, or counted twice: {stats:?}"
        );
    }

    fn check_completion(&mut self, cqe: &Cqe) {
        let Some((qpn, is_recv)) = self.posted.remove(&cqe.wr_id) else {
            panic!("a completion for a WR never posted or already completed: {cqe:?}");
        };
        assert_eq!(cqe.qpn, qpn, "completion on the wrong QP: {cqe:?}");
        let recv_opcode = matches!(cqe.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm);
        assert_eq!(
            recv_opcode, is_recv,
            "completion from the wrong queue: {cqe:?}"
        );
    }
}

/// Checks one datagram the NIC wrote: to the peer, parses, and has a good ICRC.
fn check_transmit(transmit: &Transmit, buf: &[u8]) {
    assert_eq!(transmit.src, US, "{transmit:?}");
    assert_eq!(
        transmit.dst,
        SocketAddr::new(PEER, roce_wire::ROCE_V2_UDP_PORT),
        "{transmit:?}"
    );
    assert!(transmit.len <= MAX_DATAGRAM, "{transmit:?}");
    let payload = &buf[..transmit.len];
    let packet = RocePacket::new_checked(payload)
        .unwrap_or_else(|err| panic!("the NIC sent a packet that does not check: {err}"));
    if let Err(err) = RoceRepr::parse(&packet) {
        panic!("the NIC sent a packet that does not parse: {err}");
    }
    let header = pseudo_header(transmit.src, transmit.src_port, transmit.dst.ip());
    if let Err(err) = icrc::verify(&header, payload) {
        panic!("the NIC sent a bad ICRC: {err}");
    }
}

/// The IP and UDP fields the ICRC covers, for a datagram with ID 0 and DF.
fn pseudo_header(src: IpAddr, src_port: u16, dst: IpAddr) -> PseudoHeader {
    PseudoHeader::for_datagram(
        SocketAddr::new(src, src_port),
        SocketAddr::new(dst, roce_wire::ROCE_V2_UDP_PORT),
        0,
    )
    .expect("the harness's addresses are of one family")
}

/// The script, read front to back.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(first)
    }

    fn byte0(&mut self) -> u8 {
        self.byte().unwrap_or(0)
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte0(), self.byte0()])
    }

    fn take(&mut self, len: usize) -> &'a [u8] {
        let (taken, rest) = self.0.split_at(len.min(self.0.len()));
        self.0 = rest;
        taken
    }
}

#[cfg(test)]
mod tests;
