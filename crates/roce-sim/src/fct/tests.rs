use proptest::prelude::*;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::topology::{Routes, hpcc_fat};

fn record(size: u64, fct_ns: u64, ideal_ns: u64) -> FctRecord {
    FctRecord {
        src: NodeId(1),
        dst: NodeId(2),
        sport: 10_000,
        dport: 100,
        size,
        start: Instant::from_millis(2000),
        fct: Duration::from_nanos(fct_ns),
        ideal: Duration::from_nanos(ideal_ns),
    }
}

#[test]
fn ideal_fct_is_third_cc_standalone_fct() {
    let routes = Routes::new(hpcc_fat()).unwrap();
    let path = routes.path_info(NodeId(0), NodeId(319), 1000).unwrap();
    // base RTT: 2 x 6 us + 2 x 80 ns (100G) + 4 x 20 ns (400G) = 12 240 ns.
    // 1 MB: 1000 packets, 1 000 000 + 48 000 bytes at 100G = 83 840 ns.
    assert_eq!(
        ideal_fct(1_000_000, &path, IdealModel::HPCC),
        Duration::from_nanos(96_080)
    );
    // 1 byte: one packet of 49 bytes, 3.92 ns rounded down.
    assert_eq!(
        ideal_fct(1, &path, IdealModel::HPCC),
        Duration::from_nanos(12_243)
    );
    // 1001 bytes: two packets.
    assert_eq!(
        ideal_fct(1001, &path, IdealModel::HPCC),
        Duration::from_nanos(12_240 + 87)
    );
    assert_eq!(
        ideal_fct(0, &path, IdealModel::HPCC),
        Duration::from_nanos(12_243)
    );
}

#[test]
fn slowdown_is_clamped_at_one() {
    assert_eq!(record(1000, 3000, 1000).slowdown(), 3.0);
    assert_eq!(record(1000, 500, 1000).slowdown(), 1.0);
    assert_eq!(record(1000, 0, 0).slowdown(), 1.0);
    assert_eq!(record(1000, 5, 0).slowdown(), f64::INFINITY);
}

#[test]
fn fct_lines_are_hpccs_layout() {
    let r = FctRecord {
        src: NodeId(1),
        dst: NodeId(300),
        ..record(1000, 5000, 4000)
    };
    let line = fct_line(&r);
    assert_eq!(
        line,
        "0b000101 0b012c01 10000 100 1000 2000000000 5000 4000"
    );
    let file = write_fct_file([&r, &record(7, 8, 9)]);
    assert_eq!(
        parse_fct_file("fct.txt", &file).unwrap(),
        [r, record(7, 8, 9)]
    );
}

#[test]
fn malformed_fct_lines_name_file_and_line() {
    let good = "0b000101 0b000201 10000 100 1000 2000000000 5000 4000";
    let cases: &[(&str, &str)] = &[
        (
            "0b000101 0b000201 10000 100 1000 2000000000 5000",
            "f:1: expected 8 fields",
        ),
        (
            "zz000101 0b000201 10000 100 1000 2000000000 5000 4000",
            "f:1: sip \"zz000101\"",
        ),
        (
            "0b0001010 0b000201 10000 100 1000 2000000000 5000 4000",
            "f:1: sip \"0b0001010\"",
        ),
        (
            "0b000101 0b000201 70000 100 1000 2000000000 5000 4000",
            "f:1: sport \"70000\"",
        ),
        (
            "0b000101 0b000201 10000 100 -1 2000000000 5000 4000",
            "f:1: size \"-1\"",
        ),
        (
            "0b000101 0b000201 10000 100 1000 2e9 5000 4000",
            "f:1: start_ns \"2e9\"",
        ),
    ];
    for (line, want) in cases {
        let err = parse_fct_file("f", line).unwrap_err().to_string();
        assert!(
            err.starts_with(want),
            "{line:?}: got {err:?}, want {want:?}"
        );
        let two = format!("{good}\n\n{line}\n");
        let err = parse_fct_file("f", &two).unwrap_err();
        assert_eq!(err.line, 3);
    }
}

