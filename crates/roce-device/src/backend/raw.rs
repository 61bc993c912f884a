//! The raw backend: whole Ethernet frames on a named interface, through an AF_PACKET socket
//! with a receive ring ([`super::packet_socket`]). It needs CAP_NET_RAW.
//!
//! Because it builds every header itself, it can do what a UDP socket cannot: a UDP source port
//! per QP (the NIC runs with `SrcPortPolicy::PerQp`, as rxe does), the DSCP and ECN bits of every
//! packet, and, on receive, the whole IP header, so every ICRC is checked in full (the IPv4 ID
//! included). It answers ARP (IPv4) or neighbour solicitations (IPv6, `backend/ndp.rs`) for its
//! own address and learns its peers' MACs from them, and the MAC of a peer it does not know
//! yet from the first frame that peer sends (never a new one for a known peer: a forged frame
//! must not redirect its packets), so it can play an address that no kernel owns.
//!
//! The device's task reads the ring itself (the socket is registered with tokio): each wake-up
//! takes every frame that has arrived, copying only the RoCEv2 payloads into the driver's
//! buffer. A UDP segmentation-offload batch that a peer's UDP socket sent over a veth arrives
//! as one frame; it is cut into its datagrams here, datagram `i` with the batch's IPv4 ID plus
//! `i`, which is the ID the sender's kernel gives that segment on a wire and so the one its
//! ICRC was sealed for. Sends of a batch of equal-size packets go the same way: one frame for
//! the whole batch with a `virtio_net_hdr` asking the kernel to cut it (UDP GSO), its header
//! carrying ID 0 so that packet `i` leaves with ID `i`, as the engine sealed it.
//!
//! The interface should carry no IP address of the host for the NIC's address: otherwise the
//! kernel also receives the datagrams to port 4791 and answers them with ICMP port unreachable.
//! Over IPv6 every datagram leaves in a frame of its own (no offload batch), and GID 0, the
//! link-local address, carries no traffic here.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use etherparse_arp::{arp_reply, arp_request, parse_arp};
use roce_core::Transmit;
use roce_wire::frame::{Ethernet, Frame, FrameRepr, Ip, LinkType, Transport};
use tokio::io::unix::AsyncFd;

use super::packet_socket::{self, PacketSocket, Receiver, RxFrame, Sender, cut_batch};
use super::{Backend, BackendCounters, Counter, Received, ndp};

/// An AF_PACKET socket on one interface, playing one IP address.
#[derive(Debug)]
pub struct RawBackend {
    rx: AsyncFd<Receiver>,
    link: Link,
}

/// Everything but the receive ring: the sending half, the addresses, the neighbours.
#[derive(Debug)]
struct Link {
    tx: Sender,
    mac: [u8; 6],
    ip: IpAddr,
    neighbours: HashMap<IpAddr, [u8; 6]>,
    /// Frames waiting for an ARP reply or a neighbour advertisement, per address.
    waiting: HashMap<IpAddr, Vec<(FrameRepr, Vec<u8>)>>,
    /// Whether the kernel takes UDP batches to cut (false after it refused one).
    gso: bool,
    /// Headers of the frame being sent.
    headers: [u8; 64],
    /// What it drops, by reason, and the batches it cut.
    counters: Arc<BackendCounters>,
}

impl RawBackend {
    /// Opens `interface` to play `ip`. Fails with a message that says what to do when the
    /// process lacks CAP_NET_RAW or the interface does not exist. Must be called inside a
    /// tokio runtime.
    pub fn open(interface: &str, ip: IpAddr) -> io::Result<Self> {
        let PacketSocket { tx, rx, mac, .. } =
            packet_socket::open(interface, false).map_err(|err| {
                if err.kind() == io::ErrorKind::PermissionDenied {
                    io::Error::new(
                        err.kind(),
                        format!("the raw backend: {err}, or use --backend udp"),
                    )
                } else {
                    err
                }
            })?;
        Ok(Self {
            rx: super::sys::register(rx)?,
            link: Link {
                tx,
                mac,
                ip,
                neighbours: HashMap::new(),
                waiting: HashMap::new(),
                gso: true,
                headers: [0; 64],
                counters: BackendCounters::shared(),
            },
        })
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.link.mac
    }
}

