//! The unprivileged backend: one UDP socket bound to `<ip>:4791` (and, for an IPv4 NIC whose
//! GID 0 is its interface's IPv6 link-local address, a second one bound to that address:
//! [`UdpBackend::bind_link_local`]). quinn-udp receives (ECN from IP_RECVTOS cmsgs, GRO) and
//! sets DF (IP_PMTUDISC_PROBE); sends are `sendmsg`s with the packet's DSCP and ECN in an IP_TOS
//! (IPV6_TCLASS) cmsg and, for a batch, a UDP_SEGMENT cmsg (UDP segmentation offload: one
//! system call, and on a veth one skb, for up to [`MAX_GSO_SEGMENTS`] datagrams).
//!
//! What this backend can and cannot do, and so what a NIC on it does:
//! - every packet leaves from source port 4791 (the port of every socket), so the NIC runs with
//!   `SrcPortPolicy::Fixed(4791)` and its ICRCs cover that port;
//! - Linux gives DF datagrams sent on an unconnected UDP socket the IPv4 ID 0, and numbers the
//!   segments of one segmentation-offload send 0, 1, 2, … (`inet_gso_segment`), which is what
//!   the engine seals each packet of a batch for (checked by the veth test against the raw
//!   backend, which sees every ID, and by the interop matrix against rxe);
//! - on receive the IPv4 ID is not visible (`ip_id: None`): the NIC tries the datagram's place
//!   in its GRO batch, then solves for the one ID that makes the ICRC verify (a packet from rxe,
//!   whose IDs count up, counts under `rx_icrc_id_solved`), and drops the packet under
//!   `rx_icrc_errors` when no ID does. A corruption passes one time in 2^16; the raw backend
//!   sees whole frames and checks every ICRC in full.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::task::Poll;

use roce_core::Transmit;
use tokio::io::unix::AsyncFdReadyGuard;

use super::registration::Registration;
use super::{Backend, Received, Receiver, Sender};

mod interface;
mod open;
mod receiver;
mod sender;
mod sockets;
#[cfg(test)]
mod tests;

pub use interface::{Interface, interface_of};
pub use receiver::UdpReceiver;
pub use sender::{MAX_GSO_SEGMENTS, UdpSender};

use open::Opened;
use sockets::Sockets;

/// A UDP socket on `<ip>:4791`, and maybe a second one on an IPv6 link-local address
/// ([`UdpBackend::bind_link_local`]).
#[derive(Debug)]
pub struct UdpBackend {
    /// The sockets' registrations with the runtime's reactor ([`Registration`]).
    fds: Sockets<Registration<std::net::UdpSocket>>,
    /// Its own receives, until the device takes a [`UdpReceiver`] of its own.
    rx: UdpReceiver,
    /// Its own sends, until the device takes a [`UdpSender`] of its own.
    tx: UdpSender,
}

impl UdpBackend {
    /// Binds `<ip>:port` (4791 for RoCEv2). Must be called inside a tokio runtime.
    pub fn bind(ip: IpAddr, port: u16) -> io::Result<Self> {
        let std_socket = std::net::UdpSocket::bind(SocketAddr::new(ip, port))?;
        Self::from_socket(Opened::new(std_socket, None)?)
    }

    /// Binds `[::]:port` on the interface `ifname` alone (`SO_BINDTODEVICE`, IPv6 only): one
    /// socket for every IPv6 address of the interface, its link-local one too, each send
    /// leaving from the transmit's source address (`IPV6_PKTINFO`). For a NIC whose GIDs are
    /// an interface's global and link-local addresses, as rxe's are. Another socket on that
    /// port and interface (another NIC on the same interface) makes it fail with
    /// `EADDRINUSE`. Must be called inside a tokio runtime.
    pub fn bind_interface(ifname: &str, ifindex: u32, port: u16) -> io::Result<Self> {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_only_v6(true)?;
        socket.bind_device(Some(ifname.as_bytes()))?;
        socket.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)).into())?;
        Self::from_socket(Opened::new(socket.into(), Some(ifindex))?)
    }

    /// Adds a second socket, IPv6 only, bound to `[ip%scope_id]:port` (this backend's port):
    /// for an IPv4 NIC whose GID 0 is its interface's link-local address `ip` (`scope_id`,
    /// the interface's index), as rxe's is. The address itself, not `[::]`, so that the
    /// interface's other IPv6 addresses stay free for other NICs. From then on the backend
    /// receives from both sockets, and a transmit leaves through the one of its source's
    /// family. Fails, leaving the backend as it was, with `EADDRINUSE` where another socket
    /// holds the port on that address or on the whole interface (an IPv6 NIC on it, another
    /// IPv4 NIC's link-local socket), or `EADDRNOTAVAIL` where the address is not (yet, during
    /// duplicate address detection) usable. Call it before the device takes the backend's
    /// sender and receiver, i.e. before `Device::spawn`; a second call replaces the link-local
    /// socket. Must be called inside a tokio runtime.
    pub fn bind_link_local(&mut self, ip: Ipv6Addr, scope_id: u32) -> io::Result<()> {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_only_v6(true)?;
        let port = self.local_addr().port();
        socket.bind(&SocketAddrV6::new(ip, port, 0, scope_id).into())?;
        self.add_link_local(socket.into(), scope_id)
    }

    /// Adds `socket`, bound to a link-local address of the interface `scope_id`.
    fn add_link_local(&mut self, socket: std::net::UdpSocket, scope_id: u32) -> io::Result<()> {
        let opened = Opened::new(socket, (scope_id != 0).then_some(scope_id))?;
        self.fds.link_local = Some(Registration::new(opened.fd)?);
        self.rx.sockets.link_local = Some(opened.rx);
        self.tx.sockets.link_local = Some(opened.tx);
        self.tx.gso_segments = self.tx.gso_segments.min(opened.gso_segments);
        Ok(())
    }

    /// A backend over sockets bound elsewhere (a shared NIC's agent binds them in the
    /// address's `SO_REUSEPORT` group, [`crate::share`]): `first` as [`UdpBackend::bind`] or
    /// [`UdpBackend::bind_interface`] binds it (with the interface's index for the latter), and
    /// the link-local one as [`UdpBackend::bind_link_local`] does. Must be called inside a tokio
    /// runtime.
    pub fn from_sockets(
        first: std::net::UdpSocket,
        first_ifindex: Option<u32>,
        link_local: Option<(std::net::UdpSocket, u32)>,
    ) -> io::Result<Self> {
        let mut backend = Self::from_socket(Opened::new(first, first_ifindex)?)?;
        if let Some((socket, scope_id)) = link_local {
            backend.add_link_local(socket, scope_id)?;
        }
        Ok(backend)
    }

    fn from_socket(opened: Opened) -> io::Result<Self> {
        Ok(Self {
            fds: Sockets::one(Registration::new(opened.fd)?),
            rx: UdpReceiver {
                sockets: Sockets::one(opened.rx),
            },
            tx: UdpSender {
                sockets: Sockets::one(opened.tx),
                gso_segments: opened.gso_segments,
                pieces: Vec::new(),
            },
        })
    }

    /// Sends every datagram with a system call of its own: no segmentation-offload batches.
    /// For links where a reader of packet sockets that does not cut batches (a capture on a
    /// veth) should see each datagram as a frame of its own.
    pub fn without_gso(mut self) -> Self {
        self.tx.gso_segments = 1;
        self
    }

    /// The address the first socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.rx.sockets.first.local
    }

    /// The address the link-local socket is bound to, if the backend has one
    /// ([`UdpBackend::bind_link_local`]).
    pub fn link_local_addr(&self) -> Option<SocketAddr> {
        self.rx.sockets.link_local.as_ref().map(|s| s.local)
    }
}

