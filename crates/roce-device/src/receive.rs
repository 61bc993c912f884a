//! The way in: datagrams from the backend handed to the engine, one time for a batch — and,
//! where the backend has a [`Receiver`] that any thread may use, received by whichever thread
//! looks: the device's task when the socket wakes it, or a program's thread that spins on an
//! empty CQ ([`crate::DeviceHandle::poll_network`]), which then needs no other thread to wake
//! for what it waits for. One thread receives at a time ([`DirectRx`] is behind a lock), so
//! datagrams reach the engine in the order they came.

use std::io;

use roce_core::{Datagram, Instant};

use crate::backend::{Received, Receiver};
use crate::engine::EngineLock;
use crate::tap::Tap;

/// Receive-side random drops, for showing recovery at work (`roce demo --loss`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loss {
    /// Probability in parts per million.
    pub(crate) ppm: u32,
    /// xorshift state.
    pub(crate) state: u64,
}

impl Loss {
    fn drop_next(&mut self) -> bool {
        if self.ppm == 0 {
            return false;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % 1_000_000) < u64::from(self.ppm)
    }
}

/// Where received datagrams wait for the engine.
#[derive(Debug)]
pub(crate) struct Inbox {
    pub(crate) buf: Vec<u8>,
    pub(crate) received: Vec<Received>,
    loss: Loss,
    tap: Option<Tap>,
}

impl Inbox {
    pub(crate) fn new(buffer_len: usize, loss: Loss, tap: Option<Tap>) -> Self {
        Self {
            buf: vec![0u8; buffer_len],
            received: Vec::new(),
            loss,
            tap: tap.filter(Tap::received_too),
        }
    }

    /// Hands what was received to the engine, with one time for the whole batch, which `now`
    /// gives (the clock, or an instant the caller read just before the receive); returns how
    /// many datagrams there were. `now` is asked only if a datagram came: an empty poll reads
    /// no clock (a busy-polling waiter makes millions).
    pub(crate) fn hand_over(
        &mut self,
        engine: &EngineLock,
        now: impl FnOnce() -> Instant,
    ) -> usize {
        let count = self.received.len();
        if count == 0 {
            return 0;
        }
        let now = now();
        for datagram in self.received.drain(..) {
            let payload = &self.buf[datagram.offset..datagram.offset + datagram.len];
            if self.loss.drop_next() {
                continue;
            }
            if let Some(tap) = &self.tap {
                tap.record_received(&datagram, payload);
            }
            engine.step(|nic| {
                nic.handle_datagram(
                    now,
                    Datagram {
                        src: datagram.src,
                        dst: datagram.dst,
                        ecn: datagram.ecn,
                        ip_id: datagram.ip_id,
                        segment: datagram.segment,
                        payload,
                    },
                );
            });
        }
        count
    }
}

/// Receiving without the device's task: the backend's [`Receiver`] and an inbox, used by one
/// thread at a time.
pub(crate) struct DirectRx {
    inbox: Inbox,
    receiver: Box<dyn Receiver>,
}

impl std::fmt::Debug for DirectRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectRx")
            .field("received", &self.inbox.received.len())
            .finish_non_exhaustive()
    }
}

impl DirectRx {
    pub(crate) fn new(receiver: Box<dyn Receiver>, loss: Loss, tap: Option<Tap>) -> Self {
        Self {
            inbox: Inbox::new(receiver.buffer_len(), loss, tap),
            receiver,
        }
    }

    /// One receive, without waiting, and the hand-over of what came: returns whether the
    /// socket was drained, and how many datagrams came.
    pub(crate) fn receive_round(
        &mut self,
        engine: &EngineLock,
        now: impl FnOnce() -> Instant,
    ) -> io::Result<(bool, usize)> {
        let Inbox { buf, received, .. } = &mut self.inbox;
        let drained = self.receiver.try_recv(buf, received)?;
        Ok((drained, self.inbox.hand_over(engine, now)))
    }
}
