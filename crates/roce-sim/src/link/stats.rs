//! The counters of a link.

#[cfg(doc)]
use super::Link;

/// Counters of a [`Link`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LinkStats {
    /// Packets offered with [`Link::send`].
    pub offered: u64,
    /// Copies handed out by [`Link::deliver`], duplicates included.
    pub delivered: u64,
    /// Packets lost at random.
    pub lost: u64,
    /// Packets dropped at the tail of a full queue.
    pub queue_drops: u64,
    /// Packets dropped by targeted faults.
    pub fault_drops: u64,
    /// Packets dropped by the filter.
    pub filtered: u64,
    /// Packets with a bit flipped.
    pub corrupted: u64,
    /// Packets sent twice.
    pub duplicated: u64,
    /// Packets the link marked CE.
    pub ce_marked: u64,
    /// The largest queue occupancy reached, in wire bytes.
    pub max_queue_bytes: usize,
}
