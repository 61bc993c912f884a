//! The congestion experiments of issue 6, in virtual time on a [`Fabric`](roce_sim::Fabric):
//! two DCQCN flows converging to fair shares, an 8:1 incast with and without DCQCN and PFC, and
//! PFC's victim flow. Each runs a [`Scenario`] (the same ones as `scenarios/*.toml`, which
//! `roce sim` runs) and asserts on its [`Series`]. Experiment 4 (one CNP at α = 1 halves the
//! rate; F fast-recovery steps back to the target) is roce-core's `cc::tests`, against a
//! literal transcription of the paper's equations, and `sim_dcqcn`'s
//! `dcqcn_cuts_the_senders_rate_after_cnps` end to end.
//!
//! The fabric: hosts on one switch, 10 Gb/s ports, 1 µs cables, RED marking Kmin 10 KB,
//! Kmax 40 KB, Pmax 0.2; flows are RC WRITEs of 64 KiB, four posted at a time, DSCP 26
//! (priority 3), path MTU 1024.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_core::Duration;
use roce_sim::scenario::{Flow, NicCongestion, jain_index, run};
use roce_sim::switch::{MarkAt, Pfc};
use roce_sim::{EcnMarking, Scenario, Series, SwitchConfig};

fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn long(from: usize, to: usize, start: Duration) -> Flow {
    Flow {
        from,
        to,
        bytes: None,
        start,
        dscp: 26,
    }
}

/// RED marking: Kmin 10 KB, Kmax 40 KB, Pmax 0.2.
const ECN: EcnMarking = EcnMarking {
    k_min_bytes: 10_000,
    k_max_bytes: 40_000,
    p_max: 0.2,
};

/// PFC on priority 3: XOFF above 20 KB held per ingress port, XON below 10 KB.
const PFC: Pfc = Pfc {
    xoff_bytes: 20_000,
    xon_bytes: 10_000,
    pause_quanta: 0xffff,
    priorities: 1 << 3,
};

const LINE: f64 = 10e9;

fn switch(buffer_bytes: usize, mark_at: MarkAt, pfc: Option<Pfc>) -> SwitchConfig {
    SwitchConfig {
        bandwidth_bps: LINE as u64,
        latency: us(1),
        buffer_bytes,
        ecn: Some(ECN),
        mark_at,
        pfc,
        ..SwitchConfig::default()
    }
}

fn totals(s: &Series) -> String {
    format!(
        "{}: drops {}, pauses {}, CE marks {}, CNPs {}, retransmitted {}, queue max {} B",
        s.name,
        Series::total(&s.drops),
        Series::total(&s.pauses),
        Series::total(&s.ce_marks),
        Series::total(&s.cnps),
        s.retransmitted_packets,
        s.queue_max(Duration::ZERO, ms(1000)),
    )
}

/// Experiment 1: host 0 writes to host 2 from 0, host 1 joins at 1 ms; the paper's DCQCN.
fn fairness(congestion: NicCongestion) -> Scenario {
    Scenario {
        name: "fairness".into(),
        hosts: 3,
        switch: switch(1 << 20, MarkAt::Enqueue, None),
        congestion,
        flows: vec![long(0, 2, us(0)), long(1, 2, ms(1))],
        duration: ms(20),
        interval: us(500),
        bottleneck: 2,
        ..Scenario::default()
    }
}

/// Settling time and window of experiment 1.
const SETTLE: Duration = Duration::from_millis(5);
const END: Duration = Duration::from_millis(20);

#[test]
fn two_long_flows_converge_to_fair_shares_with_dcqcn() {
    let s = run(&fairness(NicCongestion::DcqcnPaper)).unwrap();
    let means: Vec<f64> = (0..2).map(|f| s.mean_goodput(f, SETTLE, END)).collect();
    let jain = jain_index(&means);
    eprintln!("{}; goodput {means:?}, Jain {jain:.4}", totals(&s));
    assert!(
        jain >= 0.99,
        "Jain index {jain:.4} over 5–20 ms, goodput {means:?}"
    );
    // Fair and using the link: each near half of it.
    for (f, m) in means.iter().enumerate() {
        assert!(*m >= 0.4 * LINE, "flow {f}: {m} b/s");
    }
    assert_eq!(Series::total(&s.drops), 0);
    assert!(s.flows.iter().all(|f| f.cnps > 0));
}

