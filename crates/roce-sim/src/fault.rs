//! Targeted faults: exact, one-shot (or `times`-shot) interventions on a [`Link`](crate::Link),
//! applied before the filter and before anything random.
//!
//! A test that wants "the third packet is lost" says so with a [`Fault`] instead of searching for
//! a seed whose random loss happens to do it. Faults match on what the link can read from the
//! packet's BTH (see [`PacketMeta`]); a payload that has no BTH matches only [`Fault::DropNth`].

use roce_wire::opcode::Operation;
use roce_wire::{Opcode, Psn, Qpn, bth};

/// One targeted fault. [`Link::fail`](crate::Link::fail) arms it; it fires on the next packets
/// it matches and disarms itself once it has fired as often as it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Drop the next `times` packets whose BTH carries `psn`, whatever their opcode (a request
    /// and an acknowledgement of the same PSN alike; note that a CNP carries PSN 0).
    DropPsn {
        /// The PSN to drop.
        psn: Psn,
        /// How many matching packets to drop.
        times: u32,
    },
    /// Drop the `n`-th packet offered to the link, counting from 1 since the link was created
    /// (so `n` is the position in [`Link::sent`](crate::Link::sent) plus one). A fault whose
    /// packet has already gone by never fires.
    DropNth {
        /// 1-based position among all packets offered.
        n: u64,
    },
    /// Drop the next acknowledgement: RC ACKNOWLEDGE (ACK, NAK or RNR NAK), RC ATOMIC
    /// ACKNOWLEDGE, or any RDMA READ response packet (READ responses are acknowledgements
    /// too: they retire the requests before them, rxe `rxe_comp.c`).
    DropNextAck,
    /// Drop the next `times` packets with this opcode.
    DropOpcode {
        /// The opcode to drop.
        opcode: Opcode,
        /// How many matching packets to drop.
        times: u32,
    },
    /// Set ECN to CE on the next ECN-capable (ECT(0) or ECT(1)) packet with this PSN, as a
    /// congested switch would. A Not-ECT packet is never marked (RFC 3168 §5); the fault waits
    /// for an ECN-capable one.
    MarkCe {
        /// The PSN to mark.
        psn: Psn,
    },
    /// Flip one bit of the next packet with this PSN, chosen by the link's RNG among the bits
    /// the ICRC covers, so that the receiver's ICRC check must reject it.
    Corrupt {
        /// The PSN to corrupt.
        psn: Psn,
    },
}

/// What a fault does to a packet it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    Drop,
    MarkCe,
    Corrupt,
}

/// What the link reads from an offered packet: its position, and its BTH fields if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketMeta {
    /// 1-based position among all packets offered to the link.
    pub index: u64,
    /// The BTH opcode, `None` if the payload is shorter than a BTH.
    pub opcode: Option<Opcode>,
    /// The BTH destination QP.
    pub dest_qp: Option<Qpn>,
    /// The BTH PSN.
    pub psn: Option<Psn>,
    /// The BTH AckReq bit: the requester asks for an ACK of this packet.
    pub ack_req: Option<bool>,
}

impl PacketMeta {
    /// Reads the BTH at the start of `payload`, if it is long enough to hold one. Total: no byte
    /// sequence panics, and a payload that is not RoCE gets `None` fields.
    pub fn read(index: u64, payload: &[u8]) -> Self {
        let bth = bth::Packet::new_checked(payload).ok();
        Self {
            index,
            opcode: bth.as_ref().map(bth::Packet::opcode),
            dest_qp: bth.as_ref().map(bth::Packet::dest_qp),
            psn: bth.as_ref().map(bth::Packet::psn),
            ack_req: bth.as_ref().map(bth::Packet::ack_req),
        }
    }

    /// Whether the opcode acknowledges requests: ACKNOWLEDGE, ATOMIC ACKNOWLEDGE or a READ
    /// response.
    pub fn is_ack(&self) -> bool {
        self.opcode.and_then(Opcode::layout).is_some_and(|layout| {
            matches!(
                layout.operation,
                Operation::Acknowledge | Operation::AtomicAcknowledge | Operation::RdmaReadResponse
            )
        })
    }
}

