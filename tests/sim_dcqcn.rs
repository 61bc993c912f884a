//! DCQCN between two NICs in virtual time: the notification point's CNPs, pacing at the QP's
//! rate, and a bottleneck link with RED ECN marking where DCQCN keeps the queue bounded and
//! lossless while the same traffic without it overflows the queue.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::cell::RefCell;
use std::rc::Rc;

use roce_core::{Congestion, DcqcnConfig, Duration, Ecn, Instant, NicConfig, SendOp, WcStatus};
use roce_sim::{EcnMarking, LinkConfig, Pair, PairConfig, SimPacket, Verdict};
use roce_tests::sim::{pattern, post, remote, wr};
use roce_wire::{Opcode, Psn, RocePacket, cnp};

fn dcqcn(config: DcqcnConfig, line_rate_bps: u64) -> NicConfig {
    NicConfig {
        line_rate_bps,
        congestion: Congestion::Dcqcn(config),
        ..NicConfig::default()
    }
}

/// a WRITEs `count` messages of `len` bytes into b, each signaled.
fn write_messages(pair: &mut Pair, count: u64, len: u32) {
    let data = pattern(7, len as usize);
    pair.a.mr.write(0, &data);
    for id in 0..count {
        let write = wr(&pair.a, id, SendOp::RdmaWrite(remote(&pair.b, 0)), 0, len);
        post(pair, true, write);
    }
}

fn successes(pair: &mut Pair) -> usize {
    pair.a
        .completions()
        .iter()
        .inspect(|cqe| assert_eq!(cqe.status, WcStatus::Success))
        .count()
}

#[test]
fn ce_marked_requests_get_one_cnp_per_min_time_between_cnps() {
    let _log = roce_sim::trace_to_test_output();
    // Paper values: N = 50 µs; a 10 Gb/s line so the requests span several intervals.
    let config = PairConfig {
        nic: dcqcn(DcqcnConfig::paper(), 10_000_000_000),
        ..PairConfig::default()
    };
    let mut pair = Pair::connected(&config);
    // Every request is marked CE on its way to b.
    pair.a_to_b.set_filter(|_| Verdict::MarkCe);
    let cnps: Rc<RefCell<Vec<(SimPacket, Instant)>>> = Rc::default();
    write_messages(&mut pair, 1, 128 * 1024);
    let seen = cnps.clone();
    let clock = Rc::new(RefCell::new(Instant::ZERO));
    let now = clock.clone();
    pair.b_to_a.set_filter(move |packet| {
        if packet.payload.first() == Some(&u8::from(Opcode::Cnp)) {
            seen.borrow_mut().push((packet.clone(), *now.borrow()));
        }
        Verdict::Pass
    });
    while pair.now < Instant::from_millis(3) && pair.step() {
        *clock.borrow_mut() = pair.now;
    }

    let cnps = cnps.borrow();
    let marked: Vec<Instant> = pair
        .a_to_b
        .sent()
        .iter()
        .filter(|sent| sent.ce_marked)
        .filter_map(|sent| sent.arrival)
        .collect();
    assert!(marked.len() >= 100, "{} CE-marked requests", marked.len());
    // The rule, applied to the arrival times of the marked requests: a CNP at the first, then
    // at the first one at least N = 50 µs after the last CNP.
    let mut expected = Vec::new();
    for &at in &marked {
        if expected
            .last()
            .is_none_or(|&last: &Instant| at - last >= Duration::from_micros(50))
        {
            expected.push(at);
        }
    }
    let times: Vec<Instant> = cnps.iter().map(|(_, at)| *at).collect();
    assert!(expected.len() >= 3, "{expected:?}");
    assert_eq!(times, expected, "one CNP per min_time_between_cnps");
    assert_eq!(pair.b.nic.stats().tx_cnps, cnps.len() as u64);
    assert_eq!(pair.a.nic.stats().rx_cnps, cnps.len() as u64);
    let b_state = pair.b.nic.qp_congestion(pair.b.qpn, pair.now).unwrap();
    assert_eq!(b_state.cnps_sent, cnps.len() as u64);
    let a_state = pair.a.nic.qp_congestion(pair.a.qpn, pair.now).unwrap();
    assert_eq!(a_state.cnps_received, cnps.len() as u64);
    assert!(a_state.rate_bps.unwrap() < 10_000_000_000);

    // The bytes: opcode 0x81, BECN, DestQP = a's QP (the sender), PSN 0, 16 zero bytes, a
    // valid ICRC; DSCP cnp_dscp 48, not ECN-capable.
    let (cnp_packet, _) = &cnps[0];
    assert_eq!(cnp_packet.dscp, 48);
    assert_eq!(cnp_packet.ecn, Ecn::NotEct);
    let parsed = RocePacket::new_checked(&cnp_packet.payload[..]).unwrap();
    let bth = parsed.bth();
    assert_eq!(bth.opcode(), Opcode::Cnp);
    assert!(bth.becn());
    assert_eq!(bth.dest_qp(), pair.a.qpn);
    assert_eq!(bth.psn(), Psn::new(0));
    assert!(!bth.ack_req());
    assert_eq!(cnp_packet.payload.len(), 12 + cnp::RESERVED_LEN + 4);
    assert!(cnp_packet.payload[12..28].iter().all(|&b| b == 0));
    assert_eq!(pair.a.nic.stats().rx_icrc_errors, 0);
    // With the marking over, the rate recovers and the WRITE completes.
    drop(cnps);
    pair.a_to_b.clear_filter();
    pair.drive_until(Instant::from_millis(50));
    assert_eq!(successes(&mut pair), 1);
}

