//! How a device reaches the network: something that receives RoCEv2 UDP payloads with the
//! metadata the engine needs, and sends the engine's transmits.

use std::io;
use std::net::SocketAddr;

use roce_core::{Ecn, Loan, Transmit};

mod bind_error;
mod counters;
mod ndp;
pub mod packet_socket;
pub mod raw;
mod registration;
pub mod steer;
#[allow(unsafe_code)]
pub(crate) mod sys;
#[cfg(test)]
mod testing;
pub mod udp;

pub use bind_error::BindError;
pub(crate) use counters::Counter;
pub use counters::{BackendCounters, BackendStats};

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
    /// Its place in a receive-offload (GRO) batch, 0 when it came alone (see
    /// `roce_core::Datagram::segment`).
    pub segment: u16,
    /// Where its payload starts in the buffer.
    pub offset: usize,
    /// Its payload's length.
    pub len: usize,
}

/// Seals `packet`'s ICRC again for the IPv4 identification `ip_id` (a datagram of a batch that
/// leaves with another ID than the one it was built for).
pub(crate) fn reseal(transmit: &Transmit, packet: &mut [u8], ip_id: u16) {
    let src = SocketAddr::new(transmit.src, transmit.src_port);
    if let Some(header) = roce_wire::PseudoHeader::for_datagram(src, transmit.dst, ip_id) {
        roce_wire::icrc::seal(&header, packet);
    }
}

/// Writes each loan's bytes at its place in `payload` (`Loan::at` counted from its start): the
/// gathered batch as one buffer, for a sender that cannot gather.
pub(crate) fn fill_loans(payload: &mut [u8], loans: &[Loan]) {
    for loan in loans {
        let mut at = loan.at;
        loan.read_with(&mut |bytes| {
            payload[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        });
    }
}

/// [`Sender::send_gathered`] for a sender that gathers: the batch's pieces ([`gather`]), after
/// `lead` empty ones the sender fills in (a frame's headers), go to `send`, which says whether
/// it sent them; where it did not, or the pieces are more than one call gathers, the batch is
/// copied into one buffer and sent by [`send_copied`]. `room` is the sender's vector of
/// pieces, kept from one batch to the next.
pub(crate) fn send_gathered_or_copied<S: Sender + ?Sized>(
    sender: &mut S,
    room: fn(&mut S) -> &mut Vec<sys::Piece>,
    lead: usize,
    (transmit, payload, segment, loans): (&Transmit, &mut [u8], usize, &[Loan]),
    send: impl FnOnce(&mut S, &mut [sys::Piece]) -> io::Result<bool>,
) -> io::Result<()> {
    let mut pieces = std::mem::take(room(sender));
    pieces.clear();
    pieces.resize(lead, sys::Piece::EMPTY);
    let sent = if gather(payload, loans, &mut pieces) {
        send(sender, &mut pieces)
    } else {
        Ok(false)
    };
    *room(sender) = pieces;
    if sent? {
        return Ok(());
    }
    send_copied(sender, transmit, payload, segment, loans)
}

/// Appends to `pieces` those of a batch whose bytes at each loan's place are the loan's:
/// `payload` around them, empty ones left out. False when the pieces are then more than one
/// send gathers ([`sys::MAX_PIECES`]).
pub(crate) fn gather(payload: &[u8], loans: &[Loan], pieces: &mut Vec<sys::Piece>) -> bool {
    let mut push = |piece: sys::Piece| {
        if piece.len > 0 {
            pieces.push(piece);
        }
    };
    let mut from = 0;
    for loan in loans {
        push(sys::Piece::of(&payload[from..loan.at]));
        push(sys::Piece {
            addr: loan.addr(),
            len: loan.len,
        });
        from = loan.at + loan.len;
    }
    push(sys::Piece::of(&payload[from..]));
    pieces.len() <= sys::MAX_PIECES
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

    /// Sends `payload`, the UDP payloads of datagrams of `segment` bytes each (the last may be
    /// shorter), all with `transmit`'s addresses and header fields; the ICRC of the `i`-th was
    /// computed for the IPv4 identification `i` (`Nic::poll_transmit_segment`). The driver
    /// gives at most [`Backend::max_segments`] datagrams at once. This default sends them one
    /// by one, each with ID 0, so it seals every ICRC but the first again for ID 0.
    fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> impl Future<Output = io::Result<()>> + Send {
        async move {
            for (index, datagram) in payload.chunks_mut(segment.max(1)).enumerate() {
                if index > 0 {
                    reseal(transmit, datagram, 0);
                }
                self.send(transmit, datagram).await?;
            }
            Ok(())
        }
    }

    /// How many datagrams one [`Backend::send_segments`] may carry: 1 when the backend cannot
    /// batch (the default).
    fn max_segments(&self) -> usize {
        1
    }

    /// The UDP source port this backend sends from, if it cannot choose per packet.
    fn fixed_src_port(&self) -> Option<u16>;

    /// A size for the receive buffer (large enough for what one `recv` can bring in).
    fn recv_buffer_len(&self) -> usize;

    /// The counters of what this backend drops before the engine sees it, shared with the
    /// device's handles. `None` (the default): it drops nothing of its own.
    fn counters(&self) -> Option<std::sync::Arc<BackendCounters>> {
        None
    }

    /// A [`Sender`] that any thread may use, so that a verb sends the packets it makes on the
    /// application's thread. Once one is handed out, the device sends only through it and
    /// never calls this backend's `send` or `send_segments` again. `None` (the default): only
    /// the device's task sends, through those.
    fn sender(&mut self) -> Option<Box<dyn Sender>> {
        None
    }

    /// A [`Receiver`] that any thread may use, so that a program spinning on an empty CQ
    /// receives on its own thread what it waits for. Once one is handed out, the device
    /// receives only through it, and its task waits with [`Backend::when_readable`] instead of
    /// [`Backend::recv`]. `None` (the default): only the task receives, through `recv`.
    fn receiver(&mut self) -> Option<Box<dyn Receiver>> {
        None
    }

    /// Whether a datagram's arrival wakes the thread the device's task runs on (true when the
    /// backend is made). While a program's thread spins on the [`Receiver`], the task steps
    /// back from the socket, and a wake-up for each datagram would only take a core from the
    /// spinners: the task turns it off, and on again before it waits with
    /// [`Backend::when_readable`], which then sees what came meanwhile. The default does
    /// nothing (the arrivals keep waking the task).
    fn wake_on_datagrams(&mut self, wake: bool) -> io::Result<()> {
        let _ = wake;
        Ok(())
    }

    /// Waits until datagrams may have arrived, then calls `receive`, which takes them through
    /// the [`Receiver`] and says whether it drained the socket: then the next call waits for a
    /// new datagram. Must be cancel-safe until `receive` is called. Only called on a backend
    /// that handed out a receiver; the default never returns.
    fn when_readable<F>(&mut self, receive: F) -> impl Future<Output = io::Result<()>> + Send
    where
        F: FnOnce() -> io::Result<bool> + Send,
    {
        let _ = receive;
        std::future::pending()
    }
}

/// Receiving without waiting, from whichever thread has the device's receive lock (one at a
/// time, so datagrams reach the engine in the order they came).
pub trait Receiver: Send + 'static {
    /// Receives what waits, without waiting, into `buf`, appending to `out`; returns whether
    /// the socket was drained (fewer datagrams than one call can take, or none).
    fn try_recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<bool>;

    /// A size for the receive buffer (large enough for what one `try_recv` can bring in).
    fn buffer_len(&self) -> usize;
}

