//! Packets in flight, stored once in a pool and referred to by index: links and switches carry
//! a [`PacketRef`] (the index and the few fields a hop reads, so that forwarding never reads
//! the pool), and a slot's payload buffer is reused by the next packet, so a packet-hop
//! allocates nothing once the pool has grown to the packets in flight.
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
pub const HEADER_BYTES: usize = 64;

/// A slot's first [`HEADER_BYTES`] of UDP payload, on a cache line of its own: delivery reads it
/// after the packet crossed the fabric, when it has long left the cache, and an unaligned slot
/// would straddle two lines and cost two misses.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct Head([u8; HEADER_BYTES]);

/// Slots of packets and the free ones.
#[derive(Debug, Default)]
pub(super) struct PacketPool {
    /// Per slot, the packet: in [`Payload::Lengths`] mode only for a packet without an IPv4
    /// 5-tuple (the network gives its hosts IPv4 addresses: never), cut to [`HEADER_BYTES`].
    packets: Vec<SimPacket>,
    /// Per slot, in [`Payload::Lengths`] mode: the first [`HEADER_BYTES`] of its UDP payload
    /// (one cache line: delivery reads this and the [`PacketRef`], not the packet).
    heads: Vec<Head>,
    /// Per slot, of a packet stored in `packets`: the bytes of its whole UDP payload (in
    /// [`Payload::Lengths`] mode, longer than what `packets` keeps). The others' length
    /// travels in their [`PacketRef`].
    lens: Vec<u32>,
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

    /// Stores what a NIC transmitted (its UDP payload is `buf[..transmit.len]`); what links
    /// and switches carry for it.
    pub(super) fn insert(&mut self, transmit: &Transmit, buf: &[u8]) -> PacketRef {
        let src = SocketAddr::new(transmit.src, transmit.src_port);
        let overhead = if transmit.dst.is_ipv4() {
            IPV4_FRAME_OVERHEAD
        } else {
            IPV6_FRAME_OVERHEAD
        };
        let tuple = tuple_of(src, transmit.dst);
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index =
                    u32::try_from(self.packets.len()).expect("fewer than 2^32 packets in flight");
                self.packets
                    .push(SimPacket::new(src, transmit.dst, Vec::new()));
                self.lens.push(0);
                if self.lengths {
                    self.heads.push(Head([0; HEADER_BYTES]));
                }
                index
            }
        };
        let packet = PacketRef {
            index,
            // No IPv4 destination: a tuple no switch routes (`PacketRef::tuple`).
            tuple: tuple.unwrap_or(UNROUTED),
            // At most MAX_DATAGRAM (4 160) plus the frame's headers: well within 16 bits.
            wire_len: u16::try_from(transmit.len + overhead + FCS_BYTES).unwrap_or(u16::MAX),
            dscp: transmit.dscp,
            ecn: transmit.ecn,
        };
        if self.lengths && tuple.is_some() {
            let n = transmit.len.min(HEADER_BYTES);
            self.heads[index as usize].0[..n].copy_from_slice(&buf[..n]);
            return packet;
        }
        self.lens[index as usize] = u32::try_from(transmit.len).unwrap_or(u32::MAX);
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
        packet
    }

    /// The datagram of `packet` as its receiver sees it, with the ECN bits the switches left it;
    /// in [`Payload::Lengths`] mode built in `scratch` (at least
    /// [`MAX_DATAGRAM`](roce_core::MAX_DATAGRAM) long), past the kept prefix unchanged.
    pub(super) fn datagram<'a>(&'a self, packet: PacketRef, scratch: &'a mut [u8]) -> Datagram<'a> {
        let index = packet.index;
        if self.lengths {
            let mut head = None;
            // The tuple and the length travel in the reference.
            let mut len =
                (packet.wire_len as usize).saturating_sub(IPV4_FRAME_OVERHEAD + FCS_BYTES);
            if let Some(t) = packet.tuple() {
                // A copy of a constant length: a few moves rather than a call.
                scratch[..HEADER_BYTES].copy_from_slice(&self.heads[index as usize].0);
                head = Some((
                    SocketAddr::from((Ipv4Addr::from(t.src_ip), t.sport)),
                    SocketAddr::from((Ipv4Addr::from(t.dst_ip), t.dport)),
                ));
            } else {
                let p = &self.packets[index as usize];
                scratch[..p.payload.len()].copy_from_slice(&p.payload);
                len = self.lens[index as usize] as usize;
            }
            let (src, dst) = head.unwrap_or_else(|| {
                let p = &self.packets[index as usize];
                (p.src, p.dst)
            });
            return Datagram {
                src,
                dst,
                ecn: packet.ecn,
                // The simulator knows the whole header: IPv4 ID 0, as the NICs computed the ICRC.
                ip_id: src.is_ipv4().then_some(0),
                segment: 0,
                payload: &scratch[..len],
            };
        }
        let mut datagram = datagram(&self.packets[index as usize]);
        datagram.ecn = packet.ecn;
        datagram
    }

    /// Cache hint: the header bytes delivery of `packet` will read.
    #[inline]
    pub(super) fn prefetch(&self, packet: &PacketRef) {
        if let Some(head) = self.heads.get(packet.index as usize) {
            crate::prefetch::prefetch(head);
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

/// A pooled packet as links carry it and switches queue it: the index and what a hop reads
/// and marks, so that forwarding reads no slot of the pool (in a research-scale run most slots
/// have left the cache while their packets waited in deep queues). The receiver's datagram
/// takes its ECN bits from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketRef {
    pub(super) index: u32,
    tuple: FiveTuple,
    /// Bytes on a link: Ethernet, IP and UDP headers, the UDP payload, and the Ethernet FCS.
    /// Preamble and inter-frame gap are not counted, as HPCC does not count them. (16 bits:
    /// a packet's event and its link in the wheel then fit in 32 bytes.)
    wire_len: u16,
    dscp: u8,
    /// Its ECN bits: as its NIC sent them, then as the hops marked them.
    ecn: Ecn,
}

/// The tuple of a packet without an IPv4 5-tuple: destination 0.0.0.0, which is no host's.
const UNROUTED: FiveTuple = FiveTuple {
    src_ip: 0,
    dst_ip: 0,
    sport: 0,
    dport: 0,
};

impl PacketRef {
    /// Its IPv4 5-tuple, `None` for IPv6 (which no switch routes).
    pub(super) fn tuple(&self) -> Option<&FiveTuple> {
        (self.tuple.dst_ip != 0).then_some(&self.tuple)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Delivery's read of a slot's header bytes is one cache line, never two.
    #[test]
    fn a_head_is_one_aligned_cache_line() {
        assert_eq!((size_of::<Head>(), align_of::<Head>()), (64, 64));
        let pool_heads: Vec<Head> = vec![Head([0; HEADER_BYTES]); 3];
        assert!(
            pool_heads
                .iter()
                .all(|h| (h as *const Head as usize).is_multiple_of(64))
        );
    }
}
