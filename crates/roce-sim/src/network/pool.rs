//! Packets in flight, stored once in a pool and referred to by index: events and queues carry a
//! `u32`, switches queue a [`PacketRef`] (the few fields they read), and a slot's payload buffer
//! is reused by the next packet, so a packet-hop allocates nothing once the pool has grown to the
//! packets in flight.
//!
//! In [`Payload::Lengths`] mode a slot keeps only the first [`HEADER_BYTES`] of the UDP payload
//! (every RoCE header there is, and the start of the data) and the payload's length; delivery
//! copies that prefix into a scratch buffer whose remaining bytes are whatever they were, and
//! hands the NIC the whole length of it.

use std::net::SocketAddr;

use roce_core::{Datagram, Transmit};
use roce_wire::frame::Ecn;

use super::Payload;
use super::wiring::tuple_of;
use crate::pair::datagram;
use crate::switch::Frame;
use crate::topology::FiveTuple;
use crate::{IPV4_FRAME_OVERHEAD, IPV6_FRAME_OVERHEAD, SimPacket};

/// Bytes of the UDP payload a slot keeps in [`Payload::Lengths`] mode: more than the BTH and
/// the longest extended headers (RETH and immediate, or an AtomicETH, 40 bytes in all).
pub(super) const HEADER_BYTES: usize = 64;

/// What a packet-hop reads and writes of a packet, kept apart from its bytes so that forwarding
/// touches 32 bytes of memory per packet rather than the packet.
#[derive(Debug, Clone, Copy)]
struct Meta {
    /// Its IPv4 5-tuple (`None` for IPv6, which no switch routes).
    tuple: Option<FiveTuple>,
    /// Bytes of its UDP payload (all of it, in either mode).
    len: u32,
    /// Bytes on a link ([`PacketPool::frame_len`]).
    frame_len: u32,
    dscp: u8,
    /// Its ECN bits as the last switch left them (the receiver sees these).
    ecn: Ecn,
}

/// Slots of packets and the free ones.
#[derive(Debug, Default)]
pub(super) struct PacketPool {
    packets: Vec<SimPacket>,
    /// Per slot.
    meta: Vec<Meta>,
    free: Vec<u32>,
    /// Bytes of the payload kept: all, or [`HEADER_BYTES`].
    keep: usize,
}

impl PacketPool {
    /// An empty pool that stores packets as `payload` says.
    pub(super) fn new(payload: Payload) -> Self {
        Self {
            keep: match payload {
                Payload::Bytes => usize::MAX,
                Payload::Lengths => HEADER_BYTES,
            },
            ..Self::default()
        }
    }

    /// Stores what a NIC transmitted (its UDP payload is `buf[..transmit.len]`).
    pub(super) fn insert(&mut self, transmit: &Transmit, buf: &[u8]) -> u32 {
        let src = SocketAddr::new(transmit.src, transmit.src_port);
        let payload = &buf[..transmit.len.min(self.keep)];
        let len = u32::try_from(transmit.len).unwrap_or(u32::MAX);
        let index = if let Some(index) = self.free.pop() {
            let p = &mut self.packets[index as usize];
            p.src = src;
            p.dst = transmit.dst;
            p.payload.clear();
            p.payload.extend_from_slice(payload);
            index
        } else {
            let index =
                u32::try_from(self.packets.len()).expect("fewer than 2^32 packets in flight");
            self.packets
                .push(SimPacket::new(src, transmit.dst, payload.to_vec()));
            index
        };
        let p = &mut self.packets[index as usize];
        p.ecn = transmit.ecn;
        p.dscp = transmit.dscp;
        p.ttl = transmit.ttl;
        let overhead = if transmit.dst.is_ipv4() {
            IPV4_FRAME_OVERHEAD
        } else {
            IPV6_FRAME_OVERHEAD
        };
        let meta = Meta {
            tuple: tuple_of(src, transmit.dst),
            len,
            frame_len: u32::try_from(transmit.len + overhead + FCS_BYTES).unwrap_or(u32::MAX),
            dscp: transmit.dscp,
            ecn: transmit.ecn,
        };
        match self.meta.get_mut(index as usize) {
            Some(m) => *m = meta,
            None => self.meta.push(meta),
        }
        index
    }

    /// The 5-tuple of slot `index`'s packet, if it is IPv4.
    pub(super) fn tuple(&self, index: u32) -> Option<&FiveTuple> {
        self.meta[index as usize].tuple.as_ref()
    }

    /// A switch left slot `index`'s packet with these ECN bits.
    pub(super) fn set_ecn(&mut self, index: u32, ecn: Ecn) {
        self.meta[index as usize].ecn = ecn;
    }

    /// The datagram of slot `index` as its receiver sees it; in [`Payload::Lengths`] mode built
    /// in `scratch` (at least as long as the payload), past the kept prefix unchanged.
    pub(super) fn datagram<'a>(&'a self, index: u32, scratch: &'a mut [u8]) -> Datagram<'a> {
        let p = &self.packets[index as usize];
        let meta = &self.meta[index as usize];
        let len = meta.len as usize;
        let mut datagram = datagram(p);
        datagram.ecn = meta.ecn;
        if p.payload.len() < len {
            // Only a payload longer than the prefix is cut, to exactly the prefix: a copy of a
            // constant length, which compiles to a few moves rather than a call.
            let head: &[u8; HEADER_BYTES] = p.payload[..].try_into().expect("cut to the prefix");
            scratch[..HEADER_BYTES].copy_from_slice(head);
            datagram.payload = &scratch[..len];
        }
        datagram
    }

    /// Bytes of slot `index`'s packet on a link: Ethernet, IP and UDP headers, the UDP payload,
    /// and the Ethernet FCS. Preamble and inter-frame gap are not counted, as HPCC does not
    /// count them.
    pub(super) fn frame_len(&self, index: u32) -> usize {
        self.meta[index as usize].frame_len as usize
    }

    /// What a switch queues for the packet in slot `index`.
    pub(super) fn reference(&self, index: u32) -> PacketRef {
        let m = &self.meta[index as usize];
        PacketRef {
            index,
            wire_len: m.frame_len,
            dscp: m.dscp,
            ecn: m.ecn,
        }
    }

    /// Slot `index` is free again.
    pub(super) fn free(&mut self, index: u32) {
        self.free.push(index);
    }

    /// Packets stored now.
    pub(super) fn live(&self) -> usize {
        self.packets.len() - self.free.len()
    }
}

/// The Ethernet frame check sequence.
pub const FCS_BYTES: usize = 4;

/// A pooled packet as a switch queues it: the index and what the switch reads and marks. Its
/// ECN bits are written back to the pool when it leaves the switch.
#[derive(Debug, Clone, Copy)]
pub struct PacketRef {
    pub(super) index: u32,
    wire_len: u32,
    dscp: u8,
    pub(super) ecn: Ecn,
}

impl Frame for PacketRef {
    fn wire_len(&self) -> usize {
        self.wire_len as usize
    }
    fn dscp(&self) -> u8 {
        self.dscp
    }
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    fn set_ecn(&mut self, ecn: Ecn) {
        self.ecn = ecn;
    }
}
