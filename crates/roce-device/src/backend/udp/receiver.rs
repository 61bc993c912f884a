//! The receiving half of a [`UdpBackend`]: quinn-udp receives (GRO batches cut into their
//! datagrams, ECN from the TOS) from each of its sockets.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::Arc;

use quinn_udp::{EcnCodepoint, RecvMeta, UdpSocketState};
use roce_core::Ecn;

use super::sockets::Sockets;
use crate::backend::{Received, Receiver};

#[cfg(doc)]
use super::UdpBackend;
#[cfg(doc)]
use crate::backend::Backend;

/// The receiving half of a [`UdpBackend`]: other descriptors of its sockets, non-blocking,
/// which any thread may use (see [`Backend::receiver`]).
#[derive(Debug)]
pub struct UdpReceiver {
    pub(super) sockets: Sockets<SocketReceiver>,
}

/// What receives from one socket.
#[derive(Debug)]
pub(super) struct SocketReceiver {
    pub(super) socket: std::net::UdpSocket,
    pub(super) state: Arc<UdpSocketState>,
    pub(super) local: SocketAddr,
    pub(super) meta: Vec<RecvMeta>,
}

impl UdpReceiver {
    /// Another receiver on the same sockets.
    pub(super) fn try_clone(&self) -> io::Result<Self> {
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

fn ecn_from(ecn: Option<EcnCodepoint>) -> Ecn {
    match ecn {
        None => Ecn::NotEct,
        Some(EcnCodepoint::Ect0) => Ecn::Ect0,
        Some(EcnCodepoint::Ect1) => Ecn::Ect1,
        Some(EcnCodepoint::Ce) => Ecn::Ce,
    }
}

/// Datagrams (or GRO batches) taken from the socket per system call.
pub(super) const BATCH: usize = 8;
