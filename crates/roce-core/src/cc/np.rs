//! The DCQCN notification point (the paper's "NP"): a CE-marked request makes the receiving
//! QP send a CNP to the QP that sent it, at most one per `min_time_between_cnps`. The policy
//! only: the QP writes and sends the CNP (`qp/cnp.rs`).

use crate::{Duration, Instant};

/// A QP's notification point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Notifier {
    /// When the last CNP was sent.
    last: Option<Instant>,
    /// A CNP is to be sent.
    due: bool,
    /// CNPs sent.
    pub(crate) cnps_sent: u64,
}

impl Notifier {
    /// Whether a CNP is to be sent.
    pub(crate) fn due(&self) -> bool {
        self.due
    }

    /// A CE-marked request arrived at `now`: a CNP is due unless one was sent less than
    /// `min_gap` ago (mlx5 `min_time_between_cnps`; such CE marks send nothing, the firmware's
    /// rate limit, where htsim's NP sends one when the interval ends instead).
    pub(crate) fn on_ce(&mut self, now: Instant, min_gap: Duration) {
        if self.due || self.last.is_some_and(|last| now < last + min_gap) {
            return;
        }
        self.due = true;
    }

    /// The CNP due is being written: it is due no more.
    pub(crate) fn clear_due(&mut self) {
        self.due = false;
    }

    /// The CNP left at `now`.
    pub(crate) fn sent(&mut self, now: Instant) {
        self.last = Some(now);
        self.cnps_sent += 1;
    }
}