impl Link {
    /// Handles one frame: ARP and neighbour discovery are answered or learnt from; the RoCEv2
    /// datagrams to our address
    /// (one, or the datagrams of an offload batch) are copied into `buf` at `*at` and
    /// described in `out`. Returns false, taking nothing, when `buf` has no room for them.
    fn take(
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
            buf[*at..*at + payload.len()].copy_from_slice(payload);
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

    /// Sends one frame: `repr`'s headers, then `payload`.
    fn emit(&mut self, repr: &FrameRepr, payload: &[u8]) -> io::Result<()> {
        let len = repr
            .emit_headers(&mut self.headers, payload.len())
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err.to_string()))?;
        self.tx.send(&[&self.headers[..len], payload])
    }

    /// Sends `payload`, datagrams of `segment` bytes each, as one frame for the kernel to cut
    /// (`repr` carries ID 0: datagram `i` leaves with ID `i`).
    fn emit_batch(&mut self, repr: &FrameRepr, payload: &[u8], segment: usize) -> io::Result<()> {
        if !repr.ip.src.is_ipv4() {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        // The UDP checksum is left to the kernel, which wants the pseudo-header sum of the
        // whole in the field.
        let len = repr
            .emit_offload_headers(&mut self.headers, payload.len())
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err.to_string()))?;
        // The UDP header is the last of them.
        let udp = len - etherparse::UdpHeader::LEN;
        let segment =
            u16::try_from(segment).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.tx
            .send_udp_gso(&[&self.headers[..len], payload], udp, segment)
    }

    /// The frame headers of `transmit`'s packets (the destination MAC filled in later), with
    /// IPv4 ID `ip_id` and DF, as the engine sealed the ICRC for; over IPv6, flow label 0 (the
    /// ICRC does not cover it).
    fn repr(&self, transmit: &Transmit, ip_id: u16) -> io::Result<(FrameRepr, IpAddr)> {
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
    fn wait_for_neighbour(
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

impl Drop for RawBackend {
    fn drop(&mut self) {
        let rx = self.rx.get_mut();
        self.link
            .counters
            .add(Counter::RingFull, rx.take_ring_drops(true));
        let counters = self.link.counters.snapshot();
        tracing::debug!(
            batches_cut = counters.rx_batches_cut,
            batches_dropped = counters.rx_batches_dropped,
            fragments = counters.rx_ipv4_fragments,
            malformed = counters.rx_malformed_frames,
            truncated = rx.truncated(),
            ring_full = counters.rx_ring_full,
            "raw backend closed"
        );
    }
}

impl Backend for RawBackend {
    async fn recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<()> {
        loop {
            let mut guard = self.rx.readable_mut().await?;
            let mut at = 0;
            let link = &mut self.link;
            let receiver = guard.get_inner_mut();
            receiver.poll_frames(MAX_FRAMES, |frame| link.take(frame, buf, &mut at, out));
            let lost = receiver.take_ring_drops(false);
            if lost > 0 {
                link.counters.add(Counter::RingFull, lost);
                tracing::debug!(lost, "raw backend: frames dropped by the kernel, ring full");
            }
            if !receiver.has_frame() {
                guard.clear_ready();
            }
            if !out.is_empty() {
                return Ok(());
            }
        }
    }

    async fn send(&mut self, transmit: &Transmit, payload: &[u8]) -> io::Result<()> {
        let (repr, dst) = self.link.repr(transmit, 0)?;
        if self.link.neighbours.contains_key(&dst) {
            self.link.emit(&repr, payload)
        } else {
            self.link
                .wait_for_neighbour(transmit, payload, payload.len())
        }
    }

    async fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        let segment = segment.max(1);
        let (repr, dst) = self.link.repr(transmit, 0)?;
        if !self.link.neighbours.contains_key(&dst) {
            return self.link.wait_for_neighbour(transmit, payload, segment);
        }
        if payload.len() <= segment {
            return self.link.emit(&repr, payload);
        }
        if self.link.gso && repr.ip.src.is_ipv4() {
            match self.link.emit_batch(&repr, payload, segment) {
                Ok(()) => return Ok(()),
                Err(err) if err.raw_os_error() == Some(nix::libc::EINVAL) => {
                    tracing::info!(error = %err, "the kernel refused a UDP batch to cut; sending datagrams one by one");
                    self.link.gso = false;
                }
                Err(err) => return Err(err),
            }
        }
        // One frame per datagram, each with the ID its ICRC was sealed for.
        for (index, datagram) in payload.chunks(segment).enumerate() {
            let (repr, _) = self.link.repr(transmit, index as u16)?;
            self.link.emit(&repr, datagram)?;
        }
        Ok(())
    }

    fn max_segments(&self) -> usize {
        super::udp::MAX_GSO_SEGMENTS
    }

    fn fixed_src_port(&self) -> Option<u16> {
        None
    }

    fn recv_buffer_len(&self) -> usize {
        // Room for several 64 KiB batches per wake-up.
        64 * roce_core::MAX_DATAGRAM + (1 << 16)
    }

    fn counters(&self) -> Option<Arc<BackendCounters>> {
        Some(self.link.counters.clone())
    }
}

/// Whether `frame` is an IPv4 fragment (More Fragments set or a non-zero offset) of a UDP
/// datagram to `ip`: the first fragment carries the UDP header, the others do not, so none of
/// them can be told apart as RoCEv2 by its port; all are dropped and counted.
fn is_udp_fragment_to(frame: &[u8], ip: IpAddr) -> bool {
    let IpAddr::V4(ip) = ip else {
        return false;
    };
    frame.get(12..14) == Some(&[0x08, 0x00])
        && frame.get(23) == Some(&17)
        && frame
            .get(20..22)
            .is_some_and(|f| f[0] & 0x3f != 0 || f[1] != 0)
        && frame.get(30..34) == Some(&ip.octets()[..])
}

/// Whether `frame` is ICMPv6 over Ethernet (no extension header between: neighbour discovery
/// has none).
fn is_icmpv6(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x86, 0xdd]) && frame.get(20) == Some(&58)
}