/// Sending without waiting on a runtime, from whichever thread has the device's transmit lock
/// (one at a time, so packets leave in the engine's order). A send that finds the kernel's
/// buffer full waits for room in the call.
pub trait Sender: Send + 'static {
    /// Sends `payload`, the UDP payloads of datagrams of `segment` bytes each, as
    /// [`Backend::send_segments`] does.
    fn send_segments(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()>;

    /// How many datagrams one [`Sender::send_segments`] may carry.
    fn max_segments(&self) -> usize;

    /// Whether [`Sender::send_gathered`] gathers payloads from where they lie (then the device
    /// lends request payloads rather than copying them, `roce_core::Loan`). False (the
    /// default): it copies them in first.
    fn gathers(&self) -> bool {
        false
    }

    /// Sends as [`Sender::send_segments`] does a batch whose bytes at each loan's place
    /// (`Loan::at`, from the start of `payload`) are the loan's, not `payload`'s. The default
    /// copies them in, then sends the buffer (`send_copied`).
    fn send_gathered(
        &mut self,
        transmit: &Transmit,
        payload: &mut [u8],
        segment: usize,
        loans: &[Loan],
    ) -> io::Result<()> {
        send_copied(self, transmit, payload, segment, loans)
    }
}

/// [`Sender::send_gathered`] by a copy: the loans' bytes written into `payload` at their
/// places ([`fill_loans`]), then the one buffer sent. A sender that gathers falls back on it
/// where a batch cannot be gathered.
pub(crate) fn send_copied<S: Sender + ?Sized>(
    sender: &mut S,
    transmit: &Transmit,
    payload: &mut [u8],
    segment: usize,
    loans: &[Loan],
) -> io::Result<()> {
    fill_loans(payload, loans);
    sender.send_segments(transmit, payload, segment)
}
