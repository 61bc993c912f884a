//! Packets in flight, stored once in a pool and referred to by index: events and queues carry a
//! `u32`, switches queue a [`PacketRef`] (the few fields they read), and a slot's payload buffer
//! is reused by the next packet, so a packet-hop allocates nothing once the pool has grown to the
//! packets in flight.

use std::net::SocketAddr;

use roce_core::Transmit;
use roce_wire::frame::Ecn;

use crate::SimPacket;
use crate::switch::Frame;

/// Slots of packets and the free ones.
#[derive(Debug, Default)]
pub(super) struct PacketPool {
    packets: Vec<SimPacket>,
    free: Vec<u32>,
}

impl PacketPool {
    /// Stores what a NIC transmitted (its UDP payload is `buf[..transmit.len]`).
    pub(super) fn insert(&mut self, transmit: &Transmit, buf: &[u8]) -> u32 {
        let src = SocketAddr::new(transmit.src, transmit.src_port);
        let payload = &buf[..transmit.len];
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
        index
    }

    /// The packet in slot `index`.
    pub(super) fn get(&self, index: u32) -> &SimPacket {
        &self.packets[index as usize]
    }

    /// The packet in slot `index`, to change.
    pub(super) fn get_mut(&mut self, index: u32) -> &mut SimPacket {
        &mut self.packets[index as usize]
    }

    /// What a switch queues for the packet in slot `index`.
    pub(super) fn reference(&self, index: u32) -> PacketRef {
        let p = self.get(index);
        PacketRef {
            index,
            wire_len: u32::try_from(frame_len(p)).unwrap_or(u32::MAX),
            dscp: p.dscp,
            ecn: p.ecn,
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

/// Bytes of a packet on a link: Ethernet, IP and UDP headers, the UDP payload, and the
/// Ethernet FCS (which [`SimPacket::wire_len`] leaves out). Preamble and inter-frame gap are not
/// counted, as HPCC does not count them.
pub(super) fn frame_len(p: &SimPacket) -> usize {
    p.wire_len() + FCS_BYTES
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