#[test]
fn lone_flows_at_their_ideal_give_slowdown_one_in_every_bin() {
    // One flow: only the last 5 % bin (l = 95 * 1 / 100 = 0, r = 1) holds it.
    let one = SlowdownTable::new([&record(1000, 4000, 4000)], 5).unwrap();
    assert_eq!(one.bins.len(), 1);
    let b = one.bins[0];
    assert_eq!((b.percentile, b.max_size, b.flows), (0.95, 1000, 1));
    assert_eq!((b.p50, b.p95, b.p99), (1.0, 1.0, 1.0));
    // 100 flows, each at its ideal: 20 bins of 5 flows, all slowdowns 1.
    let flows: Vec<FctRecord> = (1..=100).map(|s| record(s * 100, s * 10, s * 10)).collect();
    let t = SlowdownTable::new(&flows, 5).unwrap();
    assert_eq!(t.bins.len(), 20);
    for (i, b) in t.bins.iter().enumerate() {
        assert_eq!(b.flows, 5);
        assert_eq!(b.max_size, (i as u64 + 1) * 500);
        assert_eq!((b.p50, b.p95, b.p99), (1.0, 1.0, 1.0));
    }
}

#[test]
fn known_slowdowns_give_get_pctl_percentiles() {
    // 2000 flows in 20 bins of 100; within each bin the slowdowns are 1..=100 in random order
    // (a bin's sizes all exceed the previous bin's). get_pctl picks a[50], a[95], a[99] of the
    // sorted slowdowns: 51, 96, 100.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut flows = Vec::new();
    for bin in 0..20u64 {
        let mut slow: Vec<u64> = (1..=100).collect();
        slow.shuffle(&mut rng);
        for (j, s) in slow.into_iter().enumerate() {
            let size = bin * 1000 + j as u64;
            flows.push(record(size, s * 1000, 1000));
        }
    }
    flows.shuffle(&mut rng);
    let t = SlowdownTable::new(&flows, 5).unwrap();
    assert_eq!(t.flows, 2000);
    assert_eq!(t.bins.len(), 20);
    for (i, b) in t.bins.iter().enumerate() {
        assert_eq!(b.flows, 100);
        assert_eq!(b.max_size, i as u64 * 1000 + 99);
        assert_eq!((b.p50, b.p95, b.p99), (51.0, 96.0, 100.0), "bin {i}");
    }
    // 10 % bins merge pairs of them: 200 flows with slowdowns 1..=100 twice.
    let wide = SlowdownTable::new(&flows, 10).unwrap();
    assert_eq!(wide.bins.len(), 10);
    assert_eq!(
        (wide.bins[3].p50, wide.bins[3].p95, wide.bins[3].p99),
        (51.0, 96.0, 100.0)
    );
    let text = t.to_text();
    assert_eq!(text.lines().count(), 20);
    assert_eq!(text.lines().next(), Some("0.000 99\t51.000 96.000 100.000"));
    assert_eq!(
        text.lines().nth(19),
        Some("0.950 19099\t51.000 96.000 100.000")
    );
    let json = t.to_json();
    assert!(json.starts_with("{\"step_percent\":5,\"flows\":2000,\"bins\":[{\"percentile\":0,"));
    assert!(json.contains(
        "{\"percentile\":0.95,\"max_size\":19099,\"flows\":100,\"p50\":51,\"p95\":96,\"p99\":100}]}"
    ));
}

#[test]
fn bad_steps_and_empty_input() {
    assert_eq!(SlowdownTable::new([], 0), Err(TableError::BadStep(0)));
    assert_eq!(SlowdownTable::new([], 101), Err(TableError::BadStep(101)));
    let empty = SlowdownTable::new([], 5).unwrap();
    assert!(empty.bins.is_empty());
    assert_eq!(
        empty.to_json(),
        "{\"step_percent\":5,\"flows\":0,\"bins\":[]}"
    );
    let inf = SlowdownTable::new([&record(1, 5, 0)], 100).unwrap();
    assert!(inf.to_json().contains("\"p50\":null"));
}

proptest! {
    #[test]
    fn arbitrary_fct_text_never_panics(text in "[0-9a-fx .\\n-]{0,120}") {
        let _ = parse_fct_file("p", &text);
    }

    #[test]
    fn every_flow_lands_in_one_bin(
        raw in proptest::collection::vec((1u64..1 << 30, 1u64..1 << 20, 1u64..1 << 20), 0..300),
        step in 1u32..=100,
    ) {
        let flows: Vec<FctRecord> = raw.iter().map(|&(s, f, i)| record(s, f, i)).collect();
        let t = SlowdownTable::new(&flows, step).unwrap();
        prop_assert_eq!(t.bins.iter().map(|b| b.flows).sum::<usize>(), flows.len());
        for b in &t.bins {
            prop_assert!(b.p50 >= 1.0 && b.p50 <= b.p95 && b.p95 <= b.p99);
        }
        prop_assert!(t.bins.windows(2).all(|w| w[0].max_size <= w[1].max_size));
    }
}
