//! Packets in flight, stored once in a pool and referred to by index: links and switches carry
//! a [`PacketRef`] (the index and the few fields a hop reads, so that forwarding never reads
//! the pool), and a slot's payload buffer is reused by the next packet, so a packet-hop
//! allocates nothing once the pool has grown to the packets in flight.
//!
//! In [`Payload::Lengths`] mode a slot keeps only the first [`HEADER_BYTES`] of the UDP payload
//! (every RoCE header there is, and the start of the data), inline, and the payload's length;
//! delivery copies that prefix into a scratch buffer whose remaining bytes are whatever they
//! were, and hands the NIC the whole length of it. When the hosts run HPCC the prefix is two
//! such lines, for the INT header after the BTH (`roce_wire::int`); a packet that carries one
//! is flagged in its [`PacketRef`], and the switches' records are written into the slot
//! ([`PacketPool::stamp_int`]) — the only hop that touches the slot, and only for those packets.
//! HPCC-PINT's 4-byte header fits the one line, and is raised there
//! ([`PacketPool::raise_pint`]).

use std::net::{Ipv4Addr, SocketAddr};

use roce_core::{Datagram, DatagramMut, Instant, Nic, Transmit};
use roce_wire::bth;
use roce_wire::frame::Ecn;
use roce_wire::int::{self, Hop};

use super::Payload;
use super::wiring::tuple_of;
use crate::pair::datagram;
use crate::switch::Frame;
use crate::topology::FiveTuple;
use crate::{IPV4_FRAME_OVERHEAD, IPV6_FRAME_OVERHEAD, SimPacket};

/// Bytes of the UDP payload a slot keeps in [`Payload::Lengths`] mode (twice as many with INT):
/// more than the BTH and the longest extended headers (RETH and immediate, or an AtomicETH, 40
/// bytes in all), and with INT's 44 bytes more.
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
    /// [`Head`]s per slot: 1, or 2 when packets carry INT.
    stride: usize,
    /// Packets may carry a PINT header.
    pint: bool,
}

