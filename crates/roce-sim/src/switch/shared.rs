//! The shared buffer ([`SharedBuffer`]): what a packet may take of it, what it is charged to,
//! and the dynamic threshold that decides PFC. The rules are those of HPCC's `switch-mmu.cc`
//! (`CheckIngressAdmission`, `UpdateIngressAdmission`, `RemoveFromIngressAdmission`,
//! `GetPfcThreshold`, `CheckShouldPause`, `CheckShouldResume`), written here from their
//! description in [`SharedBuffer`].

use super::{Frame, SharedBuffer, SwitchOf};

impl<P: Frame> SwitchOf<P> {
    /// The threshold of `port` now: the free space (what neither the reserves, the headrooms
    /// nor the shared bytes in use hold) shifted right by the port's α.
    pub(super) fn threshold(&self, shared: &SharedBuffer, port: usize) -> usize {
        self.free(shared) >> self.ports[port].alpha_shift
    }

    /// What neither the reserves, the headrooms nor the shared bytes in use hold.
    #[inline]
    fn free(&self, shared: &SharedBuffer) -> usize {
        shared
            .bytes
            .saturating_sub(self.set_aside)
            .saturating_sub(self.shared_used)
    }

    /// The bytes of the shared pool that `ingress`'s `priority` holds.
    pub(super) fn shared_share(
        &self,
        shared: &SharedBuffer,
        ingress: usize,
        priority: usize,
    ) -> usize {
        self.ports[ingress].class[priority]
            .held
            .saturating_sub(shared.reserve_bytes)
    }

    /// Whether a packet of `bytes` that came in on `ingress` with `priority` may be queued: it
    /// fits under the threshold, or (on a PFC priority) in the port's headroom.
    pub(super) fn shared_admits(
        &self,
        shared: &SharedBuffer,
        ingress: usize,
        priority: usize,
        bytes: usize,
    ) -> bool {
        let port = &self.ports[ingress];
        let under = port.class[priority].held + bytes <= shared.reserve_bytes
            || self.shared_share(shared, ingress, priority) + bytes
                <= self.threshold(shared, ingress);
        under
            || (self.lossless(priority)
                && port.class[priority].headroom_held + bytes <= port.headroom)
    }

    /// Charges an admitted packet to its ingress: to the reserve, the shared pool, or (past
    /// the threshold) the headroom.
    pub(super) fn shared_charge(
        &mut self,
        shared: &SharedBuffer,
        ingress: usize,
        priority: usize,
        bytes: usize,
    ) {
        let held = self.ports[ingress].class[priority].held + bytes;
        if held <= shared.reserve_bytes {
            self.ports[ingress].class[priority].held = held;
        } else if held - shared.reserve_bytes > self.threshold(shared, ingress) {
            self.ports[ingress].class[priority].headroom_held += bytes;
        } else {
            self.ports[ingress].class[priority].held = held;
            self.shared_used += bytes.min(held - shared.reserve_bytes);
        }
    }

    /// Gives back what a packet that left took: from the headroom first, then the shared
    /// pool, then the reserve.
    pub(super) fn shared_release(
        &mut self,
        shared: &SharedBuffer,
        ingress: usize,
        priority: usize,
        bytes: usize,
    ) {
        let port = &mut self.ports[ingress];
        let from_headroom = port.class[priority].headroom_held.min(bytes);
        let rest = bytes - from_headroom;
        let from_shared = rest.min(
            port.class[priority]
                .held
                .saturating_sub(shared.reserve_bytes),
        );
        port.class[priority].headroom_held -= from_headroom;
        port.class[priority].held -= rest;
        self.shared_used -= from_shared;
    }

    /// PFC with the dynamic threshold: (whether `ingress`'s sender should be paused for
    /// `priority`, whether a paused one may resume).
    #[inline]
    pub(super) fn shared_pfc(
        &self,
        shared: &SharedBuffer,
        ingress: usize,
        priority: usize,
    ) -> (bool, bool) {
        let port = &self.ports[ingress];
        if port.class[priority].headroom_held > 0 {
            return (true, false); // in its headroom: paused, and not to resume
        }
        let share = port.class[priority]
            .held
            .saturating_sub(shared.reserve_bytes);
        // `threshold`, with the port in hand.
        let threshold = self.free(shared) >> port.alpha_shift;
        let pause = share >= threshold;
        let resume = share == 0 || share + shared.resume_offset_bytes <= threshold;
        (pause, resume)
    }
}