/// Frames that are worth a full parse (cheap byte checks): ARP, ICMPv6 (neighbour discovery),
/// and UDP to port 4791 over IPv4 or IPv6 (whose UDP header follows the fixed header: RoCEv2
/// has no extension headers).
fn wanted(frame: &[u8]) -> bool {
    let port = &roce_wire::ROCE_V2_UDP_PORT.to_be_bytes()[..];
    match frame.get(12..14) {
        Some([0x08, 0x06]) => true,
        Some([0x08, 0x00]) => {
            let ihl = usize::from(frame.get(14).map_or(0, |b| b & 0x0f)) * 4;
            frame.get(23) == Some(&17) && frame.get(14 + ihl + 2..14 + ihl + 4) == Some(port)
        }
        Some([0x86, 0xdd]) => match frame.get(20) {
            Some(58) => true,
            Some(17) => frame.get(14 + 40 + 2..14 + 40 + 4) == Some(port),
            _ => false,
        },
        _ => false,
    }
}

/// Frames queued per address while its ARP reply is awaited.
const MAX_WAITING: usize = 256;
/// Frames taken from the ring per wake-up at most (the driver then runs the engine).
const MAX_FRAMES: usize = 256;

/// ARP for IPv4 over Ethernet, through etherparse's `ArpEthIpv4Packet`.
mod etherparse_arp {
    use std::net::Ipv4Addr;

    use etherparse::{
        ArpEthIpv4Packet, ArpOperation, EtherType, Ethernet2Header, NetSlice, SlicedPacket,
    };

    /// The fields of an ARP packet that matter here.
    pub(super) struct Arp {
        pub(super) is_request: bool,
        pub(super) sender_mac: [u8; 6],
        pub(super) sender_ip: Ipv4Addr,
        pub(super) target_ip: Ipv4Addr,
    }

    pub(super) fn parse_arp(frame: &[u8]) -> Option<Arp> {
        let sliced = SlicedPacket::from_ethernet(frame).ok()?;
        let Some(NetSlice::Arp(arp)) = sliced.net else {
            return None;
        };
        let arp = arp.to_packet().try_eth_ipv4().ok()?;
        Some(Arp {
            is_request: arp.operation == ArpOperation::REQUEST,
            sender_mac: arp.sender_mac,
            sender_ip: arp.sender_ipv4_addr(),
            target_ip: arp.target_ipv4_addr(),
        })
    }

