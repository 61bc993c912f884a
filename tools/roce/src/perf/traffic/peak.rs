//! perftest's peak bandwidth: the best window of posts and completions, and when it is searched.

use std::time::Instant;

/// The best time per message over any window from the post of WR `i` to the completion of
/// number `j >= i` (`(completed[j] - posted[i]) / (j - i + 1)`), in seconds: perftest's peak
/// (perftest_parameters.c `print_report_bw`, which searches every `i` and the `j` at
/// multiples of `cq_mod`, the run's CQ moderation, then reports `size / opt_delta`). The
/// window over the whole run is one of them, so the peak is never below the average. `None`
/// without completions.
///
/// perftest tries every pair, `n² / cq_mod` windows (4 M at 20 000 iterations, a cost the
/// run's CPU time then carries). The same minimum in `O(n log n)`: a window's time per message
/// is the slope from the point `(i, posted[i])` to `(j + 1, completed[j])`, and the smallest
/// slope from a point to the right of a set of points is to a vertex of their upper convex
/// hull, where the slopes fall then rise, so a binary search finds it. The hull grows by one
/// point per WR, each `j` asks once.
pub(crate) fn best_per_message(
    posted: &[Instant],
    completed: &[Instant],
    cq_mod: usize,
) -> Option<f64> {
    let cq_mod = cq_mod.max(1);
    let n = posted.len().min(completed.len());
    let base = *posted[..n].iter().chain(&completed[..n]).min()?;
    let secs = |t: Instant| t.duration_since(base).as_secs_f64();
    let slope = |p: (f64, f64), q: (f64, f64)| (q.1 - p.1) / (q.0 - p.0);
    let mut hull: Vec<(f64, f64)> = Vec::new();
    let mut best = f64::INFINITY;
    let mut next = 0;
    let ends = (cq_mod - 1..n)
        .step_by(cq_mod)
        .chain((!n.is_multiple_of(cq_mod)).then_some(n - 1));
    for j in ends {
        for (i, &at) in posted.iter().enumerate().take(j + 1).skip(next) {
            let p = (i as f64, secs(at));
            // Upper hull: drop the last vertex while it is on or below the chord to `p`.
            while let [.., o, a] = hull[..]
                && (a.0 - o.0) * (p.1 - o.1) - (a.1 - o.1) * (p.0 - o.0) >= 0.0
            {
                hull.pop();
            }
            hull.push(p);
        }
        next = j + 1;
        let q = ((j + 1) as f64, secs(completed[j]));
        let (mut lo, mut hi) = (0, hull.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if slope(hull[mid + 1], q) <= slope(hull[mid], q) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // A completion before its post would be a negative time: perftest's unsigned
        // difference is clamped at zero, as `saturating_duration_since` does.
        best = best.min(slope(hull[lo], q).max(0.0));
    }
    (best.is_finite() && best > 0.0).then_some(best)
}

/// perftest computes no peak above this many iterations per QP (perftest_parameters.c:
/// `iters > 20000 && noPeak == OFF` sets `noPeak`): the search is quadratic.
pub(crate) const PEAK_MAX_ITERS: u32 = 20_000;

/// Nor here above this many of all QPs together: perftest's search takes `n * n / cq_mod`
/// steps, and this one two timestamps per iteration.
pub(crate) const PEAK_MAX_TOTAL: u64 = 200_000;
