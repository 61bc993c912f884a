//! The raw backend: whole Ethernet frames on a named interface, through an AF_PACKET socket
//! (pnet_datalink). It needs CAP_NET_RAW.
//!
//! Because it builds every header itself, it can do what a UDP socket cannot: a UDP source port
//! per QP (the NIC runs with `SrcPortPolicy::PerQp`, as rxe does), the DSCP and ECN bits of every
//! packet, and, on receive, the whole IP header, so every ICRC is checked in full (the IPv4 ID
//! included). It answers ARP for its own address and learns its peers' MACs from ARP replies and
//! from the frames they send, so it can play an address that no kernel owns.
//!
//! The interface should carry no IP address of the host for the NIC's address: otherwise the
//! kernel also receives the datagrams to port 4791 and answers them with ICMP port unreachable.
//! IPv4 only for now (IPv6 needs neighbour discovery).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use etherparse_arp::{arp_reply, arp_request, parse_arp};
use pnet_datalink::DataLinkSender;
use roce_core::Transmit;
use roce_wire::frame::{Ethernet, Frame, FrameRepr, Ip, LinkType, Transport};
use tokio::sync::mpsc;

use super::packet_socket::{self, PacketSocket};
use super::{Backend, Received};

/// An AF_PACKET socket on one interface, playing one IPv4 address.
pub struct RawBackend {
    tx: Box<dyn DataLinkSender>,
    frames: mpsc::Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
    mac: [u8; 6],
    ip: Ipv4Addr,
    neighbours: HashMap<Ipv4Addr, [u8; 6]>,
    /// Frames waiting for an ARP reply, per address.
    waiting: HashMap<Ipv4Addr, Vec<(FrameRepr, Vec<u8>)>>,
    frame: Vec<u8>,
}

impl std::fmt::Debug for RawBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawBackend")
            .field("mac", &self.mac)
            .field("ip", &self.ip)
            .finish_non_exhaustive()
    }
}

