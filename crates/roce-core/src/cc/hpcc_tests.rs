//! HPCC's rules (Li et al., SIGCOMM 2019, Algorithm 1; ns-3 `UpdateRateHp`), ACK by ACK: one
//! bottleneck hop at 100 Gb/s, T = 10 µs (so its BDP is 125 000 bytes), and each ACK echoing
//! that hop's record one T after the previous one (so that U's EWMA takes the new sample whole).

use roce_wire::Psn;
use roce_wire::int::{self, Hop};

use super::control::{Ack, CongestionControl};
use super::hpcc::Hpcc;
use crate::Instant;
use crate::config::HpccConfig;
use crate::stats::Stats;
use crate::timer::TimerTable;

const LINE: f64 = 100e9;
const T_NS: u64 = 10_000;
const BDP: f64 = LINE * 1e-5 / 8.0;
const W_AI: f64 = 40e6;

fn config() -> HpccConfig {
    HpccConfig {
        base_rtt_ns: T_NS as u32,
        ..HpccConfig::default()
    }
}

/// The sender and the hop whose records the ACKs echo.
struct Sender {
    hpcc: Hpcc,
    stats: Stats,
    /// The hop's clock, ns, and its transmitted bytes.
    time: u64,
    tx: u64,
    /// ACKs so far: ACK k acknowledges PSN k.
    acks: u32,
}

impl Sender {
    fn new(config: HpccConfig) -> Self {
        Self {
            hpcc: Hpcc::new(config, LINE),
            stats: Stats::default(),
            time: 0,
            tx: 0,
            acks: 0,
        }
    }

    /// An ACK whose hop record is `dt_ns` after the previous one, having sent `bytes` since,
    /// with `qlen` bytes queued; `next` the first PSN not yet sent.
    fn ack_at(&mut self, dt_ns: u64, bytes: u64, qlen: u64, next: u32) {
        self.time += dt_ns;
        self.tx += bytes;
        let mut echo = int::Repr {
            echo: true,
            nhop: 1,
            ..int::Repr::default()
        };
        echo.hops[0] = Hop::new(self.time, self.tx, qlen, LINE as u64);
        self.acks += 1;
        let ack = Ack {
            now: Instant::from_nanos(self.time),
            newly_acked: 1000,
            una: Psn::new(self.acks),
            next: Psn::new(next),
            rtt: None,
            ecn_echo: false,
            int: Some(echo),
        };
        self.hpcc
            .on_ack(&ack, &mut TimerTable::default(), &mut self.stats);
    }

    /// One T later, the hop sent at `load` × B and holds `queue_bdps` BDPs; a full update (the
    /// ACK covers everything sent so far).
    fn rtt(&mut self, load: f64, queue_bdps: f64) {
        let next = self.acks + 1;
        self.ack_at(
            T_NS,
            (load * BDP) as u64,
            (queue_bdps * BDP) as u64,
            next + 100,
        );
        // The next ACK starts past the update's PSN.
        self.acks = next + 100;
    }

