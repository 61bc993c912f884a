use super::*;

#[test]
fn the_peak_is_the_best_window_and_never_below_the_average() {
    let t0 = Instant::now();
    let ms = |k: u64| t0 + Duration::from_millis(k);
    // 1000 messages, one every ms, all posted at once: every window from 0 gives 1 ms.
    let n = 1000u64;
    let posted = vec![t0; n as usize];
    let completed: Vec<Instant> = (1..=n).map(ms).collect();
    let best = best_per_message(&posted, &completed, 100).unwrap();
    assert!((best - 1e-3).abs() < 1e-9, "{best}");
    // Posted as they go, one per ms, and messages 300..600 come 4 times faster: the best
    // window is in that burst (a quarter of a ms a message), the average is slower.
    let mut t = 0.0f64;
    let mut posted = Vec::new();
    let mut completed = Vec::new();
    for k in 0..n {
        let step = if (300..600).contains(&k) { 0.25 } else { 1.0 };
        posted.push(t0 + Duration::from_secs_f64(t / 1e3));
        t += step;
        completed.push(t0 + Duration::from_secs_f64((t + 0.5) / 1e3));
    }
    let best = best_per_message(&posted, &completed, 100).unwrap();
    let average = (completed[999] - posted[0]).as_secs_f64() / n as f64;
    assert!(best < average, "{best} {average}");
    assert!(best > 0.25e-3 && best < 0.3e-3, "{best}");
    assert_eq!(best_per_message(&[], &[], 100), None);
}

/// perftest's search, every window tried: what the hull's search must find.
fn best_by_every_window(posted: &[Instant], completed: &[Instant], cq_mod: usize) -> Option<f64> {
    let n = posted.len().min(completed.len());
    let mut best = f64::INFINITY;
    let mut window = |i: usize, j: usize| {
        let t = completed[j]
            .saturating_duration_since(posted[i])
            .as_secs_f64();
        best = best.min(t / (j - i + 1) as f64);
    };
    for i in 0..n {
        let mut j = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
        while j < n {
            window(i, j);
            j += cq_mod;
        }
        if !n.is_multiple_of(cq_mod) {
            window(i, n - 1);
        }
    }
    (best.is_finite() && best > 0.0).then_some(best)
}

proptest::proptest! {
    /// Posts and completions as a run makes them (each in order, a WR completing after its
    /// post), in bursts and stalls, under any CQ moderation: the hull's minimum is every
    /// window's.
    #[test]
    fn the_peak_is_every_windows_minimum(
        n in 1usize..700,
        cq_mod in proptest::sample::select(vec![1usize, 7, 64, 100, 128]),
        gaps in proptest::collection::vec((0u64..3000, 0u64..3000, 0u8..4), 700),
    ) {
        let t0 = Instant::now();
        let (mut post, mut done) = (0u64, 0u64);
        let (mut posted, mut completed) = (Vec::new(), Vec::new());
        for &(p, c, burst) in &gaps[..n] {
            // A burst posts many WRs at one instant, or completes them at one.
            post += if burst == 0 { 0 } else { p };
            done = done.max(post) + if burst == 1 { 0 } else { c };
            posted.push(t0 + Duration::from_nanos(post));
            completed.push(t0 + Duration::from_nanos(done + 1));
        }
        let hull = best_per_message(&posted, &completed, cq_mod);
        let every = best_by_every_window(&posted, &completed, cq_mod);
        match (hull, every) {
            (Some(h), Some(e)) => proptest::prop_assert!((h - e).abs() <= 1e-9 * e, "{} {}", h, e),
            (h, e) => proptest::prop_assert_eq!(h, e),
        }
    }
}

#[test]
fn a_qps_goodput_runs_to_its_last_completion() {
    let t0 = Instant::now();
    let mut per_qp = PerQp::new(2, t0, Plan::Iterations(1));
    per_qp.completed(1, t0 + Duration::from_millis(4));
    per_qp.completed(0, t0 + Duration::from_millis(2));
    assert_eq!(
        per_qp.last(),
        [
            Some(Duration::from_millis(2)),
            Some(Duration::from_millis(4))
        ]
    );
    assert_eq!(per_qp.sampled(), None);
    // With -D only what completes inside the window counts.
    let plan = Plan::Duration {
        total: Duration::from_secs(4),
        margin: Duration::from_secs(1),
    };
    let mut per_qp = PerQp::new(1, t0, plan);
    for s in [0.5, 1.5, 2.5, 3.5] {
        per_qp.completed(0, t0 + Duration::from_secs_f64(s));
    }
    assert_eq!(per_qp.sampled(), Some((Duration::from_secs(2), 2)));
    assert_eq!(per_qp.sum, 4);
}
