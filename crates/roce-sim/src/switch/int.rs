//! HPCC's in-band telemetry at a switch egress (Li et al., SIGCOMM 2019, §3.2; HPCC's ns-3
//! `switch-node.cc` `SwitchNotifyDequeue`, CC_MODE 3): a packet that carries the INT header
//! (`roce_wire::int`) takes one record as it leaves a port — the time, the bytes the port sent
//! before it, the queue it leaves behind, and the port's line rate.

use roce_core::Instant;
use roce_wire::int::Hop;

use super::{Frame, SwitchOf};

impl<P: Frame> SwitchOf<P> {
    /// `port`'s record for a packet leaving it at `now`, before the port counts it sent (ns-3
    /// stamps `m_txBytes` before adding the packet, and the queue after taking it off).
    pub(super) fn int_hop(&self, now: Instant, port: usize) -> Hop {
        let p = &self.ports[port];
        Hop::with_rate_code(
            now.as_nanos(),
            p.stats.sent_bytes,
            p.bytes as u64,
            p.int_rate,
        )
    }

    /// Appends `egress`'s record to a leaving packet that wants one ([`Frame::wants_int`]).
    #[inline(always)]
    pub(super) fn stamp_leaving(&self, now: Instant, egress: usize, packet: &mut P) {
        if packet.wants_int() {
            packet.push_int(self.int_hop(now, egress));
        }
    }

    /// For an event driver that keeps packets elsewhere: the record of the packet of `bytes`
    /// that `port` started at `now` ([`SwitchOf::depart`] or [`SwitchOf::forward`] just counted
    /// it sent), as [`SwitchOf::depart`] stamps a packet that wants one.
    #[inline]
    pub fn int_record(&self, now: Instant, port: usize, bytes: usize) -> Hop {
        let p = &self.ports[port];
        Hop::with_rate_code(
            now.as_nanos(),
            p.stats.sent_bytes.saturating_sub(bytes as u64),
            p.bytes as u64,
            p.int_rate,
        )
    }
}
