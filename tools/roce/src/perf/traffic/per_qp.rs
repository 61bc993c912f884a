//! How long a run lasts ([`Plan`]) and what each QP of a bandwidth test completed ([`PerQp`]).

use std::time::{Duration, Instant};

/// How long a run lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// `-n`: iterations per QP.
    Iterations(u32),
    /// `-D`: post for `total`; count what completes from `margin` after the start to
    /// `margin` before the end (perftest's `-D` with its default margin, a quarter of it).
    Duration { total: Duration, margin: Duration },
}

impl Plan {
    /// Iterations per QP; with a duration, as many as the time allows (a count no run
    /// reaches: 2^64 messages).
    pub(crate) fn iters(self) -> u64 {
        match self {
            Self::Iterations(n) => u64::from(n),
            Self::Duration { .. } => u64::MAX,
        }
    }
}

/// The sampling window of a `-D` run.
#[derive(Debug, Clone, Copy)]
struct Window {
    from: Instant,
    to: Instant,
    /// Completions inside it.
    count: u64,
}

/// What each QP of a bandwidth test completed.
#[derive(Debug, Clone)]
pub(crate) struct PerQp {
    /// When every QP had work.
    pub(crate) start: Instant,
    /// Completions per QP.
    pub(crate) done: Vec<u64>,
    /// Their sum.
    pub(crate) sum: u64,
    /// Completions taken: `sum` when every WR asks for one, fewer with CQ moderation.
    pub(crate) completions: u64,
    /// When each QP's last completion came: the end of its transfer, over which its goodput
    /// is counted ([`PerQp::last`]). Kept as the instant, which a completion only copies (the
    /// difference from `start` at every one cost 55 instructions, 1.6 % of a 64-byte WRITE's
    /// client).
    last_at: Vec<Option<Instant>>,
    window: Option<Window>,
}

impl PerQp {
    pub(crate) fn new(qps: usize, start: Instant, plan: Plan) -> Self {
        let window = match plan {
            Plan::Iterations(_) => None,
            Plan::Duration { total, margin } => Some(Window {
                from: start + margin,
                to: start + total.saturating_sub(margin),
                count: 0,
            }),
        };
        Self {
            start,
            done: vec![0; qps],
            sum: 0,
            completions: 0,
            last_at: vec![None; qps],
            window,
        }
    }

    pub(crate) fn completed(&mut self, qp: usize, now: Instant) {
        self.completed_through(qp, self.done[qp] + 1, now);
    }

    /// QP `qp` has `through` WRs done, at `now`: a completion that stands for the unsignaled
    /// WRs before it too (CQ moderation). Returns how many it adds (none if not past `done`).
    pub(crate) fn completed_through(&mut self, qp: usize, through: u64, now: Instant) -> u64 {
        let added = through.saturating_sub(self.done[qp]);
        self.completions += 1;
        self.done[qp] += added;
        self.sum += added;
        self.last_at[qp] = Some(now);
        if let Some(w) = &mut self.window
            && (w.from..=w.to).contains(&now)
        {
            w.count += added;
        }
        added
    }

    /// Each QP's last completion, since `start`.
    pub(crate) fn last(&self) -> Vec<Option<Duration>> {
        let since = |at: Instant| at.saturating_duration_since(self.start);
        self.last_at.iter().map(|at| at.map(since)).collect()
    }

    /// With `-D`: the sampling window and what completed in it.
    pub(crate) fn sampled(&self) -> Option<(Duration, u64)> {
        self.window.map(|w| (w.to - w.from, w.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `-D` or `--run_infinitely` run posts for as long as it lasts: 2^32 messages a QP
    /// (71 minutes at a million a second) is no end.
    #[test]
    fn a_timed_run_has_no_message_count_to_reach() {
        let timed = Plan::Duration {
            total: Duration::from_secs(1),
            margin: Duration::ZERO,
        };
        assert!(timed.iters() > u64::from(u32::MAX) + 1);
        assert_eq!(Plan::Iterations(7).iters(), 7);
        let mut per_qp = PerQp::new(1, Instant::now(), timed);
        per_qp.done[0] = u64::from(u32::MAX);
        per_qp.completed(0, Instant::now());
        assert_eq!(per_qp.done[0], 1 << 32);
    }

    /// A moderated completion counts the unsignaled WRs before it, in the totals and in a
    /// `-D` window; one that says no more than is known adds nothing.
    #[test]
    fn a_completion_through_a_wr_counts_those_before_it() {
        let start = Instant::now();
        let timed = Plan::Duration {
            total: Duration::from_secs(4),
            margin: Duration::from_secs(1),
        };
        let mut per_qp = PerQp::new(2, start, timed);
        let in_window = start + Duration::from_secs(2);
        assert_eq!(per_qp.completed_through(1, 100, in_window), 100);
        assert_eq!(per_qp.completed_through(1, 150, start), 50);
        assert_eq!(per_qp.completed_through(1, 150, in_window), 0);
        assert_eq!((per_qp.done.clone(), per_qp.sum), (vec![0, 150], 150));
        assert_eq!(per_qp.completions, 3);
        assert_eq!(per_qp.sampled().map(|(_, n)| n), Some(100));
        assert_eq!(per_qp.last()[1], Some(Duration::from_secs(2)));
        assert_eq!(per_qp.last()[0], None);
    }
}
