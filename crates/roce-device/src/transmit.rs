//! The way out: the engine's transmits, packed into segmentation-offload batches ([`TxBatch`])
//! one batch at a time, and — where the backend has a [`Sender`] that any thread may use — sent
//! by whichever thread made them.
//!
//! A verb that makes packets (a posted send WR) sends them itself, on the application's thread,
//! as a hardware NIC's doorbell starts the transmit at once: the device's task is not woken,
//! which in a ping-pong is a wake-up of another thread saved per message. One thread sends at a
//! time ([`Direct`] is behind a lock the verb only tries), so packets leave in the engine's
//! order; a verb that finds the lock taken rings the doorbell instead, and the task sends.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use roce_core::{Instant, Loan, MAX_DATAGRAM, Transmit};
use roce_wire::icrc::ipv4_id::Rekey;

use crate::backend::Sender;
use crate::backend::steer::slot_of;
use crate::batch::{MAX_BATCH_BYTES, TxBatch};
use crate::engine::EngineLock;
use crate::tap::Tap;

/// Packets one round of sending takes from the engine at most (a few offload batches): then
/// the task looks at its commands, the backend and the clock again. Without a bound a READ of
/// a GiB was sent whole, seconds long, before the task read anything, and the requester's
/// retries of a lost response ran out while its duplicate request waited in the socket. A verb
/// that reaches the bound leaves the rest to the task.
pub(crate) const MAX_TRANSMITS_PER_ROUND: usize = 256;

/// The packets being taken from the engine and the batch they are packed into.
#[derive(Debug)]
pub(crate) struct Outbox {
    /// Room for a whole batch, and behind its last packet always room for one more.
    buf: Vec<u8>,
    batch: TxBatch,
    /// A packet that did not join the batch handed out last: it starts the next one. Its
    /// transmit, where it was written, and the IPv4 identification its ICRC covers.
    carried: Option<(Transmit, usize, u16)>,
    /// Whether request payloads are lent (`roce_core::Loan`): the sender gathers them.
    lending: bool,
    /// The batch's lent payloads, their places counted from the start of `buf`.
    loans: Vec<Loan>,
    /// The carried packet's, counted from the start of `buf` where it was written.
    carried_loans: Vec<Loan>,
    /// The packet just taken's, as the engine hands them over (counted from the packet's
    /// start), before they join `loans` or `carried_loans`.
    fresh: Vec<Loan>,
    /// Packets taken from the engine this round, and the most it may take.
    taken: usize,
    limit: usize,
    tap: Option<Tap>,
    /// How the ICRC of a carried packet changes with its IPv4 identification, for the length
    /// of the last one carried (most are of one length).
    rekey: Option<Rekey>,
}

impl Outbox {
    /// An outbox for batches of `max_segments`; with `lending`, payloads are lent (a tap
    /// records whole packets, so it turns lending off).
    pub(crate) fn new(max_segments: usize, tap: Option<Tap>, lending: bool) -> Self {
        Self {
            buf: vec![0u8; MAX_BATCH_BYTES + MAX_DATAGRAM],
            batch: TxBatch::new(max_segments),
            carried: None,
            lending: lending && tap.is_none(),
            loans: Vec::new(),
            carried_loans: Vec::new(),
            fresh: Vec::new(),
            taken: 0,
            limit: MAX_TRANSMITS_PER_ROUND,
            tap,
            rekey: None,
        }
    }

    /// Starts a round of at most `limit` packets. The round takes what the engine has, so what
    /// a poll of the network left for a post (`Shared::owed`) is no longer owed.
    pub(crate) fn begin(&mut self, owed: &AtomicBool, limit: usize) {
        owed.store(false, Ordering::SeqCst);
        self.taken = 0;
        self.limit = limit;
    }

    /// Whether the last round stopped at its bound: the engine may have more to send.
    pub(crate) fn stopped_at_limit(&self) -> bool {
        self.taken >= self.limit
    }