#[test]
fn without_congestion_control_no_cnp_and_no_ect() {
    let mut pair = Pair::connected(&PairConfig::default());
    pair.a_to_b.set_filter(|packet| {
        assert_eq!(packet.ecn, Ecn::NotEct);
        Verdict::MarkCe
    });
    write_messages(&mut pair, 1, 64 * 1024);
    pair.drive_until(Instant::from_millis(2));
    assert_eq!(pair.a_to_b.stats().ce_marked, 0);
    assert_eq!(pair.b.nic.stats().tx_cnps, 0);
    assert_eq!(pair.a.nic.poll_timeout(), None);
    assert_eq!(successes(&mut pair), 1);
}

#[test]
fn a_paced_qp_sends_at_its_rate() {
    let _log = roce_sim::trace_to_test_output();
    // No congestion: the QP is paced at line rate, 1 Gb/s, on an infinitely fast link.
    let rate = 1e9;
    let config = PairConfig {
        nic: dcqcn(DcqcnConfig::default(), rate as u64),
        ..PairConfig::default()
    };
    let mut pair = Pair::connected(&config);
    write_messages(&mut pair, 4, 64 * 1024);
    pair.drive_until(Instant::from_millis(20));
    assert_eq!(successes(&mut pair), 4);
    let sent = pair.a_to_b.sent();
    assert!(sent.len() >= 256);
    // Each packet occupies its bytes on the wire (UDP payload + Ethernet/IPv4/UDP headers) at
    // the rate: the next one leaves no earlier.
    let gap = |i: usize| (sent[i].len + roce_sim::IPV4_FRAME_OVERHEAD) as f64 * 8.0 * 1e9 / rate;
    let expected: f64 = (0..sent.len() - 1).map(gap).sum();
    let actual = (sent.last().unwrap().time - sent[0].time).as_nanos() as f64;
    let error = (actual - expected).abs() / expected;
    assert!(error < 0.01, "spacing off by {:.3} %", error * 100.0);
    for (i, pair) in sent.windows(2).enumerate() {
        let d = (pair[1].time - pair[0].time).as_nanos() as f64;
        assert!(d + 1.0 >= gap(i), "packet {i} left {d} ns after the last");
    }
    // The wait is a timer, not polling: the DCQCN NIC is idle once the run is over.
    assert_eq!(pair.a.nic.poll_timeout(), None);
}

