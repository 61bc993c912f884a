//! [`Link`]: everything of a raw backend but its receive ring. What it takes from each frame
//! (ARP, neighbour discovery, RoCEv2 datagrams), and how it sends, waiting for a neighbour's
//! MAC where it must.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use roce_core::Transmit;
use roce_wire::frame::{Ethernet, Frame, FrameRepr, Ip, LinkType, Transport};

use super::etherparse_arp::{self, arp_reply, arp_request, parse_arp};
use super::filter::{is_icmpv6, is_udp_fragment_to, wanted};
use crate::backend::packet_socket::{RxFrame, Sender, cut_batch};
use crate::backend::sys::Piece;
use crate::backend::{BackendCounters, Counter, Received, ndp};

/// Everything but the receive ring: the sending half, the addresses, the neighbours.
#[derive(Debug)]
pub(super) struct Link {
    pub(super) tx: Sender,
    pub(super) mac: [u8; 6],
    pub(super) ip: IpAddr,
    /// Neighbours' MACs (a tree: looked up for every frame sent, where SipHash cost more).
    pub(super) neighbours: BTreeMap<IpAddr, [u8; 6]>,
    /// Frames waiting for an ARP reply or a neighbour advertisement, per address.
    pub(super) waiting: BTreeMap<IpAddr, Vec<(FrameRepr, Vec<u8>)>>,
    /// Whether the kernel takes UDP batches to cut (false after it refused one).
    pub(super) gso: bool,
    /// Headers of the frame being sent.
    pub(super) headers: [u8; 64],
    /// What it drops, by reason, and the batches it cut.
    pub(super) counters: Arc<BackendCounters>,
}

impl Link {
    /// Handles one frame: ARP and neighbour discovery are answered or learnt from; the RoCEv2
    /// datagrams to our address
    /// (one, or the datagrams of an offload batch) are copied into `buf` at `*at` and
    /// described in `out`. Returns false, taking nothing, when `buf` has no room for them.
    pub(super) fn take(
        &mut self,
        frame: RxFrame<'_>,
        buf: &mut [u8],
        at: &mut usize,
        out: &mut Vec<Received>,
    ) -> bool {
        let bytes = frame.data;
        if is_udp_fragment_to(bytes, self.ip) {
            self.counters.bump(Counter::Ipv4Fragment);
            tracing::trace!(len = bytes.len(), "raw backend: ipv4 fragment dropped");
            return true;
        }
        if !wanted(bytes) {
            return true;
        }
        // ARP and ICMPv6 are taken here whatever they hold: only what teaches a neighbour or
        // asks for us is acted on.
        if bytes.get(12..14) == Some(&[0x08, 0x06]) {
            if let (Some(arp), IpAddr::V4(us)) = (parse_arp(bytes), self.ip) {
                self.on_arp(&arp, us);
            }
            return true;
        }
        if is_icmpv6(bytes) {
            if let (Some(nd), IpAddr::V6(us)) = (ndp::parse(bytes), self.ip) {
                self.on_neighbour_discovery(nd, us);
            }
            return true;
        }
        let malformed = |counters: &BackendCounters| {
            counters.bump(Counter::MalformedFrame);
            tracing::trace!(len = bytes.len(), "raw backend: malformed frame dropped");
            true
        };
        let Ok(parsed) = Frame::parse(LinkType::Ethernet, bytes) else {
            return malformed(&self.counters);
        };
        let (Some(ip), Some(Transport::Udp(udp, payload)), Some(eth)) =
            (parsed.ip, parsed.transport, parsed.ethernet)
        else {
            return malformed(&self.counters);
        };
        if ip.dst != self.ip || udp.dst_port != roce_wire::ROCE_V2_UDP_PORT {
            return true;
        }
        if *at + payload.len() > buf.len() {
            return false;
        }
        if !self.neighbours.contains_key(&ip.src) {
            let src = ip.src;
            // A datagram teaches the MAC of a peer we know nothing of yet (saving the ARP
            // round trip before the first answer), never a new one for a known peer: before
            // its ICRC is checked, a forged frame could otherwise send our packets for that
            // peer elsewhere, and the peer would see a PSN gap. ARP alone updates a known
            // peer, as the kernel's neighbour table is updated by ARP, not by IP packets.
            self.neighbours.insert(src, eth.src);
            // What waits for this peer's ARP reply goes first: later sends go straight out
            // now, and would overtake it (the peer would see a PSN gap and NAK).
            self.flush_waiting(src);
        }
        let mut push = |payload: &[u8], ip_id: Option<u16>| {
            roce_core::copy::copy_payload(&mut buf[*at..*at + payload.len()], payload);
            out.push(Received {
                src: SocketAddr::new(ip.src, udp.src_port),
                dst: SocketAddr::new(ip.dst, udp.dst_port),
                ecn: ip.ecn,
                ip_id,
                segment: 0,
                offset: *at,
                len: payload.len(),
            });
            *at += payload.len();
        };
        if !frame.vnet.is_gso() {
            push(payload, ip.identification);
            return true;
        }
        match cut_batch(bytes, &frame.vnet) {
            Ok(batch) => {
                self.counters.bump(Counter::BatchCut);
                for index in 0..batch.count() {
                    push(batch.payload(index), batch.ip_id(index));
                }
            }
            Err(err) => {
                self.counters.bump(Counter::BatchDropped);
                tracing::debug!(error = %err, len = bytes.len(), "raw backend: offload batch dropped");
            }
        }
        true
    }

