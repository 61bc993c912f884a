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

/// The ConnectX-4 Lx CNP of scapy's `test/contrib/roce.uts`, the whole Ethernet frame: from
/// 10.0.17.1 to 10.0.18.1, DSCP 48 ECT(0), for QP 0x118, with hardware's ICRC. A reference for
/// tests and fuzz seeds.
pub const CONNECTX_FRAME: [u8; 74] = [
    0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08,
    0x00, // Ethernet
    0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, // IPv4
    0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, //
    0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, // UDP
    0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, // BTH
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
    0x82, 0xfd, 0x00, 0x2a, // ICRC
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cnp_bth_matches_the_connectx_capture() {
        // BTH `81 00 ffff 40 000118 00000000` of the ConnectX-4 Lx CNP.
        let mut buf = [0; 12];
        bth(Qpn::new(0x118)).emit(&mut crate::bth::Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x81, 0, 0xff, 0xff, 0x40, 0, 0x01, 0x18, 0, 0, 0, 0]);
        assert_eq!(buf, CONNECTX_FRAME[42..54]);
    }
}
