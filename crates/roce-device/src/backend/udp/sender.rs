//! The sending half of a [`UdpBackend`]: a `sendmsg` per packet or segmentation-offload
//! batch, with its DSCP and ECN in a cmsg, through the socket of its source's family.

use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::os::fd::AsFd;

use nix::libc;
use nix::poll::{PollFd, PollFlags, poll};
use nix::sys::socket::SockaddrStorage;
use roce_core::{Loan, Transmit};

use super::sockets::Sockets;
use crate::backend::sys::{Cmsg, Piece, send_to};
use crate::backend::{Sender, send_gathered_or_copied};

/// A placeholder in the array of a send's control messages (only the first `count` are sent).
const EMPTY: Cmsg<'static> = Cmsg {
    level: 0,
    kind: 0,
    data: &[],
};

#[cfg(doc)]
use super::UdpBackend;
#[cfg(doc)]
use crate::backend::Backend;

/// The sending half of a [`UdpBackend`]: other descriptors of its sockets, non-blocking,
/// which any thread may use (see [`Backend::sender`]). A transmit leaves through the socket of
/// its source address's family.
#[derive(Debug)]
pub struct UdpSender {
    pub(super) sockets: Sockets<SocketSender>,
    /// Datagrams one send may carry (1 when the kernel has no UDP segmentation offload or
    /// refused it once).
    pub(super) gso_segments: usize,
    /// Room for the pieces of a gathered send, kept from one to the next.
    pub(super) pieces: Vec<Piece>,
}

/// What sends through one socket.
#[derive(Debug)]
pub(super) struct SocketSender {
    pub(super) socket: std::net::UdpSocket,
    /// For a socket bound to `[::]` on one interface ([`UdpBackend::bind_interface`]), or to
    /// one of its link-local addresses ([`UdpBackend::bind_link_local`]): that interface's
    /// index, given with each send's source address (`IPV6_PKTINFO`) and as the scope of a
    /// link-local destination.
    pub(super) ifindex: Option<u32>,
}

impl Sender for UdpSender {
    fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        if self.send_whole(transmit, &[Piece::of(payload)], payload.len(), segment)? {
            return Ok(());
        }
        for (index, datagram) in payload.chunks_mut(segment.max(1)).enumerate() {
            if index > 0 {
                crate::backend::reseal(transmit, datagram, 0);
            }
            self.sendmsg(transmit, &[Piece::of(datagram)], None)?;
        }
        Ok(())
    }

    fn max_segments(&self) -> usize {
        self.gso_segments
    }

    fn gathers(&self) -> bool {
        true
    }

    fn send_gathered(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
        loans: &[Loan],
    ) -> io::Result<()> {
        // Too many pieces for one send, or datagrams one by one: from one buffer.
        let len = payload.len();
        send_gathered_or_copied(
            self,
            |s| &mut s.pieces,
            0,
            (transmit, payload, segment, loans),
            |s, pieces| s.send_whole(transmit, pieces, len, segment),
        )
    }
}

impl UdpSender {
    /// Another sender on the same sockets.
    pub(super) fn try_clone(&self) -> io::Result<Self> {
        let sockets = self.sockets.try_map(|s| {
            Ok(SocketSender {
                socket: s.socket.try_clone()?,
                ifindex: s.ifindex,
            })
        })?;
        Ok(Self {
            sockets,
            gso_segments: self.gso_segments,
            pieces: Vec::new(),
        })
    }

    /// [`SocketSender::sendmsg`] through the socket of the transmit's source family: the
    /// link-local socket (IPv6) for an IPv6 source of an IPv4 NIC, else the first.
    pub(super) fn sendmsg(
        &self,
        transmit: &Transmit,
        pieces: &[Piece],
        gso: Option<usize>,
    ) -> io::Result<usize> {
        match &self.sockets.link_local {
            Some(link_local) if transmit.src.is_ipv6() => link_local,
            _ => &self.sockets.first,
        }
        .sendmsg(transmit, pieces, gso)
    }

