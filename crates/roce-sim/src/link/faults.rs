//! Targeted faults and the filter, tried on every offered packet before it reaches the queue.

use tracing::trace;

use super::{Link, SimPacket};
use crate::fault::{Effect, Fault, PacketMeta, Verdict};

/// The interceptor of [`Link::set_filter`].
pub(super) type Filter = Box<dyn FnMut(&SimPacket) -> Verdict>;

impl Link {
    /// Arms a targeted fault. Faults are tried in the order they were armed; at most one drop
    /// fault fires per packet, and a packet a fault dropped does not use up `MarkCe` or `Corrupt`
    /// faults.
    pub fn fail(&mut self, fault: Fault) {
        self.faults.push(fault);
    }

    /// Sets the filter that sees every packet no fault dropped (s2n-quic's interceptor),
    /// replacing any earlier one.
    pub fn set_filter(&mut self, filter: impl FnMut(&SimPacket) -> Verdict + 'static) {
        self.filter = Some(Box::new(filter));
    }

    /// Removes the filter.
    pub fn clear_filter(&mut self) {
        self.filter = None;
    }
    /// Fires the faults that match: returns whether one dropped the packet, and whether one
    /// marks or corrupts it.
    pub(super) fn apply_faults(&mut self, meta: &PacketMeta, ect: bool) -> (bool, bool, bool) {
        if let Some(i) = self
            .faults
            .iter()
            .position(|fault| fault.effect_on(meta, ect) == Some(Effect::Drop))
        {
            self.fire(i);
            return (true, false, false);
        }
        let mut fire_first = |effect| {
            let found = self
                .faults
                .iter()
                .position(|fault| fault.effect_on(meta, ect) == Some(effect));
            found.map(|i| self.fire(i)).is_some()
        };
        let mark_ce = fire_first(Effect::MarkCe);
        let corrupt = fire_first(Effect::Corrupt);
        (false, mark_ce, corrupt)
    }

    /// Records that fault `i` fired, disarming it once used up.
    pub(super) fn fire(&mut self, i: usize) {
        if !self.faults[i].fire() {
            let fault = self.faults.remove(i);
            trace!(fault = ?fault, "fault used up");
        }
    }
}
