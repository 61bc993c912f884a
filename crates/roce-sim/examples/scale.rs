//! Scale of the engine, in one process and in virtual time (no sockets):
//!
//! 1. memory: 10 000 connected RC QPs on one NIC (`--qps`), counted by a global allocator
//!    (stats_alloc) that keeps the bytes in use, so the figure is the whole NIC's — each QP and its entries in the
//!    NIC's maps — not `size_of::<Qp>()`. Measured twice: what creating and connecting them
//!    took, and what destroying them frees after each has done one 64 KiB WRITE and is idle
//!    again (what its queues keep).
//! 2. goodput and fairness: two NICs over a [`Pair`] whose link has a line rate (`--gbps`,
//!    default 100) and 1 µs latency and is each NIC's port (`LinkConfig::nic_port`), the NICs
//!    sending in bursts of 16 packets a QP as the device's do, with 1, 10, 100 and 1000 active
//!    QPs each keeping two 64 KiB RDMA WRITEs posted at path MTU 4096. For each: the aggregate
//!    goodput in virtual time (does the engine keep the link full?), the same bytes over the
//!    wall-clock time the simulation took (what the engine and the simulator cost on this
//!    CPU), the ratio of each to the 1-QP row, and Jain's fairness index of the QPs' goodputs
//!    (the payload of each QP's packets that reached the other NIC in the measured window).
//!    `--idle N` adds N connected idle QPs on each NIC to every row.
//!
//! Each row is measured once the process is warm: a 1-QP run that is not shown comes first (the
//! first row run cold took 0.6–0.7 × the rate of the same row run again, which made every
//! other row look faster than one QP). The window is 100 ms of virtual time, some 0.3 s of wall
//! time a row, and the rows are run three times, alternated: each row's wall-clock figure is
//! the median of its three, so that a moment of a shared host's load moves a row less.
//!
//! `cargo run --release -p roce-sim --example scale [-- --qps 10000 --idle 0 --window-ms 100]`

use std::alloc::System;
use std::collections::HashMap;
use std::time::{Duration, Instant as WallClock};

use roce_core::{
    CqHandle, Instant, Mtu, Nic, PdHandle, Psn, QpInit, QpType, Qpn, Remote, SendOp, SendWr, Sge,
    WcStatus,
};
use roce_sim::scenario::jain_index;
use roce_sim::{LinkConfig, Pair, PairConfig, connect};
use roce_wire::Opcode;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

/// The system allocator, counting what is allocated and freed (stats_alloc: the counting
/// needs an `unsafe impl GlobalAlloc`, which this workspace forbids in its own code).
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes in use now (a reallocation counts as what it added or freed).
fn in_use() -> isize {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as isize - stats.bytes_deallocated as isize
}

/// Bytes per WRITE.
const WRITE: u32 = 64 * 1024;
/// The path MTU.
const MTU: u32 = 4096;
/// WRITEs each active QP keeps posted.
const IN_FLIGHT: usize = 2;

struct Options {
    qps: usize,
    idle: usize,
    gbps: f64,
    window: Duration,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        qps: 10_000,
        idle: 0,
        gbps: 100.0,
        window: Duration::from_millis(100),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| format!("{flag} {v}: a number"))
        };
        match flag.as_str() {
            "--qps" => o.qps = number(&value)? as usize,
            "--idle" => o.idle = number(&value)? as usize,
            "--gbps" => o.gbps = number(&value)?,
            "--window-ms" => o.window = Duration::from_secs_f64(number(&value)? / 1e3),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(why) => {
            eprintln!("scale: {why}");
            std::process::exit(2);
        }
    };
    memory(o.qps);
    println!();
    goodput(&o);
}