    /// An ARP request or reply: its sender is learnt, and a request for our address answered.
    fn on_arp(&mut self, arp: &etherparse_arp::Arp, us: std::net::Ipv4Addr) {
        let sender = IpAddr::V4(arp.sender_ip);
        self.neighbours.insert(sender, arp.sender_mac);
        if arp.is_request && arp.target_ip == us {
            let reply = arp_reply(self.mac, us, arp.sender_mac, arp.sender_ip);
            if let Err(err) = self.tx.send(&[&reply]) {
                tracing::debug!(error = %err, "raw backend: ARP reply not sent");
            }
        }
        self.flush_waiting(sender);
    }

    /// A neighbour solicitation or advertisement: the sender of a solicitation (whose MAC
    /// it carries) is learnt, as ARP learns a requester, and one for our address is answered;
    /// an advertisement teaches its target's MAC, a known neighbour's too (as ARP replies
    /// update the table; a solicited advertisement is what the kernel's table believes).
    fn on_neighbour_discovery(&mut self, nd: ndp::Ndp, us: Ipv6Addr) {
        let (learnt, mac) = if nd.is_solicitation {
            (nd.sender_ip, nd.mac)
        } else {
            (nd.target, nd.mac)
        };
        // An unspecified sender (a peer's duplicate address detection) teaches nothing.
        if let Some(mac) = mac
            && !learnt.is_unspecified()
        {
            self.neighbours.insert(IpAddr::V6(learnt), mac);
        }
        if nd.is_solicitation
            && nd.target == us
            && let Some(to_mac) = nd.mac
            && !nd.sender_ip.is_unspecified()
        {
            let reply = ndp::advertisement(self.mac, us, to_mac, nd.sender_ip);
            if let Err(err) = self.tx.send(&[&reply]) {
                tracing::debug!(error = %err, "raw backend: neighbour advertisement not sent");
            }
        }
        self.flush_waiting(IpAddr::V6(learnt));
    }

    fn flush_waiting(&mut self, ip: IpAddr) {
        let (Some(mac), Some(frames)) =
            (self.neighbours.get(&ip).copied(), self.waiting.remove(&ip))
        else {
            return;
        };
        for (mut repr, payload) in frames {
            repr.ethernet.dst = mac;
            if let Err(err) = self.emit(&repr, &payload) {
                tracing::debug!(error = %err, "raw backend: queued frame not sent");
            }
        }
    }