    /// The next batch to send — its shared transmit, its payloads (packet `i` sealed for the
    /// IPv4 identification `i`), its segment size and the payloads lent to it (their places
    /// counted from the start of the payloads; the bytes there are not the packets') — or
    /// `None` when the engine has nothing more this round. Every batch returned must be sent
    /// (or counted lost) before the next call: the packet that ended it is moved to the front
    /// of the buffer then, and the loans are returned.
    pub(crate) fn next_batch(
        &mut self,
        engine: &EngineLock,
        now: Instant,
    ) -> Option<(Transmit, &mut [u8], usize, &[Loan])> {
        self.loans.clear();
        if let Some(carried) = self.carried.take() {
            self.start_with(carried);
        }
        // The engine's lock once for the batch, not once for each of its packets: taken per
        // packet, its lock and unlock (two atomic operations) held 45 % of this function's
        // samples in `perf record` of a 64 KiB WRITE client, 1.5 % of all its samples. A verb
        // on another thread waits for the batch (at most the sender's segments) to be built.
        let mut engine = engine.lock();
        while !self.batch.is_full() && self.taken < self.limit {
            let (at, ip_id) = (self.batch.len(), self.batch.next_ip_id());
            let buf = &mut self.buf[at..];
            let transmit = if self.lending {
                engine
                    .nic
                    .poll_transmit_lending(now, buf, ip_id, &mut self.fresh)
            } else {
                engine.nic.poll_transmit_segment(now, buf, ip_id)
            };
            let Some(transmit) = transmit else {
                break;
            };
            self.taken += 1;
            // Most packets lend nothing (acknowledgements, short payloads).
            let lent = !self.fresh.is_empty();
            if lent {
                for loan in &mut self.fresh {
                    loan.at += at;
                }
            }
            let slot = slot_of(&self.buf[at..at + transmit.len]);
            if !self.batch.fits(&transmit, slot) {
                self.carried = Some((transmit, at, ip_id));
                self.carried_loans.append(&mut self.fresh);
                break;
            }
            if lent {
                self.loans.append(&mut self.fresh);
            }
            self.push(transmit, slot);
        }
        let (transmit, len, segment) = self.batch.take()?;
        Some((transmit, &mut self.buf[..len], segment, &self.loans))
    }

    /// Starts the batch with the packet carried over from the last one, written at `at` and
    /// sealed for the IPv4 identification `ip_id`: as segment 0, its headers and its ICRC move
    /// to the front (a lent payload's place between them holds none of its bytes), and its
    /// ICRC becomes the one for the identification 0 without a pass over its payload.
    fn start_with(&mut self, (transmit, at, ip_id): (Transmit, usize, u16)) {
        let len = transmit.len;
        let (head, tail) = match (self.carried_loans.first(), self.carried_loans.last()) {
            (Some(first), Some(last)) => (first.at - at, last.at + last.len - at),
            _ => (len, len),
        };
        roce_core::copy::move_to_front(&mut self.buf, at, head);
        self.buf.copy_within(at + tail..at + len, tail);
        for loan in &mut self.carried_loans {
            loan.at -= at;
        }
        if ip_id != 0 && transmit.dst.is_ipv4() {
            let rekey = match self.rekey {
                Some(rekey) if rekey.packet_len() == len => rekey,
                _ => *self.rekey.insert(Rekey::new(len)),
            };
            rekey.reseal(&mut self.buf[..len], ip_id, 0);
        }
        self.loans.append(&mut self.carried_loans);
        let slot = slot_of(&self.buf[..len]);
        self.push(transmit, slot);
    }

    /// Adds the packet just written at the batch's end, steered to `slot` by its receiver.
    fn push(&mut self, transmit: Transmit, slot: Option<u8>) {
        if let Some(tap) = &self.tap {
            let (at, ip_id) = (self.batch.len(), self.batch.next_ip_id());
            tap.record_transmit(&transmit, ip_id, &self.buf[at..at + transmit.len]);
        }
        self.batch.push(transmit, slot);
    }
}

/// Sending without the device's task: the backend's [`Sender`] and the outbox, used by one
/// thread at a time (the task's turn, or a verb's).
pub(crate) struct Direct {
    outbox: Outbox,
    sender: Box<dyn Sender>,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("outbox", &self.outbox)
            .finish_non_exhaustive()
    }
}

impl Direct {
    pub(crate) fn new(sender: Box<dyn Sender>, tap: Option<Tap>) -> Self {
        Self {
            outbox: Outbox::new(sender.max_segments(), tap, sender.gathers()),
            sender,
        }
    }

    /// Sends what the engine has, at most `limit` packets; returns whether it stopped at that
    /// bound (more may wait). The round clears `owed` (`Outbox::begin`).
    pub(crate) fn send_round(
        &mut self,
        engine: &EngineLock,
        owed: &AtomicBool,
        now: Instant,
        limit: usize,
    ) -> bool {
        let Self { outbox, sender } = self;
        outbox.begin(owed, limit);
        while let Some((transmit, payload, segment, loans)) = outbox.next_batch(engine, now) {
            let sent = if loans.is_empty() {
                sender.send_segments(&transmit, payload, segment)
            } else {
                sender.send_gathered(&transmit, payload, segment, loans)
            };
            log_failure(&transmit, sent);
        }
        outbox.stopped_at_limit()
    }
}

/// A batch that cannot go out is lost, as on a wire: the transport recovers. The error is
/// logged, not fatal.
pub(crate) fn log_failure(transmit: &Transmit, result: io::Result<()>) {
    if let Err(err) = result {
        tracing::debug!(dst = %transmit.dst, error = %err, "send failed");
    }
}

#[cfg(test)]
mod tests;