impl RawBackend {
    /// Opens `interface` to play `ip`. Fails with a message that says what to do when the
    /// process lacks CAP_NET_RAW or the interface does not exist.
    pub fn open(interface: &str, ip: IpAddr) -> io::Result<Self> {
        let IpAddr::V4(ip) = ip else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the raw backend speaks IPv4 only for now",
            ));
        };
        let PacketSocket {
            tx,
            rx,
            mac,
            max_frame,
        } = packet_socket::open(interface, false).map_err(|err| {
            if err.kind() == io::ErrorKind::PermissionDenied {
                io::Error::new(
                    err.kind(),
                    format!("the raw backend: {err}, or use --backend udp"),
                )
            } else {
                err
            }
        })?;
        let (frames_tx, frames) = mpsc::channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        packet_socket::spawn_receiver(
            format!("roce-raw-{interface}"),
            rx,
            max_frame,
            stop.clone(),
            move |frame| !wanted(frame) || frames_tx.blocking_send(frame.to_vec()).is_ok(),
        )?;
        Ok(Self {
            tx,
            frames,
            stop,
            mac,
            ip,
            neighbours: HashMap::new(),
            waiting: HashMap::new(),
            frame: Vec::new(),
        })
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn send_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        match self.tx.send_to(frame, None) {
            Some(result) => result,
            None => Err(io::Error::other("raw backend: frame not sent")),
        }
    }

    /// Handles one frame: ARP is answered or learnt from; a RoCEv2 datagram to our address is
    /// copied into `buf` at `*at` and described in `out`.
    fn take(&mut self, bytes: &[u8], buf: &mut [u8], at: &mut usize, out: &mut Vec<Received>) {
        if let Some(arp) = parse_arp(bytes) {
            self.neighbours.insert(arp.sender_ip, arp.sender_mac);
            if arp.is_request && arp.target_ip == self.ip {
                let reply = arp_reply(self.mac, self.ip, arp.sender_mac, arp.sender_ip);
                if let Err(err) = self.send_frame(&reply) {
                    tracing::debug!(error = %err, "raw backend: ARP reply not sent");
                }
            }
            self.flush_waiting(arp.sender_ip);
            return;
        }
        let Ok(frame) = Frame::parse(LinkType::Ethernet, bytes) else {
            return;
        };
        let (Some(ip), Some(Transport::Udp(udp, payload)), Some(eth)) =
            (frame.ip, frame.transport, frame.ethernet)
        else {
            return;
        };
        if ip.dst != IpAddr::V4(self.ip) || udp.dst_port != roce_wire::ROCE_V2_UDP_PORT {
            return;
        }
        if let IpAddr::V4(src) = ip.src {
            self.neighbours.insert(src, eth.src);
        }
        if *at + payload.len() > buf.len() {
            return;
        }
        buf[*at..*at + payload.len()].copy_from_slice(payload);
        out.push(Received {
            src: SocketAddr::new(ip.src, udp.src_port),
            dst: SocketAddr::new(ip.dst, udp.dst_port),
            ecn: ip.ecn,
            ip_id: ip.identification,
            segment: 0,
            offset: *at,
            len: payload.len(),
        });
        *at += payload.len();
    }

    fn flush_waiting(&mut self, ip: Ipv4Addr) {
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

    fn emit(&mut self, repr: &FrameRepr, payload: &[u8]) -> io::Result<()> {
        let mut frame = std::mem::take(&mut self.frame);
        frame.resize(repr.header_len() + payload.len(), 0);
        let result = match repr.emit_headers(&mut frame, payload.len()) {
            Ok(at) => {
                frame[at..].copy_from_slice(payload);
                self.send_frame(&frame)
            }
            Err(err) => Err(io::Error::new(io::ErrorKind::InvalidInput, err.to_string())),
        };
        self.frame = frame;
        result
    }
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Backend for RawBackend {
    async fn recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<()> {
        loop {
            let Some(first) = self.frames.recv().await else {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "raw backend: the receive thread stopped",
                ));
            };
            let mut at = 0;
            self.take(&first, buf, &mut at, out);
            while let Ok(frame) = self.frames.try_recv() {
                self.take(&frame, buf, &mut at, out);
                if at + roce_core::MAX_DATAGRAM > buf.len() {
                    break;
                }
            }
            if !out.is_empty() {
                return Ok(());
            }
        }
    }

    async fn send(&mut self, transmit: &Transmit, payload: &[u8]) -> io::Result<()> {
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (transmit.src, transmit.dst.ip()) else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the raw backend speaks IPv4 only for now",
            ));
        };
        let repr = FrameRepr {
            ethernet: Ethernet {
                src: self.mac,
                dst: [0xff; 6],
                vlan: None,
                ether_type: 0x0800,
            },
            ip: Ip {
                src: IpAddr::V4(src),
                dst: IpAddr::V4(dst),
                dscp: transmit.dscp,
                ecn: transmit.ecn,
                ttl: transmit.ttl,
                // The engine computed the ICRC for ID 0 with DF, as the UDP backend sends.
                identification: Some(0),
                dont_fragment: true,
                flow_label: None,
            },
            src_port: transmit.src_port,
            dst_port: transmit.dst.port(),
        };
        match self.neighbours.get(&dst).copied() {
            Some(mac) => {
                let repr = FrameRepr {
                    ethernet: Ethernet {
                        dst: mac,
                        ..repr.ethernet
                    },
                    ..repr
                };
                self.emit(&repr, payload)
            }
            None => {
                let queue = self.waiting.entry(dst).or_default();
                if queue.len() < MAX_WAITING {
                    queue.push((repr, payload.to_vec()));
                }
                let request = arp_request(self.mac, self.ip, dst);
                self.send_frame(&request)
            }
        }
    }

    fn fixed_src_port(&self) -> Option<u16> {
        None
    }

    fn recv_buffer_len(&self) -> usize {
        64 * roce_core::MAX_DATAGRAM
    }
}

/// What the receive thread passes on: ARP, and IPv4 UDP to port 4791 (cheap byte checks, the
/// full parse comes later).
fn wanted(frame: &[u8]) -> bool {
    match frame.get(12..14) {
        Some([0x08, 0x06]) => true,
        Some([0x08, 0x00]) => {
            let ihl = usize::from(frame.get(14).map_or(0, |b| b & 0x0f)) * 4;
            frame.get(23) == Some(&17)
                && frame.get(14 + ihl + 2..14 + ihl + 4)
                    == Some(&roce_wire::ROCE_V2_UDP_PORT.to_be_bytes()[..])
        }
        _ => false,
    }
}

/// Frames queued per address while its ARP reply is awaited.
const MAX_WAITING: usize = 256;
/// Frames between the receive thread and the device.
const QUEUE: usize = 4096;

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
