//! UDP segmentation-offload batches seen whole: one IP/UDP datagram whose payload is several
//! RoCEv2 packets of one size (the last maybe shorter), as a capture on `lo` or on a veth with
//! offloads on sees what a sender gave the kernel with `UDP_SEGMENT`. The kernel cuts such a
//! batch into datagrams before they leave (`__udp_gso_segment`, `inet_gso_segment` in Linux
//! `net/ipv4/udp_offload.c` and `af_inet.c`): each with the batch's headers, its own UDP and IP
//! lengths, and for IPv4 the batch's identification plus its index (the segments of one
//! unconnected DF send are numbered 0, 1, 2, ...). [`Segments`] yields those datagrams as
//! [`Frame`]s, whose ICRCs check against their own pseudo-headers.
//!
//! A capture does not record the segment size (`gso_size`). [`Frame::gso_segments`] finds it:
//!
//! * only a RoCEv2 datagram that does not stand as one packet (it does not parse, or its ICRC
//!   fails) is a candidate, and its UDP payload must be a multiple of 4 bytes long (every RoCE
//!   packet is: headers, padded payload and ICRC all are);
//! * a size `s` is tried from the smallest RoCE packet (16 bytes: BTH and ICRC) up to the largest
//!   (a 4096-byte payload behind the longest headers), in steps of 4, and below the payload's
//!   length (at least two segments); the last segment must be at least 16 bytes too;
//! * `s` is the segment size when the bytes at every offset `k * s` begin a RoCE packet that
//!   parses (BTH version 0, a known opcode, the lengths its opcode needs) and every segment's ICRC
//!   verifies with segment `k`'s IPv4 identification and lengths. The first (smallest) such `s`
//!   wins.
//! * If no size passes, a batch damaged in one place is still recognised: the first `s` for which
//!   every segment parses and the ICRC of segment 0 or of segment 1 verifies. Its other segments
//!   are then whatever they are, and the caller sees which ICRCs fail.
//!
//! The ICRC is what makes the rule sound: a wrong `s` would need a CRC-32 to match by chance
//! (one in 2^32 per segment tried). It does not assume that the packets are of one QP or have
//! consecutive PSNs (a batch may interleave QPs: only the addresses, marking and size must
//! agree). A frame whose ICRCs were rewritten on the way is not recognised; [`Frame::cut`] cuts by
//! a known size (a virtio-net header's `gso_size`) without the check.
//!
//! The search costs little: a size is tried only if every segment parses, and a wrong size fails
//! at the first ICRC (the fallback computes at most two per size), so at worst some 2 MB of CRC
//! for one 64 KiB frame that is no batch.

use super::{Frame, IpHeaderCopy, Transport, UDP_HEADER_LEN, UdpHeaderCopy};
use crate::RocePacket;

/// The smallest RoCEv2 packet: a BTH and the ICRC.
const MIN_PACKET: usize = 12 + 4;
/// The largest RoCEv2 packet: a 4096-byte payload (the largest path MTU) and its pad behind the
/// longest extension headers (RETH and ImmDt, 20 bytes; an AtomicETH is 28 but carries no
/// payload), with room to spare, and the ICRC.
const MAX_PACKET: usize = 12 + 64 + 4096 + 4;

/// The datagrams of one segmentation-offload batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segments<'a> {
    whole: Frame<'a>,
    payload: &'a [u8],
    size: usize,
}

impl<'a> Frame<'a> {
    /// This frame as the segmentation-offload batch it is, if it is one: a RoCEv2 datagram that
    /// is not one good packet but whose payload cuts into packets that each parse and carry a
    /// good ICRC, or (a batch damaged in one place) of which segment 0 or 1 does (the module's
    /// documentation gives the rule: check each segment's ICRC). `None` for anything else,
    /// including a frame that is one good RoCE packet.
    pub fn gso_segments(&self) -> Option<Segments<'a>> {
        let payload = self.roce_payload()?;
        let whole_is_good = matches!(self.roce(), Some(Ok(_))) && self.verify_icrc().is_ok();
        if whole_is_good || payload.len() % 4 != 0 {
            return None;
        }
        let largest = MAX_PACKET.min(payload.len().checked_sub(1)?);
        let candidates = || {
            (MIN_PACKET..=largest)
                .step_by(4)
                .filter_map(|size| self.cut(size))
                .filter(Segments::parse)
        };
        candidates()
            .find(Segments::verify)
            .or_else(|| candidates().find(Segments::verify_one_of_first_two))
    }

    /// Cuts this frame's UDP payload into datagrams of `size` bytes (the last maybe shorter), as
    /// the kernel cuts a batch sent with that segment size. `None` if the frame is not UDP, `size`
    /// is 0, or the last segment would be shorter than a RoCE packet can be while the batch has
    /// more than one. Nothing is checked: that is [`Frame::gso_segments`]'s job.
    pub fn cut(&self, size: usize) -> Option<Segments<'a>> {
        let Some(Transport::Udp(_, payload)) = self.transport else {
            return None;
        };
        if size == 0 || self.udp_header.0.is_none() {
            return None;
        }
        let last = payload.len() - payload.len().saturating_sub(1) / size * size;
        if payload.len() > size && last < MIN_PACKET {
            return None;
        }
        Some(Segments {
            whole: *self,
            payload,
            size,
        })
    }
}

