//! Two NICs, one QP each (RC by default, or UC or UD), connected over two [`Link`]s, in virtual
//! time: the harness of the two-NIC tests (quinn's `Pair`).
//!
//! ```text
//!   a.nic ──a_to_b──▶ b.nic
//!   a.nic ◀──b_to_a── b.nic
//! ```
//!
//! [`Pair::step`] delivers what is due, fires due timers, moves every transmit onto its link, then
//! jumps `now` to the next event. DCQCN timers re-arm forever, so "until idle" is no stopping rule:
//! runs are bounded with [`Pair::drive_until`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_core::{
    Access, AddressVector, Connect, CqHandle, Cqe, Datagram, Instant, MAX_DATAGRAM, MemoryRegion,
    Mtu, Nic, NicConfig, PdHandle, Psn, QpInit, QpState, QpType, Qpn, Transmit, UdDest,
};

use crate::event_loop::{self, Network};
use crate::{Capture, Link, LinkConfig, SimPacket, set_sim_time};

/// How a [`Pair`] is built. The default: seed 0, perfect 10 µs links, RC QPs, path MTU 1024,
/// 1 MiB regions, the QP attributes of ibv_rc_pingpong but retry_cnt 7 and a 1 ms ACK timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct PairConfig {
    /// The QPs' transport service. UC QPs take the path and PSN attributes, UD QPs the Q_Key
    /// and only the first PSN; the RC-only attributes below are then unused.
    pub qp_type: QpType,
    /// The UD QPs' Q_Key. Default 0x1111_1111, as ibv_ud_pingpong.
    pub qkey: u32,
    /// Seed of the links (`seed` for a → b, `seed + 1` for b → a).
    pub seed: u64,
    /// Both directions.
    pub link: LinkConfig,
    /// The QPs' path MTU (RC and UC; a UD QP's is the port's, `nic.max_mtu`).
    pub mtu: Mtu,
    /// Bytes of each side's memory region.
    pub region_len: usize,
    /// First PSN of a's requester (b's responder expects it).
    pub a_psn: Psn,
    /// First PSN of b's requester.
    pub b_psn: Psn,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
    /// RNR timer code the responders send.
    pub min_rnr_timer: u8,
    /// Outstanding READs and atomics.
    pub max_rd_atomic: u8,
    /// Send and receive queue depths.
    pub queue_depth: usize,
    /// The NICs' configuration, their addresses aside.
    pub nic: NicConfig,
}

impl Default for PairConfig {
    fn default() -> Self {
        Self {
            qp_type: QpType::Rc,
            qkey: 0x1111_1111,
            seed: 0,
            link: LinkConfig::default(),
            mtu: Mtu::Mtu1024,
            region_len: 1 << 20,
            a_psn: Psn::new(0),
            b_psn: Psn::new(0x0080_0000),
            timeout: 8,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            queue_depth: 1024,
            nic: NicConfig::default(),
        }
    }
}

/// One NIC of a pair and its objects.
#[derive(Debug)]
pub struct Side {
    /// The NIC.
    pub nic: Nic,
    /// Its address.
    pub addr: IpAddr,
    /// Its protection domain.
    pub pd: PdHandle,
    /// Its one completion queue (send and receive).
    pub cq: CqHandle,
    /// Its QP.
    pub qpn: Qpn,
    /// Its QP's Q_Key (UD).
    pub qkey: u32,
    /// Its memory region, with every right.
    pub mr: MemoryRegion,
}

impl Side {
    /// The next completion.
    pub fn completion(&mut self) -> Option<Cqe> {
        self.nic.poll_completion(self.cq)
    }

    /// Every completion waiting.
    pub fn completions(&mut self) -> Vec<Cqe> {
        std::iter::from_fn(|| self.completion()).collect()
    }

    /// The QP's state.
    pub fn qp_state(&self) -> QpState {
        self.nic.qp_state(self.qpn).expect("the pair's QP exists")
    }

    /// Where a peer's UD send WR goes to reach this side's QP (`SendWr::ud`).
    pub fn ud_dest(&self) -> UdDest {
        UdDest {
            ip: self.addr,
            qpn: self.qpn,
            qkey: self.qkey,
        }
    }
}

