//! The DCQCN reaction point in virtual time, pinned against a literal transcription of the
//! paper's equations (a differential test, s2n-quic style), plus the mlx5 knobs the paper does
//! not have.

use super::control::CongestionControl;
use super::dcqcn::Dcqcn;
use crate::config::DcqcnConfig;
use crate::stats::Stats;
use crate::timer::{Timer, TimerTable};
use crate::{Duration, Instant};

const LINE: f64 = 40e9;

/// The reaction point of Zhu et al. (SIGCOMM 2015), equation by equation, as the paper
/// writes it down. Nothing here is shared with `dcqcn.rs`.
#[derive(Debug, Clone, Copy)]
struct PaperRp {
    rc: f64,
    rt: f64,
    alpha: f64,
    t: u32,
    bc: u32,
    g: f64,
    f: u32,
    r_ai: f64,
    r_hai: f64,
}

impl PaperRp {
    fn new() -> Self {
        Self {
            rc: LINE,
            rt: LINE,
            alpha: 1.0,
            t: 0,
            bc: 0,
            g: 1.0 / 256.0,
            f: 5,
            r_ai: 40e6,
            r_hai: 200e6,
        }
    }

    /// On CNP: RT = RC; RC = RC·(1 − α/2); α = (1−g)·α + g; T = BC = 0.
    fn cnp(&mut self) {
        self.rt = self.rc;
        self.rc *= 1.0 - self.alpha / 2.0;
        self.alpha = (1.0 - self.g) * self.alpha + self.g;
        self.t = 0;
        self.bc = 0;
    }

    /// Every K without a CNP: α = (1−g)·α.
    fn alpha_timer(&mut self) {
        self.alpha *= 1.0 - self.g;
    }

    fn timer(&mut self) {
        self.t += 1;
        self.increase();
    }

    fn byte_counter(&mut self) {
        self.bc += 1;
        self.increase();
    }

    fn increase(&mut self) {
        if self.t.max(self.bc) <= self.f {
            // fast recovery
        } else if self.t.min(self.bc) > self.f {
            let i = f64::from(self.t.min(self.bc) - self.f);
            self.rt += i * self.r_hai;
        } else {
            self.rt += self.r_ai;
        }
        // Clamped to line rate (RT too: mlx5 `rpg_max_rate` 0 is the line rate).
        self.rt = self.rt.min(LINE);
        self.rc = ((self.rt + self.rc) / 2.0).min(LINE);
    }
}

/// What [`Rp::next_event`] fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fired {
    /// α decayed by (1 − g), its period having passed without a CNP.
    AlphaDecay,
    Timer(Timer),
}

struct Rp {
    rp: Dcqcn,
    timers: TimerTable,
    stats: Stats,
    now: Instant,
}

impl Rp {
    fn new(config: DcqcnConfig) -> Self {
        Self {
            rp: Dcqcn::new(config, LINE),
            timers: TimerTable::default(),
            stats: Stats::default(),
            now: Instant::ZERO,
        }
    }

    fn paper() -> Self {
        Self::new(DcqcnConfig::paper())
    }

    fn cnp(&mut self) {
        self.rp.on_cnp(self.now, &mut self.timers, &mut self.stats);
    }

    fn sent(&mut self, bytes: u64) {
        self.rp
            .on_sent(self.now, bytes, &mut self.timers, &mut self.stats);
    }

