//! The unprivileged backend: one UDP socket bound to `<ip>:4791`. quinn-udp receives (ECN from
//! IP_RECVTOS cmsgs, GRO) and sets DF (IP_PMTUDISC_PROBE); sends are plain `sendto`s with the
//! socket's TOS option set to the packet's DSCP and ECN.
//!
//! What this backend can and cannot do, and so what a NIC on it does:
//! - every packet leaves from source port 4791 (one socket), so the NIC runs with
//!   `SrcPortPolicy::Fixed(4791)` and its ICRCs cover that port;
//! - Linux gives DF datagrams sent on an unconnected UDP socket the IPv4 ID 0, which is what the
//!   engine's ICRC assumes (checked by a test that captures our own packets);
//! - on receive the IPv4 ID is not visible, so the ICRC of a packet from a peer that uses other
//!   IDs (rxe counts them up) cannot be checked in full: the NIC checks it as if the ID were 0 and,
//!   when that fails, accepts the packet and counts it under `rx_icrc_unverifiable`. The raw
//!   backend sees whole frames and checks every ICRC.
//! - DSCP and ECN go out as the socket's TOS option, set when a packet asks for another value.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};

use quinn_udp::{EcnCodepoint, RecvMeta, UdpSocketState};
use roce_core::{Ecn, Transmit};
use tokio::io::Interest;
use tokio::net::UdpSocket;

use super::{Backend, Received};

/// A UDP socket on `<ip>:4791`.
#[derive(Debug)]
pub struct UdpBackend {
    socket: UdpSocket,
    state: UdpSocketState,
    local: SocketAddr,
    meta: Vec<RecvMeta>,
    /// The TOS byte the socket sends with now.
    tos: Option<u8>,
}

impl UdpBackend {
    /// Binds `<ip>:port` (4791 for RoCEv2). Must be called inside a tokio runtime.
    pub fn bind(ip: IpAddr, port: u16) -> io::Result<Self> {
        let std_socket = std::net::UdpSocket::bind(SocketAddr::new(ip, port))?;
        std_socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&std_socket).into())?;
        // A burst of READ responses or a window of requests is a few hundred datagrams; the
        // default receive buffer (rmem_default, ~208 KiB) holds about 90 of them and the kernel
        // drops the rest (RcvbufErrors in /proc/net/snmp). Ask for more; the kernel caps it at
        // net.core.rmem_max / wmem_max.
        for result in [
            state.set_recv_buffer_size((&std_socket).into(), SOCKET_BUFFER),
            state.set_send_buffer_size((&std_socket).into(), SOCKET_BUFFER),
        ] {
            if let Err(err) = result {
                tracing::debug!(error = %err, "socket buffer size not set");
            }
        }
        let socket = UdpSocket::from_std(std_socket)?;
        let local = socket.local_addr()?;
        let meta = vec![RecvMeta::default(); BATCH];
        Ok(Self {
            socket,
            state,
            local,
            meta,
            tos: None,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Backend for UdpBackend {
    async fn recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<()> {
        let chunk = buf.len() / BATCH;
        loop {
            self.socket.readable().await?;
            let mut slices: Vec<IoSliceMut<'_>> = buf
                .chunks_mut(chunk)
                .take(BATCH)
                .map(IoSliceMut::new)
                .collect();
            let result = self.socket.try_io(Interest::READABLE, || {
                self.state
                    .recv((&self.socket).into(), &mut slices, &mut self.meta)
            });
            let count = match result {
                Ok(count) => count,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(err) => return Err(err),
            };
            for (index, meta) in self.meta.iter().take(count).enumerate() {
                // With GRO one buffer holds several datagrams of `stride` bytes each.
                let stride = meta.stride.max(1);
                let mut start = 0;
                while start < meta.len {
                    let len = stride.min(meta.len - start);
                    out.push(Received {
                        src: meta.addr,
                        dst: SocketAddr::new(
                            meta.dst_ip.unwrap_or(self.local.ip()),
                            self.local.port(),
                        ),
                        ecn: ecn_from(meta.ecn),
                        ip_id: None,
                        offset: index * chunk + start,
                        len,
                    });
                    start += len;
                }
            }
            return Ok(());
        }
    }

    async fn send(&mut self, transmit: &Transmit, payload: &[u8]) -> io::Result<()> {
        // The whole TOS byte (DSCP and ECN) is a socket option, changed only when a packet asks
        // for another one (a QP's packets share theirs).
        let tos = (transmit.dscp << 2) | transmit.ecn.bits();
        if self.tos != Some(tos) {
            let socket = socket2::SockRef::from(&self.socket);
            match transmit.dst {
                SocketAddr::V4(_) => socket.set_tos_v4(u32::from(tos))?,
                SocketAddr::V6(_) => socket.set_tclass_v6(u32::from(tos))?,
            }
            self.tos = Some(tos);
        }
        // A plain sendto: quinn-udp's send always attaches an IP_TOS cmsg holding only the
        // ECN bits, which would override the DSCP.
        self.socket.send_to(payload, transmit.dst).await.map(drop)
    }

    fn fixed_src_port(&self) -> Option<u16> {
        Some(self.local.port())
    }

    fn recv_buffer_len(&self) -> usize {
        // Each slot must hold a whole GRO batch of the largest datagrams a NIC sends, or the
        // kernel truncates the batch and its last datagrams are lost.
        BATCH * self.state.gro_segments().max(1) * roce_core::MAX_DATAGRAM
    }
}

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

/// Datagrams (or GRO batches) taken from the socket per system call.
const BATCH: usize = 8;
