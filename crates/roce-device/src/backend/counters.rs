//! What a backend drops before the engine sees it, counted by reason. The engine counts what
//! it drops itself (`roce_core::Stats`); these are the frames and datagrams that never became a
//! `Datagram`: frames the kernel dropped for a full receive ring, fragments, frames that do not
//! parse, offload batches that cannot be cut.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A backend's counters, shared with the device's handles (relaxed atomics: each is a count,
/// read as a snapshot).
#[derive(Debug, Default)]
pub struct BackendCounters {
    rx_ring_full: AtomicU64,
    rx_ipv4_fragments: AtomicU64,
    rx_malformed_frames: AtomicU64,
    rx_batches_cut: AtomicU64,
    rx_batches_dropped: AtomicU64,
}

/// A snapshot of [`BackendCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendStats {
    /// Dropped by the kernel: frames that found the packet socket's receive ring full (the
    /// raw backend; `PACKET_STATISTICS`). Any frame on the interface counts, ours or not: a
    /// flood of them can crowd out a peer's packets, which then show as lost.
    pub rx_ring_full: u64,
    /// Dropped: IPv4 fragments of UDP datagrams to our address. RoCEv2 is sent with DF and
    /// never fragmented (IBA Annex A17.4), so a fragment is a misconfigured path or an attack.
    pub rx_ipv4_fragments: u64,
    /// Dropped: frames to our address and the RoCEv2 port whose headers do not parse.
    pub rx_malformed_frames: u64,
    /// Segmentation-offload batches received and cut into their datagrams.
    pub rx_batches_cut: u64,
    /// Dropped: offload batches that could not be cut.
    pub rx_batches_dropped: u64,
}

impl BackendStats {
    /// Every counter by name, for reports and JSON.
    pub fn counters(&self) -> [(&'static str, u64); 5] {
        [
            ("rx_ring_full", self.rx_ring_full),
            ("rx_ipv4_fragments", self.rx_ipv4_fragments),
            ("rx_malformed_frames", self.rx_malformed_frames),
            ("rx_batches_cut", self.rx_batches_cut),
            ("rx_batches_dropped", self.rx_batches_dropped),
        ]
    }

    /// Everything dropped, for any reason.
    pub fn rx_dropped(&self) -> u64 {
        self.rx_ring_full
            + self.rx_ipv4_fragments
            + self.rx_malformed_frames
            + self.rx_batches_dropped
    }
}

/// Which counter to bump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counter {
    RingFull,
    Ipv4Fragment,
    MalformedFrame,
    BatchCut,
    BatchDropped,
}

impl BackendCounters {
    /// Fresh counters to share.
    pub(crate) fn shared() -> Arc<Self> {
        Arc::default()
    }

    pub(crate) fn bump(&self, counter: Counter) {
        self.add(counter, 1);
    }

    pub(crate) fn add(&self, counter: Counter, n: u64) {
        let cell = match counter {
            Counter::RingFull => &self.rx_ring_full,
            Counter::Ipv4Fragment => &self.rx_ipv4_fragments,
            Counter::MalformedFrame => &self.rx_malformed_frames,
            Counter::BatchCut => &self.rx_batches_cut,
            Counter::BatchDropped => &self.rx_batches_dropped,
        };
        cell.fetch_add(n, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> BackendStats {
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        BackendStats {
            rx_ring_full: get(&self.rx_ring_full),
            rx_ipv4_fragments: get(&self.rx_ipv4_fragments),
            rx_malformed_frames: get(&self.rx_malformed_frames),
            rx_batches_cut: get(&self.rx_batches_cut),
            rx_batches_dropped: get(&self.rx_batches_dropped),
        }
    }
}