    fn rate(&self) -> f64 {
        self.hpcc.rate_bps().unwrap()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-3 * b.abs().max(1.0)
}

/// U = qlen/(B·T) + txRate/B: half a BDP queued and half the line rate sent is U ≈ 1 (the
/// records' quantisation: 320-byte queue units and 512-byte byte units at 100 Gb/s).
#[test]
fn u_is_the_queue_over_the_bdp_plus_the_tx_rate_over_b() {
    let mut s = Sender::new(config());
    s.rtt(0.0, 0.5); // first ACK: the records only
    s.rtt(0.5, 0.5);
    let qlen = (62_500 / 320 * 320) as f64;
    let sent = (s.tx / 512 * 512 - (s.tx - 62_500) / 512 * 512) as f64;
    let u = qlen * 8.0 / (LINE * 1e-5) + sent * 8.0 / 1e-5 / LINE;
    assert!(close(s.hpcc.utilisation(), u), "{}", s.hpcc.utilisation());
    assert!((u - 1.0).abs() < 0.005, "{u}");
}

/// A hop's txRate is Δbytes/Δtime of two successive records: with no queue, U is that rate
/// over B.
#[test]
fn the_tx_rate_of_a_hop_comes_from_two_successive_records() {
    let mut s = Sender::new(config());
    s.rtt(0.0, 0.0);
    s.rtt(0.25, 0.0);
    assert!(
        close(s.hpcc.utilisation(), 0.25),
        "{}",
        s.hpcc.utilisation()
    );
    s.rtt(0.75, 0.0);
    assert!(
        close(s.hpcc.utilisation(), 0.75),
        "{}",
        s.hpcc.utilisation()
    );
}

/// U above η: W = W_c/(U/η) + W_AI, a cut toward η·W_c/U.
#[test]
fn a_u_above_eta_cuts_w_multiplicatively_toward_eta_w_c_over_u() {
    let mut s = Sender::new(config());
    s.rtt(1.0, 1.0);
    s.rtt(1.0, 1.0);
    let u = s.hpcc.utilisation();
    assert!((u - 2.0).abs() < 0.005, "{u}");
    let expected = LINE * 0.95 / u + W_AI;
    assert!(close(s.rate(), expected), "{} vs {expected}", s.rate());
    assert!(close(
        s.hpcc.window_bytes().unwrap() as f64,
        expected * 1e-5 / 8.0
    ));
    assert_eq!(s.stats.rate_decreases, 1);
}

/// U below η with stages left (maxStage > incStage): W = W_c + W_AI, an additive step; with
/// ns-3's maxStage 0 the step is multiplicative, W_c/(U/η) + W_AI.
#[test]
fn below_eta_additive_increase_by_w_ai_while_stages_remain() {
    let mut s = Sender::new(HpccConfig {
        max_stage: 5,
        ..config()
    });
    s.rtt(1.0, 1.0);
    s.rtt(1.0, 1.0); // cut: incStage 0
    let cut = s.rate();
    s.rtt(0.5, 0.0);
    assert!(
        (s.rate() - cut - W_AI).abs() < 1.0,
        "{} vs {}",
        s.rate(),
        cut + W_AI
    );

    let mut mi = Sender::new(config());
    mi.rtt(1.0, 1.0);
    mi.rtt(1.0, 1.0);
    let cut = mi.rate();
    mi.rtt(0.5, 0.0);
    let expected = (cut * 0.95 / mi.hpcc.utilisation() + W_AI).min(LINE);
    assert!(close(mi.rate(), expected), "{} vs {expected}", mi.rate());
    assert!(mi.rate() > cut + W_AI);
}

/// W_c moves once per RTT: ACKs before the one that covers the PSN sent when W_c was set react
/// (fast react) from the same W_c; the one that covers it sets W_c.
#[test]
fn w_c_moves_once_per_rtt() {
    let mut s = Sender::new(config());
    s.ack_at(T_NS, 0, BDP as u64, 10); // first: W_c's RTT ends when PSN 10 is covered
    let w_c = s.hpcc.reference_rate();
    // Two ACKs inside the RTT, each over a full queue.
    s.ack_at(T_NS, BDP as u64, BDP as u64, 20);
    let first = s.rate();
    assert!(first < w_c);
    assert_eq!(s.hpcc.reference_rate(), w_c, "W_c stays inside the RTT");
    s.ack_at(T_NS, BDP as u64, BDP as u64, 20);
    // Both reacted from the same W_c: same U, same W.
    assert!(close(s.rate(), first));
    assert_eq!(s.hpcc.reference_rate(), w_c);
    // The ACK that covers PSN 10 sets W_c.
    s.acks = 10;
    s.ack_at(T_NS, BDP as u64, BDP as u64, 30);
    assert!(close(s.hpcc.reference_rate(), s.rate()));
    assert!(s.hpcc.reference_rate() < w_c);
}

/// Without fast react, ACKs inside the RTT change nothing.
#[test]
fn without_fast_react_only_the_rtts_ack_moves_the_rate() {
    let mut s = Sender::new(HpccConfig {
        fast_react: false,
        ..config()
    });
    s.ack_at(T_NS, 0, 0, 10);
    s.ack_at(T_NS, BDP as u64, BDP as u64, 20);
    assert_eq!(s.rate(), LINE);
}

/// An ACK without INT (a READ response, an atomic ACK) leaves HPCC as it was.
#[test]
fn an_ack_without_int_changes_nothing() {
    let mut s = Sender::new(config());
    s.rtt(1.0, 1.0);
    let ack = Ack {
        now: Instant::from_micros(100),
        newly_acked: 1000,
        una: Psn::new(1000),
        next: Psn::new(1001),
        rtt: None,
        ecn_echo: false,
        int: None,
    };
    s.hpcc
        .on_ack(&ack, &mut TimerTable::default(), &mut s.stats);
    assert_eq!(s.rate(), LINE);
}

/// An ACK echoing the PINT value `value`, covering PSN `una`, with `next` the first PSN not
/// yet sent.
fn pint_ack(hpcc: &mut Hpcc, stats: &mut Stats, value: u16, una: u32, next: u32) {
    let ack = Ack {
        now: Instant::from_nanos(u64::from(una) * 1000),
        newly_acked: 1000,
        una: Psn::new(una),
        next: Psn::new(next),
        rtt: None,
        ecn_echo: false,
        int: Some(int::Repr::pint(true, value)),
    };
    hpcc.on_ack(&ack, &mut TimerTable::default(), stats);
}

fn pint() -> HpccConfig {
    HpccConfig {
        pint: true,
        ..config()
    }
}

/// HPCC-PINT (ns-3 `UpdateRateHpPint`): U is the echoed value decoded, taken whole (no EWMA at
/// the sender: the switch kept one), and W = W_c/(U/η) + W_AI as HPCC's.
#[test]
fn pint_takes_the_echoed_utilisation_whole() {
    let base = pint().pint_base();
    let mut hpcc = Hpcc::new(pint(), LINE);
    let mut stats = Stats::default();
    // The first ACK starts the RTT and changes nothing.
    let two = roce_wire::pint::encode(2.0, base, 0);
    pint_ack(&mut hpcc, &mut stats, two, 1, 10);
    assert_eq!(hpcc.rate_bps(), Some(LINE));
    // The RTT's ACK (it covers PSN 10): U = decode(value) exactly, W_c ← W.
    pint_ack(&mut hpcc, &mut stats, two, 11, 20);
    let u = roce_wire::pint::decode(two, base);
    assert!((u - 2.0).abs() < 0.02, "{u}");
    assert_eq!(hpcc.utilisation(), u);
    let expected = LINE * 0.95 / u + W_AI;
    assert!(close(hpcc.rate_bps().unwrap(), expected));
    assert_eq!(hpcc.reference_rate(), hpcc.rate_bps().unwrap());
    // A low value inside the next RTT: a fast reaction from W_c, U replaced, not averaged.
    let low = roce_wire::pint::encode(0.5, base, 0);
    pint_ack(&mut hpcc, &mut stats, low, 12, 30);
    assert_eq!(hpcc.utilisation(), roce_wire::pint::decode(low, base));
    let w_c = hpcc.reference_rate();
    let up = (w_c * 0.95 / hpcc.utilisation() + W_AI).min(LINE);
    assert!(close(hpcc.rate_bps().unwrap(), up));
    assert_eq!(hpcc.reference_rate(), w_c, "W_c stays inside the RTT");
    assert_eq!((stats.rate_decreases, stats.rate_increases), (1, 1));
}

/// PINT's sampling (ns-3 `PINT_PROB`): at 500 about half the echoes move U, each drawn; at 1000
/// every one does; at 0 none, the first included.
#[test]
fn pint_uses_its_share_of_the_echoes() {
    let base = pint().pint_base();
    let used = |prob: u32| {
        let mut hpcc = Hpcc::new(
            HpccConfig {
                pint_prob: prob,
                ..pint()
            },
            LINE,
        )
        .with_draws(7);
        let mut stats = Stats::default();
        let mut used = 0;
        for i in 0..2000u32 {
            // A value no echo before carried: one that is used leaves U at it.
            let value = 100 + i as u16;
            let before = hpcc.utilisation();
            pint_ack(&mut hpcc, &mut stats, value, i + 2, i + 3);
            let u = roce_wire::pint::decode(value, base);
            if hpcc.utilisation() == u && before != u {
                used += 1;
            }
        }
        used
    };
    let half = used(500);
    assert!((900..1100).contains(&half), "{half} of 2000");
    // Every ACK covers the last update's PSN here, so each one used is a full update; the
    // first only starts the RTT.
    assert_eq!(used(1000), 1999);
    assert_eq!(used(0), 0);
}