/// A 10 Gb/s bottleneck with a 100 KB drop-tail queue and RED marking (Kmin 5 KB, Kmax 20 KB,
/// Pmax 0.2), 2 µs latency, behind NICs whose line rate is 20 Gb/s.
fn bottleneck(congestion: Congestion) -> Pair {
    let config = PairConfig {
        link: LinkConfig {
            latency: Duration::from_micros(2),
            bandwidth_bps: Some(10_000_000_000),
            queue_limit_bytes: Some(QUEUE_LIMIT),
            ecn: Some(EcnMarking {
                k_min_bytes: 5_000,
                k_max_bytes: 20_000,
                p_max: 0.2,
            }),
            ..LinkConfig::default()
        },
        nic: NicConfig {
            line_rate_bps: 20_000_000_000,
            congestion,
            ..NicConfig::default()
        },
        ..PairConfig::default()
    };
    let mut pair = Pair::connected(&config);
    write_messages(&mut pair, 32, 64 * 1024);
    pair
}

const QUEUE_LIMIT: usize = 100_000;
/// The bound DCQCN keeps the queue under.
const DCQCN_QUEUE_BOUND: usize = 64_000;

#[test]
fn dcqcn_keeps_a_bottleneck_queue_bounded_and_lossless() {
    let _log = roce_sim::trace_to_test_output();
    let mut pair = bottleneck(Congestion::Dcqcn(DcqcnConfig::default()));
    pair.drive_until(Instant::from_millis(5));
    let link = *pair.a_to_b.stats();
    let a = pair.a.nic.stats().clone();
    let state = pair.a.nic.qp_congestion(pair.a.qpn, pair.now).unwrap();
    eprintln!(
        "max queue {} B, CE marks {}, CNPs {}, decreases {}, increases {}, {state:?}",
        link.max_queue_bytes, link.ce_marked, a.rx_cnps, a.rate_decreases, a.rate_increases
    );
    assert_eq!(successes(&mut pair), 32, "2 MiB written");
    assert_eq!(link.queue_drops, 0);
    assert_eq!(a.retransmitted_packets, 0);
    assert!(link.ce_marked > 0 && a.rx_cnps > 0 && a.rate_decreases > 0);
    assert!(
        link.max_queue_bytes < DCQCN_QUEUE_BOUND,
        "max queue {} B",
        link.max_queue_bytes
    );
}

#[test]
fn dcqcn_cuts_the_senders_rate_after_cnps() {
    let mut pair = bottleneck(Congestion::Dcqcn(DcqcnConfig::default()));
    let line = 20_000_000_000;
    let start = pair.a.nic.qp_congestion(pair.a.qpn, pair.now).unwrap();
    assert_eq!(start.rate_bps, Some(line));
    let cut = pair.drive_while(Instant::from_millis(1), |pair| {
        pair.a.nic.stats().rx_cnps > 0
    });
    assert!(cut, "a CNP arrives");
    let state = pair.a.nic.qp_congestion(pair.a.qpn, pair.now).unwrap();
    // NVIDIA defaults: α starts at 1023/1024, so the cut is 1 − α/2, just under half.
    assert!(state.rate_bps.unwrap() <= line * 51 / 100, "{state:?}");
    assert_eq!(state.target_bps, Some(line));
    assert!(state.alpha > 0.9);
}

#[test]
fn without_dcqcn_the_same_bottleneck_overflows() {
    let mut pair = bottleneck(Congestion::None);
    pair.drive_until(Instant::from_millis(5));
    let link = pair.a_to_b.stats();
    assert!(link.queue_drops > 0, "{link:?}");
    assert_eq!(link.ce_marked, 0, "Not-ECT packets are never marked");
}
