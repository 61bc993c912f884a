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
//! a known size (a virtio-net header's `gso_size`) without the check, and [`Frame::split`] as the
//! kernel does whatever the datagrams hold (what a device handed a batch whole does).
//!
//! The search costs little: a size is tried only if every segment parses, and a wrong size fails
//! at the first ICRC (the fallback computes at most two per size), so at worst some 2 MB of CRC
//! for one 64 KiB frame that is no batch.

use etherparse::{Ipv4Header, Ipv6Header, UdpHeader};

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
        let segments = self.split(size)?;
        let payload = segments.payload;
        let last = payload.len() - payload.len().saturating_sub(1) / size * size;
        if payload.len() > size && last < MIN_PACKET {
            return None;
        }
        Some(segments)
    }

    /// Cuts this frame's UDP payload into datagrams of `size` bytes (the last maybe shorter)
    /// whatever they hold, as the kernel cuts a batch whose segment size it was given. `None` if
    /// the frame is not UDP or `size` is 0.
    pub fn split(&self, size: usize) -> Option<Segments<'a>> {
        let Some(Transport::Udp(_, payload)) = self.transport else {
            return None;
        };
        if size == 0 || self.udp_header.0.is_none() {
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

    /// The UDP payload of datagram `index` (empty past the last).
    pub fn payload(&self, index: usize) -> &'a [u8] {
        let start = index.saturating_mul(self.size).min(self.payload.len());
        let end = start.saturating_add(self.size).min(self.payload.len());
        &self.payload[start..end]
    }

    /// The IPv4 identification datagram `index` leaves with: the batch's plus `index`, in 16
    /// bits as the kernel counts (`None` for IPv6).
    pub fn ip_id(&self, index: usize) -> Option<u16> {
        let id = self.whole.ip?.identification?;
        // Truncation is the kernel's 16-bit count.
        Some(id.wrapping_add(index as u16))
    }

    /// Writes datagram `index` as a whole frame into `out` (cleared first): the batch's link
    /// header, its IP header with this datagram's lengths, IPv4 identification and header
    /// checksum, its UDP header with this datagram's length and checksum 0 ("none", which IPv4
    /// allows and the ICRC does not cover), and its payload. False, leaving `out` empty, past the
    /// last.
    pub fn write(&self, index: usize, out: &mut Vec<u8>) -> bool {
        out.clear();
        let Some(frame) = self.get(index) else {
            return false;
        };
        let (Some(Ok((mut udp, _))), Some(Transport::Udp(_, payload))) = (
            frame
                .udp_header
                .0
                .as_ref()
                .map(|h| UdpHeader::from_slice(h)),
            frame.transport,
        ) else {
            return false;
        };
        udp.checksum = 0;
        out.extend_from_slice(frame.link_header);
        out.extend_from_slice(frame.ip_header.as_slice());
        out.extend_from_slice(&udp.to_bytes());
        out.extend_from_slice(payload);
        true
    }

    /// Datagram `index` (from 0), with its own lengths and IPv4 identification. `None` past the
    /// last.
    pub fn get(&self, index: usize) -> Option<Frame<'a>> {
        if index >= self.count() {
            return None;
        }
        let payload = self.payload(index);
        let udp_len = u16::try_from(UDP_HEADER_LEN + payload.len()).ok()?;
        let mut frame = self.whole;
        let Some(Transport::Udp(udp, _)) = frame.transport else {
            return None;
        };
        frame.transport = Some(Transport::Udp(udp, payload));
        let (mut udp_header, _) = UdpHeader::from_slice(&frame.udp_header.0?).ok()?;
        udp_header.length = udp_len;
        frame.udp_header = UdpHeaderCopy(Some(udp_header.to_bytes()));
        let mut ip = frame.ip_header;
        let header = &mut ip.bytes[..ip.len];
        match header.first().map(|b| b >> 4) {
            Some(4) => {
                let (mut v4, _) = Ipv4Header::from_slice(header).ok()?;
                v4.set_payload_len(usize::from(udp_len)).ok()?;
                let id = self.ip_id(index)?;
                v4.identification = id;
                v4.header_checksum = v4.calc_header_checksum();
                put(header, &v4.to_bytes())?;
                if let Some(fields) = frame.ip.as_mut() {
                    fields.identification = Some(id);
                }
            }
            Some(6) => {
                let (mut v6, _) = Ipv6Header::from_slice(header).ok()?;
                v6.payload_length = udp_len;
                put(header, &v6.to_bytes())?;
            }
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

/// Overwrites `header` with `bytes`, which a header of the same length re-emitted (`None` if
/// they differ, as they cannot for a header that parsed).
fn put(header: &mut [u8], bytes: &[u8]) -> Option<()> {
    (header.len() == bytes.len()).then(|| header.copy_from_slice(bytes))
}

#[cfg(test)]
mod tests;