impl<'a> Segments<'a> {
    /// The segment size: the UDP payload bytes of every datagram but the last.
    pub fn segment_size(&self) -> usize {
        self.size
    }

    /// How many datagrams (at least one).
    pub fn count(&self) -> usize {
        self.payload.len().div_ceil(self.size).max(1)
    }

    /// Datagram `index` (from 0), with its own lengths and IPv4 identification. `None` past the
    /// last.
    pub fn get(&self, index: usize) -> Option<Frame<'a>> {
        if index >= self.count() {
            return None;
        }
        let start = (index * self.size).min(self.payload.len());
        let end = (start + self.size).min(self.payload.len());
        let payload = &self.payload[start..end];
        let udp_len = u16::try_from(UDP_HEADER_LEN + payload.len()).ok()?;
        let mut frame = self.whole;
        let Some(Transport::Udp(udp, _)) = frame.transport else {
            return None;
        };
        frame.transport = Some(Transport::Udp(udp, payload));
        let mut udp_header = frame.udp_header.0?;
        udp_header[4..6].copy_from_slice(&udp_len.to_be_bytes());
        frame.udp_header = UdpHeaderCopy(Some(udp_header));
        let mut ip = frame.ip_header;
        let header = &mut ip.bytes[..ip.len];
        match header.first().map(|b| b >> 4) {
            Some(4) if header.len() >= 20 => {
                let total = u16::try_from(header.len()).ok()?.checked_add(udp_len)?;
                // The kernel counts IDs in 16 bits too.
                let id = u16::from_be_bytes([header[4], header[5]])
                    .wrapping_add(u16::try_from(index).unwrap_or(u16::MAX));
                header[2..4].copy_from_slice(&total.to_be_bytes());
                header[4..6].copy_from_slice(&id.to_be_bytes());
                header[10..12].fill(0);
                let checksum = ipv4_checksum(header);
                header[10..12].copy_from_slice(&checksum.to_be_bytes());
                if let Some(fields) = frame.ip.as_mut() {
                    fields.identification = Some(id);
                }
            }
            Some(6) if header.len() >= 40 => header[4..6].copy_from_slice(&udp_len.to_be_bytes()),
            _ => return None,
        }
        frame.ip_header = IpHeaderCopy::new(&ip.bytes[..ip.len]);
        Some(frame)
    }

    /// The datagrams in order.
    pub fn iter(&self) -> impl Iterator<Item = Frame<'a>> + '_ {
        (0..self.count()).map_while(|index| self.get(index))
    }

    /// Whether every datagram holds a RoCE packet that parses (everything but the ICRC).
    fn parse(&self) -> bool {
        self.payload
            .chunks(self.size)
            .all(|packet| RocePacket::new_checked(packet).is_ok())
    }

    /// Whether the ICRC of datagram 0 or 1 verifies.
    fn verify_one_of_first_two(&self) -> bool {
        (0..2).any(|index| self.get(index).is_some_and(|f| f.verify_icrc().is_ok()))
    }

    /// Whether every datagram's ICRC verifies against its own pseudo-header.
    fn verify(&self) -> bool {
        let mut count = 0;
        let all = self.iter().all(|frame| {
            count += 1;
            frame.verify_icrc().is_ok()
        });
        all && count == self.count()
    }
}

/// The IPv4 header checksum (RFC 1071) of `header`, whose checksum field is 0.
fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|pair| {
            u32::from(u16::from_be_bytes([
                pair[0],
                pair.get(1).copied().unwrap_or(0),
            ]))
        })
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests;