    pub(super) fn arp_request(mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
        frame([0xff; 6], mac, ArpOperation::REQUEST, ip, [0; 6], target)
    }

    pub(super) fn arp_reply(
        mac: [u8; 6],
        ip: Ipv4Addr,
        to_mac: [u8; 6],
        to_ip: Ipv4Addr,
    ) -> Vec<u8> {
        frame(to_mac, mac, ArpOperation::REPLY, ip, to_mac, to_ip)
    }

    fn frame(
        dst: [u8; 6],
        src: [u8; 6],
        operation: ArpOperation,
        ip: Ipv4Addr,
        target_mac: [u8; 6],
        target: Ipv4Addr,
    ) -> Vec<u8> {
        let eth = Ethernet2Header {
            source: src,
            destination: dst,
            ether_type: EtherType::ARP,
        };
        let arp = ArpEthIpv4Packet {
            operation,
            sender_mac: src,
            sender_ipv4: ip.octets(),
            target_mac,
            target_ipv4: target.octets(),
        };
        let mut out = eth.to_bytes().to_vec();
        out.extend_from_slice(&arp.to_bytes());
        // Ethernet's minimum frame (60 bytes before the FCS).
        out.resize(60, 0);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const US: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    /// An Ethernet + IPv4 frame, UDP to us: `flags_offset` is the IPv4 flags and fragment
    /// offset field, `udp` says whether a UDP header to port 4791 follows (a first fragment or
    /// a whole datagram) or payload bytes do (a later fragment).
    fn frame(dst: Ipv4Addr, flags_offset: u16, udp: bool) -> Vec<u8> {
        let mut f = vec![0; 14 + 20 + 8 + 16];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[20..22].copy_from_slice(&flags_offset.to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&dst.octets());
        if udp {
            f[34..36].copy_from_slice(&4791u16.to_be_bytes());
            f[36..38].copy_from_slice(&4791u16.to_be_bytes());
        } else {
            f[34..].fill(0x5a);
        }
        f
    }

    #[test]
    fn every_fragment_of_a_udp_datagram_to_us_is_told_apart_and_nothing_else() {
        const DF: u16 = 0x4000;
        const MF: u16 = 0x2000;
        // The first fragment: MF, offset 0, the UDP header to 4791.
        assert!(is_udp_fragment_to(&frame(US, MF, true), IpAddr::V4(US)));
        // A middle and the last fragment: no UDP header, an offset (in 8-byte units).
        assert!(is_udp_fragment_to(
            &frame(US, MF | 185, false),
            IpAddr::V4(US)
        ));
        assert!(is_udp_fragment_to(&frame(US, 370, false), IpAddr::V4(US)));
        // Whole datagrams, with and without DF, and fragments for someone else.
        assert!(!is_udp_fragment_to(&frame(US, DF, true), IpAddr::V4(US)));
        assert!(!is_udp_fragment_to(&frame(US, 0, true), IpAddr::V4(US)));
        assert!(!is_udp_fragment_to(
            &frame(Ipv4Addr::new(198, 18, 0, 3), MF, true),
            IpAddr::V4(US)
        ));
        // A whole RoCEv2 datagram is wanted; a later fragment would not even look like one.
        assert!(wanted(&frame(US, DF, true)));
        assert!(!wanted(&frame(US, 370, false)));
    }

    /// The UDP payloads to port 4791 of the frames `rx` takes within `limit`, until `n`.
    fn roce_payloads(rx: &mut Receiver, n: usize, limit: std::time::Duration) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let start = std::time::Instant::now();
        while got.len() < n && start.elapsed() < limit {
            rx.wait(std::time::Duration::from_millis(50)).unwrap();
            rx.poll_frames(64, |frame| {
                if let Ok(Frame {
                    transport: Some(Transport::Udp(udp, payload)),
                    ..
                }) = Frame::parse(LinkType::Ethernet, frame.data)
                    && udp.dst_port == roce_wire::ROCE_V2_UDP_PORT
                {
                    got.push(payload.to_vec());
                }
                true
            });
        }
        got
    }