impl Fault {
    /// What this fault does, if it matches `meta`. `ect` says whether the packet is ECN-capable.
    pub(crate) fn effect_on(&self, meta: &PacketMeta, ect: bool) -> Option<Effect> {
        let hit = match *self {
            Self::DropPsn { psn, times } => times > 0 && meta.psn == Some(psn),
            Self::DropNth { n } => meta.index == n,
            Self::DropNextAck => meta.is_ack(),
            Self::DropOpcode { opcode, times } => times > 0 && meta.opcode == Some(opcode),
            Self::MarkCe { psn } => ect && meta.psn == Some(psn),
            Self::Corrupt { psn } => meta.psn == Some(psn),
        };
        hit.then_some(match self {
            Self::MarkCe { .. } => Effect::MarkCe,
            Self::Corrupt { .. } => Effect::Corrupt,
            _ => Effect::Drop,
        })
    }

    /// Records that the fault fired once. Returns whether it is still armed.
    pub(crate) fn fire(&mut self) -> bool {
        match self {
            Self::DropPsn { times, .. } | Self::DropOpcode { times, .. } => {
                *times = times.saturating_sub(1);
                *times > 0
            }
            Self::DropNth { .. }
            | Self::DropNextAck
            | Self::MarkCe { .. }
            | Self::Corrupt { .. } => false,
        }
    }
}

/// What a [`Link`](crate::Link)'s filter decides for a packet (s2n-quic's interceptor). The
/// filter sees every packet that no targeted fault dropped, before the queue and before anything
/// random.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Verdict {
    /// Let the packet through unchanged.
    #[default]
    Pass,
    /// Drop the packet.
    Drop,
    /// Set ECN to CE if the packet is ECN-capable (Not-ECT packets are never marked).
    MarkCe,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(index: u64, opcode: Opcode, psn: u32) -> PacketMeta {
        PacketMeta {
            index,
            opcode: Some(opcode),
            dest_qp: Some(Qpn::new(0x11)),
            psn: Some(Psn::new(psn)),
            ack_req: Some(false),
        }
    }

    #[test]
    fn drop_psn_fires_times_times_then_disarms() {
        let mut fault = Fault::DropPsn {
            psn: Psn::new(2),
            times: 2,
        };
        let packet = meta(1, Opcode::RcSendOnly, 2);
        assert_eq!(fault.effect_on(&packet, false), Some(Effect::Drop));
        assert!(fault.fire());
        assert_eq!(fault.effect_on(&packet, false), Some(Effect::Drop));
        assert!(!fault.fire());
        assert_eq!(fault.effect_on(&packet, false), None);
        assert_eq!(
            fault.effect_on(&meta(1, Opcode::RcSendOnly, 3), false),
            None
        );
    }

    #[test]
    fn acks_are_acknowledge_atomic_acknowledge_and_read_responses() {
        let acks = [
            Opcode::RcAcknowledge,
            Opcode::RcAtomicAcknowledge,
            Opcode::RcRdmaReadResponseFirst,
            Opcode::RcRdmaReadResponseMiddle,
            Opcode::RcRdmaReadResponseLast,
            Opcode::RcRdmaReadResponseOnly,
        ];
        for opcode in Opcode::ALL.iter().copied() {
            assert_eq!(
                meta(1, opcode, 0).is_ack(),
                acks.contains(&opcode),
                "{opcode}"
            );
        }
        assert!(!meta(1, Opcode::Unknown(0x11 | 0x40), 0).is_ack());
    }

    #[test]
    fn mark_ce_waits_for_an_ecn_capable_packet() {
        let fault = Fault::MarkCe { psn: Psn::new(7) };
        let packet = meta(1, Opcode::RcSendOnly, 7);
        assert_eq!(fault.effect_on(&packet, false), None);
        assert_eq!(fault.effect_on(&packet, true), Some(Effect::MarkCe));
    }

    #[test]
    fn a_payload_without_a_bth_has_no_fields() {
        let meta = PacketMeta::read(3, &[0x04; 11]);
        assert_eq!(meta.index, 3);
        assert_eq!((meta.opcode, meta.dest_qp, meta.psn), (None, None, None));
        assert!(!meta.is_ack());
        let fault = Fault::DropOpcode {
            opcode: Opcode::RcSendOnly,
            times: 1,
        };
        assert_eq!(fault.effect_on(&meta, true), None);
        assert_eq!(
            Fault::DropNth { n: 3 }.effect_on(&meta, true),
            Some(Effect::Drop)
        );
    }
}
