//! Packets in flight, stored once in a pool and referred to by index: events and queues carry a
//! `u32`, switches queue a [`PacketRef`] (the few fields they read), and a slot's payload buffer
//! is reused by the next packet, so a packet-hop allocates nothing once the pool has grown to the
//! packets in flight.
//!
//! In [`Payload::Lengths`] mode a slot keeps only the first [`HEADER_BYTES`] of the UDP payload
//! (every RoCE header there is, and the start of the data), inline, and the payload's length;
//! delivery copies that prefix into a scratch buffer whose remaining bytes are whatever they
//! were, and hands the NIC the whole length of it.

use std::net::{Ipv4Addr, SocketAddr};

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
    /// Per slot, the packet: in [`Payload::Lengths`] mode only for a packet without an IPv4
    /// 5-tuple (the network gives its hosts IPv4 addresses: never), cut to [`HEADER_BYTES`].
    packets: Vec<SimPacket>,
    /// Per slot, in [`Payload::Lengths`] mode: the first [`HEADER_BYTES`] of its UDP payload
    /// (one cache line: delivery reads this and `meta`, not the packet).
    heads: Vec<[u8; HEADER_BYTES]>,
    /// Per slot.
    meta: Vec<Meta>,
    free: Vec<u32>,
    lengths: bool,
}

impl PacketPool {
    /// An empty pool that stores packets as `payload` says.
    pub(super) fn new(payload: Payload) -> Self {
        Self {
            lengths: payload == Payload::Lengths,
            ..Self::default()
        }
    }

    /// Stores what a NIC transmitted (its UDP payload is `buf[..transmit.len]`).
    pub(super) fn insert(&mut self, transmit: &Transmit, buf: &[u8]) -> u32 {
        let src = SocketAddr::new(transmit.src, transmit.src_port);
        let overhead = if transmit.dst.is_ipv4() {
            IPV4_FRAME_OVERHEAD
        } else {
            IPV6_FRAME_OVERHEAD
        };
        let meta = Meta {
            tuple: tuple_of(src, transmit.dst),
            len: u32::try_from(transmit.len).unwrap_or(u32::MAX),
            frame_len: u32::try_from(transmit.len + overhead + FCS_BYTES).unwrap_or(u32::MAX),
            dscp: transmit.dscp,
            ecn: transmit.ecn,
        };
        let index = match self.free.pop() {
            Some(index) => {
                self.meta[index as usize] = meta;
                index
            }
            None => {
                let index =
                    u32::try_from(self.meta.len()).expect("fewer than 2^32 packets in flight");
                self.meta.push(meta);
                self.packets
                    .push(SimPacket::new(src, transmit.dst, Vec::new()));
                if self.lengths {
                    self.heads.push([0; HEADER_BYTES]);
                }
                index
            }
        };
        if self.lengths && meta.tuple.is_some() {
            let n = transmit.len.min(HEADER_BYTES);
            self.heads[index as usize][..n].copy_from_slice(&buf[..n]);
            return index;
        }
        let keep = if self.lengths {
            HEADER_BYTES
        } else {
            usize::MAX
        };
        let p = &mut self.packets[index as usize];
        p.src = src;
        p.dst = transmit.dst;
        p.payload.clear();
        p.payload.extend_from_slice(&buf[..transmit.len.min(keep)]);
        p.ecn = transmit.ecn;
        p.dscp = transmit.dscp;
        p.ttl = transmit.ttl;
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
    /// in `scratch` (at least [`MAX_DATAGRAM`](roce_core::MAX_DATAGRAM) long), past the kept
    /// prefix unchanged.
    pub(super) fn datagram<'a>(&'a self, index: u32, scratch: &'a mut [u8]) -> Datagram<'a> {
        let meta = &self.meta[index as usize];
        let len = meta.len as usize;
        if self.lengths {
            let mut head = None;
            if let Some(t) = meta.tuple {
                // A copy of a constant length: a few moves rather than a call.
                scratch[..HEADER_BYTES].copy_from_slice(&self.heads[index as usize]);
                head = Some((
                    SocketAddr::from((Ipv4Addr::from(t.src_ip), t.sport)),
                    SocketAddr::from((Ipv4Addr::from(t.dst_ip), t.dport)),
                ));
            } else {
                let p = &self.packets[index as usize];
                scratch[..p.payload.len()].copy_from_slice(&p.payload);
            }
            let (src, dst) = head.unwrap_or_else(|| {
                let p = &self.packets[index as usize];
                (p.src, p.dst)
            });
            return Datagram {
                src,
                dst,
                ecn: meta.ecn,
                // The simulator knows the whole header: IPv4 ID 0, as the NICs computed the ICRC.
                ip_id: src.is_ipv4().then_some(0),
                segment: 0,
                payload: &scratch[..len],
            };
        }
        let mut datagram = datagram(&self.packets[index as usize]);
        datagram.ecn = meta.ecn;
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
