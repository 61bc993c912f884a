//! How a device reaches the network: something that receives RoCEv2 UDP payloads with the
//! metadata the engine needs, and sends the engine's transmits.

use std::io;
use std::net::SocketAddr;

use roce_core::{Ecn, Transmit};

pub mod packet_socket;
pub mod raw;
pub mod udp;

/// One datagram received into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// The sender.
    pub src: SocketAddr,
    /// Our address it was sent to.
    pub dst: SocketAddr,
    /// ECN bits of its IP header, where the backend sees them.
    pub ecn: Ecn,
    /// The IPv4 identification, where the backend sees it (raw sockets; a UDP socket does not).
    pub ip_id: Option<u16>,
    /// Where its payload starts in the buffer.
    pub offset: usize,
    /// Its payload's length.
    pub len: usize,
}

/// A way onto the network.
pub trait Backend: Send + 'static {
    /// Waits for datagrams and receives at least one into `buf`, appending to `out`. Must be
    /// cancel-safe: the driver drops it when another event comes first.
    fn recv(
        &mut self,
        buf: &mut [u8],
        out: &mut Vec<Received>,
    ) -> impl Future<Output = io::Result<()>> + Send;

    /// Sends one transmit whose payload is `payload`.
    fn send(
        &mut self,
        transmit: &Transmit,
        payload: &[u8],
    ) -> impl Future<Output = io::Result<()>> + Send;

    /// The UDP source port this backend sends from, if it cannot choose per packet.
    fn fixed_src_port(&self) -> Option<u16>;

    /// A size for the receive buffer (large enough for what one `recv` can bring in).
    fn recv_buffer_len(&self) -> usize;
}
