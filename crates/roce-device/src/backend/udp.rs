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

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::Arc;
use std::task::Poll;

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd};

use nix::poll::{PollFd, PollFlags, poll};
use nix::sys::socket::{ControlMessage, MsgFlags, SockaddrStorage, sendmsg};
use quinn_udp::{EcnCodepoint, RecvMeta, UdpSocketState};
use roce_core::{Ecn, Transmit};
use tokio::io::unix::{AsyncFd, AsyncFdReadyGuard};

use super::{Backend, Received, Receiver, Sender};

/// A UDP socket on `<ip>:4791`, and maybe a second one on an IPv6 link-local address
/// ([`UdpBackend::bind_link_local`]).
#[derive(Debug)]
pub struct UdpBackend {
    /// The sockets, registered with the runtime's reactor as `AsyncFd`s rather than tokio
    /// `UdpSocket`s, for the readiness guard's `clear_ready` (see `recv`).
    fds: Sockets<AsyncFd<std::net::UdpSocket>>,
    /// Its own receives, until the device takes a [`UdpReceiver`] of its own.
    rx: UdpReceiver,
    /// Its own sends, until the device takes a [`UdpSender`] of its own.
    tx: UdpSender,
}

/// One thing for each socket of a [`UdpBackend`]: the first socket's (bound by
/// [`UdpBackend::bind`] or [`UdpBackend::bind_interface`]), then the link-local one's, if
/// the backend has one.
#[derive(Debug)]
struct Sockets<T> {
    first: T,
    link_local: Option<T>,
}

impl<T> Sockets<T> {
    fn one(first: T) -> Self {
        Self {
            first,
            link_local: None,
        }
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        std::iter::once(&self.first).chain(&self.link_local)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        std::iter::once(&mut self.first).chain(&mut self.link_local)
    }

    fn into_iter(self) -> impl Iterator<Item = T> {
        std::iter::once(self.first).chain(self.link_local)
    }

    fn try_map<'a, U>(
        &'a self,
        mut f: impl FnMut(&'a T) -> io::Result<U>,
    ) -> io::Result<Sockets<U>> {
        Ok(Sockets {
            first: f(&self.first)?,
            link_local: self.link_local.as_ref().map(f).transpose()?,
        })
    }

    fn len(&self) -> usize {
        1 + usize::from(self.link_local.is_some())
    }
}

/// The receiving half of a [`UdpBackend`]: other descriptors of its sockets, non-blocking,
/// which any thread may use (see [`Backend::receiver`]).
#[derive(Debug)]
pub struct UdpReceiver {
    sockets: Sockets<SocketReceiver>,
}

/// What receives from one socket.
#[derive(Debug)]
struct SocketReceiver {
    socket: std::net::UdpSocket,
    state: Arc<UdpSocketState>,
    local: SocketAddr,
    meta: Vec<RecvMeta>,
}

/// The sending half of a [`UdpBackend`]: other descriptors of its sockets, non-blocking,
/// which any thread may use (see [`Backend::sender`]). A transmit leaves through the socket of
/// its source address's family.
#[derive(Debug)]
pub struct UdpSender {
    sockets: Sockets<SocketSender>,
    /// Datagrams one send may carry (1 when the kernel has no UDP segmentation offload or
    /// refused it once).
    gso_segments: usize,
}

/// What sends through one socket.
#[derive(Debug)]
struct SocketSender {
    socket: std::net::UdpSocket,
    /// For a socket bound to `[::]` on one interface ([`UdpBackend::bind_interface`]), or to
    /// one of its link-local addresses ([`UdpBackend::bind_link_local`]): that interface's
    /// index, given with each send's source address (`IPV6_PKTINFO`) and as the scope of a
    /// link-local destination.
    ifindex: Option<u32>,
}

/// One socket made ready for a [`UdpBackend`]: registered with the reactor, and its two halves.
struct Opened {
    fd: AsyncFd<std::net::UdpSocket>,
    rx: SocketReceiver,
    tx: SocketSender,
    /// Datagrams one segmentation-offload send on it may carry.
    gso_segments: usize,
}