    /// The next instant something happens: an armed timer, or α's next decay.
    fn next_deadline(&self) -> Option<Instant> {
        [self.timers.next(), self.rp.alpha_due()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Jumps to the next deadline and fires what is due there: α's decay first (it was the
    /// first of `Timer::ALL` when it had a timer of its own), then the timers in `Timer::ALL`
    /// order as the NIC does; returns what fired.
    fn next_event(&mut self) -> Vec<Fired> {
        let Some(at) = self.next_deadline() else {
            return Vec::new();
        };
        self.now = at;
        let mut fired = Vec::new();
        if self.rp.alpha_due() == Some(at) {
            // Applied when next needed; here at once, to read α tick by tick.
            self.rp.apply_alpha_decays(at);
            fired.push(Fired::AlphaDecay);
        }
        for timer in Timer::ALL {
            if self.timers.expire(timer, self.now) {
                self.rp
                    .on_timer(timer, self.now, &mut self.timers, &mut self.stats);
                fired.push(Fired::Timer(timer));
            }
        }
        fired
    }

    fn alpha(&self) -> f64 {
        self.rp.alpha(self.now)
    }

    fn rate(&self) -> f64 {
        self.rp.rate_bps().unwrap()
    }

    fn target(&self) -> f64 {
        self.rp.target_bps().unwrap()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[track_caller]
fn assert_same(rp: &Rp, paper: &PaperRp) {
    assert!(
        close(rp.rate(), paper.rc)
            && close(rp.target(), paper.rt)
            && close(rp.alpha(), paper.alpha),
        "engine (rc {}, rt {}, α {}) != paper (rc {}, rt {}, α {}) at {}",
        rp.rate(),
        rp.target(),
        rp.alpha(),
        paper.rc,
        paper.rt,
        paper.alpha,
        rp.now
    );
}

/// Runs engine and paper side by side over `events` timer deadlines.
/// `count` CNPs to the engine and to the paper's model alike.
fn cnps_to_both(rp: &mut Rp, paper: &mut PaperRp, count: usize) {
    for _ in 0..count {
        rp.cnp();
        paper.cnp();
    }
}

fn run_both(rp: &mut Rp, paper: &mut PaperRp, events: usize) {
    for _ in 0..events {
        for fired in rp.next_event() {
            match fired {
                Fired::AlphaDecay => paper.alpha_timer(),
                Fired::Timer(Timer::RateIncrease) => paper.timer(),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_same(rp, paper);
    }
}

#[test]
fn one_cnp_at_alpha_one_halves_the_rate() {
    let mut rp = Rp::paper();
    let mut paper = PaperRp::new();
    cnps_to_both(&mut rp, &mut paper, 1);
    assert_same(&rp, &paper);
    assert_eq!(rp.rate(), LINE / 2.0);
    assert_eq!(rp.target(), LINE);
    assert_eq!(rp.alpha(), 1.0, "(1 − g)·1 + g");
    assert_eq!(rp.stats.rate_decreases, 1);
    // A second CNP: the rate is cut by α/2 again, the target follows the rate.
    cnps_to_both(&mut rp, &mut paper, 1);
    assert_same(&rp, &paper);
    assert_eq!(rp.rate(), LINE / 4.0);
    assert_eq!(rp.target(), LINE / 2.0);
}

#[test]
fn alpha_decays_as_one_minus_g_to_the_k_without_cnps() {
    let mut rp = Rp::paper();
    let mut paper = PaperRp::new();
    // Two CNPs (α stays 1): the rate stays far from line rate for the whole run.
    cnps_to_both(&mut rp, &mut paper, 2);
    // Paper values: K = 55 µs, g = 1/256.
    for k in 1..=20 {
        run_both(&mut rp, &mut paper, 1);
        assert_eq!(rp.now, Instant::from_micros(55 * k));
        let expected = (1.0 - 1.0 / 256.0_f64).powi(k as i32);
        assert!(close(rp.alpha(), expected), "k {k}: α {}", rp.alpha());
    }
}

#[test]
fn rate_returns_to_target_in_f_fast_recovery_steps_then_additive_increase() {
    let mut rp = Rp::paper();
    let mut paper = PaperRp::new();
    cnps_to_both(&mut rp, &mut paper, 1);
    let gap0 = rp.target() - rp.rate();
    // F = 5 timer events of fast recovery: RT stays, the gap halves each time.
    for step in 1..=5 {
        run_both(&mut rp, &mut paper, 1);
        assert_eq!(rp.target(), LINE, "fast recovery leaves the target");
        let gap = rp.target() - rp.rate();
        assert!(
            close(gap, gap0 / f64::from(1 << step)),
            "step {step}: gap {gap}"
        );
    }
    // Then additive increase: RT += R_AI = 40 Mb/s per timer event (RT is at line rate here,
    // so it is clamped; see the clamp test). Below line rate it climbs:
    let mut rp = Rp::paper();
    let mut paper = PaperRp::new();
    cnps_to_both(&mut rp, &mut paper, 2);
    run_both(&mut rp, &mut paper, 5);
    let target = rp.target();
    run_both(&mut rp, &mut paper, 1);
    assert!(close(rp.target(), target + 40e6), "additive increase");
    assert_eq!(rp.stats.rate_increases, 6);
}

#[test]
fn hyper_increase_once_both_counters_pass_f() {
    let mut rp = Rp::paper();
    let mut paper = PaperRp::new();
    cnps_to_both(&mut rp, &mut paper, 2);
    // Eight byte-counter events (B = 10 MB each): five fast recovery, three additive increase.
    rp.sent(8 * 10_000_000);
    for _ in 0..8 {
        paper.byte_counter();
    }
    assert_same(&rp, &paper);
    // Timer events: T = 1..5 additive (max > F, min ≤ F), then T = 6, 7 hyper (i = 1, 2).
    for _ in 0..5 {
        let target = rp.target();
        run_both(&mut rp, &mut paper, 1);
        assert!(close(rp.target(), target + 40e6), "additive");
    }
    for i in 1..=2 {
        let target = rp.target();
        run_both(&mut rp, &mut paper, 1);
        assert!(
            close(rp.target(), target + f64::from(i) * 200e6),
            "hyper step {i}"
        );
    }
    assert_eq!(rp.stats.rate_increases, 15);
}

#[test]
fn the_rate_is_clamped_to_line_rate_and_the_timers_stop_there() {
    let mut rp = Rp::paper();
    rp.cnp();
    let mut events = 0;
    while rp.timers.get(Timer::RateIncrease).is_some() {
        rp.next_event();
        assert!(rp.rate() <= LINE && rp.target() <= LINE);
        events += 1;
        assert!(events < 10_000, "recovers");
    }
    assert_eq!((rp.rate(), rp.target()), (LINE, LINE));
    // α decays on until it is below 1/1024, then nothing is due: an idle QP is idle.
    while rp.next_deadline().is_some() {
        rp.next_event();
    }
    assert!(rp.alpha() < 1.0 / 1024.0);
    assert_eq!(rp.rp.alpha_due(), None);
}

#[test]
fn the_rate_never_goes_below_rpg_min_rate() {
    let mut rp = Rp::new(DcqcnConfig {
        rpg_min_rate: 1_000,
        ..DcqcnConfig::paper()
    });
    for _ in 0..100 {
        rp.cnp();
    }
    assert_eq!(rp.rate(), 1e9);
}

#[test]
fn one_decrease_per_rate_reduce_monitor_period() {
    // NVIDIA defaults: 4 µs.
    let mut rp = Rp::new(DcqcnConfig::default());
    rp.cnp();
    let after_one = rp.rate();
    rp.now = Instant::from_micros(3);
    rp.cnp();
    assert_eq!(rp.rate(), after_one, "inside the period");
    assert_eq!(rp.stats.rate_decreases, 1);
    rp.now = Instant::from_micros(4);
    rp.cnp();
    assert!(rp.rate() < after_one);
    assert_eq!(rp.stats.rate_decreases, 2);
}

/// HPCC's ns-3 run with the paper's timers (`run.py --cc dcqcn_paper`): its decrease looked at
/// every 50 µs, α every 50, the increase timer 55, no byte counter.
fn ns3_ticked() -> Rp {
    Rp::new(DcqcnConfig {
        rate_reduce_monitor_period: 50,
        decrease_on_tick: true,
        dce_tcp_rtt: 50,
        rpg_time_reset: 55,
        rpg_byte_reset: u32::MAX,
        initial_alpha_value: 1024,
        ..DcqcnConfig::default()
    })
}

#[test]
fn on_a_tick_the_first_cnp_cuts_nothing_until_its_tick() {
    // ns-3's cnp_received_mlx only sets a flag (and RateOnFirstCnp is 1.0); the first
    // CheckRateDecreaseMlx, a period and 1 ns after the first CNP, cuts.
    let mut rp = ns3_ticked();
    rp.now = Instant::from_micros(7);
    rp.cnp();
    assert_eq!((rp.rate(), rp.stats.rate_decreases), (LINE, 0));
    let tick = Instant::from_micros(57) + Duration::from_nanos(1);
    assert_eq!(rp.timers.get(Timer::RateIncrease), Some(tick));
    // A second CNP before the tick asks for nothing more.
    rp.now = Instant::from_micros(30);
    rp.cnp();
    assert_eq!(rp.timers.get(Timer::RateIncrease), Some(tick));
    // α's step at 57 µs (a CNP in its period: (1 − g)·1 + g = 1) comes first, then the cut.
    assert_eq!(rp.next_event(), vec![Fired::AlphaDecay]);
    assert_eq!(rp.now, Instant::from_micros(57));
    assert_eq!(rp.next_event(), vec![Fired::Timer(Timer::RateIncrease)]);
    assert_eq!(rp.now, tick);
    assert_eq!(
        rp.rate(),
        LINE / 2.0,
        "one cut for the two CNPs, by α/2 at α = 1"
    );
    assert_eq!(rp.stats.rate_decreases, 1);
    // The increase timer now runs, 55 µs from the cut.
    assert_eq!(
        rp.timers.get(Timer::RateIncrease),
        Some(tick + Duration::from_micros(55))
    );
}

#[test]
fn on_a_tick_a_cnp_waits_for_the_next_tick_of_the_first_cnps_grid() {
    let mut rp = ns3_ticked();
    rp.cnp(); // at 0: the ticks fall at 50 µs + 1 ns, 100 µs + 1 ns, ...
    assert_eq!(rp.next_event(), vec![Fired::AlphaDecay]);
    assert_eq!(rp.next_event(), vec![Fired::Timer(Timer::RateIncrease)]);
    let after_one = rp.rate();
    // The tick at 100 µs passes without a CNP in its period: nothing is cut, and nothing
    // wakes the QP for it (the next event is the increase timer, 55 µs after the cut).
    assert_eq!(rp.stats.rate_decreases, 1);
    let increase = Instant::from_micros(105) + Duration::from_nanos(1);
    assert_eq!(rp.timers.get(Timer::RateIncrease), Some(increase));
    // A CNP at 120 µs: its tick is 150 µs + 1 ns, on the grid, not 50 µs after it. The
    // increase at 105 µs has already come and gone.
    while rp.now < increase {
        rp.next_event();
    }
    assert_eq!(rp.stats.rate_increases, 1);
    let increased = rp.rate();
    assert!(increased > after_one);
    rp.now = Instant::from_micros(120);
    rp.cnp();
    assert_eq!(rp.rate(), increased, "not at the CNP");
    let tick = Instant::from_micros(150) + Duration::from_nanos(1);
    assert_eq!(rp.timers.get(Timer::RateIncrease), Some(tick));
    while rp.stats.rate_decreases == 1 {
        rp.next_event();
    }
    assert_eq!(rp.now, tick);
    assert!(rp.rate() < increased);
    assert_eq!(
        rp.stats.rate_increases, 1,
        "the increase at 160 µs was not reached"
    );
}

#[test]
fn by_the_timer_alone_f_fast_recoveries_one_additive_then_hyper_increases() {
    // HPCC's ns-3 (RateIncEventMlx): F = 1, R_AI 20 Mb/s and R_HAI 200 Mb/s at 100 Gb/s, no
    // byte counter. Stage 0 fast recovery, stage 1 additive, every later one R_HAI.
    let config = DcqcnConfig {
        rpg_threshold: 1,
        rpg_ai_rate: 20,
        rpg_hai_rate: 200,
        stages_by_timer: true,
        clamp_tgt_rate: true,
        rate_reduce_monitor_period: 0,
        rpg_byte_reset: u32::MAX,
        initial_alpha_value: 1024,
        ..DcqcnConfig::default()
    };
    let mut rp = Rp::new(config);
    // Two cuts: RT = RC = LINE / 2, then RC = LINE / 4.
    rp.cnp();
    rp.cnp();
    assert_eq!((rp.rate(), rp.target()), (LINE / 4.0, LINE / 2.0));
    let timer = |rp: &mut Rp| {
        while !rp.next_event().contains(&Fired::Timer(Timer::RateIncrease)) {}
        (rp.rate(), rp.target())
    };
    // Fast recovery: the target holds, the rate halves the distance.
    assert_eq!(timer(&mut rp), (LINE * 3.0 / 8.0, LINE / 2.0));
    // Additive: + R_AI.
    let rt = LINE / 2.0 + 20e6;
    assert_eq!(timer(&mut rp).1, rt);
    // Hyper: + R_HAI at each event, not i·R_HAI.
    assert_eq!(timer(&mut rp).1, rt + 200e6);
    assert_eq!(timer(&mut rp).1, rt + 400e6);
    assert_eq!(timer(&mut rp).1, rt + 600e6);
    // The paper's stages, with no byte counter, never leave additive increase.
    let mut paper_stages = Rp::new(DcqcnConfig {
        stages_by_timer: false,
        ..config
    });
    paper_stages.cnp();
    paper_stages.cnp();
    for _ in 0..4 {
        timer(&mut paper_stages);
    }
    assert_eq!(paper_stages.target(), LINE / 2.0 + 3.0 * 20e6);
}

#[test]
fn without_the_tick_the_same_cnp_cuts_at_once() {
    // The same profile, `decrease_on_tick` off: NVIDIA's rule, a cut at the CNP.
    let mut rp = ns3_ticked();
    rp.rp = Dcqcn::new(
        DcqcnConfig {
            decrease_on_tick: false,
            rate_reduce_monitor_period: 50,
            dce_tcp_rtt: 50,
            rpg_time_reset: 55,
            rpg_byte_reset: u32::MAX,
            initial_alpha_value: 1024,
            ..DcqcnConfig::default()
        },
        LINE,
    );
    rp.now = Instant::from_micros(7);
    rp.cnp();
    assert_eq!((rp.rate(), rp.stats.rate_decreases), (LINE / 2.0, 1));
    assert_eq!(
        rp.timers.get(Timer::RateIncrease),
        Some(Instant::from_micros(62))
    );
}

#[test]
fn nvidia_defaults_decrease_by_alpha_over_two_and_keep_min_dec_fac() {
    let mut rp = Rp::new(DcqcnConfig::default());
    let alpha = 1023.0 / 1024.0;
    rp.cnp();
    assert!(
        close(rp.rate(), LINE * (1.0 - alpha / 2.0)),
        "rpg_gd 11 is 1 − α/2"
    );
    // α rises at the end of its period (1 µs), by g = 5/1024.
    assert_eq!(rp.alpha(), alpha, "not before the period ends");
    assert_eq!(rp.next_event(), vec![Fired::AlphaDecay]);
    assert_eq!(rp.now, Instant::ZERO + Duration::from_micros(1));
    assert!(close(rp.alpha(), (1019.0 / 1024.0) * alpha + 5.0 / 1024.0));
    // rpg_gd 10 would be 1 − α: rpg_min_dec_fac 50 keeps half.
    let mut rp = Rp::new(DcqcnConfig {
        rpg_gd: 10,
        initial_alpha_value: 1024,
        ..DcqcnConfig::default()
    });
    rp.cnp();
    assert_eq!(rp.rate(), LINE / 2.0);
}

#[test]
fn rate_to_set_on_first_cnp_applies_to_the_first_only() {
    let mut rp = Rp::new(DcqcnConfig {
        rate_to_set_on_first_cnp: 10_000,
        ..DcqcnConfig::default()
    });
    rp.cnp();
    assert_eq!((rp.rate(), rp.target()), (10e9, 10e9));
    rp.now += Duration::from_micros(10);
    rp.cnp();
    assert!(rp.rate() < 10e9 && rp.rate() > 4.9e9);
}

#[test]
fn byte_counter_drives_increases_only_while_recovering() {
    let mut rp = Rp::paper();
    rp.sent(100_000_000);
    assert_eq!(
        rp.stats.rate_increases, 0,
        "at line rate nothing to recover"
    );
    rp.cnp();
    rp.sent(9_999_999);
    assert_eq!(rp.stats.rate_increases, 0);
    rp.sent(1);
    assert_eq!(rp.stats.rate_increases, 1);
}

#[test]
fn nvidia_alpha_steps_once_a_period_up_with_any_cnp_in_it_and_down_without() {
    // NVIDIA's dce_tcp_rtt (and HPCC's ns-3, UpdateAlphaMlx): α is updated once every
    // period whether or not a CNP came; up by g if one did, down by (1 − g) if none did.
    let g = 5.0 / 1024.0;
    let mut rp = Rp::new(DcqcnConfig::default());
    let mut expected = 1023.0 / 1024.0;
    rp.cnp();
    // Three more CNPs in the same microsecond, inside rate_reduce_monitor_period: no second
    // decrease, and α's step at the period's end counts them once.
    for ns in [200, 500, 900] {
        rp.now = Instant::ZERO + Duration::from_nanos(ns);
        rp.cnp();
    }
    assert_eq!(rp.stats.rate_decreases, 1);
    assert_eq!(rp.next_event(), vec![Fired::AlphaDecay]);
    expected = (1.0 - g) * expected + g;
    assert!(
        close(rp.alpha(), expected),
        "{} against {expected}",
        rp.alpha()
    );
    // A period without a CNP: down.
    assert_eq!(rp.next_event(), vec![Fired::AlphaDecay]);
    expected *= 1.0 - g;
    assert!(close(rp.alpha(), expected));
    // A CNP still inside the 4 µs after the decrease raises α at its period's end though the
    // rate stays.
    let rate = rp.rate();
    rp.now = Instant::ZERO + Duration::from_nanos(2_500);
    rp.cnp();
    assert_eq!((rp.rate(), rp.stats.rate_decreases), (rate, 1));
    assert_eq!(rp.next_event(), vec![Fired::AlphaDecay]);
    assert_eq!(rp.now, Instant::ZERO + Duration::from_micros(3));
    expected = (1.0 - g) * expected + g;
    assert!(close(rp.alpha(), expected));
    // The paper's rule instead raises α at the decrease itself, and only there.
    let mut paper = Rp::new(DcqcnConfig {
        alpha_on_cnp: true,
        ..DcqcnConfig::default()
    });
    paper.cnp();
    assert!(close(paper.alpha(), (1.0 - g) * (1023.0 / 1024.0) + g));
    paper.now = Instant::ZERO + Duration::from_nanos(500);
    paper.cnp();
    assert!(
        close(paper.alpha(), (1.0 - g) * (1023.0 / 1024.0) + g),
        "no rise without a decrease"
    );
}