/// Bytes in use per connected idle QP on one NIC of `qps`.
fn memory(qps: usize) {
    let mut pair = pair(f64::INFINITY);
    // One CQ for all of a NIC's QPs, as perftest's QPs share theirs; deep enough for all.
    let (a_cq, b_cq) = (pair.a.nic.create_cq(2 * qps), pair.b.nic.create_cq(2 * qps));
    let before = in_use();
    let a_qpns = create_qps(&mut pair.a.nic, pair.a.pd, a_cq, qps);
    let created = in_use() - before;
    let b_qpns = create_qps(&mut pair.b.nic, pair.b.pd, b_cq, qps);
    let mark = in_use();
    connect_all(&mut pair, &a_qpns, &b_qpns, true, false);
    let connected = created + in_use() - mark;
    connect_all(&mut pair, &a_qpns, &b_qpns, false, true);

    // One WRITE on every QP of a, then every QP idle again.
    let mut writes = Writes::new(&pair, &a_qpns);
    for i in 0..a_qpns.len() {
        writes.post(&mut pair, i);
    }
    let deadline = Instant::from_millis(1000);
    let mut done = 0;
    loop {
        // A step delivers what is due now, then moves the clock on.
        let more = pair.step();
        while let Some(cqe) = pair.a.nic.poll_completion(a_cq) {
            assert_eq!(cqe.status, WcStatus::Success, "{cqe:?}");
            done += 1;
        }
        if done == a_qpns.len() || pair.now >= deadline || !more {
            break;
        }
    }
    assert_eq!(
        done,
        a_qpns.len(),
        "every QP's WRITE completed: a {:?} b {:?}",
        pair.a.nic.stats(),
        pair.b.nic.stats()
    );
    drop(writes);
    // What a's QPs hold now, each with its entry in the NIC's maps: what destroying them frees.
    let held = in_use();
    for &qpn in &a_qpns {
        pair.a.nic.destroy_qp(qpn).expect("a QP of a");
    }
    let after_traffic = held - in_use();
    let fresh = connected as f64 / qps as f64;
    let used = after_traffic as f64 / qps as f64;
    println!(
        "memory: {qps} connected RC QPs on one NIC (queues of 16 WRs, one shared CQ), counted by the global allocator"
    );
    println!("  created and connected, idle: {connected} bytes, {fresh:.0} bytes per QP");
    println!(
        "  after one 64 KiB WRITE each, idle again (freed by destroying them): {after_traffic} bytes, {used:.0} bytes per QP"
    );
    let idle = fresh.max(used);
    println!(
        "  an idle QP, whole NIC: {idle:.0} bytes ({} the 4 KiB goal)",
        if idle <= 4096.0 { "within" } else { "over" }
    );
}

/// The goodput table.
fn goodput(o: &Options) {
    println!(
        "goodput: {} KiB RDMA WRITEs, {IN_FLIGHT} posted per active QP, path MTU 4096, link {} Gb/s with 1 us latency, {} idle QPs per NIC, window {:?} of virtual time after 1 ms; wall: the median of 3 rounds, rows alternated",
        WRITE / 1024,
        o.gbps,
        o.idle,
        o.window
    );
    println!(
        "{:>7} {:>14} {:>8} {:>14} {:>8} {:>8} {:>10}",
        "active", "virtual Gb/s", "vs 1", "wall Gb/s", "vs 1", "jain", "wall s"
    );
    // Warm-up, not shown: the allocator's pages, the code and the branch history.
    run(1, o);
    // Each row ROUNDS times, the rows alternated; each row's wall-clock figure is the median
    // of its rounds (the virtual-time figures and Jain's index are the same in every round).
    const ROWS: [usize; 4] = [1, 10, 100, 1000];
    const ROUNDS: usize = 3;
    let mut rounds: Vec<Vec<Row>> = (0..ROWS.len()).map(|_| Vec::new()).collect();
    for _ in 0..ROUNDS {
        for (i, &active) in ROWS.iter().enumerate() {
            rounds[i].push(run(active, o));
        }
    }
    let mut first: Option<(f64, f64)> = None;
    for (&active, mut rows) in ROWS.iter().zip(rounds) {
        rows.sort_by(|a, b| a.wall_gbps.total_cmp(&b.wall_gbps));
        let row = &rows[rows.len() / 2];
        let (v1, w1) = *first.get_or_insert((row.virtual_gbps, row.wall_gbps));
        println!(
            "{:>7} {:>14.2} {:>7.1}% {:>14.2} {:>7.1}% {:>8.4} {:>10.2}",
            active,
            row.virtual_gbps,
            100.0 * row.virtual_gbps / v1,
            row.wall_gbps,
            100.0 * row.wall_gbps / w1,
            row.jain,
            row.wall.as_secs_f64()
        );
    }
}

