//! TIMELY's rules (Mittal et al., SIGCOMM 2015; HPCC ns-3 `UpdateRateTimely`), one update per
//! window of ACKs, with the defaults (T_low 50 µs, T_high 500 µs, minRTT 20 µs, α 0.875,
//! β 0.8, δ 10 Mb/s, HAI 50 Mb/s after 5 increases in a row).

use roce_wire::Psn;

use super::control::{Ack, CongestionControl};
use super::timely::Timely;
use crate::config::TimelyConfig;
use crate::stats::Stats;
use crate::timer::TimerTable;
use crate::{Duration, Instant};

const LINE: f64 = 10e9;
const BETA: f64 = 0.8;
const ALPHA: f64 = 0.875;
const MIN_RTT: f64 = 20_000.0;

struct Sender {
    timely: Timely,
    /// Windows acknowledged.
    windows: u32,
    stats: Stats,
}

impl Sender {
    fn new() -> Self {
        Self {
            timely: Timely::new(TimelyConfig::default(), LINE),
            windows: 0,
            stats: Stats::default(),
        }
    }

    /// The first ACK of the next window (of 100 PSNs), with an RTT sample of `rtt_us`.
    fn window(&mut self, rtt_us: f64) {
        let start = self.windows * 100;
        self.windows += 1;
        self.ack(start + 1, start + 100, Some(rtt_us));
    }

    fn ack(&mut self, una: u32, next: u32, rtt_us: Option<f64>) {
        let ack = Ack {
            now: Instant::from_micros(u64::from(una)),
            newly_acked: 1000,
            una: Psn::new(una),
            next: Psn::new(next),
            rtt: rtt_us.map(|us| Duration::from_nanos((us * 1000.0) as u64)),
            ecn_echo: false,
            int: None,
        };
        self.timely
            .on_ack(&ack, &mut TimerTable::default(), &mut self.stats);
    }

    fn rate(&self) -> f64 {
        self.timely.rate_bps().unwrap()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1.0
}

/// Above T_high: rate × (1 − β·(1 − T_high/RTT)), whatever the gradient.
#[test]
fn an_rtt_above_t_high_decreases_by_beta_times_the_excess() {
    let mut s = Sender::new();
    s.window(600.0);
    assert_eq!(
        s.rate(),
        LINE,
        "the first sample only starts the measurement"
    );
    // The same RTT again: gradient 0, but above T_high.
    s.window(600.0);
    let expected = LINE * (1.0 - BETA * (1.0 - 500.0 / 600.0));
    assert!(close(s.rate(), expected), "{} vs {expected}", s.rate());
    assert_eq!(s.stats.rate_decreases, 1);
}

/// Below T_low: + δ, even with a rising RTT (a positive gradient).
#[test]
fn an_rtt_below_t_low_increases_additively() {
    let mut s = Sender::new();
    s.window(600.0);
    s.window(600.0);
    let cut = s.rate();
    // Four windows at 10 µs: + δ each, and the EWMA of the differences settles near 0.
    for i in 1..=4 {
        s.window(10.0);
        assert!(close(s.rate(), cut + f64::from(i) * 10e6), "{}", s.rate());
    }
    // Rising by 35 µs: the gradient is positive, but the RTT is under T_low: + δ.
    s.window(45.0);
    assert!(close(s.rate(), cut + 50e6), "{}", s.rate());
}

/// Between T_low and T_high a positive gradient decreases: rate × (1 − β·gradient), the
/// gradient the EWMA of the RTT differences over minRTT.
#[test]
fn a_positive_gradient_decreases_by_beta_times_the_gradient() {
    let mut s = Sender::new();
    s.window(100.0);
    s.window(110.0);
    // rtt_diff = α·10 µs (from 0); gradient = rtt_diff / 20 µs.
    let diff = ALPHA * 10_000.0;
    let expected = LINE * (1.0 - BETA * diff / MIN_RTT);
    assert!(close(s.rate(), expected), "{} vs {expected}", s.rate());
    // The EWMA: the next difference, −2 µs, makes rtt_diff = (1 − α)·diff + α·(−2 µs), which
    // is negative: an increase of δ.
    s.window(108.0);
    let diff2 = (1.0 - ALPHA) * diff + ALPHA * -2_000.0;
    assert!(diff2 < 0.0);
    assert!(close(s.rate(), expected + 10e6), "{}", s.rate());
}

/// A zero or negative gradient increases by δ; after N = 5 increases in a row, by the
/// hyper-active step.
#[test]
fn a_negative_gradient_increases_and_turns_hyper_after_n_in_a_row() {
    let mut s = Sender::new();
    s.window(600.0);
    s.window(600.0);
    let mut rate = s.rate();
    // Falling RTTs in the band: negative gradients.
    for i in 0..8 {
        s.window(100.0 - f64::from(i));
        let step = if i < 5 { 10e6 } else { 50e6 };
        rate += step;
        assert!(
            close(s.rate(), rate),
            "increase {i}: {} vs {rate}",
            s.rate()
        );
    }
    // A decrease resets the count.
    s.window(700.0);
    rate = s.rate();
    s.window(20.0);
    assert!(close(s.rate(), rate + 10e6));
}

/// One update per window: an ACK that covers nothing sent after the last update changes
/// nothing; an ACK without a sample (a retransmission's) neither.
#[test]
fn the_rate_is_updated_once_per_window() {
    let mut s = Sender::new();
    s.ack(1, 100, Some(600.0));
    s.ack(50, 100, Some(900.0));
    s.ack(100, 100, Some(900.0));
    assert_eq!(s.rate(), LINE, "no update inside the first window");
    s.ack(101, 200, None);
    assert_eq!(s.rate(), LINE, "no sample, no update");
    s.ack(101, 200, Some(600.0));
    let expected = LINE * (1.0 - BETA * (1.0 - 500.0 / 600.0));
    assert!(close(s.rate(), expected));
    s.ack(150, 200, Some(1000.0));
    assert!(close(s.rate(), expected), "inside the window: no update");
}
