//! DCTCP's ECN-Echo at the responder (Alizadeh et al., SIGCOMM 2010, §3.1 and its Figure 10,
//! the receiver's two-state ACK machine), carried in the BTH's BECN bit of the ACKs (IBA vol.
//! 1 Annex A10, congestion control: BTH byte 4 holds FECN, bit 7, and BECN, bit 6). Each ACK
//! says whether the requests it newly acknowledges arrived CE-marked; as ACKs are coalesced
//! (one per AckReq), a request whose CE state differs from the ones before it since the last
//! ACK first makes the responder acknowledge those, with their state, so that every ACK
//! covers requests of one state and the requester can count the marked bytes exactly.
//!
//! Only when the NIC's congestion control asks for it ([`crate::Congestion::echoes_ecn`]):
//! otherwise no ACK has BECN set and none is added, the wire is rxe's. A peer that does not
//! read the bit is not disturbed by it: rxe (`rxe_hdr.h`) keeps FECN and BECN in the top bits
//! of the word that holds the DestQP (`BTH_FECN_MASK` 0x80000000, `BTH_BECN_MASK` 0x40000000),
//! writes them as zero (`bth_init` masks the QPN with `BTH_QPN_MASK`) and reads the QPN through
//! that mask; the ICRC covers that byte as all ones (`roce_wire::icrc`), so setting it changes
//! no ICRC; our parser only reports it (`roce_wire::bth`), and only the completer hands it to
//! congestion control.

/// The responder's ECN-Echo state.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EcnEcho {
    /// The request being handled arrived CE-marked.
    ce: bool,
    /// The CE state of the SEND and WRITE packets accepted since the last ACK; `None`: no
    /// packet since.
    run: Option<bool>,
}

impl EcnEcho {
    /// A request arrived, CE-marked or not.
    pub(crate) fn arrived(&mut self, ce: bool) {
        self.ce = ce;
    }

    /// A new SEND or WRITE packet is about to be accepted: if its CE state ends a run of the
    /// other state, the BECN of the ACK due at once for that run (of the packet before it).
    pub(crate) fn state_change(&mut self) -> Option<bool> {
        let run = self.run.filter(|&run| run != self.ce)?;
        self.run = None;
        Some(run)
    }

    /// The SEND or WRITE packet was accepted; with `ack` it is acknowledged now: the BECN of
    /// that ACK.
    pub(crate) fn accepted(&mut self, ack: bool) -> bool {
        self.run = (!ack).then_some(self.ce);
        self.ce
    }

    /// Something other than a SEND or WRITE packet was handled (a READ or atomic, which its
    /// responses acknowledge, or a refusal): the run ends unacknowledged by an ACK of its own.
    pub(crate) fn reset(&mut self) {
        self.run = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figure 10 of the DCTCP paper: ACKs are delayed while the CE state holds, and a change
    /// acknowledges the run before it with that run's state.
    #[test]
    fn a_change_of_ce_state_acknowledges_the_run_before_it() {
        let mut echo = EcnEcho::default();
        // Three unmarked packets, no AckReq: nothing due.
        for _ in 0..3 {
            echo.arrived(false);
            assert_eq!(echo.state_change(), None);
            echo.accepted(false);
        }
        // A marked one: the three before are acknowledged at once, without BECN.
        echo.arrived(true);
        assert_eq!(echo.state_change(), Some(false));
        echo.accepted(false);
        // Another marked one with AckReq: its ACK echoes CE.
        echo.arrived(true);
        assert_eq!(echo.state_change(), None);
        assert!(echo.accepted(true));
        // After an ACK no run is open: an unmarked packet changes nothing.
        echo.arrived(false);
        assert_eq!(echo.state_change(), None);
        assert!(!echo.accepted(true));
    }
}