/// Two NICs over two links.
#[derive(Debug)]
pub struct Pair {
    /// Side a, at 198.18.0.1.
    pub a: Side,
    /// Side b, at 198.18.0.2.
    pub b: Side,
    /// What a sends.
    pub a_to_b: Link,
    /// What b sends.
    pub b_to_a: Link,
    /// Simulated time.
    pub now: Instant,
    buf: Vec<u8>,
}

/// The address of side a.
pub const A_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
/// The address of side b.
pub const B_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

impl Pair {
    /// Two NICs with one QP each of `config.qp_type`, connected to each other (UD: each knows
    /// the other's address and QPN through [`Side::ud_dest`]) and in RTS. If `ROCE_SIM_PCAP` is
    /// set, both links are captured into `$ROCE_SIM_PCAP/<thread name>.pcap` (the test's name).
    pub fn connected(config: &PairConfig) -> Self {
        let mut a = side(config, A_ADDR);
        let mut b = side(config, B_ADDR);
        connect(
            config,
            &mut a.nic,
            a.qpn,
            a.addr,
            (b.addr, b.qpn),
            config.b_psn,
            config.a_psn,
            0,
        );
        connect(
            config,
            &mut b.nic,
            b.qpn,
            b.addr,
            (a.addr, a.qpn),
            config.a_psn,
            config.b_psn,
            0,
        );
        let mut a_to_b = Link::new(config.link, config.seed);
        let mut b_to_a = Link::new(config.link, config.seed.wrapping_add(1));
        let name = std::thread::current()
            .name()
            .unwrap_or("pair")
            .replace("::", "-");
        if let Some(capture) = Capture::from_env(&name) {
            a_to_b.capture(capture.clone());
            b_to_a.capture(capture);
        }
        Self {
            a,
            b,
            a_to_b,
            b_to_a,
            now: Instant::ZERO,
            buf: vec![0; MAX_DATAGRAM],
        }
    }

    /// Delivers everything due at `now`, fires due timers, moves transmits onto the links, then
    /// jumps `now` to the next event. Returns false when nothing is scheduled.
    pub fn step(&mut self) -> bool {
        self.exchange();
        // A port still serialising is a moment its NIC may send again: one step more per
        // packet with `LinkConfig::nic_port`, none without.
        let next = [
            self.a.nic.poll_timeout(),
            self.b.nic.poll_timeout(),
            self.a_to_b.next_arrival(),
            self.b_to_a.next_arrival(),
            self.a_to_b.port_free_at(self.now),
            self.b_to_a.port_free_at(self.now),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(at) => {
                self.now = self.now.max(at);
                set_sim_time(self.now);
                true
            }
            None => false,
        }
    }

    /// Steps until `deadline` or until nothing is scheduled.
    pub fn drive_until(&mut self, deadline: Instant) {
        while self.now < deadline && self.step() {}
        if self.now < deadline {
            self.exchange();
        }
    }

    /// Steps until `done(self)` holds or `deadline` passes; returns whether it held.
    pub fn drive_while(&mut self, deadline: Instant, done: impl FnMut(&mut Self) -> bool) -> bool {
        event_loop::drive_while(self, deadline, done)
    }

    /// Everything that can happen at `now`, until nothing more does.
    fn exchange(&mut self) {
        let mut links = PairLinks([&mut self.a_to_b, &mut self.b_to_a]);
        event_loop::exchange(
            self.now,
            &mut [&mut self.a, &mut self.b],
            &mut links,
            &mut self.buf,
        );
    }
}

/// A pair's network: node 0 (a) sends on the first link, node 1 (b) on the second.
struct PairLinks<'a>([&'a mut Link; 2]);

impl Network for PairLinks<'_> {
    fn deliver(&mut self, now: Instant, to: usize) -> Option<SimPacket> {
        self.0.get_mut(1 - to.min(1))?.deliver(now)
    }

    fn send(&mut self, now: Instant, from: usize, packet: SimPacket) {
        if let Some(link) = self.0.get_mut(from) {
            link.send(now, packet);
        }
    }

    fn port_free_at(&self, now: Instant, from: usize) -> Option<Instant> {
        self.0.get(from)?.port_free_at(now)
    }

    fn node_name(&self, i: usize) -> Option<&'static str> {
        ["a", "b"].get(i).copied()
    }
}

pub(crate) fn datagram(packet: &SimPacket) -> Datagram<'_> {
    Datagram {
        src: packet.src,
        dst: packet.dst,
        ecn: packet.ecn,
        // The simulator knows the whole header: IPv4 ID 0, as the NICs computed the ICRC.
        ip_id: packet.src.is_ipv4().then_some(0),
        segment: 0,
        payload: &packet.payload,
    }
}

