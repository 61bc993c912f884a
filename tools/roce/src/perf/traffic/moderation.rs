//! CQ moderation, perftest's `-Q`: which of a QP's WRs ask for a completion.
//!
//! perftest's bandwidth loop (`run_iter_bw`, perftest_resources.c) clears
//! `IBV_SEND_SIGNALED` on its WR at every `cq_mod`-th post and sets it again on the post
//! before the next, so one WR in `cq_mod` completes, and it counts each completion as
//! `cq_mod` WRs done; `cq_mod` is at most the TX depth (perftest_parameters.c), so a full
//! window always holds a WR that will complete. Here the WR's id is its index in its QP, and
//! since an RC QP's send queue completes in order, a completion for WR `n` says that WRs
//! `0..=n` are done, whatever the moderation; the last WR always asks, so that a run of any
//! length ends on a completion.

/// Which WRs of a QP ask for a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moderation {
    /// One WR in `every` asks.
    every: u64,
    /// WRs per QP (`u64::MAX` for a timed run, which has no last).
    iters: u64,
}

impl Moderation {
    /// perftest's rule: `cq_mod`, but at most `depth` (and at least 1), for QPs of `iters` WRs.
    pub(crate) fn new(cq_mod: u32, depth: u32, iters: u64) -> Self {
        Self {
            every: u64::from(cq_mod.min(depth).max(1)),
            iters,
        }
    }

    /// One WR in how many asks: the moderation after perftest's rule.
    pub(crate) fn every(self) -> usize {
        usize::try_from(self.every).unwrap_or(usize::MAX)
    }

    /// Whether WR `n` (its index in its QP, from 0) asks for a completion: every `every`-th,
    /// and the last.
    pub(crate) fn signaled(self, n: u64) -> bool {
        (n + 1).is_multiple_of(self.every) || n + 1 == self.iters
    }

    /// Of a QP's first `posted` WRs, how many lie up to the last one that asked: those a
    /// completion will account for; the rest complete unseen until a later one asks.
    pub(crate) fn asked(self, posted: u64) -> u64 {
        if posted == self.iters {
            posted
        } else {
            posted - posted % self.every
        }
    }

    /// [`Moderation::asked`] over every QP's posted WRs.
    pub(crate) fn asked_of_all(self, posted: &[u64]) -> u64 {
        posted.iter().map(|&p| self.asked(p)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(m: Moderation, wrs: u64) -> Vec<u64> {
        (0..wrs).filter(|&n| m.signaled(n)).collect()
    }

    #[test]
    fn one_wr_in_cq_mod_asks_and_the_last_always() {
        // perftest's default of 100 with 250 WRs: the 100th, the 200th and the last.
        assert_eq!(asking(Moderation::new(100, 128, 250), 250), [99, 199, 249]);
        // A count that divides evenly has no extra one.
        assert_eq!(asking(Moderation::new(100, 128, 200), 200), [99, 199]);
    }

    #[test]
    fn cq_mod_above_the_depth_is_the_depth() {
        // As perftest_parameters.c makes it, so a full window always holds a WR that asks.
        assert_eq!(asking(Moderation::new(100, 16, 40), 40), [15, 31, 39]);
        let m = Moderation::new(1000, 7, u64::MAX);
        for start in 0..50 {
            assert!(
                (start..start + 7).any(|n| m.signaled(n)),
                "window at {start}"
            );
        }
    }

    #[test]
    fn one_asks_for_every_wr() {
        assert_eq!(asking(Moderation::new(1, 128, 5), 5), [0, 1, 2, 3, 4]);
    }

    /// What `asked` derives from a posted count is what the WRs that asked say.
    #[test]
    fn asked_is_up_to_the_last_signaled_wr() {
        for m in [
            Moderation::new(100, 128, 250),
            Moderation::new(16, 16, 40),
            Moderation::new(1, 128, 5),
            Moderation::new(4, 128, u64::MAX),
        ] {
            for posted in 0..=40.min(m.iters) {
                let last = (0..posted)
                    .rev()
                    .find(|&n| m.signaled(n))
                    .map_or(0, |n| n + 1);
                assert_eq!(m.asked(posted), last, "{m:?} {posted}");
            }
        }
        let m = Moderation::new(100, 128, 250);
        assert_eq!((m.asked(199), m.asked(200), m.asked(250)), (100, 200, 250));
        assert_eq!(m.asked_of_all(&[150, 250]), 350);
    }

    #[test]
    fn a_timed_run_has_no_last() {
        assert_eq!(asking(Moderation::new(4, 128, u64::MAX), 10), [3, 7]);
    }
}
