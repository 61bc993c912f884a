//! The engine's cost per packet: an RDMA WRITE stream at path MTU 4096 between two NICs with no
//! loss, driven directly — a `poll_transmit` → b `handle_datagram` → b `poll_transmit` (its
//! ACKs) → a `handle_datagram` — with no simulated link in between. One criterion iteration is
//! one data packet, so the times reported are per packet; they include posting the WRs (64
//! packets each), the ACKs (one per 64 packets, rxe's `RXE_MAX_PKT_PER_ACK`) and the completions.
//!
//! - `write_4096/icrc_check`: both NICs as configured by default: the sender seals the ICRC, the
//!   receiver checks it.
//! - `write_4096/icrc_skip_rx`: the receiver skips its ICRC check (`IcrcPolicy::Skip`); the
//!   sender still computes the ICRC of every packet.
//! - `floor/copy_2x4096`: the two 4 KiB copies every packet needs anyway (gather from the
//!   sender's region into the packet, scatter from the packet into the receiver's region).
//! - `copy/memcpy/D` and `copy/pieces/D`: one 4 KiB payload from a page-aligned source to a
//!   destination `D` bytes further modulo 4 KiB, by one `copy_from_slice` and by
//!   `roce_core::copy::copy_payload` (the engine's); D = 12 is where a MIDDLE packet's payload
//!   lies from its region's page, and where glibc's `rep movsb` is slow on AMD Zen.
//! - `write_64/messages`: 64-byte WRITEs, 64 posted at a time, each one packet with AckReq and
//!   its own ACK and completion: one iteration is one message, so 1 / time is the message rate
//!   of both NICs on one core.
//!
//! `cargo bench -p roce-core --bench engine -- --warm-up-time 1 --measurement-time 4`; figures
//! are kept in docs/benchmarks.md.
//!
//! For instruction counts (`valgrind --tool=callgrind`, repeatable on a busy machine), the
//! binary runs one stream without criterion when `ROCE_ENGINE_PACKETS` is set:
//! `ROCE_ENGINE_PACKETS=20000 ROCE_ENGINE_SIZE=262144 valgrind --tool=callgrind <bench binary>`
//! (`ROCE_ENGINE_SIZE`: bytes per WRITE, default 256 KiB; `ROCE_ENGINE_ICRC=skip` skips the
//! receiver's check). `bench/compare.sh` takes the difference of two such runs.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant as WallClock};

use criterion::{Criterion, criterion_group};
use roce_core::{
    Access, AddressVector, Connect, CqHandle, Datagram, Ecn, IcrcPolicy, Instant, MAX_DATAGRAM,
    MemoryRegion, Mtu, Nic, NicConfig, Psn, QpInit, QpType, Qpn, Remote, SendOp, SendWr, Sge,
    Transmit,
};

/// What one NIC sent, `t` of `buf`, as the datagram the other receives.
fn datagram<'a>(t: &Transmit, buf: &'a [u8]) -> Datagram<'a> {
    Datagram {
        src: SocketAddr::new(t.src, t.src_port),
        dst: t.dst,
        ecn: Ecn::NotEct,
        ip_id: Some(0),
        segment: 0,
        payload: &buf[..t.len],
    }
}

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const MTU: u32 = 4096;
/// Packets per WRITE of the 4 KiB stream.
const PACKETS_PER_WR: u32 = 64;

/// One NIC with one RC QP.
struct Side {
    nic: Nic,
    qpn: Qpn,
    cq: CqHandle,
    mr: MemoryRegion,
}

/// Two NICs and the stream between them.
struct Stream {
    a: Side,
    b: Side,
    buf: Vec<u8>,
    /// WRITEs posted and not completed.
    posted: usize,
    next_wr_id: u64,
    /// Bytes per WRITE.
    msg_len: u32,
    /// WRs kept posted, so the requester never waits for the application.
    in_flight: usize,
}

impl Stream {
    fn new(rx_icrc: IcrcPolicy, msg_len: u32, in_flight: usize) -> Self {
        let mut a = side(A, IcrcPolicy::Check, msg_len);
        let mut b = side(B, rx_icrc, msg_len);
        connect(&mut a, B, b.qpn);
        connect(&mut b, A, a.qpn);
        Self {
            a,
            b,
            buf: vec![0; MAX_DATAGRAM],
            posted: 0,
            next_wr_id: 0,
            msg_len,
            in_flight,
        }
    }

    /// Moves `packets` data packets from a to b, with everything they cause.
    fn run(&mut self, packets: u64) {
        let now = Instant::ZERO;
        let mut sent = 0;
        while sent < packets {
            while self.posted < self.in_flight {
                self.post();
            }
            let Some(t) = self.a.nic.poll_transmit(now, &mut self.buf) else {
                // The window is full: the ACK is on its way back below.
                self.acks(now);
                continue;
            };
            self.b.nic.handle_datagram(now, datagram(&t, &self.buf));
            sent += 1;
            self.acks(now);
        }
    }

    /// b's ACKs to a, and a's completions.
    fn acks(&mut self, now: Instant) {
        while let Some(t) = self.b.nic.poll_transmit(now, &mut self.buf) {
            self.a.nic.handle_datagram(now, datagram(&t, &self.buf));
        }
        while let Some(cqe) = self.a.nic.poll_completion(self.a.cq) {
            assert_eq!(cqe.status, roce_core::WcStatus::Success, "{cqe:?}");
            self.posted -= 1;
        }
    }

