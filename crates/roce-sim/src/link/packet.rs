//! What travels on a link ([`SimPacket`]) and what the link records of each ([`Sent`], [`Fate`]).

use std::net::SocketAddr;

use roce_core::Instant;
use roce_wire::frame::Ecn;
use roce_wire::{Opcode, Psn, Qpn};

#[cfg(doc)]
use super::Link;
use super::{IPV4_FRAME_OVERHEAD, IPV6_FRAME_OVERHEAD};
#[cfg(doc)]
use crate::fault::Fault;

/// A RoCEv2 UDP payload and the IP/UDP fields that travel with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimPacket {
    /// Source address and UDP source port.
    pub src: SocketAddr,
    /// Destination address and UDP port (4791).
    pub dst: SocketAddr,
    /// The ECN bits of the IP header; the link may set them to CE.
    pub ecn: Ecn,
    /// DSCP, 0..=63.
    pub dscp: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// The UDP payload: BTH … ICRC for RoCEv2, but any bytes are carried.
    pub payload: Vec<u8>,
    /// A label of the packet's owner, carried along and never read by the simulator (0 unless
    /// set): `roce switch` names the frame a packet stands for by it.
    pub tag: u32,
}

impl SimPacket {
    /// A packet with Not-ECT, DSCP 0 and TTL 64.
    pub fn new(src: SocketAddr, dst: SocketAddr, payload: Vec<u8>) -> Self {
        Self {
            src,
            dst,
            ecn: Ecn::NotEct,
            dscp: 0,
            ttl: 64,
            payload,
            tag: 0,
        }
    }

    /// The frame's length on the wire: the UDP payload plus the Ethernet, IP and UDP headers
    /// ([`IPV4_FRAME_OVERHEAD`] or [`IPV6_FRAME_OVERHEAD`], by the destination's family).
    pub fn wire_len(&self) -> usize {
        let overhead = if self.dst.is_ipv4() {
            IPV4_FRAME_OVERHEAD
        } else {
            IPV6_FRAME_OVERHEAD
        };
        self.payload.len() + overhead
    }

    /// Whether the packet is ECN-capable, ECT(0) or ECT(1): only those may be marked CE.
    pub fn is_ect(&self) -> bool {
        matches!(self.ecn, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// What became of an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// Put on the cable; it arrives at [`Sent::arrival`].
    Delivered,
    /// Lost on the cable by random loss.
    Lost,
    /// Dropped at the tail of a full queue.
    QueueFull,
    /// Dropped by a targeted [`Fault`].
    Fault,
    /// Dropped by the filter.
    Filtered,
}

/// The record of one offered packet. Its BTH fields are read from the packet as offered,
/// before any corruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sent {
    /// When it was offered.
    pub time: Instant,
    /// BTH opcode, `None` if the payload is shorter than a BTH.
    pub opcode: Option<Opcode>,
    /// BTH destination QP.
    pub dest_qp: Option<Qpn>,
    /// BTH PSN.
    pub psn: Option<Psn>,
    /// BTH AckReq: the requester asked for an ACK of it.
    pub ack_req: Option<bool>,
    /// Bytes of UDP payload.
    pub len: usize,
    /// What became of it.
    pub fate: Fate,
    /// When its first copy arrives, if it was delivered.
    pub arrival: Option<Instant>,
    /// One bit was flipped.
    pub corrupted: bool,
    /// A second copy was delivered too.
    pub duplicated: bool,
    /// The link set ECN to CE.
    pub ce_marked: bool,
}