impl PacketPool {
    /// An empty pool that stores packets as `payload` says, with room for an INT header in
    /// each slot's kept prefix when `int`, and PINT headers flagged when `pint`.
    pub(super) fn new(payload: Payload, int: bool, pint: bool) -> Self {
        Self {
            lengths: payload == Payload::Lengths,
            stride: if int { 2 } else { 1 },
            pint,
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
                    for _ in 0..self.stride {
                        self.heads.push(Head([0; HEADER_BYTES]));
                    }
                }
                index
            }
        };
        let payload = &buf[..transmit.len];
        let int = self.stride > 1 && int::stampable(payload);
        let pint = self.pint && int::pint_stampable(payload);
        let packet = PacketRef {
            index,
            // No IPv4 destination: a tuple no switch routes (`PacketRef::tuple`).
            tuple: tuple.unwrap_or(UNROUTED),
            // At most MAX_DATAGRAM (4 224) plus the frame's headers: well within 16 bits.
            wire_len: u16::try_from(transmit.len + overhead + FCS_BYTES).unwrap_or(u16::MAX),
            dscp: (transmit.dscp & DSCP_MASK)
                | if int { INT_FLAG } else { 0 }
                | if pint { PINT_FLAG } else { 0 },
            ecn: transmit.ecn,
        };
        if self.lengths && tuple.is_some() {
            let first = index as usize * self.stride;
            for (k, head) in self.heads[first..first + self.stride]
                .iter_mut()
                .enumerate()
            {
                let from = (k * HEADER_BYTES).min(payload.len());
                let n = (payload.len() - from).min(HEADER_BYTES);
                head.0[..n].copy_from_slice(&payload[from..from + n]);
            }
            return packet;
        }
        self.lens[index as usize] = u32::try_from(transmit.len).unwrap_or(u32::MAX);
        let keep = if self.lengths {
            HEADER_BYTES * self.stride
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
    /// [`MAX_DATAGRAM`](roce_core::MAX_DATAGRAM) long), past the kept prefix unchanged, where
    /// the receiver may rewrite it ([`Delivery::Scratch`]).
    pub(super) fn datagram<'a>(&'a self, packet: PacketRef, scratch: &'a mut [u8]) -> Delivery<'a> {
        let index = packet.index;
        if self.lengths {
            let mut head = None;
            // The tuple and the length travel in the reference.
            let mut len =
                (packet.wire_len as usize).saturating_sub(IPV4_FRAME_OVERHEAD + FCS_BYTES);
            if let Some(t) = packet.tuple() {
                // A copy of a constant length: a few moves rather than a call.
                let first = index as usize * self.stride;
                scratch[..HEADER_BYTES].copy_from_slice(&self.heads[first].0);
                if self.stride > 1 {
                    scratch[HEADER_BYTES..2 * HEADER_BYTES]
                        .copy_from_slice(&self.heads[first + 1].0);
                }
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
            return Delivery::Scratch(DatagramMut {
                src,
                dst,
                ecn: packet.ecn,
                // The simulator knows the whole header: IPv4 ID 0, as the NICs computed the ICRC.
                ip_id: src.is_ipv4().then_some(0),
                segment: 0,
                payload: &mut scratch[..len],
            });
        }
        let mut datagram = datagram(&self.packets[index as usize]);
        datagram.ecn = packet.ecn;
        Delivery::Stored(datagram)
    }

    /// Cache hint: the header bytes delivery of `packet` will read.
    #[inline]
    pub(super) fn prefetch(&self, packet: &PacketRef) {
        if let Some(head) = self.heads.get(packet.index as usize * self.stride) {
            crate::prefetch::prefetch(head);
        }
    }

    /// A switch egress appends `hop` to the INT header of `packet` (one that
    /// [`PacketRef::int_flag`]s it): in the slot's kept prefix (the header lies within its
    /// first line) or its whole payload.
    pub(super) fn stamp_int(&mut self, packet: PacketRef, hop: Hop) {
        let index = packet.index as usize;
        if self.lengths && packet.tuple().is_some() {
            // The flag was set when the slot was filled, from `int::stampable` of these bytes,
            // which only the stamps have changed since: the header is whole, flagged and a
            // request's, and `push_hop` refuses a full one.
            let head = &mut self.heads[index * self.stride].0[bth::HEADER_LEN..];
            int::Packet::new_unchecked(head).push_hop(hop);
        } else if let Some(p) = self.packets.get_mut(index) {
            int::stamp(&mut p.payload, hop);
        }
    }

    /// A switch egress raises the PINT value of `packet` (one that [`PacketRef::pint_flag`]s
    /// it) to `value` if higher: in the slot's kept prefix or its whole payload.
    pub(super) fn raise_pint(&mut self, packet: PacketRef, value: u16) {
        let index = packet.index as usize;
        if self.lengths && packet.tuple().is_some() {
            int::raise_pint(&mut self.heads[index * self.stride].0, value);
        } else if let Some(p) = self.packets.get_mut(index) {
            int::raise_pint(&mut p.payload, value);
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

/// A packet as its receiver takes it ([`PacketPool::datagram`]).
#[derive(Debug)]
pub(super) enum Delivery<'a> {
    /// Built in the caller's scratch buffer ([`Payload::Lengths`]), which the receiving NIC may
    /// rewrite as it takes the datagram in ([`Nic::handle_datagram_mut`]: HPCC's INT header
    /// comes off in place).
    Scratch(DatagramMut<'a>),
    /// The pool's own copy ([`Payload::Bytes`]).
    Stored(Datagram<'a>),
}

impl Delivery<'_> {
    /// `nic` takes the datagram in at `now`.
    #[inline]
    pub(super) fn deliver(self, now: Instant, nic: &mut Nic) {
        match self {
            Self::Scratch(datagram) => nic.handle_datagram_mut(now, datagram),
            Self::Stored(datagram) => nic.handle_datagram(now, datagram),
        }
    }

    /// The datagram, read-only.
    #[cfg(test)]
    fn as_datagram(&self) -> Datagram<'_> {
        match self {
            Self::Scratch(datagram) => datagram.as_datagram(),
            Self::Stored(datagram) => *datagram,
        }
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
    /// DSCP in the low six bits, [`INT_FLAG`] and [`PINT_FLAG`].
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

/// The bits of [`PacketRef`]'s `dscp` that are the DSCP.
const DSCP_MASK: u8 = 63;
/// Set in [`PacketRef`]'s `dscp`: the packet carries an INT header the switches stamp.
const INT_FLAG: u8 = 0x80;
/// Set in [`PacketRef`]'s `dscp`: the packet carries a PINT header the switches raise.
const PINT_FLAG: u8 = 0x40;

impl PacketRef {
    /// Whether it carries an INT header for the switches to stamp (HPCC,
    /// [`roce_wire::int::stampable`] when it was sent).
    #[inline(always)]
    pub(super) fn int_flag(&self) -> bool {
        self.dscp & INT_FLAG != 0
    }

    /// Whether it carries a PINT header for the switches to raise (HPCC-PINT,
    /// [`roce_wire::int::pint_stampable`] when it was sent).
    #[inline(always)]
    pub(super) fn pint_flag(&self) -> bool {
        self.dscp & PINT_FLAG != 0
    }

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
        self.dscp & DSCP_MASK
    }
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    fn set_ecn(&mut self, ecn: Ecn) {
        self.ecn = ecn;
    }
    /// The value goes into the slot, by the event driver (`SwitchOf::pint_value`).
    fn wants_pint(&self) -> bool {
        self.pint_flag()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With INT, a lengths-mode slot keeps two lines: the INT header the switches stamp in the
    /// slot and what follows it (the RETH here) reach the receiver whole; the flag rides in the
    /// reference, not in its DSCP.
    #[test]
    fn an_int_packet_is_stamped_in_its_slot_and_delivered_whole() {
        for payload in [Payload::Lengths, Payload::Bytes] {
            let mut pool = PacketPool::new(payload, true, false);
            let mut buf = vec![0u8; 1100];
            buf[0] = 0x0a;
            buf[int::BTH_FLAG_BYTE] = int::BTH_FLAG;
            int::Repr::default().emit(&mut buf[12..]);
            for (i, b) in buf[56..72].iter_mut().enumerate() {
                *b = i as u8 + 1; // the RETH
            }
            let transmit = Transmit {
                src: "198.18.0.1".parse().unwrap(),
                src_port: 49152,
                dst: "198.18.0.2:4791".parse().unwrap(),
                ecn: Ecn::NotEct,
                dscp: 26,
                ttl: 64,
                len: buf.len(),
            };
            let packet = pool.insert(&transmit, &buf);
            assert!(packet.int_flag());
            assert_eq!(packet.dscp(), 26);
            let hops = [
                Hop::new(1, 2, 3, 100_000_000_000),
                Hop::new(4, 5, 6, 25_000_000_000),
            ];
            for hop in hops {
                pool.stamp_int(packet, hop);
            }
            let mut scratch = vec![0; roce_core::MAX_DATAGRAM];
            let got = pool.datagram(packet, &mut scratch);
            let got = got.as_datagram();
            let header = int::Repr::parse(&int::Packet::new_checked(&got.payload[12..]).unwrap());
            assert_eq!(header.unwrap().hops(), &hops, "{payload:?}");
            assert_eq!(got.payload[56..72], buf[56..72], "{payload:?}");
            assert_eq!(got.payload.len(), buf.len());
        }
        // Without HPCC nothing is flagged, whatever the packet.
        let mut pool = PacketPool::new(Payload::Lengths, false, false);
        let mut buf = vec![0u8; 100];
        buf[int::BTH_FLAG_BYTE] = int::BTH_FLAG;
        let transmit = Transmit {
            src: "198.18.0.1".parse().unwrap(),
            src_port: 49152,
            dst: "198.18.0.2:4791".parse().unwrap(),
            ecn: Ecn::NotEct,
            dscp: 0,
            ttl: 64,
            len: buf.len(),
        };
        assert!(!pool.insert(&transmit, &buf).int_flag());
    }

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