    /// Sends `payload`, the UDP payloads of datagrams of `segment` bytes each ([`Backend::
    /// send_segments`](crate::backend::Backend::send_segments)): one frame for the kernel to
    /// cut where it can, else a frame per datagram, each with the ID its ICRC was sealed for;
    /// queued for the neighbour's MAC while it is not known.
    pub(super) fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &[u8],
        segment: usize,
    ) -> io::Result<()> {
        let segment = segment.max(1);
        let (repr, dst) = self.repr(transmit, 0)?;
        if !self.neighbours.contains_key(&dst) {
            return self.wait_for_neighbour(transmit, payload, segment);
        }
        let mut pieces = [Piece::EMPTY, Piece::of(payload)];
        if self.send_whole(&repr, payload.len(), segment, &mut pieces)? {
            return Ok(());
        }
        for (index, datagram) in payload.chunks(segment).enumerate() {
            let (repr, _) = self.repr(transmit, index as u16)?;
            self.emit(&repr, datagram)?;
        }
        Ok(())
    }

    /// Sends as [`Link::send_segments`] does a batch whose bytes are `pieces[1..]` (`payload`
    /// with lent regions' bytes at their places, [`gather`](crate::backend::gather)), gathered
    /// by the kernel's copy. `pieces[0]` is room for the frame's headers. False, having sent
    /// nothing, where the batch must be one buffer instead: the neighbour's MAC is not known
    /// (the frames wait in a queue), or the batch would go datagram by datagram.
    pub(super) fn send_gathered(
        &mut self,
        transmit: &Transmit,
        len: usize,
        segment: usize,
        pieces: &mut [Piece],
    ) -> io::Result<bool> {
        let (repr, dst) = self.repr(transmit, 0)?;
        if !self.neighbours.contains_key(&dst) {
            return Ok(false);
        }
        self.send_whole(&repr, len, segment.max(1), pieces)
    }

    /// Sends a batch of `len` bytes, `pieces[1..]`, to a known neighbour in one call: one
    /// frame, or one frame for the kernel to cut into datagrams of `segment` bytes (`repr`
    /// carries ID 0: datagram `i` leaves with ID `i`). `pieces[0]` is room for the headers.
    /// False, having sent nothing, where it must go datagram by datagram: the kernel has no
    /// segmentation offload for it (IPv6, or it refused a batch once, and then every batch
    /// after).
    fn send_whole(
        &mut self,
        repr: &FrameRepr,
        len: usize,
        segment: usize,
        pieces: &mut [Piece],
    ) -> io::Result<bool> {
        let invalid = |err: roce_wire::ParseError| {
            io::Error::new(io::ErrorKind::InvalidInput, err.to_string())
        };
        if len <= segment {
            let at = repr.emit_headers(&mut self.headers, len).map_err(invalid)?;
            pieces[0] = Piece::of(&self.headers[..at]);
            self.tx.send_pieces(pieces)?;
            return Ok(true);
        }
        if !self.gso || !repr.ip.src.is_ipv4() {
            return Ok(false);
        }
        // The UDP checksum is left to the kernel, which wants the pseudo-header sum of the
        // whole in the field; the UDP header is the last of the headers.
        let at = repr
            .emit_offload_headers(&mut self.headers, len)
            .map_err(invalid)?;
        pieces[0] = Piece::of(&self.headers[..at]);
        let segment =
            u16::try_from(segment).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        match self
            .tx
            .send_udp_gso(pieces, at - etherparse::UdpHeader::LEN, segment)
        {
            Ok(()) => Ok(true),
            Err(err) if err.raw_os_error() == Some(nix::libc::EINVAL) => {
                tracing::info!(error = %err, "the kernel refused a UDP batch to cut; sending datagrams one by one");
                self.gso = false;
                Ok(false)
            }
            Err(err) => Err(err),
        }
    }

    /// Sends one frame: `repr`'s headers, then `payload`.
    pub(super) fn emit(&mut self, repr: &FrameRepr, payload: &[u8]) -> io::Result<()> {
        let len = repr
            .emit_headers(&mut self.headers, payload.len())
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err.to_string()))?;
        self.tx.send(&[&self.headers[..len], payload])
    }

    /// The frame headers of `transmit`'s packets (the destination MAC filled in later), with
    /// IPv4 ID `ip_id` and DF, as the engine sealed the ICRC for; over IPv6, flow label 0 (the
    /// ICRC does not cover it).
    pub(super) fn repr(&self, transmit: &Transmit, ip_id: u16) -> io::Result<(FrameRepr, IpAddr)> {
        let (src, dst) = (transmit.src, transmit.dst.ip());
        if src.is_ipv4() != dst.is_ipv4() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the source and destination are of two families",
            ));
        }
        let v4 = src.is_ipv4();
        let repr = FrameRepr {
            ethernet: Ethernet {
                src: self.mac,
                dst: self.neighbours.get(&dst).copied().unwrap_or([0xff; 6]),
                vlan: None,
                ether_type: if v4 { 0x0800 } else { 0x86dd },
            },
            ip: Ip {
                src,
                dst,
                dscp: transmit.dscp,
                ecn: transmit.ecn,
                ttl: transmit.ttl,
                identification: v4.then_some(ip_id),
                dont_fragment: v4,
                flow_label: (!v4).then_some(0),
            },
            src_port: transmit.src_port,
            dst_port: transmit.dst.port(),
        };
        Ok((repr, dst))
    }

    /// Queues the datagrams of `payload` (`segment` bytes each, datagram `i` with ID `i`) for
    /// `dst`'s ARP reply or neighbour advertisement, and asks for it.
    pub(super) fn wait_for_neighbour(
        &mut self,
        transmit: &Transmit,
        payload: &[u8],
        segment: usize,
    ) -> io::Result<()> {
        let (_, dst) = self.repr(transmit, 0)?;
        for (index, datagram) in payload.chunks(segment.max(1)).enumerate() {
            let (repr, _) = self.repr(transmit, index as u16)?;
            let queue = self.waiting.entry(dst).or_default();
            if queue.len() < MAX_WAITING {
                queue.push((repr, datagram.to_vec()));
            }
        }
        let request = match (self.ip, dst) {
            (IpAddr::V4(us), IpAddr::V4(dst)) => arp_request(self.mac, us, dst),
            (IpAddr::V6(us), IpAddr::V6(dst)) => ndp::solicitation(self.mac, us, dst),
            _ => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
        };
        self.tx.send(&[&request])
    }
}

/// Frames queued per address while its ARP reply is awaited.
const MAX_WAITING: usize = 256;