    fn post(&mut self) {
        let len = self.msg_len;
        let sge = Sge {
            addr: self.a.mr.addr(),
            length: len,
            lkey: self.a.mr.lkey(),
        };
        let remote = Remote {
            addr: self.b.mr.addr(),
            rkey: self.b.mr.rkey(),
        };
        let wr = SendWr::new(self.next_wr_id, SendOp::RdmaWrite(remote), sge);
        self.next_wr_id += 1;
        self.a.nic.post_send(self.a.qpn, wr).expect("a valid WRITE");
        self.posted += 1;
    }
}

fn side(addr: IpAddr, icrc: IcrcPolicy, msg_len: u32) -> Side {
    let mut nic = Nic::new(NicConfig {
        addrs: vec![addr],
        icrc,
        ..NicConfig::default()
    });
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(256);
    let mr = nic
        .reg_mr(pd, msg_len as usize, Access::ALL)
        .expect("a valid region");
    let init = QpInit::new(QpType::Rc, pd, cq, 128);
    let qpn = nic.create_qp(&init).expect("a valid QP");
    Side { nic, qpn, cq, mr }
}

fn connect(side: &mut Side, peer: IpAddr, peer_qpn: Qpn) {
    let av = AddressVector::new(side.nic.config().addrs[0], peer);
    let connect = Connect {
        mtu: Mtu::Mtu4096,
        max_rd_atomic: 16,
        max_dest_rd_atomic: 16,
        min_rnr_timer: 1,
        ..Connect::rc(av, peer_qpn, Psn::new(0), Psn::new(0))
    };
    side.nic
        .connect_qp(side.qpn, &connect)
        .expect("the QPs connect");
}

impl Stream {
    /// Nothing was dropped or resent.
    fn check(&self) {
        let stats = self.b.nic.stats();
        assert_eq!(stats.rx_dropped(), 0, "{stats:?}");
        assert_eq!(self.a.nic.stats().retransmitted_packets, 0);
    }
}

fn per_packet(stream: &mut Stream, packets: u64) -> Duration {
    let start = WallClock::now();
    stream.run(packets);
    start.elapsed()
}

fn engine(c: &mut Criterion) {
    let mut group = c.benchmark_group("write_4096");
    for (name, policy) in [
        ("icrc_check", IcrcPolicy::Check),
        ("icrc_skip_rx", IcrcPolicy::Skip),
    ] {
        let mut stream = Stream::new(policy, PACKETS_PER_WR * MTU, 2);
        group.bench_function(name, |bench| {
            bench.iter_custom(|packets| per_packet(&mut stream, packets));
        });
        stream.check();
    }
    group.finish();

    let mut stream = Stream::new(IcrcPolicy::Check, 64, 64);
    c.bench_function("write_64/messages", |bench| {
        bench.iter_custom(|messages| per_packet(&mut stream, messages));
    });
    stream.check();

    let src = vec![1u8; MTU as usize];
    let mut packet = vec![0u8; MTU as usize];
    let mut dst = vec![0u8; MTU as usize];
    c.bench_function("floor/copy_2x4096", |bench| {
        bench.iter(|| {
            packet.copy_from_slice(black_box(&src));
            dst.copy_from_slice(black_box(&packet));
            black_box(&dst);
        });
    });
}

/// A 4 KiB copy at each distance, whole and in the engine's pieces (see the top of the file).
fn copy(c: &mut Criterion) {
    const PAGE: usize = 4096;
    let src = vec![1u8; 3 * PAGE];
    let mut dst = vec![0u8; 3 * PAGE];
    let page_start = |v: &[u8]| (PAGE - v.as_ptr() as usize % PAGE) % PAGE;
    let (from, to) = (page_start(&src), page_start(&dst));
    for distance in [12usize, 64] {
        let source = &src[from..from + PAGE];
        let at = to + distance;
        c.bench_function(&format!("copy/memcpy/{distance}"), |bench| {
            bench.iter(|| dst[at..at + PAGE].copy_from_slice(black_box(source)));
        });
        c.bench_function(&format!("copy/pieces/{distance}"), |bench| {
            bench
                .iter(|| roce_core::copy::copy_payload(&mut dst[at..at + PAGE], black_box(source)));
        });
    }
}

criterion_group!(benches, engine, copy);

fn main() {
    // One stream without criterion, for valgrind (see the top of the file).
    if let Some(packets) = std::env::var("ROCE_ENGINE_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        let size = std::env::var("ROCE_ENGINE_SIZE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(PACKETS_PER_WR * MTU);
        let policy = match std::env::var("ROCE_ENGINE_ICRC").as_deref() {
            Ok("skip") => IcrcPolicy::Skip,
            _ => IcrcPolicy::Check,
        };
        let in_flight = if size <= MTU { 64 } else { 2 };
        let mut stream = Stream::new(policy, size, in_flight);
        stream.run(packets);
        stream.check();
        println!("{packets} packets of up to {MTU} bytes, {size}-byte WRITEs");
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