/// Settling time of experiment 2.
const INCAST_SETTLE: Duration = Duration::from_millis(3);

/// Experiment 2: hosts 0..8 all write to host 8; 300 KB of buffer on the port, marking at
/// dequeue (Fast ECN), DCQCN with NVIDIA's defaults.
fn incast(congestion: NicCongestion, pfc: Option<Pfc>) -> Scenario {
    Scenario {
        name: "incast".into(),
        hosts: 9,
        switch: switch(300_000, MarkAt::Dequeue, pfc),
        congestion,
        flows: (0..8).map(|i| long(i, 8, us(0))).collect(),
        duration: ms(6),
        interval: us(250),
        bottleneck: 8,
        ..Scenario::default()
    }
}

#[test]
fn incast_with_dcqcn_keeps_the_queue_near_kmax_and_drops_nothing() {
    let s = run(&incast(NicCongestion::Dcqcn, None)).unwrap();
    let settled = s.queue_max(INCAST_SETTLE, ms(6));
    eprintln!("{}; queue max after 3 ms {settled} B", totals(&s));
    assert_eq!(Series::total(&s.drops), 0, "{}", totals(&s));
    assert_eq!(s.retransmitted_packets, 0);
    // The first burst (8 × line rate) queues more; once settled, near Kmax.
    assert!(
        settled <= ECN.k_max_bytes * 3 / 2,
        "queue {settled} B after 3 ms, Kmax {}",
        ECN.k_max_bytes
    );
    let total: f64 = (0..8).map(|f| s.mean_goodput(f, ms(1), ms(6))).sum();
    assert!(total >= 0.8 * LINE, "the port is used: {total} b/s");
}

#[test]
fn incast_without_dcqcn_overflows_the_queue() {
    let s = run(&incast(NicCongestion::None, None)).unwrap();
    eprintln!("{}", totals(&s));
    assert!(Series::total(&s.drops) > 0, "{}", totals(&s));
    assert!(s.retransmitted_packets > 0);
}

#[test]
fn incast_with_pfc_and_no_dcqcn_pauses_the_senders() {
    let s = run(&incast(NicCongestion::None, Some(PFC))).unwrap();
    eprintln!("{}", totals(&s));
    assert!(Series::total(&s.pauses) > 0, "{}", totals(&s));
    assert_eq!(Series::total(&s.drops), 0, "{}", totals(&s));
}

/// Experiment 3: hosts 0..4 write to host 4 (4:1); host 0 also writes to host 5, whose port is
/// idle — the victim flow, on the same priority. PFC on.
fn victim(congestion: NicCongestion) -> Scenario {
    let mut flows: Vec<Flow> = (0..4).map(|i| long(i, 4, us(0))).collect();
    flows.push(long(0, 5, us(0)));
    Scenario {
        name: "victim".into(),
        hosts: 6,
        switch: switch(1 << 20, MarkAt::Enqueue, Some(PFC)),
        congestion,
        flows,
        duration: ms(10),
        interval: us(500),
        bottleneck: 4,
        ..Scenario::default()
    }
}

#[test]
fn pfc_slows_a_victim_flow_and_dcqcn_removes_the_effect() {
    let pfc_only = run(&victim(NicCongestion::None)).unwrap();
    let with_dcqcn = run(&victim(NicCongestion::Dcqcn)).unwrap();
    let (from, to) = (ms(2), ms(10));
    let slowed = pfc_only.mean_goodput(4, from, to);
    let freed = with_dcqcn.mean_goodput(4, from, to);
    eprintln!(
        "{}; victim {slowed} b/s\n{}; victim {freed} b/s",
        totals(&pfc_only),
        totals(&with_dcqcn)
    );
    assert!(Series::total(&pfc_only.pauses) > 0);
    // Host 0's link could carry 10 Gb/s; its flow into the congested port gets ~1/4 of that
    // port, and PFC holds the victim, queued behind it at host 0, to about the same.
    assert!(slowed <= 0.35 * LINE, "victim under PFC: {slowed} b/s");
    // With DCQCN the congested flow is paced instead and the victim takes the rest.
    assert!(
        freed >= 2.5 * slowed && freed >= 0.5 * LINE,
        "victim with DCQCN: {freed} b/s against {slowed} b/s"
    );
}