struct Row {
    virtual_gbps: f64,
    wall_gbps: f64,
    jain: f64,
    wall: Duration,
}

/// `active` QPs writing for `o.window` of virtual time, after 1 ms of warm-up.
fn run(active: usize, o: &Options) -> Row {
    let mut pair = pair(o.gbps);
    let total = active + o.idle;
    let a_cq = pair.a.nic.create_cq(4 * total);
    let b_cq = pair.b.nic.create_cq(4 * total);
    // The pair's own QP is QP 0.
    let mut a_qpns = vec![pair.a.qpn];
    let mut b_qpns = vec![pair.b.qpn];
    a_qpns.extend(create_qps(&mut pair.a.nic, pair.a.pd, a_cq, total - 1));
    b_qpns.extend(create_qps(&mut pair.b.nic, pair.b.pd, b_cq, total - 1));
    connect_all(&mut pair, &a_qpns[1..], &b_qpns[1..], true, true);
    let active_qpns = &a_qpns[..active];
    let mut writes = Writes::new(&pair, active_qpns);
    for i in 0..active {
        for _ in 0..IN_FLIGHT {
            writes.post(&mut pair, i);
        }
    }
    let start = Instant::from_nanos(1_000_000);
    let end = start + o.window;
    let mut wall_start = None;
    while pair.now < end && pair.step() {
        if wall_start.is_none() && pair.now >= start {
            wall_start = Some(WallClock::now());
        }
        // QP 0, the pair's own, completes into the pair's CQ; the others into a_cq.
        while let Some(cqe) = pair
            .a
            .nic
            .poll_completion(pair.a.cq)
            .or_else(|| pair.a.nic.poll_completion(a_cq))
        {
            assert_eq!(cqe.status, WcStatus::Success, "{cqe:?}");
            writes.post(&mut pair, writes.index[&cqe.qpn]);
        }
    }
    let wall = wall_start.map_or(Duration::ZERO, |t| t.elapsed());
    // Each QP's goodput: the payload of its WRITE packets that reached b in the window (every
    // one carries a full 4096 bytes here: 64 KiB is 16 packets), which is finer than counting
    // whole 64 KiB completions.
    let b_index: HashMap<Qpn, usize> = b_qpns[..active]
        .iter()
        .enumerate()
        .map(|(i, &q)| (q, i))
        .collect();
    let mut bytes = vec![0u64; active];
    for sent in pair.a_to_b.sent() {
        let in_window = sent.arrival.is_some_and(|t| t >= start && t < end);
        let write = matches!(
            sent.opcode,
            Some(Opcode::RcRdmaWriteFirst | Opcode::RcRdmaWriteMiddle | Opcode::RcRdmaWriteLast)
        );
        if let Some(&i) = sent
            .dest_qp
            .and_then(|q| b_index.get(&q))
            .filter(|_| in_window && write)
        {
            bytes[i] += u64::from(MTU);
        }
    }
    let sum: u64 = bytes.iter().sum();
    let secs = o.window.as_secs_f64();
    let rates: Vec<f64> = bytes.iter().map(|&b| b as f64 / secs).collect();
    Row {
        virtual_gbps: sum as f64 * 8.0 / secs / 1e9,
        wall_gbps: sum as f64 * 8.0 / wall.as_secs_f64().max(1e-9) / 1e9,
        jain: jain_index(&rates),
        wall,
    }
}

