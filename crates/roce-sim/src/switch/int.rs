//! HPCC's in-band telemetry at a switch egress (Li et al., SIGCOMM 2019, §3.2; HPCC's ns-3
//! `switch-node.cc` `SwitchNotifyDequeue`, CC_MODE 3): a packet that carries the INT header
//! (`roce_wire::int`) takes one record as it leaves a port — the time, the bytes the port sent
//! before it, the queue it leaves behind, and the port's line rate. With HPCC-PINT (CC_MODE 10)
//! every packet leaving a port moves its utilisation meter, and one that carries a PINT header
//! is raised to the port's utilisation, encoded (`roce_wire::pint`).

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

    /// Appends `egress`'s record to a leaving packet that wants one ([`Frame::wants_int`]);
    /// with PINT's meters, moves `egress`'s meter and raises a PINT packet's value.
    #[inline(always)]
    pub(super) fn stamp_leaving(&mut self, now: Instant, egress: usize, packet: &mut P) {
        if packet.wants_int() {
            packet.push_int(self.int_hop(now, egress));
        }
        if self.config.pint.is_some() {
            self.pint_leaving(now, egress, packet);
        }
    }

    /// HPCC-PINT at `egress`, for a packet leaving at `now` (ns-3 `SwitchNotifyDequeue`,
    /// CC_MODE 10): a PINT packet updates the port's U from the queue it leaves behind and is
    /// raised to U encoded; then every packet, PINT's or not, is the port's last
    /// (`m_lastPktTs`, `m_lastPktSize`).
    #[inline(never)]
    fn pint_leaving(&mut self, now: Instant, egress: usize, packet: &mut P) {
        let Some(meter) = &self.config.pint else {
            return;
        };
        let at = now.as_nanos();
        if packet.wants_pint() {
            let p = &mut self.ports[egress];
            let u = p.pint.update(at, p.bytes as u64, p.rate_bps, meter.rtt_ns);
            // ns-3's `rand() % 65536`: the switch's own generator.
            let draw = (super::pfc::next_draw(&mut self.rng) >> 48) as u16;
            let value = meter.scale.encode(u, draw);
            p.pint_value = value;
            packet.raise_pint(value);
        }
        self.ports[egress]
            .pint
            .departed(at, packet.wire_len() as u64);
    }

    /// For an event driver that keeps packets elsewhere: the value `port` gave the last PINT
    /// packet it started ([`Frame::wants_pint`]), for the driver to raise that packet to.
    #[inline]
    pub fn pint_value(&self, port: usize) -> u16 {
        self.ports[port].pint_value
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
