//! Writing a packet and sealing its ICRC: the tail of every packet a QP sends, requests
//! ([`super::requester`]), responses and ACKs ([`super::responder`]), CNPs and QP 1's MADs
//! alike, the source address a packet leaves from, and HPCC's INT header after the BTH.

use std::net::{IpAddr, SocketAddr};

use roce_wire::{Opcode, RoceRepr, icrc, int};

use super::{Qp, QpType};
use crate::config::SrcPortPolicy;
use crate::loan::MIN_LENT;
use crate::{Ecn, Transmit};

impl Qp {
    /// Writes a packet into `buf` and seals its ICRC: the UDP payload of a datagram to `dst`
    /// whose IPv4 identification will be `ip_id`, from the QP's path (or, for UD, the NIC's
    /// address of `dst`'s family). `fill` writes the payload; it returns false when the data
    /// cannot be read, and is not called for a `lent` payload (see [`seal`]).
    pub(crate) fn emit(
        &self,
        config: &crate::NicConfig,
        (ip_id, lent): (u16, Lent<'_>),
        repr: &RoceRepr,
        dst: IpAddr,
        buf: &mut [u8],
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<Transmit, EmitError> {
        let src = match self.av {
            Some(av) if self.qp_type != QpType::Ud => av.src,
            _ => {
                // The NIC's address of dst's family, and of its scope where the NIC has one:
                // a link-local source for a link-local destination (GID 0), else a wider one.
                let same_family = |a: &&IpAddr| a.is_ipv4() == dst.is_ipv4();
                config
                    .addrs
                    .iter()
                    .filter(same_family)
                    .find(|a| link_local(**a) == link_local(dst))
                    .or_else(|| config.addrs.iter().find(same_family))
                    .copied()
                    .ok_or(EmitError::NoSource)?
            }
        };
        let src_port = match config.src_port {
            SrcPortPolicy::PerQp => self.src_port,
            SrcPortPolicy::Fixed(port) => port,
        };
        let sealed = (ip_id, config.icrc.seals(), lent);
        let int = self.int_for(config, repr);
        let mut transmit = seal(repr, int.as_ref(), (src, src_port), dst, sealed, buf, fill)?;
        if let Some(av) = self.av {
            transmit.dscp = av.dscp;
            transmit.ttl = if av.hop_limit == 0 { 64 } else { av.hop_limit };
        }
        Ok(transmit)
    }

    /// The INT header a packet of the QP carries with HPCC (`roce_wire::int`): an empty one on
    /// a request of an RC QP, for the switches to stamp (PINT's, at 0, with HPCC-PINT); on an
    /// ACK or NAK the one of the newest request received, as the echo; on nothing else (READ
    /// responses, atomic ACKs, UC, UD).
    fn int_for(&self, config: &crate::NicConfig, repr: &RoceRepr) -> Option<int::Repr> {
        let crate::Congestion::Hpcc(hpcc) = &config.congestion else {
            return None;
        };
        if self.qp_type != QpType::Rc {
            return None;
        }
        let opcode = repr.bth.opcode;
        if opcode == Opcode::RcAcknowledge {
            return self.resp.int.map(|int| int::Repr { echo: true, ..int });
        }
        let empty = if hpcc.pint {
            int::Repr::pint(false, 0)
        } else {
            int::Repr::default()
        };
        opcode
            .layout()
            .is_some_and(|layout| layout.is_request())
            .then_some(empty)
    }
}

/// Writes the packet `repr` into `buf`, its payload by `fill` (false: unreadable), and seals its
/// ICRC for a datagram from `src` to `dst`:4791 whose IPv4 identification will be `ip_id`
/// (unless `icrc` is false: [`IcrcPolicy::Off`](crate::IcrcPolicy::Off) leaves it as `buf` held
/// it). A `lent` payload is not written: its loans' bytes stand in its place, and the ICRC
/// covers them (`loan.rs`). DSCP 0 and TTL 64 unless the caller sets its path's. Inlined: it
/// is the tail of every packet the requester and the responder send.
#[inline(always)]
pub(crate) fn seal(
    repr: &RoceRepr,
    int: Option<&int::Repr>,
    (src, src_port): (IpAddr, u16),
    dst: IpAddr,
    (ip_id, icrc, lent): (u16, bool, Lent<'_>),
    buf: &mut [u8],
    fill: impl FnOnce(&mut [u8]) -> bool,
) -> Result<Transmit, EmitError> {
    debug_assert!(
        lent.is_none() || int.is_none(),
        "an INT header moves the payload: lend_payload copies it"
    );
    let len = repr.buffer_len();
    // With INT, the packet is written past the room for the header, then its BTH moved in
    // front of it (`insert_int`): 12 bytes moved, not the payload.
    let room = int.map_or(0, int::Repr::buffer_len);
    let packet = buf
        .get_mut(room..room + len)
        .ok_or(EmitError::BufferTooSmall)?;
    let mut filled = true;
    repr.emit(packet, |payload| filled = lent.is_some() || fill(payload))
        .map_err(|_| EmitError::BufferTooSmall)?;
    if !filled {
        return Err(EmitError::Unreadable);
    }
    let (packet, len) = match int {
        None => (&mut buf[..len], len),
        Some(int) => insert_int(int, buf, len),
    };
    let to = SocketAddr::new(dst, roce_wire::ROCE_V2_UDP_PORT);
    let header = roce_wire::PseudoHeader::for_datagram(SocketAddr::new(src, src_port), to, ip_id)
        .ok_or(EmitError::NoSource)?;
    match lent {
        _ if !icrc => {}
        None => icrc::seal(&header, packet),
        // The payload is not in `buf`: the ICRC covers the loans' bytes in its place.
        Some((hole, loans)) => {
            let end = hole + loans.iter().map(|loan| loan.len).sum::<usize>();
            let sealed = icrc::seal_around(&header, packet, hole..end, |f| {
                loans.iter().for_each(|loan| loan.read_with(f));
            });
            if !sealed {
                return Err(EmitError::BufferTooSmall);
            }
        }
    }
    Ok(Transmit {
        src,
        src_port,
        dst: to,
        ecn: Ecn::NotEct,
        dscp: 0,
        ttl: 64,
        len,
    })
}

/// Puts `int` between the BTH and the rest of the packet of `len` bytes written at
/// `buf[int.buffer_len()..]`: the BTH moves to the front, the header follows it, flagged in the
/// BTH (`roce_wire::int`). Returns the packet, the header's length longer.
fn insert_int<'a>(int: &int::Repr, buf: &'a mut [u8], len: usize) -> (&'a mut [u8], usize) {
    let room = int.buffer_len();
    let total = len + room;
    let packet = &mut buf[..total];
    let bth = roce_wire::bth::HEADER_LEN;
    packet.copy_within(room..room + bth, 0);
    int.emit(&mut packet[bth..]);
    packet[int::BTH_FLAG_BYTE] |= int.bth_flag();
    (packet, total)
}

/// A payload lent (`loan.rs`): where it starts in the packet, and its loans in order.
pub(crate) type Lent<'a> = Option<(usize, &'a [crate::Loan])>;

/// The payload of `len` bytes of the packet `repr`, lent where the poll asked for loans
/// (`loans`), the payload is long enough to be worth it ([`MIN_LENT`]), no INT header will
/// move it and the packet is RC's: a UC or UD WR completes as its last packet is made, before
/// the batch's `sendmsg`, and a program that sees that completion may write the buffer again
/// while the kernel has still to read it (an RC WR completes on an ACK, after the packet
/// left). `lend` appends its loans, given where the payload starts in the packet (its hole),
/// or says it could not, leaving `loans` as it was. `None`: the payload is copied. Inlined, and
/// the header's length found only once those checks pass: every packet sent asks.
#[inline(always)]
pub(crate) fn lend_payload<'a>(
    loans: Option<&'a mut Vec<crate::Loan>>,
    config: &crate::NicConfig,
    (repr, len): (&RoceRepr, usize),
    lend: impl FnOnce(&mut Vec<crate::Loan>, usize) -> bool,
) -> Lent<'a> {
    let loans = loans.filter(|_| len >= MIN_LENT && !config.congestion.carries_int())?;
    if repr.bth.opcode.transport() != Some(roce_wire::opcode::Transport::Rc) {
        return None;
    }
    let hole = repr.header_len();
    let before = loans.len();
    if !lend(loans, hole) {
        return None;
    }
    let loans: &'a Vec<crate::Loan> = loans;
    Some((hole, &loans[before..]))
}

/// Why a packet could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EmitError {
    /// The caller's buffer cannot hold it (the NIC checks the buffer first: a bug if seen).
    BufferTooSmall,
    /// Its payload names memory that can no longer be read (a deregistered region).
    Unreadable,
    /// No address of the NIC's is of the destination's family, or the QP has no path.
    NoSource,
}

/// Whether `ip` is an IPv6 link-local unicast address (`fe80::/10`).
fn link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local())
}
