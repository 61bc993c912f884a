//! A long run on the calling thread, with its progress said from a second one.
//!
//! The simulation runs on the thread that asked for it, and a reporter thread wakes at an
//! interval to say how far it has got. The other way round (the run on a spawned thread) costs
//! the huge pages of `huge_pages.rs`: glibc serves a spawned thread's allocations from an arena
//! of its own, mapped without `MADV_HUGEPAGE` whatever `glibc.malloc.hugetlb` says (glibc 2.36:
//! only the main heap and the chunks it maps alone are marked), so the pooled packets, events
//! and queues a run grows land on small pages. On the 10 ms cut of the reference run that was
//! 45 MB of 119 MB on huge pages with the run on a spawned thread and 100 MB of 128 MB on the
//! main one (`AnonHugePages` in `/proc/PID/smaps_rollup`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::{Duration, Instant as WallClock};

/// When the reporter speaks: after `first` of wall time, then every `then`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Every {
    pub(super) first: Duration,
    pub(super) then: Duration,
}

/// Runs `work` on this thread; with `every`, a second thread calls `report` with the wall time
/// elapsed at each of its instants until `work` returns. A panic in `work` is caught and
/// returned as `Err` (its message has been printed by the panic hook), once the reporter has
/// stopped.
pub(super) fn run_reporting<T>(
    every: Option<Every>,
    report: impl FnMut(Duration) + Send,
    work: impl FnOnce() -> T,
) -> std::thread::Result<T> {
    let Some(every) = every else {
        return catch_unwind(AssertUnwindSafe(work));
    };
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || reporter(every, report, &finished));
        let result = catch_unwind(AssertUnwindSafe(work));
        // The reporter stops at its next wait.
        drop(done);
        result
    })
}

/// Calls `report` at `every`'s instants until `finished` says the run is over (its sender
/// dropped).
fn reporter(every: Every, mut report: impl FnMut(Duration), finished: &mpsc::Receiver<()>) {
    let started = WallClock::now();
    let mut wait = every.first;
    loop {
        match finished.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                report(started.elapsed());
                wait = every.then;
            }
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    const QUICK: Every = Every {
        first: Duration::from_millis(1),
        then: Duration::from_millis(1),
    };

    #[test]
    fn the_work_runs_on_the_calling_thread_and_its_result_comes_back() {
        let caller = std::thread::current().id();
        let result = run_reporting(Some(QUICK), |_| {}, || std::thread::current().id());
        assert_eq!(result.ok(), Some(caller));
    }

    #[test]
    fn the_reporter_speaks_while_the_work_runs_and_not_after() {
        let reports = AtomicU32::new(0);
        let result = run_reporting(
            Some(QUICK),
            |_| {
                reports.fetch_add(1, Ordering::Relaxed);
            },
            || {
                // Until the reporter has spoken twice (a reporter that never speaks fails the
                // test by its timeout).
                while reports.load(Ordering::Relaxed) < 2 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                7
            },
        );
        assert_eq!(result.ok(), Some(7));
        // The reporter was joined when `run_reporting` returned: no report comes later.
        let seen = reports.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(reports.load(Ordering::Relaxed), seen);
    }

    #[test]
    fn without_an_interval_nothing_reports() {
        let reports = AtomicU32::new(0);
        let result = run_reporting(
            None,
            |_| {
                reports.fetch_add(1, Ordering::Relaxed);
            },
            || std::thread::sleep(Duration::from_millis(20)),
        );
        assert!(result.is_ok());
        assert_eq!(reports.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_panic_in_the_work_is_returned_once_the_reporter_stopped() {
        let result = run_reporting(Some(QUICK), |_| {}, || -> u32 { panic!("the work failed") });
        let payload = result.expect_err("the panic comes back");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"the work failed"));
    }
}
