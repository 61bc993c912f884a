//! The RoCEv2 Congestion Notification Packet (IBA Annex A17.9.3): a BTH with opcode 0x81 followed
//! by 16 reserved bytes. DestQP names the QP whose packets were marked (the *sending* QP), BECN is
//! set, PSN and AckReq are 0, P_Key is the default (the ConnectX-4 Lx capture of
//! `secdev/scapy:test/contrib/roce.uts` and scapy's `cnp()`).

use crate::{BthRepr, Opcode, Psn, Qpn};

/// Length of the reserved block after the BTH.
pub const RESERVED_LEN: usize = 16;

/// The BTH of a CNP for `dest_qp`, as hardware sends it.
pub const fn bth(dest_qp: Qpn) -> BthRepr {
    let mut bth = BthRepr::new(Opcode::Cnp, dest_qp, Psn::new(0));
    bth.becn = true;
    bth
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cnp_bth_matches_the_connectx_capture() {
        // BTH `81 00 ffff 40 000118 00000000` of the ConnectX-4 Lx CNP.
        let mut buf = [0; 12];
        bth(Qpn::new(0x118)).emit(&mut crate::bth::Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x81, 0, 0xff, 0xff, 0x40, 0, 0x01, 0x18, 0, 0, 0, 0]);
    }
}
