//! One socket opened for a [`UdpBackend`]: non-blocking, its buffers sized, zero UDP checksums
//! taken over IPv6, and its two halves.

use std::io;
use std::sync::Arc;

use quinn_udp::{RecvMeta, UdpSocketState};

use super::receiver::{BATCH, SocketReceiver};
use super::sender::{MAX_GSO_SEGMENTS, SocketSender};

#[cfg(doc)]
use super::UdpBackend;

/// One socket made ready for a [`UdpBackend`]: the descriptor to register with the reactor
/// (`backend::registration`), and its two halves.
pub(super) struct Opened {
    pub(super) fd: std::net::UdpSocket,
    pub(super) rx: SocketReceiver,
    pub(super) tx: SocketSender,
    /// Datagrams one segmentation-offload send on it may carry.
    pub(super) gso_segments: usize,
}

impl Opened {
    pub(super) fn new(std_socket: std::net::UdpSocket, ifindex: Option<u32>) -> io::Result<Self> {
        std_socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&std_socket).into())?;
        no_receive_timestamps(&std_socket);
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
        Ok(Self {
            fd: std_socket,
            rx,
            tx,
            gso_segments,
        })
    }
}

/// Bytes of socket buffer asked for in each direction.
pub(super) const SOCKET_BUFFER: usize = 8 << 20;

/// Lets an IPv6 socket take UDP datagrams whose checksum is 0 (`UDP_NO_CHECK6_RX`), which the
/// kernel otherwise drops: rxe sends RoCEv2 over IPv6 without a UDP checksum (its tunnel socket
/// has `use_udp6_tx_checksums` off, rxe_net.c `rxe_setup_udp_tunnel`), as IBA Annex A17.4.2
/// allows, and takes such datagrams itself; so does our raw backend.
fn accept_zero_checksums(socket: &std::net::UdpSocket) {
    if let Err(err) = crate::backend::sys::set_udp_no_check6_rx(socket) {
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
/// Takes back the `SO_TIMESTAMPNS` that `UdpSocketState::new` sets: nothing here reads a
/// datagram's arrival time, and while one socket of the host asks for it the kernel stamps
/// every packet it receives (`net_enable_timestamp`) and each receive carries the stamp up.
fn no_receive_timestamps(socket: &std::net::UdpSocket) {
    use nix::sys::socket::{setsockopt, sockopt};
    if let Err(err) = setsockopt(socket, sockopt::ReceiveTimestampns, &false) {
        tracing::debug!(error = %err, "receive timestamps not turned off");
    }
}

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
pub(super) fn receive_cap_warning(reported: usize, want: usize) -> Option<String> {
    let got = reported / 2;
    (got < want).then(|| {
        format!(
            "UDP receive buffer capped at {} KiB by net.core.rmem_max: datagrams beyond it are \
             dropped and retransmitted; `sysctl -w net.core.rmem_max={want}` lifts the cap",
            got / 1024
        )
    })
}
