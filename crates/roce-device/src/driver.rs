//! The device's task: quinn's `ConnectionDriver`. The task owns the backend; the engine sits
//! in [`Shared`], where verbs reach it from the application's threads and ring the doorbell.
//!
//! Each turn of the loop waits for the first of three things — the doorbell, datagrams from
//! the backend, the engine's next deadline — hands it to the engine with the current time,
//! one step at a time (the engine's lock is held for one datagram, one timer, one packet to
//! send, never across an await), then sends what the engine wants to send, and last moves the
//! turn's completions into the application's queues. (A verb that makes packets sends them on
//! its own thread where the backend allows it, and wakes the task only for what it leaves:
//! [`crate::transmit`].) The engine is synchronous
//! and never blocks; a turn sends at most [`MAX_TRANSMITS_PER_ROUND`] packets, so that a long
//! train (the responses to a READ of a GiB) never keeps the task from what arrives meanwhile:
//! a turn that left packets behind is followed by one that does not wait.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::backend::Backend;
use crate::cq::lock;
use crate::receive::{Inbox, Loss};
use crate::shared::{STEP_BACK, Shared};
use crate::tap::Tap;
use crate::transmit::{MAX_TRANSMITS_PER_ROUND, Outbox, log_failure};

pub(crate) struct Driver<B> {
    pub(crate) shared: Arc<Shared>,
    pub(crate) backend: B,
    pub(crate) tap: Option<Tap>,
    pub(crate) rx_loss: Loss,
    /// Never sleep: look at the doorbell, the backend and the clock, then yield, again and
    /// again.
    pub(crate) busy_poll: bool,
}

impl<B: Backend> Driver<B> {
    pub(crate) async fn run(self) -> io::Result<()> {
        let shared = self.shared.clone();
        let result = self.turns().await;
        shared.halt();
        result
    }

    async fn turns(self) -> io::Result<()> {
        let Self {
            shared,
            mut backend,
            tap,
            rx_loss,
            busy_poll,
        } = self;
        // The task's own way in, when the backend has no receiver for every thread.
        let own_rx = if shared.rx.is_none() {
            backend.recv_buffer_len()
        } else {
            0
        };
        let mut inbox = Inbox::new(own_rx, rx_loss, tap.clone());
        // The task's own way out, when the backend has no sender for every thread.
        let mut outbox = shared
            .direct
            .is_none()
            .then(|| Outbox::new(backend.max_segments(), tap.clone(), false));
        tracing::info!("device started");
        shared.task_turns.store(1, Ordering::SeqCst);
        // The engine had more to send when the last turn ended.
        let mut more_to_send = false;
        let mut timer = Timer::new();
        loop {
            let deadline = shared.step(|nic| nic.poll_timeout());
            timer.arm(deadline, &shared);
            tokio::select! {
                // The doorbell first: an application waiting on a verb should not wait behind
                // a flood of datagrams.
                biased;
                () = shared.doorbell.answered() => {}
                result = receive(&mut backend, &mut inbox, &shared) => match result {
                    // Another thread took what woke the task: this turn has nothing to do,
                    // unless that thread left ACKs for a post it has not made.
                    Ok(0) if !more_to_send && !shared.owed.load(Ordering::SeqCst) => continue,
                    Ok(_) => {}
                    Err(err) => tracing::debug!(error = %err, "backend receive error"),
                },
                // The timer fires at the engine's deadline or before it (see `Timer`); early,
                // `handle_timeout` finds nothing due and the next turn arms it again.
                () = timer.fired(&shared) => shared.step(|nic| nic.handle_timeout(shared.clock.now())),
                // Busy polling: nothing was ready, the turn goes on without waiting (the
                // runtime looks at the sockets at every tick: see `DeviceConfig::busy_poll`).
                () = std::future::ready(()), if busy_poll => {}
                // Packets were left behind: this turn takes what arrived, then sends on.
                () = std::future::ready(()), if more_to_send => {}
            }
            if shared.is_released() {
                break;
            }
            let now = shared.clock.now();
            more_to_send = match (&shared.direct, &mut outbox) {
                // One thread sends at a time: a verb's send waits for this turn's, or rings.
                (Some(direct), _) => {
                    shared.send_round(&mut lock(direct), MAX_TRANSMITS_PER_ROUND, now)
                }
                (None, None) => false,
                (None, Some(outbox)) => {
                    outbox.begin(&shared.owed, MAX_TRANSMITS_PER_ROUND);
                    // Not lending: nothing is ever lent to these batches.
                    while let Some((transmit, payload, segment, _)) =
                        outbox.next_batch(&shared.engine, now)
                    {
                        let sent = backend.send_segments(&transmit, payload, segment).await;
                        log_failure(&transmit, sent);
                    }
                    outbox.stopped_at_limit()
                }
            };
            // After the turn's packets have left: a program may exit as soon as it sees a
            // completion, and the ACK of what it received must be gone by then.
            shared.deliver();
            shared.task_turns.fetch_add(1, Ordering::SeqCst);
            if busy_poll {
                // Let the application's tasks run (they poll their CQs the same way).
                tokio::task::yield_now().await;
                // And the machine's other threads: a spinning thread keeps the kernel's own
                // work on this core (the softirq thread that carries the peer's packets, say)
                // waiting for the scheduler's slice, milliseconds. A `sched_yield` at every
                // turn bounds that wait at microseconds; one in 8 turns (as before) left
                // `roce perf --busy-poll`'s p99 at 44-48 µs where every turn gives 21-26 µs,
                // with the same median (11-13 µs), in alternated runs over the veth.
                std::thread::yield_now();
            }
        }
        tracing::info!("device stopped");
        Ok(())
    }
}

