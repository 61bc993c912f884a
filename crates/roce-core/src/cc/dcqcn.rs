//! The DCQCN reaction point (Zhu et al., SIGCOMM 2015), per QP: the rate decrease on a CNP, the
//! α estimate, and the rate increase driven by a timer and a byte counter (fast recovery,
//! additive increase, hyper increase). Equations: the paper's "RP (sender NIC)", taken from
//! htsim `dcqcn.cpp`, `bobzhuyb/ns3-rdma` and HPCC `rdma-hw.cc`; knobs and their firmware
//! semantics: the mlx5 names of [`DcqcnConfig`].

use tracing::debug;

use super::control::CongestionControl;
use crate::config::DcqcnConfig;
use crate::stats::Stats;
use crate::timer::{Timer, TimerTable};
use crate::{Duration, Instant};

/// Bits per second in one Mb/s, the firmware's rate unit.
const MBPS: f64 = 1e6;

/// Which event drives a rate increase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IncreaseEvent {
    Timer,
    ByteCounter,
}

/// One QP's reaction point.
#[derive(Debug, Clone)]
pub(crate) struct Dcqcn {
    config: DcqcnConfig,
    /// The line rate, bits per second: where RC starts and the most RC and RT reach.
    line: f64,
    /// Current rate RC, bits per second.
    rc: f64,
    /// Target rate RT, bits per second.
    rt: f64,
    /// α as of its last decay.
    alpha: f64,
    /// When α next decays by (1 − g): every `dce_tcp_rtt` after the last decrease, while the
    /// rate recovers or α is above 1/1024; `None`: α holds. The decays are applied when α is
    /// next needed ([`Dcqcn::decay_alpha`]), not by a timer of their own: at HPCC's 1 µs
    /// period a timer would wake every recovering QP a million times a second.
    alpha_due: Option<Instant>,
    /// Timer events since the last decrease (the paper's T).
    t: u32,
    /// Byte-counter events since the last decrease (BC).
    bc: u32,
    /// Bytes sent since the last byte-counter event.
    bytes: u64,
    /// When the rate last decreased.
    last_decrease: Option<Instant>,
    /// A timer-driven increase happened since the last decrease.
    time_increased: bool,
    /// Below line rate: the increase timer and byte counter run.
    recovering: bool,
    /// A CNP arrived in the α period that ends at `alpha_due`, so that step raises α
    /// (`DcqcnConfig::alpha_on_cnp` false: NVIDIA's and ns-3's rule).
    cnp_in_period: bool,
    /// When the rate-increase timer fires, if it runs. It shares the QP's `RateIncrease`
    /// timer with `decrease_due` ([`Dcqcn::arm`]).
    increase_due: Option<Instant>,
    /// `decrease_on_tick`: the tick that cuts the rate for a CNP already received, if one
    /// waits for it.
    decrease_due: Option<Instant>,
    /// `decrease_on_tick`: where the decrease ticks count from, the QP's first CNP plus 1 ns.
    tick_origin: Option<Instant>,
}

impl Dcqcn {
    /// A reaction point at line rate `line_bps` with α at `initial_alpha_value`.
    pub(crate) fn new(config: DcqcnConfig, line_bps: f64) -> Self {
        Self {
            config,
            line: line_bps,
            rc: line_bps,
            rt: line_bps,
            alpha: f64::from(config.initial_alpha_value) / 1024.0,
            alpha_due: None,
            t: 0,
            bc: 0,
            bytes: 0,
            last_decrease: None,
            time_increased: false,
            recovering: false,
            cnp_in_period: false,
            increase_due: None,
            decrease_due: None,
            tick_origin: None,
        }
    }

    /// Arms the QP's `RateIncrease` timer for the earlier of the increase timer and the
    /// decrease tick, or stops it.
    fn arm(&self, timers: &mut TimerTable) {
        match self.increase_due.into_iter().chain(self.decrease_due).min() {
            Some(at) => timers.set(Timer::RateIncrease, at),
            None => timers.stop(Timer::RateIncrease),
        }
    }