pub(crate) fn packet(transmit: &Transmit, buf: &[u8]) -> SimPacket {
    SimPacket {
        src: SocketAddr::new(transmit.src, transmit.src_port),
        dst: transmit.dst,
        ecn: transmit.ecn,
        dscp: transmit.dscp,
        ttl: transmit.ttl,
        payload: buf[..transmit.len].to_vec(),
        tag: 0,
    }
}

pub(crate) fn side(config: &PairConfig, addr: IpAddr) -> Side {
    let mut nic = Nic::new(NicConfig {
        addrs: vec![addr],
        ..config.nic.clone()
    });
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(4 * config.queue_depth);
    let mr = nic
        .reg_mr(pd, config.region_len, Access::ALL)
        .expect("a valid region");
    let qpn = new_qp(config, &mut nic, pd, cq);
    Side {
        nic,
        addr,
        pd,
        cq,
        qpn,
        qkey: config.qkey,
        mr,
    }
}

/// A new QP of `config.qp_type` on `nic`, in `pd`, completing to `cq`.
fn new_qp(config: &PairConfig, nic: &mut Nic, pd: PdHandle, cq: CqHandle) -> Qpn {
    let init = QpInit::new(config.qp_type, pd, cq, config.queue_depth);
    nic.create_qp(&init).expect("a valid QP")
}

/// Creates a QP on node `i` and one on node `j` and connects them to each other, both sending
/// with `dscp`; returns their numbers. Completions go to each node's CQ. What
/// [`crate::Net::connect`] and [`crate::Fabric::connect_dscp`] do.
pub(crate) fn connect_nodes(
    config: &PairConfig,
    nodes: &mut [Side],
    i: usize,
    j: usize,
    dscp: u8,
) -> (Qpn, Qpn) {
    let mut qpn = |k: usize| {
        let node: &mut Side = &mut nodes[k];
        new_qp(config, &mut node.nic, node.pd, node.cq)
    };
    let (qpn_i, qpn_j) = (qpn(i), qpn(j));
    let (addr_i, addr_j) = (nodes[i].addr, nodes[j].addr);
    let (psn_i, psn_j) = (config.a_psn, config.b_psn);
    connect(
        config,
        &mut nodes[i].nic,
        qpn_i,
        addr_i,
        (addr_j, qpn_j),
        psn_j,
        psn_i,
        dscp,
    );
    connect(
        config,
        &mut nodes[j].nic,
        qpn_j,
        addr_j,
        (addr_i, qpn_i),
        psn_i,
        psn_j,
        dscp,
    );
    (qpn_i, qpn_j)
}

/// RESET → INIT → RTR → RTS, as ibv_rc_pingpong, ibv_uc_pingpong and ibv_ud_pingpong do it: each
/// transition with the attributes the QP type requires (see roce-core's QP state table), from
/// `config`. [`Pair::connected`] and [`crate::Net::connect`] connect their QPs with it; it also
/// connects more QPs that a caller created on a pair's NICs. `qpn` (at `addr`) expects
/// `rq_psn` first and sends `sq_psn` first; its packets carry `dscp`.
#[allow(clippy::too_many_arguments)]
pub fn connect(
    config: &PairConfig,
    nic: &mut Nic,
    qpn: Qpn,
    addr: IpAddr,
    (peer, peer_qpn): (IpAddr, Qpn),
    rq_psn: Psn,
    sq_psn: Psn,
    dscp: u8,
) {
    let connect = Connect {
        qp_type: config.qp_type,
        qkey: config.qkey,
        mtu: config.mtu,
        max_rd_atomic: config.max_rd_atomic,
        max_dest_rd_atomic: config.max_rd_atomic,
        min_rnr_timer: config.min_rnr_timer,
        timeout: config.timeout,
        retry_cnt: config.retry_cnt,
        rnr_retry: config.rnr_retry,
        ..Connect::rc(
            AddressVector {
                dscp,
                ..AddressVector::new(addr, peer)
            },
            peer_qpn,
            rq_psn,
            sq_psn,
        )
    };
    nic.connect_qp(qpn, &connect)
        .expect("the pair's QPs connect");
}

event_loop::impl_event_loop!(Pair);