/// The readiness guards of the sockets that are readable.
type Readiness<'a> = Sockets<Option<AsyncFdReadyGuard<'a, std::net::UdpSocket>>>;

/// Waits until one of the registered sockets is readable (may have datagrams).
async fn readable(fds: &Sockets<Registration<std::net::UdpSocket>>) -> io::Result<Readiness<'_>> {
    std::future::poll_fn(|cx| {
        let ready = fds.try_map(|registration| match registration.fd() {
            Some(fd) => match fd.poll_read_ready(cx) {
                Poll::Ready(guard) => guard.map(Some),
                Poll::Pending => Ok(None),
            },
            None => Ok(None),
        })?;
        if ready.iter().any(Option::is_some) {
            Poll::Ready(Ok(ready))
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Clears the readiness of the sockets `ready` holds guards of: after a receive that drained
/// them all. The guards were taken before the receive, so a datagram that arrived after it
/// raised a new edge, which the next [`readable`] sees: nothing is missed.
fn clear(ready: Readiness<'_>) {
    for mut guard in ready.into_iter().flatten() {
        guard.clear_ready();
    }
}

impl Backend for UdpBackend {
    async fn recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<()> {
        let before = out.len();
        loop {
            let ready = readable(&self.fds).await?;
            if self.rx.try_recv(buf, out)? {
                // The sockets were drained (fewer datagrams than asked for, or none). Without
                // this the next turn's receive is a system call that can only fail with
                // EAGAIN.
                clear(ready);
            }
            if out.len() > before {
                return Ok(());
            }
        }
    }

    async fn when_readable<F>(&mut self, receive: F) -> io::Result<()>
    where
        F: FnOnce() -> io::Result<bool> + Send,
    {
        // As `recv`, with the receive made by `receive` through the device's `UdpReceiver`.
        let ready = readable(&self.fds).await?;
        if receive()? {
            clear(ready);
        }
        Ok(())
    }

    fn wake_on_datagrams(&mut self, wake: bool) -> io::Result<()> {
        for registration in self.fds.iter_mut() {
            registration.set(wake)?;
        }
        Ok(())
    }

    fn receiver(&mut self) -> Option<Box<dyn Receiver>> {
        match self.rx.try_clone() {
            Ok(rx) => Some(Box::new(rx)),
            Err(err) => {
                tracing::debug!(error = %err, "no second descriptor: the device's task receives");
                None
            }
        }
    }

    async fn send(&mut self, transmit: &Transmit, payload: &[u8]) -> io::Result<()> {
        self.tx
            .sendmsg(transmit, &[crate::backend::sys::Piece::of(payload)], None)
            .map(drop)
    }

    async fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        Sender::send_segments(&mut self.tx, transmit, payload, segment)
    }

    fn max_segments(&self) -> usize {
        self.tx.gso_segments
    }

    fn sender(&mut self) -> Option<Box<dyn Sender>> {
        match self.tx.try_clone() {
            Ok(tx) => Some(Box::new(tx)),
            Err(err) => {
                tracing::debug!(error = %err, "no second descriptor: the device's task sends");
                None
            }
        }
    }

    fn fixed_src_port(&self) -> Option<u16> {
        Some(self.local_addr().port())
    }

    fn recv_buffer_len(&self) -> usize {
        self.rx.buffer_len()
    }
}