    /// The increase timer fired.
    fn increase_on_timer(&mut self, now: Instant, stats: &mut Stats) {
        self.increase_due = None;
        if !self.recovering {
            return;
        }
        // The decays due by now come first, as timers of the same instant fire in
        // `Timer::ALL` order; the increase may end the recovery.
        self.decay_alpha(now, true);
        self.increase(IncreaseEvent::Timer, now, stats);
        if self.recovering {
            self.increase_due = Some(now + self.increase_period());
        }
    }

    /// `decrease_on_tick`: the first decrease tick after `now`. Ticks fall every period from
    /// the first CNP plus 1 ns (ns-3 schedules its first `CheckRateDecreaseMlx` a period and
    /// 1 ns after the first CNP, then one a period after each).
    fn next_tick(&mut self, now: Instant, period: Duration) -> Instant {
        let origin = *self
            .tick_origin
            .get_or_insert(now + Duration::from_nanos(1));
        let period_ns = period.as_nanos().max(1);
        // The first tick is a period after the origin; a CNP on a tick waits for the next.
        let ticks = now.saturating_duration_since(origin).as_nanos() / period_ns + 1;
        origin + Duration::from_nanos(u64::try_from(ticks * period_ns).unwrap_or(u64::MAX))
    }

    /// g, α's gain: mlx5 `dce_tcp_g` is (1 − g) in 1/1024.
    fn g(&self) -> f64 {
        f64::from(1024u32.saturating_sub(self.config.dce_tcp_g)) / 1024.0
    }

    fn min_rate(&self) -> f64 {
        (f64::from(self.config.rpg_min_rate) * MBPS).min(self.line)
    }

    fn alpha_period(&self) -> Duration {
        Duration::from_micros(self.config.dce_tcp_rtt.max(1).into())
    }

    fn increase_period(&self) -> Duration {
        Duration::from_micros(self.config.rpg_time_reset.max(1).into())
    }

    /// α is still above the firmware's resolution (1/1024) and worth decaying.
    fn alpha_live(alpha: f64) -> bool {
        alpha >= 1.0 / 1024.0
    }

    /// α and its next decay once the decays due by `now` (or only those before it, unless
    /// `inclusive`) are applied: the paper's "every K without a CNP, α = (1 − g)·α", one step
    /// per period as a timer would take them (so the arithmetic is the timer's, bit for bit),
    /// stopping where the timer would no longer be re-armed; the first step also adds g if a
    /// CNP arrived in its period (`cnp_in_period`). `recovering` cannot change between two
    /// calls: every event that changes it applies the decays first.
    fn decayed(&self, now: Instant, inclusive: bool) -> (f64, Option<Instant>) {
        let (mut alpha, mut due) = (self.alpha, self.alpha_due);
        let (keep, period) = (1.0 - self.g(), self.alpha_period());
        let mut raise = self.cnp_in_period;
        while let Some(at) = due {
            if at > now || (at == now && !inclusive) {
                break;
            }
            alpha *= keep;
            if std::mem::take(&mut raise) {
                alpha += self.g();
            }
            due = (self.recovering || Self::alpha_live(alpha)).then(|| at + period);
        }
        (alpha, due)
    }

    /// When α next decays, if it does.
    #[cfg(test)]
    pub(crate) fn alpha_due(&self) -> Option<Instant> {
        self.alpha_due
    }

    /// Applies every decay due by `now`, as the events that need α do.
    #[cfg(test)]
    pub(crate) fn apply_alpha_decays(&mut self, now: Instant) {
        self.decay_alpha(now, true);
    }

    /// Applies the decays due by `now` ([`Dcqcn::decayed`]); a period that ended takes its CNP
    /// with it.
    fn decay_alpha(&mut self, now: Instant, inclusive: bool) {
        let due = self.alpha_due;
        (self.alpha, self.alpha_due) = self.decayed(now, inclusive);
        if self.alpha_due != due {
            self.cnp_in_period = false;
        }
    }