    #[test]
    fn what_waits_for_a_peers_arp_reply_leaves_before_what_follows_once_its_mac_is_learnt() {
        let Some(ns) = crate::backend::testing::Netns::new("arp") else {
            return;
        };
        let name = ns.0.clone();
        std::thread::spawn(move || {
            crate::backend::sys::enter_netns(&name).unwrap();
            let (us, peer) = (Ipv4Addr::new(198, 18, 9, 4), Ipv4Addr::new(198, 18, 9, 1));
            let peer_mac = [2, 0, 0, 0, 0, 0x21];
            // The peer's side of the link, where our frames arrive.
            let mut wire = packet_socket::open_in_namespace("x0").unwrap().rx;
            let PacketSocket { tx, mac, .. } = packet_socket::open_in_namespace("x1").unwrap();
            let mut link = Link {
                tx,
                mac,
                ip: IpAddr::V4(us),
                neighbours: HashMap::new(),
                waiting: HashMap::new(),
                gso: true,
                headers: [0; 64],
                counters: BackendCounters::shared(),
            };
            let transmit = |len| Transmit {
                src: IpAddr::V4(us),
                src_port: 0xc000,
                dst: SocketAddr::new(IpAddr::V4(peer), 4791),
                ecn: roce_wire::frame::Ecn::NotEct,
                dscp: 0,
                ttl: 64,
                len,
            };
            // The first packet to the peer waits for its ARP reply...
            let first = [0xaa; 40];
            link.wait_for_neighbour(&transmit(40), &first, 40).unwrap();
            // ...and before any comes, a packet from the peer teaches us its MAC.
            let mut from_peer = FrameRepr::for_datagram(
                SocketAddr::new(IpAddr::V4(peer), 4791),
                SocketAddr::new(IpAddr::V4(us), 4791),
                roce_wire::frame::Ecn::NotEct,
                0,
                64,
            );
            from_peer.ethernet.src = peer_mac;
            from_peer.ethernet.dst = mac;
            let mut bytes = vec![0u8; 128];
            let at = from_peer.emit_headers(&mut bytes, 40).unwrap();
            bytes.truncate(at + 40);
            let (mut buf, mut at, mut out) = (vec![0u8; 4096], 0, Vec::new());
            let frame = RxFrame {
                vnet: packet_socket::VirtioNetHdr::default(),
                data: &bytes,
            };
            assert!(link.take(frame, &mut buf, &mut at, &mut out));
            assert_eq!(
                (out.len(), link.neighbours.get(&IpAddr::V4(peer))),
                (1, Some(&peer_mac))
            );
            // A forged datagram from the peer's address, from another MAC, is taken (the
            // engine judges it) but does not move the peer.
            let mut forged = bytes.clone();
            forged[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x66]);
            let frame = RxFrame {
                vnet: packet_socket::VirtioNetHdr::default(),
                data: &forged,
            };
            assert!(link.take(frame, &mut buf, &mut at, &mut out));
            assert_eq!(
                (out.len(), link.neighbours.get(&IpAddr::V4(peer))),
                (2, Some(&peer_mac))
            );
            // The next packet goes straight out, as `send` sends it to a known neighbour.
            let second = [0xbb; 40];
            let (repr, _) = link.repr(&transmit(40), 0).unwrap();
            link.emit(&repr, &second).unwrap();
            let seen = roce_payloads(&mut wire, 2, std::time::Duration::from_secs(5));
            assert_eq!(seen, [first.to_vec(), second.to_vec()], "in the order sent");
            assert!(
                link.waiting
                    .get(&IpAddr::V4(peer))
                    .is_none_or(Vec::is_empty)
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn counters_are_counted_by_name_and_fragments_are_drops() {
        let counters = BackendCounters::shared();
        counters.bump(Counter::Ipv4Fragment);
        counters.bump(Counter::Ipv4Fragment);
        counters.bump(Counter::BatchCut);
        let stats = counters.snapshot();
        assert_eq!(stats.rx_ipv4_fragments, 2);
        assert_eq!(stats.rx_dropped(), 2, "a cut batch is no drop");
        assert!(stats.counters().contains(&("rx_ipv4_fragments", 2)));
    }
}
