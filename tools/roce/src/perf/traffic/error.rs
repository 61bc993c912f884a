//! Why a traffic loop stopped.

use std::time::Duration;

use roce_core::{Qpn, WcStatus};
use roce_device::DeviceError;

/// Why a traffic loop of `roce perf` stopped before its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrafficError {
    /// Nothing completed for the timeout.
    #[error(
        "no completion for {secs} s after {completed} iterations (is the peer still running, with \
         the same -n, -q and -s? a perftest peer does not tell its own)"
    )]
    Silence {
        /// The timeout, in whole seconds.
        secs: u64,
        /// Completions so far.
        completed: u64,
    },
    /// A completion of one of our QPs failed.
    #[error("completion with status {status:?} on QP {qpn}")]
    Status {
        /// Its status.
        status: WcStatus,
        /// Its QP.
        qpn: Qpn,
    },
    /// A completion of the latency test's one QP failed.
    #[error("completion with status {0:?}")]
    LatencyStatus(WcStatus),
    /// `--check`: a byte that landed is not the byte that was sent.
    #[error(transparent)]
    Mismatch(#[from] crate::perf::check::Mismatch),
    /// A completion of a QP that is not one of ours.
    #[error("a completion of QP {0}, which is not ours")]
    NotOurs(Qpn),
    /// `ib_write_lat`: the peer's write did not land in time.
    #[error("no write from the peer for {limit:?} (ping {ping})")]
    NoWrite {
        /// The timeout.
        limit: Duration,
        /// The ping waited for.
        ping: u32,
    },
    /// The device refused a verb or failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}