    /// One `sendmsg` of a batch of `len` bytes gathered from `pieces`, cut by the kernel into
    /// datagrams of `segment` bytes when it holds more than one. False when the batch must go
    /// datagram by datagram instead: this sender has no segmentation offload, or the route's
    /// device refused it just now (EIO from a device without checksum offload, as quinn-udp
    /// handles it), and then for every batch after.
    fn send_whole(
        &mut self,
        transmit: &Transmit,
        pieces: &[Piece],
        len: usize,
        segment: usize,
    ) -> io::Result<bool> {
        if len > segment && self.gso_segments <= 1 {
            return Ok(false);
        }
        let gso = (len > segment).then_some(segment);
        match self.sendmsg(transmit, pieces, gso) {
            Ok(_) => Ok(true),
            Err(err) if gso.is_some() && err.raw_os_error() == Some(libc::EIO) => {
                tracing::info!(error = %err, "UDP segmentation offload refused; sending datagrams one by one");
                self.gso_segments = 1;
                Ok(false)
            }
            Err(err) => Err(err),
        }
    }
}

impl SocketSender {
    /// One `sendmsg` of `pieces`, one after the other, to the transmit's destination, with its
    /// DSCP and ECN as the TOS (traffic class) and, with `gso`, cut by the kernel into datagrams
    /// of that many bytes.
    /// A full send buffer is waited out with `poll`, a few times [`SEND_WAIT_MS`] at most;
    /// then the send fails (the packets are lost, and the transport recovers).
    fn sendmsg(
        &self,
        transmit: &Transmit,
        pieces: &[Piece],
        gso: Option<usize>,
    ) -> io::Result<usize> {
        let tos = (transmit.dscp << 2) | transmit.ecn.bits();
        let tclass = i32::from(tos);
        let segment = gso.map(|size| u16::try_from(size).unwrap_or(u16::MAX));
        let mut dst = transmit.dst;
        let mut pktinfo = None;
        if let (Some(ifindex), SocketAddr::V6(v6), IpAddr::V6(src)) =
            (self.ifindex, transmit.dst, transmit.src)
        {
            // A socket bound to [::] on one interface: the source address is the transmit's,
            // and a link-local destination is on that interface.
            if v6.ip().is_unicast_link_local() {
                dst = SocketAddr::V6(SocketAddrV6::new(*v6.ip(), v6.port(), 0, ifindex));
            }
            // `struct in6_pktinfo`: the source address, then the interface's index.
            let mut info = [0u8; 20];
            info[..16].copy_from_slice(&src.octets());
            info[16..].copy_from_slice(&ifindex.to_ne_bytes());
            pktinfo = Some(info);
        }
        let address = SockaddrStorage::from(dst);
        // The TOS as one byte (IPv4: `ip_cmsg_send` takes one or an int), the traffic class
        // as an int (IPv6: `ip6_datagram_send_ctl` takes only an int).
        let tclass_bytes = tclass.to_ne_bytes();
        let first = if transmit.dst.is_ipv6() {
            Cmsg {
                level: libc::IPPROTO_IPV6,
                kind: libc::IPV6_TCLASS,
                data: &tclass_bytes,
            }
        } else {
            Cmsg {
                level: libc::IPPROTO_IP,
                kind: libc::IP_TOS,
                data: std::slice::from_ref(&tos),
            }
        };
        let segment_bytes = segment.map(u16::to_ne_bytes);
        let mut cmsgs = [first, EMPTY, EMPTY];
        let mut count = 1;
        if let Some(bytes) = &segment_bytes {
            cmsgs[count] = Cmsg {
                level: libc::SOL_UDP,
                kind: libc::UDP_SEGMENT,
                data: bytes,
            };
            count += 1;
        }
        if let Some(bytes) = &pktinfo {
            cmsgs[count] = Cmsg {
                level: libc::IPPROTO_IPV6,
                kind: libc::IPV6_PKTINFO,
                data: bytes,
            };
            count += 1;
        }
        let mut waits = 0;
        loop {
            match send_to(self.socket.as_fd(), pieces, &address, &cmsgs[..count]) {
                Err(nix::errno::Errno::EAGAIN) if waits < SEND_WAITS => {
                    waits += 1;
                    let mut fds = [PollFd::new(self.socket.as_fd(), PollFlags::POLLOUT)];
                    poll(&mut fds, SEND_WAIT_MS)?;
                }
                Err(nix::errno::Errno::EINTR) => {}
                result => return result.map_err(io::Error::from),
            }
        }
    }
}

/// A send that finds the socket's buffer full waits for room this many times at most, each
/// wait at most [`SEND_WAIT_MS`] milliseconds.
const SEND_WAITS: u32 = 10;
const SEND_WAIT_MS: u16 = 10;

/// The most datagrams one segmentation-offload send carries (Linux's `UDP_MAX_SEGMENTS` is 64
/// before 6.9, 128 since).
pub const MAX_GSO_SEGMENTS: usize = 64;