impl Opened {
    fn new(std_socket: std::net::UdpSocket, ifindex: Option<u32>) -> io::Result<Self> {
        std_socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&std_socket).into())?;
        size_buffers(&std_socket);
        let local = std_socket.local_addr()?;
        if local.is_ipv6() {
            accept_zero_checksums(&std_socket);
        }
        let tx = SocketSender {
            socket: std_socket.try_clone()?,
            ifindex,
        };
        let gso_segments = state.max_gso_segments().clamp(1, MAX_GSO_SEGMENTS);
        let rx = SocketReceiver {
            socket: std_socket.try_clone()?,
            state: Arc::new(state),
            local,
            meta: vec![RecvMeta::default(); BATCH],
        };
        let fd = super::sys::register_udp(std_socket)?;
        Ok(Self {
            fd,
            rx,
            tx,
            gso_segments,
        })
    }
}

impl UdpBackend {
    /// Binds `<ip>:port` (4791 for RoCEv2). Must be called inside a tokio runtime.
    pub fn bind(ip: IpAddr, port: u16) -> io::Result<Self> {
        let std_socket = std::net::UdpSocket::bind(SocketAddr::new(ip, port))?;
        Ok(Self::from_socket(Opened::new(std_socket, None)?))
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
        Ok(Self::from_socket(Opened::new(
            socket.into(),
            Some(ifindex),
        )?))
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
        let opened = Opened::new(socket.into(), (scope_id != 0).then_some(scope_id))?;
        self.fds.link_local = Some(opened.fd);
        self.rx.sockets.link_local = Some(opened.rx);
        self.tx.sockets.link_local = Some(opened.tx);
        self.tx.gso_segments = self.tx.gso_segments.min(opened.gso_segments);
        Ok(())
    }