    /// One rate-increase event (the paper's RP; the counter of the event is incremented
    /// first and fast recovery lasts while max(T, BC) ≤ F, as htsim `dcqcn.cpp` does, so it
    /// takes F steps).
    fn increase(&mut self, event: IncreaseEvent, now: Instant, stats: &mut Stats) {
        match event {
            IncreaseEvent::Timer => {
                self.t += 1;
                self.time_increased = true;
            }
            IncreaseEvent::ByteCounter => self.bc += 1,
        }
        let f = self.config.rpg_threshold;
        let stage = if self.config.stages_by_timer {
            // HPCC's ns-3: fast recovery while T ≤ F, one additive increase at F + 1, then
            // R_HAI at each event.
            if self.t <= f {
                "fast recovery"
            } else if self.t == f + 1 {
                self.rt += f64::from(self.config.rpg_ai_rate) * MBPS;
                "additive increase"
            } else {
                self.rt += f64::from(self.config.rpg_hai_rate) * MBPS;
                "hyper increase"
            }
        } else if self.t.max(self.bc) <= f {
            // Fast recovery: RC = (RT + RC) / 2, RT unchanged.
            "fast recovery"
        } else if self.t.min(self.bc) > f {
            // Hyper increase: RT += i · R_HAI with i = min(T, BC) − F.
            let i = f64::from(self.t.min(self.bc) - f);
            self.rt += i * f64::from(self.config.rpg_hai_rate) * MBPS;
            "hyper increase"
        } else {
            // Additive increase: RT += R_AI.
            self.rt += f64::from(self.config.rpg_ai_rate) * MBPS;
            "additive increase"
        };
        // Clamp to the line rate (mlx5 `rpg_max_rate` 0 = line rate).
        self.rt = self.rt.min(self.line);
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line);
        stats.rate_increases += 1;
        // Within the firmware's 1 Mb/s of line rate: recovered, the increase machinery stops.
        if self.line - self.rc < MBPS {
            self.rc = self.line;
            self.rt = self.line;
            self.recovering = false;
        }
        debug!(
            rate = self.rc,
            target = self.rt,
            alpha = self.alpha,
            t = self.t,
            bc = self.bc,
            stage,
            time = %now,
            "dcqcn rate increase"
        );
    }

    /// The rate decrease of a CNP (at the CNP, or at its tick with `decrease_on_tick`).
    fn decrease(&mut self, now: Instant, timers: &mut TimerTable, stats: &mut Stats) {
        let old = self.rc;
        let first = !self.recovering && self.rc >= self.line;
        if first && self.config.rate_to_set_on_first_cnp != 0 {
            // mlx5 `rate_to_set_on_first_cnp` (HPCC `cnp_received_mlx`: RC = RT = that rate).
            let rate = (f64::from(self.config.rate_to_set_on_first_cnp) * MBPS).min(self.line);
            self.rc = rate;
            self.rt = rate;
        } else {
            // Paper: RT = RC (mlx5: only with `clamp_tgt_rate`, or after a timer increase with
            // `clamp_tgt_rate_after_time_inc`).
            if self.config.clamp_tgt_rate
                || (self.config.clamp_tgt_rate_after_time_inc && self.time_increased)
            {
                self.rt = self.rc;
            }
            // Paper: RC = RC · (1 − α/2); mlx5: 1 − α·1024 / 2^rpg_gd, α in 1/1024.
            let divisor = f64::from(self.config.rpg_gd.min(63)).exp2() / 1024.0;
            let mut rc = self.rc * (1.0 - self.alpha / divisor);
            // mlx5 `rpg_min_dec_fac`: keep at least this percentage of the old rate.
            rc = rc.max(old * f64::from(self.config.rpg_min_dec_fac.min(100)) / 100.0);
            self.rc = rc;
        }
        // mlx5 `rpg_min_rate`.
        self.rc = self.rc.max(self.min_rate()).min(self.line);
        if self.config.alpha_on_cnp {
            // Paper: α = (1 − g)·α + g, and its decays start over.
            let g = self.g();
            self.alpha = (1.0 - g) * self.alpha + g;
            self.alpha_due = Some(now + self.alpha_period());
        }
        // Paper: reset the timer and the byte counter, T = BC = 0.
        self.t = 0;
        self.bc = 0;
        self.bytes = 0;
        self.time_increased = false;
        self.recovering = true;
        self.last_decrease = Some(now);
        self.increase_due = Some(now + self.increase_period());
        self.arm(timers);
        stats.rate_decreases += 1;
        debug!(
            from = old,
            rate = self.rc,
            target = self.rt,
            alpha = self.alpha,
            time = %now,
            "dcqcn rate decrease"
        );
    }
}

