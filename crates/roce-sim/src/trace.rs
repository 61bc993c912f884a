//! Logs in tests, stamped with simulated time.
//!
//! [`trace_to_test_output`] sends `tracing` events of the calling thread to the test's captured
//! output, filtered by `RUST_LOG` (warnings and errors only when it is unset or invalid). Each
//! line starts with the simulated time the harness last announced with [`set_sim_time`], or `-`
//! before it announced any, rather than the wall clock.

use std::cell::Cell;
use std::fmt;

use roce_core::Instant;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// Logs the calling thread's events to the test output until the returned guard is dropped.
///
/// The subscriber is the thread's default, not the global one, so every test gets its own and
/// calling this in each test (or twice in one) is harmless. Keep the guard alive for the whole
/// test: `let _log = roce_sim::trace_to_test_output();`.
pub fn trace_to_test_output() -> TraceGuard {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .with_ansi(false)
        .with_timer(SimTime)
        .finish();
    TraceGuard {
        _default: tracing::subscriber::set_default(subscriber),
    }
}

/// Announces the simulated time for the calling thread's log lines (the harness calls this as
/// its clock advances).
pub fn set_sim_time(now: Instant) {
    SIM_NOW.set(Some(now));
}

/// Keeps the test subscriber of [`trace_to_test_output`] installed; dropping it restores the
/// previous one.
#[must_use = "logging stops when the guard is dropped"]
pub struct TraceGuard {
    _default: DefaultGuard,
}

impl fmt::Debug for TraceGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceGuard").finish_non_exhaustive()
    }
}

/// Formats the thread's simulated time, as seconds with nanosecond precision.
#[derive(Debug, Clone, Copy)]
struct SimTime;

impl FormatTime for SimTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        match SIM_NOW.get() {
            Some(now) => write!(w, "{now}"),
            None => w.write_str("-"),
        }
    }
}

thread_local! {
    static SIM_NOW: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// What is logged when `RUST_LOG` is unset.
const DEFAULT_FILTER: &str = "warn";

#[cfg(test)]
mod tests {
    use tracing::Dispatch;
    use tracing::subscriber::NoSubscriber;

    use super::*;

    fn has_subscriber() -> bool {
        tracing::dispatcher::get_default(|dispatch: &Dispatch| !dispatch.is::<NoSubscriber>())
    }

    #[test]
    fn the_guard_installs_a_subscriber_for_this_thread_until_dropped() {
        assert!(!has_subscriber());
        let log = trace_to_test_output();
        assert!(has_subscriber());
        let again = trace_to_test_output();
        tracing::warn!("seen in the test output when it fails");
        drop(again);
        assert!(has_subscriber());
        drop(log);
        assert!(!has_subscriber());
    }

    #[test]
    fn lines_carry_simulated_time() {
        let mut line = String::new();
        SimTime.format_time(&mut Writer::new(&mut line)).unwrap();
        assert_eq!(line, "-");
        set_sim_time(Instant::from_micros(12));
        line.clear();
        SimTime.format_time(&mut Writer::new(&mut line)).unwrap();
        assert_eq!(line, "0.000012000");
    }
}
