//! DCTCP's rules (Alizadeh et al., SIGCOMM 2010; HPCC ns-3 `HandleAckDctcp`), ACK by ACK: a
//! window-limited sender sends W packets of 1000 bytes, the receiver acknowledges each, and the
//! next W leave when the last is acknowledged.

use roce_wire::Psn;

use super::control::{Ack, CongestionControl};
use super::dctcp::Dctcp;
use crate::config::DctcpConfig;
use crate::stats::Stats;
use crate::timer::TimerTable;
use crate::{Duration, Instant};

const LINE: f64 = 10e9;
const W: u32 = 10;
const G: f64 = 1.0 / 16.0;

/// The sender, and the ACKs it has heard.
struct Sender {
    dctcp: Dctcp,
    acked: u32,
    stats: Stats,
}

impl Sender {
    fn new(config: DctcpConfig) -> Self {
        Self {
            dctcp: Dctcp::new(config, LINE),
            acked: 0,
            stats: Stats::default(),
        }
    }

    /// The ACK of the next packet, echoing CE or not.
    fn ack(&mut self, ecn_echo: bool) {
        let psn = self.acked;
        self.acked += 1;
        // The window of `psn` is sent: its end is the first PSN of the next one.
        let next = (psn / W + 1) * W;
        let ack = Ack {
            now: Instant::from_micros(u64::from(psn)),
            newly_acked: 1000,
            una: Psn::new(psn + 1),
            next: Psn::new(next),
            rtt: Some(Duration::from_micros(5)),
            ecn_echo,
            int: None,
        };
        self.dctcp
            .on_ack(&ack, &mut TimerTable::default(), &mut self.stats);
    }

    fn rate(&self) -> f64 {
        self.dctcp.rate_bps().unwrap()
    }

    fn alpha(&self) -> f64 {
        self.dctcp.alpha(Instant::ZERO)
    }
}

#[test]
fn it_starts_at_line_rate_with_a_window_of_the_base_rtt() {
    let s = Sender::new(DctcpConfig::default());
    assert_eq!(s.rate(), LINE, "no slow start");
    assert_eq!(s.alpha(), 1.0);
    // 13 µs at 10 Gb/s.
    assert_eq!(s.dctcp.window_bytes(), Some(16_250));
    let no_window = DctcpConfig {
        base_rtt_ns: 0,
        ..DctcpConfig::default()
    };
    assert_eq!(Sender::new(no_window).dctcp.window_bytes(), None);
}

/// α ← (1 − g)·α + g·F once per window, F the fraction of the window's bytes marked; α holds
/// between the windows' ends.
#[test]
fn alpha_follows_the_ewma_with_g_once_per_window() {
    let mut s = Sender::new(DctcpConfig::default());
    // Window 0 and the ACK that ends it (the first of window 1), none marked: F = 0.
    for _ in 0..=W {
        assert_eq!(s.alpha(), 1.0, "no update before the window ends");
        s.ack(false);
    }
    let alpha1 = 1.0 - G;
    assert!((s.alpha() - alpha1).abs() < 1e-12, "α = {}", s.alpha());
    // The rest of window 1 and the ACK that ends it: 3 of these W ACKs marked.
    for i in 0..W {
        assert!(
            (s.alpha() - alpha1).abs() < 1e-12,
            "α holds inside a window"
        );
        s.ack(i == 2 || i == 5 || i == 7);
    }
    let alpha2 = (1.0 - G) * alpha1 + G * 3.0 / f64::from(W);
    assert!((s.alpha() - alpha2).abs() < 1e-12, "α = {}", s.alpha());
    // A whole window marked: F = 1.
    for _ in 0..W {
        s.ack(true);
    }
    let alpha3 = (1.0 - G) * alpha2 + G;
    assert!((s.alpha() - alpha3).abs() < 1e-12, "α = {}", s.alpha());
}

/// A window with marked ACKs cuts the rate by α/2 once, at its first marked ACK; the next window
/// with marks cuts again.
#[test]
fn a_window_with_marks_is_cut_by_alpha_over_two_once() {
    let mut s = Sender::new(DctcpConfig::default());
    // The first ACK starts the window; the second echoes CE: RC × (1 − α/2) with α = 1.
    s.ack(false);
    s.ack(true);
    assert_eq!(s.rate(), LINE / 2.0);
    assert_eq!(s.stats.rate_decreases, 1);
    // The rest of the window's marks cut nothing more.
    for _ in 2..W {
        s.ack(true);
    }
    assert_eq!(s.rate(), LINE / 2.0, "at most one cut per window");
    // The ACK that ends the window (the first of the next) updates α with F = 10/11 (the
    // first window counts the W ACKs and this one, all marked but the first), leaves CWR,
    // and as it echoes CE, cuts by the new α/2.
    s.ack(true);
    let alpha = (1.0 - G) + G * 10.0 / 11.0;
    assert!((s.alpha() - alpha).abs() < 1e-12);
    let expected = LINE / 2.0 * (1.0 - alpha / 2.0);
    assert!((s.rate() - expected).abs() < 1.0, "rate {}", s.rate());
    assert_eq!(s.stats.rate_decreases, 2);
}

/// Outside CWR, one additive step per window (ns-3 `DCTCP_RATE_AI`), up to the line rate; the
/// rate never goes below `min_rate`.
#[test]
fn an_unmarked_window_adds_rate_ai_once_and_cuts_stop_at_min_rate() {
    let mut s = Sender::new(DctcpConfig::default());
    s.ack(false);
    s.ack(true);
    let cut = s.rate();
    // The rest of the window: no step while in CWR.
    for _ in 2..W {
        s.ack(false);
    }
    assert_eq!(s.rate(), cut);
    // The next window: CWR ends at its first ACK, which adds one step; the others none.
    for _ in 0..W {
        s.ack(false);
    }
    assert_eq!(s.rate(), cut + 615e6);
    assert_eq!(s.stats.rate_increases, 1);
    for _ in 0..W {
        s.ack(false);
    }
    assert_eq!(s.rate(), cut + 2.0 * 615e6);

    // Cut after cut, window after window: never below 1 Gb/s.
    let mut s = Sender::new(DctcpConfig::default());
    for _ in 0..20 * W {
        s.ack(true);
    }
    assert_eq!(s.rate(), 1e9);
}

/// The window is `base_rtt_ns` at the current rate (ns-3's VAR_WIN).
#[test]
fn the_window_follows_the_rate() {
    let mut s = Sender::new(DctcpConfig::default());
    s.ack(false);
    s.ack(true);
    assert_eq!(s.dctcp.window_bytes(), Some(8_125));
}