    fn from_socket(opened: Opened) -> Self {
        Self {
            fds: Sockets::one(opened.fd),
            rx: UdpReceiver {
                sockets: Sockets::one(opened.rx),
            },
            tx: UdpSender {
                sockets: Sockets::one(opened.tx),
                gso_segments: opened.gso_segments,
            },
        }
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

/// Waits until one of the sockets is readable (may have datagrams).
async fn readable(fds: &Sockets<AsyncFd<std::net::UdpSocket>>) -> io::Result<Readiness<'_>> {
    std::future::poll_fn(|cx| {
        let ready = fds.try_map(|fd| match fd.poll_read_ready(cx) {
            Poll::Ready(guard) => guard.map(Some),
            Poll::Pending => Ok(None),
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
        self.tx.sendmsg(transmit, payload, None).map(drop)
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

impl UdpReceiver {
    /// Another receiver on the same sockets.
    fn try_clone(&self) -> io::Result<Self> {
        let sockets = self.sockets.try_map(|s| {
            Ok(SocketReceiver {
                socket: s.socket.try_clone()?,
                state: s.state.clone(),
                local: s.local,
                meta: vec![RecvMeta::default(); BATCH],
            })
        })?;
        Ok(Self { sockets })
    }
}

impl Receiver for UdpReceiver {
    fn try_recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<bool> {
        // Each socket its share of the buffer; drained when every socket is.
        let share = (buf.len() / self.sockets.len()).max(1);
        let mut drained = true;
        for (index, (socket, part)) in self
            .sockets
            .iter_mut()
            .zip(buf.chunks_mut(share))
            .enumerate()
        {
            drained &= socket.try_recv(part, index * share, out)?;
        }
        Ok(drained)
    }

    fn buffer_len(&self) -> usize {
        self.sockets
            .iter()
            .map(SocketReceiver::buffer_len)
            .max()
            .unwrap_or(0)
            * self.sockets.len()
    }
}

impl SocketReceiver {
    /// [`Receiver::try_recv`] from this socket into `buf`, which starts `base` bytes into the
    /// caller's buffer.
    fn try_recv(
        &mut self,
        buf: &mut [u8],
        base: usize,
        out: &mut Vec<Received>,
    ) -> io::Result<bool> {
        let chunk = buf.len() / BATCH;
        // On the stack: a receive allocates nothing.
        let mut chunks = buf.chunks_mut(chunk);
        let mut slices: [IoSliceMut<'_>; BATCH] =
            std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
        let count = match self
            .state
            .recv((&self.socket).into(), &mut slices, &mut self.meta)
        {
            Ok(count) => count,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(err) => return Err(err),
        };
        for (index, meta) in self.meta.iter().take(count).enumerate() {
            // With GRO one buffer holds several datagrams of `stride` bytes each.
            let stride = meta.stride.max(1);
            let mut start = 0;
            let mut segment = 0u16;
            while start < meta.len {
                let len = stride.min(meta.len - start);
                out.push(Received {
                    src: meta.addr,
                    dst: SocketAddr::new(meta.dst_ip.unwrap_or(self.local.ip()), self.local.port()),
                    ecn: ecn_from(meta.ecn),
                    ip_id: None,
                    segment,
                    offset: base + index * chunk + start,
                    len,
                });
                start += len;
                segment = segment.wrapping_add(1);
            }
        }
        Ok(count < BATCH)
    }

    fn buffer_len(&self) -> usize {
        // Each slot must hold a whole GRO batch of the largest datagrams a NIC sends, or the
        // kernel truncates the batch and its last datagrams are lost.
        BATCH * self.state.gro_segments().max(1) * roce_core::MAX_DATAGRAM
    }
}

impl Sender for UdpSender {
    fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        if payload.len() <= segment || self.gso_segments > 1 {
            let gso = (payload.len() > segment).then_some(segment);
            match self.sendmsg(transmit, payload, gso) {
                Ok(_) => return Ok(()),
                // The route's device cannot take the batch (EIO from a device without checksum
                // offload, as quinn-udp handles it): send datagrams one by one from now on.
                Err(err) if gso.is_some() && err.raw_os_error() == Some(nix::libc::EIO) => {
                    tracing::info!(error = %err, "UDP segmentation offload refused; sending datagrams one by one");
                    self.gso_segments = 1;
                }
                Err(err) => return Err(err),
            }
        }
        for (index, datagram) in payload.chunks_mut(segment.max(1)).enumerate() {
            if index > 0 {
                super::reseal(transmit, datagram, 0);
            }
            self.sendmsg(transmit, datagram, None)?;
        }
        Ok(())
    }

    fn max_segments(&self) -> usize {
        self.gso_segments
    }
}

impl UdpSender {
    /// Another sender on the same sockets.
    fn try_clone(&self) -> io::Result<Self> {
        let sockets = self.sockets.try_map(|s| {
            Ok(SocketSender {
                socket: s.socket.try_clone()?,
                ifindex: s.ifindex,
            })
        })?;
        Ok(Self {
            sockets,
            gso_segments: self.gso_segments,
        })
    }

    /// [`SocketSender::sendmsg`] through the socket of the transmit's source family: the
    /// link-local socket (IPv6) for an IPv6 source of an IPv4 NIC, else the first.
    fn sendmsg(
        &self,
        transmit: &Transmit,
        payload: &[u8],
        gso: Option<usize>,
    ) -> io::Result<usize> {
        match &self.sockets.link_local {
            Some(link_local) if transmit.src.is_ipv6() => link_local,
            _ => &self.sockets.first,
        }
        .sendmsg(transmit, payload, gso)
    }
}

impl SocketSender {
    /// One `sendmsg` of `payload` to the transmit's destination, with its DSCP and ECN as the
    /// TOS (traffic class) and, with `gso`, cut by the kernel into datagrams of that many bytes.
    /// A full send buffer is waited out with `poll`, a few times [`SEND_WAIT_MS`] at most;
    /// then the send fails (the packets are lost, and the transport recovers).
    fn sendmsg(
        &self,
        transmit: &Transmit,
        payload: &[u8],
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
            pktinfo = Some(nix::libc::in6_pktinfo {
                ipi6_addr: nix::libc::in6_addr {
                    s6_addr: src.octets(),
                },
                ipi6_ifindex: ifindex,
            });
        }
        let address = SockaddrStorage::from(dst);
        let mut cmsgs = [
            ControlMessage::Ipv4Tos(&tos),
            ControlMessage::Ipv4Tos(&tos),
            ControlMessage::Ipv4Tos(&tos),
        ];
        if transmit.dst.is_ipv6() {
            cmsgs[0] = ControlMessage::Ipv6TClass(&tclass);
        }
        let mut count = 1;
        if let Some(size) = &segment {
            cmsgs[count] = ControlMessage::UdpGsoSegments(size);
            count += 1;
        }
        if let Some(info) = &pktinfo {
            cmsgs[count] = ControlMessage::Ipv6PacketInfo(info);
            count += 1;
        }
        let fd = self.socket.as_raw_fd();
        let mut waits = 0;
        loop {
            match sendmsg(
                fd,
                &[IoSlice::new(payload)],
                &cmsgs[..count],
                MsgFlags::empty(),
                Some(&address),
            ) {
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

/// The interface that holds an address, and its IPv6 link-local address if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name (`veth0`).
    pub name: String,
    /// Its index (the scope of its link-local addresses).
    pub index: u32,
    /// Its first IPv6 link-local address, as rxe's GID 0 is the netdev's (`lo` has none).
    pub link_local: Option<Ipv6Addr>,
}

/// The interface of this network namespace that holds `ip`, if one does.
pub fn interface_of(ip: IpAddr) -> Option<Interface> {
    let addrs: Vec<_> = nix::ifaddrs::getifaddrs().ok()?.collect();
    let addr_of = |a: &nix::ifaddrs::InterfaceAddress| -> Option<IpAddr> {
        let sa = a.address.as_ref()?;
        if let Some(v4) = sa.as_sockaddr_in() {
            return Some(IpAddr::V4(v4.ip()));
        }
        sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
    };
    let name = addrs
        .iter()
        .find(|a| addr_of(a) == Some(ip))?
        .interface_name
        .clone();
    let index = nix::net::if_::if_nametoindex(name.as_str()).ok()?;
    let link_local =
        addrs
            .iter()
            .filter(|a| a.interface_name == name)
            .find_map(|a| match addr_of(a) {
                Some(IpAddr::V6(v6)) if v6.is_unicast_link_local() => Some(v6),
                _ => None,
            });
    Some(Interface {
        name,
        index,
        link_local,
    })
}

/// A send that finds the socket's buffer full waits for room this many times at most, each
/// wait at most [`SEND_WAIT_MS`] milliseconds.
const SEND_WAITS: u32 = 10;
const SEND_WAIT_MS: u16 = 10;

fn ecn_from(ecn: Option<EcnCodepoint>) -> Ecn {
    match ecn {
        None => Ecn::NotEct,
        Some(EcnCodepoint::Ect0) => Ecn::Ect0,
        Some(EcnCodepoint::Ect1) => Ecn::Ect1,
        Some(EcnCodepoint::Ce) => Ecn::Ce,
    }
}

/// Bytes of socket buffer asked for in each direction.
const SOCKET_BUFFER: usize = 8 << 20;

/// Lets an IPv6 socket take UDP datagrams whose checksum is 0 (`UDP_NO_CHECK6_RX`), which the
/// kernel otherwise drops: rxe sends RoCEv2 over IPv6 without a UDP checksum (its tunnel socket
/// has `use_udp6_tx_checksums` off, rxe_net.c `rxe_setup_udp_tunnel`), as IBA Annex A17.4.2
/// allows, and takes such datagrams itself; so does our raw backend.
fn accept_zero_checksums(socket: &std::net::UdpSocket) {
    if let Err(err) = super::sys::set_udp_no_check6_rx(socket) {
        tracing::debug!(error = %err, "UDP_NO_CHECK6_RX not set: IPv6 datagrams without a checksum will be dropped");
    }
}

/// Gives the socket [`SOCKET_BUFFER`] bytes each way. A burst of READ responses, or the send
/// windows of a few QPs (16 QPs with a 64 KiB message each is 256 datagrams of 4 KiB), is a
/// few hundred datagrams; the default receive buffer (rmem_default, ~208 KiB) holds a few
/// dozen of them and the kernel drops the rest (RcvbufErrors in /proc/net/snmp), which costs
/// a retransmission timeout each and, at the end of a run whose peer has gone, a failed work
/// request. `SO_RCVBUFFORCE` passes net.core.rmem_max with CAP_NET_ADMIN; without it
/// `SO_RCVBUF` is capped at rmem_max (wmem_max for sends, where a full buffer only makes the
/// sender wait), and a receive cap below what we asked for is said once, with the sysctl that lifts
/// it.
fn size_buffers(socket: &std::net::UdpSocket) {
    use nix::sys::socket::{getsockopt, setsockopt, sockopt};
    /// The cap is said once per process, not once per NIC.
    static CAPPED: std::sync::Once = std::sync::Once::new();
    let want = SOCKET_BUFFER;
    if setsockopt(socket, sockopt::SndBufForce, &want)
        .or_else(|_| setsockopt(socket, sockopt::SndBuf, &want))
        .is_err()
    {
        tracing::debug!("send buffer size not set");
    }
    let recv = setsockopt(socket, sockopt::RcvBufForce, &want)
        .or_else(|_| setsockopt(socket, sockopt::RcvBuf, &want))
        .and_then(|()| getsockopt(socket, sockopt::RcvBuf));
    match recv {
        Ok(reported) => {
            if let Some(warning) = receive_cap_warning(reported, want) {
                CAPPED.call_once(|| tracing::warn!("{warning}"));
            }
        }
        Err(err) => tracing::debug!(error = %err, "receive buffer size not set"),
    }
}

/// What to say when the kernel gave the socket a smaller receive buffer than `want`:
/// `reported` is what `SO_RCVBUF` reads back, twice the size set (socket(7): the other half
/// is the kernel's bookkeeping). `None` when it gave at least `want`.
fn receive_cap_warning(reported: usize, want: usize) -> Option<String> {
    let got = reported / 2;
    (got < want).then(|| {
        format!(
            "UDP receive buffer capped at {} KiB by net.core.rmem_max: datagrams beyond it are \
             dropped and retransmitted; `sysctl -w net.core.rmem_max={want}` lifts the cap",
            got / 1024
        )
    })
}

/// The most datagrams one segmentation-offload send carries (Linux's `UDP_MAX_SEGMENTS` is 64
/// before 6.9, 128 since).
pub const MAX_GSO_SEGMENTS: usize = 64;

/// Datagrams (or GRO batches) taken from the socket per system call.
const BATCH: usize = 8;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A buffer below what was asked for is said, with its size and the sysctl that lifts
    /// the cap; one at least as large is not (the kernel reads back twice the size set).
    #[test]
    fn a_receive_buffer_below_the_ask_is_said_with_the_sysctl_that_lifts_it() {
        let want = SOCKET_BUFFER;
        // rmem_max's usual default, 208 KiB, read back doubled.
        let warning = receive_cap_warning(2 * 212_992, want).expect("capped");
        assert!(warning.contains("capped at 208 KiB"), "{warning}");
        assert!(
            warning.contains("sysctl -w net.core.rmem_max=8388608"),
            "{warning}"
        );
        assert_eq!(receive_cap_warning(2 * want, want), None);
        assert!(receive_cap_warning(2 * want - 2, want).is_some());
    }

    /// A receive that drains the socket clears its readiness without a failing system call;
    /// a datagram that arrives afterwards still wakes the next receive.
    #[tokio::test]
    async fn a_datagram_after_a_drained_receive_is_received() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut backend = UdpBackend::bind(ip, 0).unwrap();
        let to = backend.local_addr();
        let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
        let mut buf = vec![0; backend.recv_buffer_len()];
        let mut out = Vec::new();
        for round in 0..3u8 {
            peer.send_to(&[round; 20], to).unwrap();
            tokio::time::timeout(Duration::from_secs(5), backend.recv(&mut buf, &mut out))
                .await
                .expect("the datagram was missed")
                .unwrap();
            assert_eq!(out.len(), 1, "round {round}");
            let got = &out[0];
            assert_eq!(&buf[got.offset..got.offset + got.len], &[round; 20]);
            out.clear();
        }
        // Nothing more was sent: the next receive waits.
        let idle =
            tokio::time::timeout(Duration::from_millis(50), backend.recv(&mut buf, &mut out));
        assert!(idle.await.is_err() && out.is_empty());
    }

    /// The backend's sender for every thread sends from the backend's own socket (its port,
    /// which the ICRCs cover), a batch cut into datagrams by the kernel or one by one.
    #[tokio::test]
    async fn the_sender_sends_from_the_backends_socket() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut backend = UdpBackend::bind(ip, 0).unwrap();
        let from = backend.local_addr();
        let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut sender = backend.sender().expect("a UDP backend hands out a sender");
        let transmit = Transmit {
            src: ip,
            src_port: from.port(),
            dst: peer.local_addr().unwrap(),
            ecn: Ecn::NotEct,
            dscp: 0,
            ttl: 64,
            len: 0,
        };
        // Three datagrams of 40 bytes and a last one of 10, in one call, from another thread.
        let mut payload: Vec<u8> = (0..130u8).collect();
        std::thread::spawn(move || sender.send_segments(&transmit, &mut payload, 40))
            .join()
            .unwrap()
            .unwrap();
        let mut got = Vec::new();
        for _ in 0..4 {
            let mut buf = [0u8; 64];
            let (len, src) = peer.recv_from(&mut buf).unwrap();
            assert_eq!(src, from, "not the backend's socket");
            got.push(len);
        }
        // Cut at 40 bytes; the ICRC of all but the first is sealed again for ID 0 when they go
        // one by one, so only the lengths are compared.
        assert_eq!(got, [40, 40, 40, 10]);
    }

    /// The backend's receiver for every thread takes what waits without waiting, and says
    /// when it drained the socket, also when nothing was there.
    #[tokio::test]
    async fn the_receiver_takes_what_waits_without_waiting() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut backend = UdpBackend::bind(ip, 0).unwrap();
        let to = backend.local_addr();
        let mut receiver = backend
            .receiver()
            .expect("a UDP backend hands out a receiver");
        let mut buf = vec![0; receiver.buffer_len()];
        let mut out = Vec::new();
        assert!(
            receiver.try_recv(&mut buf, &mut out).unwrap(),
            "nothing: drained"
        );
        assert!(out.is_empty());
        let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
        peer.send_to(&[1; 20], to).unwrap();
        peer.send_to(&[2; 30], to).unwrap();
        // Loopback delivers within `send_to`; a slow machine gets a few tries.
        for _ in 0..100 {
            assert!(
                receiver.try_recv(&mut buf, &mut out).unwrap(),
                "fewer than a batch"
            );
            if out.len() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let got: Vec<_> = out.iter().map(|r| (r.src, buf[r.offset], r.len)).collect();
        let from = peer.local_addr().unwrap();
        assert_eq!(got, [(from, 1, 20), (from, 2, 30)]);
    }

    /// An IPv4 backend on 127.0.0.1 with a second socket on ::1 (standing in for a link-local
    /// address: the same bind, without a scope), on the same ephemeral port; `None` where the
    /// host has no IPv6 loopback.
    fn two_sockets() -> Option<UdpBackend> {
        if std::net::UdpSocket::bind("[::1]:0").is_err() {
            crate::backend::testing::skipped("no IPv6 loopback address on this host");
            return None;
        }
        let mut backend = UdpBackend::bind("127.0.0.1".parse().unwrap(), 0).unwrap();
        backend.bind_link_local(Ipv6Addr::LOCALHOST, 0).unwrap();
        let port = backend.local_addr().port();
        assert_eq!(
            backend.link_local_addr(),
            Some(SocketAddr::from((Ipv6Addr::LOCALHOST, port)))
        );
        Some(backend)
    }

    /// With two sockets, the backend's own receive and the receiver it hands out both take
    /// datagrams from either socket, each with the address it came to, at its own place in the
    /// buffer; a socket with nothing waiting does not hold up the other.
    #[tokio::test]
    async fn both_sockets_are_received_from() {
        let Some(mut backend) = two_sockets() else {
            return;
        };
        let v4 = backend.local_addr();
        let v6 = backend.link_local_addr().unwrap();
        let peer4 = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let peer6 = std::net::UdpSocket::bind("[::1]:0").unwrap();
        let mut buf = vec![0; backend.recv_buffer_len()];
        let mut out = Vec::new();
        // The backend's own receive: the IPv6 socket alone has something, then the IPv4 one.
        for (peer, to, byte) in [(&peer6, v6, 6u8), (&peer4, v4, 4)] {
            peer.send_to(&[byte; 20], to).unwrap();
            tokio::time::timeout(Duration::from_secs(5), backend.recv(&mut buf, &mut out))
                .await
                .expect("the datagram was missed")
                .unwrap();
            assert_eq!(out.len(), 1, "to {to}");
            let got = out.pop().unwrap();
            assert_eq!((got.src, got.dst), (peer.local_addr().unwrap(), to));
            assert_eq!(&buf[got.offset..got.offset + got.len], &[byte; 20]);
        }
        // The receiver: one datagram to each socket, both taken, neither overwriting the other.
        let mut receiver = backend.receiver().unwrap();
        assert_eq!(receiver.buffer_len(), backend.recv_buffer_len());
        peer4.send_to(&[44; 30], v4).unwrap();
        peer6.send_to(&[66; 40], v6).unwrap();
        for _ in 0..100 {
            assert!(receiver.try_recv(&mut buf, &mut out).unwrap(), "drained");
            if out.len() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut got: Vec<_> = out
            .iter()
            .map(|r| (r.dst, buf[r.offset], buf[r.offset + r.len - 1], r.len))
            .collect();
        got.sort();
        assert_eq!(got, [(v4, 44, 44, 30), (v6, 66, 66, 40)]);
    }

    /// With two sockets, a transmit leaves through the socket of its source's family.
    #[tokio::test]
    async fn a_transmit_leaves_through_the_socket_of_its_source_family() {
        let Some(mut backend) = two_sockets() else {
            return;
        };
        let mut sender = backend.sender().unwrap();
        for from in [backend.link_local_addr().unwrap(), backend.local_addr()] {
            let peer = std::net::UdpSocket::bind(SocketAddr::new(from.ip(), 0)).unwrap();
            peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let transmit = Transmit {
                src: from.ip(),
                src_port: from.port(),
                dst: peer.local_addr().unwrap(),
                ecn: Ecn::NotEct,
                dscp: 0,
                ttl: 64,
                len: 0,
            };
            sender.send_segments(&transmit, &mut [7; 24], 24).unwrap();
            backend.send(&transmit, &[8; 12]).await.unwrap();
            for len in [24, 12] {
                let mut buf = [0u8; 64];
                let (got, src) = peer.recv_from(&mut buf).unwrap();
                assert_eq!((got, src), (len, from));
            }
        }
    }

    /// A link-local socket whose address and port another socket holds is refused with
    /// `EADDRINUSE`, and the backend stays as it was: one socket, which still receives.
    #[tokio::test]
    async fn a_link_local_socket_in_use_leaves_the_backend_as_it_was() {
        let Ok(taken) = std::net::UdpSocket::bind("[::1]:0") else {
            crate::backend::testing::skipped("no IPv6 loopback address on this host");
            return;
        };
        let port = taken.local_addr().unwrap().port();
        let Ok(mut backend) = UdpBackend::bind("127.0.0.1".parse().unwrap(), port) else {
            crate::backend::testing::skipped("the IPv6 loopback's port is taken on 127.0.0.1");
            return;
        };
        let err = backend.bind_link_local(Ipv6Addr::LOCALHOST, 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse, "{err}");
        assert_eq!(backend.link_local_addr(), None);
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.send_to(&[1; 10], backend.local_addr()).unwrap();
        let mut buf = vec![0; backend.recv_buffer_len()];
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), backend.recv(&mut buf, &mut out))
            .await
            .expect("the datagram was missed")
            .unwrap();
        assert_eq!(out.len(), 1);
    }
}
