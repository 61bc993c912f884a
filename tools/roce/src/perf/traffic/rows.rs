//! `--run_infinitely`: a result row every interval, of what completed in it (perftest's
//! `handle_signal_print_thread`: `sleep(duration)` then `print_report_bw` of the iterations
//! since the last row, over the time since it).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::Live;
use crate::perf::report::Measured;

/// The rows of a run that never ends.
#[derive(Debug)]
pub(in crate::perf) struct Rows {
    interval: Duration,
    /// Where each row goes, to be printed.
    out: UnboundedSender<Measured>,
    /// When the current row started, and the completions before it.
    from: Option<Instant>,
    base: u64,
}

impl Rows {
    pub(in crate::perf) fn new(interval: Duration, out: UnboundedSender<Measured>) -> Self {
        Self {
            interval,
            out,
            from: None,
            base: 0,
        }
    }

    /// `sum` completions so far at `now`: a row when the interval is over. `live` holds the
    /// current row's start and count, for the last row that Ctrl-C prints.
    pub(super) fn tick(&mut self, sum: u64, now: Instant, live: &RefCell<Live>) {
        let from = *self.from.get_or_insert(now);
        if now.duration_since(from) >= self.interval {
            // Nobody to print it only when the run is being torn down.
            let _ = self.out.send(Measured {
                elapsed: now - from,
                iterations: sum - self.base,
                ..Measured::default()
            });
            self.from = Some(now);
            self.base = sum;
        }
        let mut live = live.borrow_mut();
        live.started = self.from;
        live.completed = sum - self.base;
    }
}