impl CongestionControl for Dcqcn {
    fn rate_bps(&self) -> Option<f64> {
        Some(self.rc)
    }

    /// ns-3's `VAR_WIN`, with `window_rtt_ns` as T: RC × T, if T is set.
    fn window_bytes(&self) -> Option<u64> {
        super::rate_window(self.rc, self.config.window_rtt_ns)
    }

    fn target_bps(&self) -> Option<f64> {
        Some(self.rt)
    }

    fn alpha(&self, now: Instant) -> f64 {
        self.decayed(now, true).0
    }

    fn on_cnp(&mut self, now: Instant, timers: &mut TimerTable, stats: &mut Stats) {
        // The decays before now; one due at this very instant is replaced by the new period,
        // as re-arming a timer would replace it (the paper's rule) or comes after this CNP,
        // which it counts (NVIDIA's).
        self.decay_alpha(now, false);
        if !self.config.alpha_on_cnp {
            // NVIDIA, HPCC's ns-3: this period's α step raises it, whether or not the rate
            // decreases now; α's steps run from the first CNP on.
            self.cnp_in_period = true;
            if self.alpha_due.is_none() {
                self.alpha_due = Some(now + self.alpha_period());
            }
        }
        let period = Duration::from_micros(self.config.rate_reduce_monitor_period.into());
        if self.config.decrease_on_tick && !period.is_zero() {
            // ns-3: the CNP sets a flag; the next tick of the period cuts.
            if self.decrease_due.is_none() {
                self.decrease_due = Some(self.next_tick(now, period));
                self.arm(timers);
            }
            debug!(time = %now, due = ?self.decrease_due, "dcqcn cnp, the decrease at the tick");
            return;
        }
        // mlx5 `rate_reduce_monitor_period`: at most one decrease per period.
        if let Some(last) = self.last_decrease
            && !period.is_zero()
            && now < last + period
        {
            debug!(time = %now, "dcqcn cnp within the rate-reduce monitor period");
            return;
        }
        self.decrease(now, timers, stats);
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, _: &mut TimerTable, stats: &mut Stats) {
        if !self.recovering {
            return;
        }
        // An increase may end the recovery, after which α decays only while it is live.
        self.decay_alpha(now, true);
        // Paper: a rate-increase event every B bytes sent.
        let b = u64::from(self.config.rpg_byte_reset.max(1));
        self.bytes += bytes;
        while self.bytes >= b && self.recovering {
            self.bytes -= b;
            self.increase(IncreaseEvent::ByteCounter, now, stats);
        }
    }

    fn on_timer(&mut self, timer: Timer, now: Instant, timers: &mut TimerTable, stats: &mut Stats) {
        if timer != Timer::RateIncrease {
            return;
        }
        let due = |at: Option<Instant>| at.is_some_and(|at| at <= now);
        // Both may be due at one call (a driver that calls late): in their order, an increase
        // of the same instant first. A decrease restarts the increase timer.
        if due(self.increase_due)
            && (!due(self.decrease_due) || self.increase_due <= self.decrease_due)
        {
            self.increase_on_timer(now, stats);
        }
        if due(self.decrease_due) {
            self.decrease_due = None;
            // α's steps due by the tick come first, as ns-3's α update comes 1 ns before it.
            self.decay_alpha(now, true);
            self.decrease(now, timers, stats);
        }
        self.arm(timers);
    }
}
