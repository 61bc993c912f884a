//! perftest's peak bandwidth: the best window of posts and completions, and when it is searched.

use std::time::Instant;

/// The best time per message over any window from the post of WR `i` to the completion of
/// number `j >= i` (`(completed[j] - posted[i]) / (j - i + 1)`), in seconds: perftest's peak
/// (perftest_parameters.c `print_report_bw`, which searches every `i` and the `j` at
/// multiples of `cq_mod`, then reports `size / opt_delta`). The window over the whole run is
/// one of them, so the peak is never below the average. `None` without completions.
pub(crate) fn best_per_message(posted: &[Instant], completed: &[Instant]) -> Option<f64> {
    let n = posted.len().min(completed.len());
    let mut best = f64::INFINITY;
    let mut window = |i: usize, j: usize| {
        let t = completed[j]
            .saturating_duration_since(posted[i])
            .as_secs_f64();
        best = best.min(t / (j - i + 1) as f64);
    };
    for i in 0..n {
        let mut j = (i + 1).div_ceil(CQ_MOD) * CQ_MOD - 1;
        while j < n {
            window(i, j);
            j += CQ_MOD;
        }
        if !n.is_multiple_of(CQ_MOD) {
            window(i, n - 1);
        }
    }
    (best.is_finite() && best > 0.0).then_some(best)
}

/// perftest computes no peak above this many iterations per QP (perftest_parameters.c:
/// `iters > 20000 && noPeak == OFF` sets `noPeak`): the search is quadratic.
pub(crate) const PEAK_MAX_ITERS: u32 = 20_000;

/// Nor here above this many of all QPs together: the search takes `n * n / CQ_MOD` steps
/// and two timestamps per iteration.
pub(crate) const PEAK_MAX_TOTAL: u64 = 200_000;

/// perftest's default `cq_mod` of bandwidth tests (`DEF_CQ_MOD`): it signals one completion
/// in 100, so its peak search ends windows only at every 100th completion (and the last).
const CQ_MOD: usize = 100;