/// Two NICs, each with one RC QP connected to the other's, over a link of `gbps`.
fn pair(gbps: f64) -> Pair {
    let link = LinkConfig {
        latency: Duration::from_micros(1),
        bandwidth_bps: gbps.is_finite().then_some((gbps * 1e9) as u64),
        // The link is the NIC's port: the NIC is asked for a packet when the wire is free, as
        // a NIC's scheduler (and the network simulator's hosts) pick the next packet. Without
        // it every packet the QPs may send is built at once into the link's queue: at 1000 QPs
        // 128 MB of frames, whose memory, not the engine, set the wall-clock rate.
        nic_port: true,
        ..LinkConfig::default()
    };
    Pair::connected(&PairConfig { link, ..config() })
}

/// The pair's settings (its link aside), for its first QPs and for those added to it.
fn config() -> PairConfig {
    let mut config = PairConfig {
        mtu: Mtu::Mtu4096,
        region_len: WRITE as usize,
        queue_depth: 16,
        timeout: 14,
        a_psn: PSN,
        b_psn: PSN,
        ..PairConfig::default()
    };
    config.nic.max_qp = 0x10_0000;
    // As the device runs its NICs (`roce_device::TX_BURST_PACKETS`): a QP's turn is a burst of
    // up to 16 packets, so that one ACK request covers it.
    config.nic.tx_burst_packets = 16;
    config
}

/// The first PSN of every QP.
const PSN: Psn = Psn::new(0);

fn create_qps(nic: &mut Nic, pd: PdHandle, cq: CqHandle, n: usize) -> Vec<Qpn> {
    let init = QpInit::new(QpType::Rc, pd, cq, 16);
    (0..n)
        .map(|_| nic.create_qp(&init).expect("a QP under max_qp"))
        .collect()
}

/// RESET → INIT → RTR → RTS for each QP of a (`on_a`) and of b, QP i of a with QP i of b.
fn connect_all(pair: &mut Pair, a: &[Qpn], b: &[Qpn], on_a: bool, on_b: bool) {
    let (a_addr, b_addr) = (pair.a.addr, pair.b.addr);
    for (&qa, &qb) in a.iter().zip(b) {
        if on_a {
            connect(
                &config(),
                &mut pair.a.nic,
                qa,
                a_addr,
                (b_addr, qb),
                PSN,
                PSN,
                0,
            );
        }
        if on_b {
            connect(
                &config(),
                &mut pair.b.nic,
                qb,
                b_addr,
                (a_addr, qa),
                PSN,
                PSN,
                0,
            );
        }
    }
}

/// The WRITEs of a set of QPs of side a into b's region.
struct Writes {
    qpns: Vec<Qpn>,
    index: HashMap<Qpn, usize>,
    sge: Sge,
    remote: Remote,
    next_wr_id: u64,
}

impl Writes {
    fn new(pair: &Pair, qpns: &[Qpn]) -> Self {
        Self {
            qpns: qpns.to_vec(),
            index: qpns.iter().enumerate().map(|(i, &q)| (q, i)).collect(),
            sge: Sge {
                addr: pair.a.mr.addr(),
                length: WRITE,
                lkey: pair.a.mr.lkey(),
            },
            remote: Remote {
                addr: pair.b.mr.addr(),
                rkey: pair.b.mr.rkey(),
            },
            next_wr_id: 0,
        }
    }

    fn post(&mut self, pair: &mut Pair, i: usize) {
        let wr = SendWr::new(self.next_wr_id, SendOp::RdmaWrite(self.remote), self.sge);
        self.next_wr_id += 1;
        pair.a
            .nic
            .post_send(self.qpns[i], wr)
            .expect("a valid WRITE");
    }
}
