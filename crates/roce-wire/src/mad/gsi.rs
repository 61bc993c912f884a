//! A MAD on the wire: a RoCEv2 UD SEND_ONLY to QP 1, the General Services Interface, whose
//! payload is the 256-byte MAD (kernel `ib_mad.h` `IB_QP1_QKEY`; rxe `hdr_check`,
//! `check_keys`).

use crate::mad::MAD_LEN;
use crate::{
    BthRepr, DethRepr, EmitError, Opcode, PseudoHeader, Psn, Qpn, RocePacket, RoceRepr, deth, icrc,
};

/// QP 1, the GSI QP, where every CM MAD goes (unless redirected).
pub const GSI_QPN: Qpn = Qpn::new(1);
/// The P_Key ib_cm sends with on RoCE (`IB_DEFAULT_PKEY_FULL`).
pub const GSI_PKEY: u16 = 0xffff;
/// Length of a GSI packet: BTH, DETH, the MAD and the ICRC (the UDP payload).
pub const PACKET_LEN: usize = crate::bth::HEADER_LEN + deth::HEADER_LEN + MAD_LEN + 4;

/// The headers of a GSI packet: UD SEND_ONLY, DestQP 1, P_Key 0xFFFF, Q_Key 0x80010000,
/// SrcQP 1, 256 bytes of payload.
//= rxe:rxe_recv.c/check_keys
//# packets to QP 1 carry the GSI Q_Key 0x80010000 in their DETH
pub const fn roce_repr(psn: Psn) -> RoceRepr {
    let mut repr = RoceRepr::new(BthRepr::new(Opcode::UdSendOnly, GSI_QPN, psn));
    repr.deth = Some(DethRepr {
        qkey: deth::GSI_QKEY,
        src_qp: GSI_QPN,
    });
    repr.payload_len = MAD_LEN;
    repr
}

/// Writes a GSI packet carrying `mad` into `buffer` (exactly [`PACKET_LEN`] bytes) and seals it
/// with the ICRC of `header`, the IP and UDP fields it will be sent with.
pub fn emit(
    psn: Psn,
    mad: &[u8; MAD_LEN],
    header: &PseudoHeader,
    buffer: &mut [u8],
) -> Result<(), EmitError> {
    roce_repr(psn).emit(buffer, |payload| payload.copy_from_slice(mad))?;
    icrc::seal(header, buffer);
    Ok(())
}

/// The MAD a packet carries, if it is a GSI packet: a UD SEND_ONLY to QP 1 with a 256-byte
/// payload. The P_Key and Q_Key are not checked here (a receiver does, and counts them).
pub fn mad_of<T: AsRef<[u8]>>(packet: &RocePacket<T>) -> Option<&[u8]> {
    let bth = packet.bth();
    let payload = packet.payload();
    (bth.opcode() == Opcode::UdSendOnly && bth.dest_qp() == GSI_QPN && payload.len() == MAD_LEN)
        .then_some(payload)
}

/// [`emit`] of a CM MAD.
pub fn emit_cm(
    psn: Psn,
    mad: &crate::mad::cm::CmMad,
    header: &PseudoHeader,
    buffer: &mut [u8],
) -> Result<(), EmitError> {
    let mut bytes = [0; MAD_LEN];
    mad.emit(&mut bytes)?;
    emit(psn, &bytes, header, buffer)
}

/// A whole Ethernet frame from `src` to `dst` (UDP, with [`FrameRepr::for_datagram`]'s
/// headers) carrying a GSI packet of `mad`, its ICRC sealed: what a capture of rdma_cm shows.
/// `None` if the headers cannot be built (a mix of IPv4 and IPv6 endpoints).
///
/// [`FrameRepr::for_datagram`]: crate::frame::FrameRepr::for_datagram
pub fn frame(
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    psn: Psn,
    mad: &crate::mad::cm::CmMad,
) -> Option<Vec<u8>> {
    let repr = crate::frame::FrameRepr::for_datagram(src, dst, crate::frame::Ecn::NotEct, 0, 64);
    let mut buf = vec![0; repr.header_len() + PACKET_LEN];
    let at = repr.emit_headers(&mut buf, PACKET_LEN).ok()?;
    let header = repr.pseudo_header()?;
    emit_cm(psn, mad, &header, &mut buf[at..]).ok()?;
    Some(buf)
}