/// Waits for datagrams and hands them to the engine; returns how many. Through the device's
/// receiver for every thread if it has one (waiting for its lock while a program's thread
/// receives), else through the backend into the task's own inbox. Cancel-safe: it may be
/// dropped only while it waits.
///
/// While a program's thread spins on the network ([`crate::DeviceHandle::poll_network`] in a
/// loop: `Shared::network_polled_within`), that thread takes what comes, and the task, woken by the same datagrams, would only contend with
/// it for the locks (strace of `ib_send_lat` under `roce exec`: three futex calls per message).
/// The task then steps back and looks again a timer tick later. The socket's readiness is kept
/// meanwhile, so nothing that arrives is missed when the program stops polling; and what the
/// program left owed (`Shared::owed`: ACKs its last poll left for a post it did not make, the
/// packets of posts it made since its last poll) is sent then.
async fn receive<B: Backend>(
    backend: &mut B,
    inbox: &mut Inbox,
    shared: &Shared,
) -> io::Result<usize> {
    match &shared.rx {
        Some(rx) => {
            // Arrivals wake nobody while the program spins (`Backend::wake_on_datagrams`;
            // both ways idempotent: this future may be dropped while it sleeps). Not taken out,
            // they only keep waking the task. A busy-polling device's thread never sleeps in
            // the reactor: nothing to take out, and each change would be two system calls.
            let wakes = !shared.busy_poll;
            while shared.network_polled_within(STEP_BACK) {
                if wakes && let Err(err) = backend.wake_on_datagrams(false) {
                    tracing::debug!(error = %err, "datagrams still wake the task");
                }
                tokio::time::sleep(STEP_BACK).await;
            }
            if wakes && let Err(err) = backend.wake_on_datagrams(true) {
                // Not registered again (out of descriptors, say): the task looks at the
                // socket every step back instead of waiting on it.
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::warn!(error = %err, "cannot wait for datagrams: looking every millisecond");
                });
                tokio::time::sleep(STEP_BACK).await;
                return Ok(shared
                    .receive_round(&mut lock(rx), || shared.clock.now())?
                    .1);
            }
            // The program stopped polling with packets owed.
            if shared.owed.load(Ordering::SeqCst) {
                return Ok(0);
            }
            let mut came = 0;
            backend
                .when_readable(|| {
                    let (drained, count) =
                        shared.receive_round(&mut lock(rx), || shared.clock.now())?;
                    came = count;
                    Ok(drained)
                })
                .await?;
            Ok(came)
        }
        None => {
            let result = backend.recv(&mut inbox.buf, &mut inbox.received).await;
            let came = inbox.hand_over(&shared.engine, || shared.clock.now());
            result.map(|()| came)
        }
    }
}

/// The task's one timer, moved only to an earlier time. A new `sleep_until` every turn (the
/// engine's deadline moves with every packet it sends: a request's retry timer) registers a
/// new timer with the runtime, and one earlier than the runtime's next wake-up costs a write to
/// its eventfd and a spurious return from `epoll_wait`: two system calls per message in a
/// ping-pong. Kept armed at the earliest deadline seen instead, the timer may fire before the
/// engine's current deadline (that deadline moved later, or went away): the engine then has
/// nothing to do, and the timer is armed again at the deadline of that turn.
struct Timer {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    armed: Option<roce_core::Instant>,
}

impl Timer {
    fn new() -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
            armed: None,
        }
    }

    /// The engine's deadline now: the timer moves to it if that is earlier than where it is.
    /// Where it is goes to `shared.timer_at`, for the verbs (`Shared::after_verb`).
    fn arm(&mut self, deadline: Option<roce_core::Instant>, shared: &Shared) {
        if let Some(at) = deadline
            && self.armed.is_none_or(|armed| at < armed)
        {
            self.sleep.as_mut().reset(shared.clock.to_tokio(at));
            self.armed = Some(at);
            shared.timer_at.store(at.as_nanos(), Ordering::SeqCst);
        }
    }

    /// Until the timer fires; never, when it is not armed.
    async fn fired(&mut self, shared: &Shared) {
        if self.armed.is_none() {
            return std::future::pending().await;
        }
        self.sleep.as_mut().await;
        self.armed = None;
        shared.timer_at.store(u64::MAX, Ordering::SeqCst);
    }
}

#[cfg(test)]
pub(crate) mod tests;
