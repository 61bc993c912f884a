#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use super::*;
use std::ops::ControlFlow;

/// One long flow from host 0 to host 1.
fn one_flow(interval_us: u64) -> Scenario {
    Scenario {
        flows: vec![Flow {
            from: 0,
            to: 1,
            bytes: None,
            start: Duration::ZERO,
            dscp: 26,
        }],
        duration: Duration::from_millis(2),
        interval: Duration::from_micros(interval_us),
        ..Scenario::default()
    }
}

#[test]
fn payload_counts_whole_packets_and_a_short_last_message() {
    // 3000-byte WRITEs in 1024-byte packets: 1024, 2048, 3000 per message.
    assert_eq!(payload_of(0, 3000, 3000, u64::MAX, 1024), 0);
    assert_eq!(payload_of(1, 3000, 3000, u64::MAX, 1024), 1024);
    assert_eq!(payload_of(3, 3000, 3000, u64::MAX, 1024), 3000);
    assert_eq!(payload_of(4, 3000, 3000, u64::MAX, 1024), 4024);
    // Two messages, the last of 100 bytes (one packet).
    assert_eq!(payload_of(3, 3000, 100, 2, 1024), 3000);
    assert_eq!(payload_of(4, 3000, 100, 2, 1024), 3100);
    // 0-byte WRITEs are one packet each, no payload.
    assert_eq!(payload_of(5, 0, 0, u64::MAX, 1024), 0);
}

#[test]
fn goodput_follows_packets_not_message_completions() {
    // 64 KiB WRITEs at 10 Gb/s take ~55 µs each: counted by completions, 100 µs intervals
    // hold one or two of them and the line zig-zags between ~5 and ~10 Gb/s.
    let series = run(&one_flow(100)).unwrap();
    let goodput = &series.flows[0].goodput_bps;
    let settled = &goodput[2..];
    let (lo, hi) = settled
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), g| (lo.min(*g), hi.max(*g)));
    assert!(
        hi - lo < 0.2e9,
        "goodput swings from {lo:.3e} to {hi:.3e} b/s: {goodput:?}"
    );
    assert!(lo > 9.0e9, "a lone flow runs near line rate: {goodput:?}");
    let delivered = series.flows[0].delivered_bytes;
    let sum: f64 = goodput.iter().map(|g| g * 100e-6 / 8.0).sum();
    assert!((sum - delivered as f64).abs() < 1.0, "{sum} vs {delivered}");
    assert!(
        delivered >= series.flows[0].bytes,
        "acknowledged bytes were delivered first"
    );
}

#[test]
fn the_same_scenario_gives_the_same_series() {
    let s = one_flow(250);
    assert_eq!(run(&s).unwrap(), run(&s).unwrap());
}

#[test]
fn progress_reports_every_sample_in_order() {
    let mut seen = Vec::new();
    let series = run_observed(&one_flow(250), |t| {
        seen.push(t);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(seen, series.times);
    assert_eq!(seen.last().copied(), Some(Duration::from_millis(2)));
}

/// An observer that breaks (a Ctrl-C) stops the run at that sample: the series ends there,
/// says so, and holds what the run did until then, the same as the full run's first samples.
#[test]
fn an_observer_that_breaks_stops_the_run_where_it_is() {
    let s = one_flow(250);
    let stop = Duration::from_millis(1);
    let stopped = run_observed(&s, |t| {
        if t >= stop {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    let full = run(&s).unwrap();
    assert_eq!(full.stopped_at, None);
    assert_eq!(stopped.stopped_at, Some(stop));
    assert_eq!(stopped.times.last().copied(), Some(stop));
    let n = stopped.times.len();
    assert!(n < full.times.len());
    assert_eq!(stopped.times[..], full.times[..n]);
    assert_eq!(
        stopped.flows[0].goodput_bps[..],
        full.flows[0].goodput_bps[..n]
    );
    assert!(stopped.flows[0].bytes > 0);
    assert!(stopped.flows[0].bytes < full.flows[0].bytes);
}

#[test]
fn hosts_beyond_the_address_range_are_refused() {
    let mut s = one_flow(250);
    s.hosts = MAX_HOSTS;
    assert_eq!(s.validate(), Ok(()));
    s.hosts = MAX_HOSTS + 1;
    let err = s.validate().unwrap_err();
    assert!(err.0.contains("hosts = 255"), "{err}");
    assert!(run(&s).is_err());
}

#[test]
fn too_long_a_run_is_refused() {
    let mut s = one_flow(250);
    s.duration = MAX_DURATION;
    s.interval = Duration::from_millis(1);
    assert_eq!(s.validate(), Ok(()));
    s.duration = MAX_DURATION + Duration::from_millis(1);
    assert!(s.validate().unwrap_err().0.contains("at most 60000 ms"));
}

#[test]
fn too_many_samples_for_the_memory_limit_are_refused() {
    let mut s = one_flow(250);
    s.duration = MAX_DURATION;
    s.interval = Duration::from_micros(100);
    // 600 000 samples of one flow: about 3.4 GiB by the estimate.
    let err = s.validate().unwrap_err();
    assert!(err.0.contains("MiB of memory"), "{err}");
    s.interval = Duration::from_micros(500);
    assert_eq!(s.validate(), Ok(()));
}

#[test]
fn a_run_over_the_memory_limit_is_refused() {
    let mut s = one_flow(250);
    s.hosts = 200;
    s.switch.buffer_bytes = 1 << 20;
    assert!(s.memory_estimate() < MAX_MEMORY);
    assert_eq!(s.validate(), Ok(()));
    s.switch.buffer_bytes = 16 << 20;
    assert!(s.memory_estimate() > MAX_MEMORY);
    let err = s.validate().unwrap_err();
    assert!(err.0.contains("MiB of memory"), "{err}");
}
