//! The device's concurrency core, shared by every handle and the device's task: the engine
//! under its one lock with the sinks of its events ([`Engine`]), the CQs' shared queues, the
//! doorbell, the direct send and receive paths, the flags that decide who sends and who reads
//! the socket (`owed`, `timer_at`, the spin and burst marks), and what follows a verb
//! ([`Shared::after_verb`], `flush`, `deliver`). [`crate::handle`] is the API over it.
//!
//! Lock order: the engine's lock, then the queues' (never the other way round).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use roce_core::{Instant, Nic};

use crate::backend::BackendCounters;
use crate::clock::TokioClock;
use crate::cq::lock;
use crate::doorbell::Doorbell;
use crate::engine::{Engine, EngineLock, Queues};
use crate::receive::DirectRx;
use crate::transmit::{Direct, MAX_TRANSMITS_PER_ROUND};

/// What the handles and the device's task share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: EngineLock,
    /// Taken after the engine's lock when both are held, never before.
    pub(crate) queues: Queues,
    pub(crate) doorbell: Doorbell,
    /// Sending from any thread, if the backend can ([`crate::backend::Backend::sender`]).
    /// Taken before the engine's lock when both are held, never after.
    pub(crate) direct: Option<Mutex<Direct>>,
    /// Receiving from any thread, if the backend can ([`crate::backend::Backend::receiver`]).
    /// Taken before the transmit lock and the engine's when held together, never after.
    pub(crate) rx: Option<Mutex<DirectRx>>,
    /// The engine instant (ns) at which the task's timer fires, `u64::MAX` when it is not
    /// armed. A verb whose deadline is not earlier needs no wake-up: the timer fires early,
    /// finds nothing due and is armed again (see `driver::Timer`).
    pub(crate) timer_at: AtomicU64,
    /// The engine instant (ns) of the last [`crate::DeviceHandle::poll_network`] that could
    /// receive; 0 before the first.
    pub(crate) network_polled_at: AtomicU64,
    /// The instant of the last such poll that came within [`SPINNING`] of the one before it:
    /// a program spinning on its CQ. 0 before the first.
    pub(crate) network_spun_at: AtomicU64,
    /// The engine instant (ns) at which the last post of send WRs returned; 0 before the
    /// first. A post that comes within [`BURST_GAP`] of it is part of a burst
    /// ([`crate::Verb::PostSend`]).
    pub(crate) posted_at: AtomicU64,
    /// The engine holds packets that a thread spinning on the network is to send: a poll
    /// delivered completions and left the packets the datagrams made (their ACKs) for the
    /// program's next post to take along ([`crate::DeviceHandle::poll_network`]), or a post
    /// left its packets for the next poll ([`Shared::leave_for_the_next_poll`]). The next send
    /// round clears it (`Outbox::begin`).
    pub(crate) owed: AtomicBool,
    pub(crate) clock: TokioClock,
    /// Wait for completions by polling in a loop instead of sleeping until woken.
    pub(crate) busy_poll: bool,
    /// What the backend drops before the engine sees it, if it counts anything.
    pub(crate) backend: Option<Arc<BackendCounters>>,
    /// Turns the device's task has ended, plus one once it has started (0: no task runs
    /// yet). A flush without a sender for every thread waits for them (`Shared::flush`).
    pub(crate) task_turns: AtomicU64,
    /// Every handle is gone: the task stops.
    pub(crate) released: AtomicBool,
    /// The task has stopped: verbs fail.
    pub(crate) halted: AtomicBool,
    /// This NIC's membership of a shared address, if it shares one ([`crate::share`]), and
    /// the count of the CM's listener changes the agent was last told of.
    pub(crate) member: std::sync::OnceLock<Mutex<crate::share::member::Member>>,
    pub(crate) listen_changes_told: AtomicU64,
}

impl Shared {
    pub(crate) fn new(nic: Nic, busy_poll: bool, backend: Option<Arc<BackendCounters>>) -> Self {
        Self {
            engine: EngineLock::new(nic),
            queues: RwLock::new(BTreeMap::new()),
            doorbell: Doorbell::default(),
            direct: None,
            rx: None,
            timer_at: AtomicU64::new(u64::MAX),
            network_polled_at: AtomicU64::new(0),
            network_spun_at: AtomicU64::new(0),
            posted_at: AtomicU64::new(0),
            owed: AtomicBool::new(false),
            clock: TokioClock::new(),
            busy_poll,
            backend,
            task_turns: AtomicU64::new(0),
            released: AtomicBool::new(false),
            halted: AtomicBool::new(false),
            member: std::sync::OnceLock::new(),
            listen_changes_told: AtomicU64::new(0),
        }
    }

    pub(crate) fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock()
    }

    /// One step of the engine ([`EngineLock::step`]).
    pub(crate) fn step<R>(&self, f: impl FnOnce(&mut Nic) -> R) -> R {
        self.engine.step(f)
    }

    /// Sends what the engine has through `direct`, at most `limit` packets stamped `now`;
    /// returns whether it stopped at that bound (more may wait).
    pub(crate) fn send_round(&self, direct: &mut Direct, limit: usize, now: Instant) -> bool {
        direct.send_round(&self.engine, &self.owed, now, limit)
    }

    /// One receive through `rx`, without waiting, and the hand-over of what came at the
    /// instant `now` gives (asked only if something came: [`crate::receive::Inbox::hand_over`]):
    /// whether the socket was drained, and how many datagrams came.
    pub(crate) fn receive_round(
        &self,
        rx: &mut DirectRx,
        now: impl FnOnce() -> Instant,
    ) -> std::io::Result<(bool, usize)> {
        rx.receive_round(&self.engine, now)
    }

    /// Moves what the engine completed into the shared queues; returns whether there was a
    /// completion. The device's task does it at the end of a turn, once the packets of the
    /// turn are sent: a program that sees the completion of a received SEND and exits at once
    /// has had the ACK of it sent already (rxe likewise completes, then acknowledges, within
    /// one run of its responder task). A spinning program's poll delivers first and leaves the
    /// ACK to its answer ([`crate::DeviceHandle::poll_network`]); its exit sends what is left.
    pub(crate) fn deliver(&self) -> bool {
        self.engine().deliver(&self.queues)
    }

    /// Sends (`tx`) and receives (`rx`) from any thread, where the backend can.
    pub(crate) fn with_direct(mut self, tx: Option<Direct>, rx: Option<DirectRx>) -> Self {
        self.direct = tx.map(Mutex::new);
        self.rx = rx.map(Mutex::new);
        self
    }

    /// What a verb leaves to do once it has run: the packets it made (`sends`: the engine may
    /// have some) go out on this thread if `at_once` allows, the device sends directly and no
    /// other thread is sending at the moment; the doorbell rings if the task has work (packets
    /// left, or a deadline earlier than its timer's).
    ///
    /// A post to a NIC with no request in flight goes at once: a ping-pong's message, on the
    /// critical path. A post while requests are in flight (a stream) leaves its packets to the task, whose
    /// turn gathers the posts of a burst into a few segmentation-offload batches: sent at
    /// once, each post of 64 bytes was a system call (`ib_write_bw -s 64` under `roce exec`
    /// fell from 0.50–0.56 to 0.27–0.29 M messages/s).
    ///
    /// `now` is the instant the verb ran at: the packets go out stamped with it, without
    /// another read of the clock (a ping-pong's exchange read it about nine times a side).
    pub(crate) fn after_verb(&self, sends: bool, at_once: bool, now: Instant) {
        let mut ring = false;
        if sends {
            let direct = self.direct.as_ref().filter(|_| at_once);
            ring = match direct.map(Mutex::try_lock) {
                Some(Ok(mut direct)) => {
                    let more = self.send_round(&mut direct, MAX_TRANSMITS_PER_ROUND, now);
                    drop(direct);
                    // Completions of what just left (UD and UC sends complete when sent).
                    self.deliver();
                    more
                }
                // No direct sender, or another thread is sending: the task sends.
                None | Some(Err(_)) => true,
            };
        }
        if ring || self.deadline_before_timer() {
            self.doorbell.ring();
        }
    }

    /// What a post that does not send at once does when a program's thread spins on the
    /// network: the packets stay in the engine, owed, and the program's next poll
    /// sends them ([`crate::DeviceHandle::poll_network`]) with those of the posts in between,
    /// on its own thread. Nobody is woken but for a deadline the task's timer would miss. A
    /// program that stops polling leaves them to the task, which looks again within
    /// [`STEP_BACK`] (`driver::receive`), or to its next verb or wait for an event.
    pub(crate) fn leave_for_the_next_poll(&self) {
        self.owed.store(true, Ordering::SeqCst);
        if self.deadline_before_timer() {
            self.doorbell.ring();
        }
    }

    /// Sends what the engine has, on this thread, waiting for another thread's send to end;
    /// without a sender for every thread, has the task send it and waits (at most
    /// [`FLUSH_WAIT`]) for that ([`Shared::flush_through_the_task`]).
    pub(crate) fn flush(&self) {
        let Some(direct) = &self.direct else {
            self.flush_through_the_task();
            return;
        };
        let mut direct = lock(direct);
        // Bounded: the engine refills as fast as it sends only for a train of READ responses.
        for _ in 0..FLUSH_ROUNDS {
            if !self.send_round(&mut direct, MAX_TRANSMITS_PER_ROUND, self.clock.now()) {
                break;
            }
        }
        drop(direct);
        self.deliver();
    }

    /// [`Shared::flush`] without a sender for every thread: the doorbell rings, and a thread
    /// outside the task's runtime (where waiting could keep the task from its turn) waits for
    /// a whole turn after the ring, or for one that left the engine with nothing to send.
    pub(crate) fn flush_through_the_task(&self) {
        let before = self.task_turns.load(Ordering::SeqCst);
        self.doorbell.ring();
        if before == 0 || tokio::runtime::Handle::try_current().is_ok() {
            return;
        }
        let deadline = std::time::Instant::now() + FLUSH_WAIT;
        while !self.halted.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            let turns = self.task_turns.load(Ordering::SeqCst);
            if turns >= before + 2 || (turns > before && !self.step(|nic| nic.may_transmit())) {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// [`Shared::flush`] if the engine has something to send or a poll left ACKs owed. A
    /// completion may be visible before the ACK of its SEND has left: the device's task hands
    /// datagrams to the engine one step at a time and sends at the end of its turn, and a
    /// verb of the program's thread in between delivers what those steps completed. The
    /// verbs that end a QP's life (modify to an error state, destroy) and the program's exit
    /// must not take that ACK with them, or the peer's SEND ends in retries.
    pub(crate) fn flush_pending(&self) {
        if self.owed.load(Ordering::SeqCst) || self.step(|nic| nic.may_transmit()) {
            self.flush();
        }
    }

    /// Tells the shared address's agent the service IDs the CM listens on, if the set changed
    /// since it was last told (`changes`, the engine's count): REQs for them come here.
    pub(crate) fn tell_listeners(&self, changes: u64) {
        let Some(member) = self.member.get() else {
            return;
        };
        if self.listen_changes_told.swap(changes, Ordering::SeqCst) == changes {
            return;
        }
        let services = self.step(|nic| nic.cm_services());
        if let Err(err) = lock(member).listen(services) {
            tracing::warn!(error = %err, "cannot tell the shared address's agent what the CM listens on");
        }
    }

    /// Whether the engine's next deadline comes before the task's timer fires.
    pub(crate) fn deadline_before_timer(&self) -> bool {
        let timer_at = self.timer_at.load(Ordering::SeqCst);
        self.step(|nic| nic.poll_timeout())
            .is_some_and(|at| at.as_nanos() < timer_at)
    }

    /// Whether a program's thread spins on the network: two of its polls came within
    /// [`SPINNING`] of each other, the last one within `within`. A program that polls once
    /// after each completion event does not count: the task must not step back from a socket
    /// whose next datagram that program waits for on the event.
    pub(crate) fn network_polled_within(&self, within: Duration) -> bool {
        self.spun_within(self.clock.now().as_nanos(), within)
    }

    /// [`Shared::network_polled_within`] at the engine instant `now` (ns).
    pub(crate) fn spun_within(&self, now: u64, within: Duration) -> bool {
        recent(&self.network_spun_at, now, within)
    }

    /// Every handle is gone.
    pub(crate) fn is_released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }

    /// The task stopped (on its own, or because every handle is gone).
    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::SeqCst);
    }
}

/// Polls of the network closer together than this are a program spinning on its CQ (an
/// empty poll costs a `recvmmsg` and a `sched_yield`, a few microseconds).
pub(crate) const SPINNING: Duration = Duration::from_micros(20);

/// Posts of send WRs closer together than this (from the return of one to the start of the
/// next) are a burst: the program posts without waiting for anything in between. A
/// ping-pong's posts are a round trip apart (tens of microseconds here); a stream of UD
/// datagrams, as UCX's ud_verbs sends a message (one WR per `ibv_post_send`), comes every
/// few microseconds.
///
/// The mark is the device's, not a QP's: two threads that post on their own QPs within this of
/// each other also count as a burst, and their packets leave from the task, a wake-up later.
pub(crate) const BURST_GAP: Duration = Duration::from_micros(10);

/// How long the device's task steps back from a socket that a program's thread polls
/// (`driver::receive`).
pub(crate) const STEP_BACK: Duration = Duration::from_millis(1);

/// How long a flush waits for the device's task to send, when only the task can.
const FLUSH_WAIT: Duration = Duration::from_millis(100);

/// Send rounds a flush takes at most (of [`MAX_TRANSMITS_PER_ROUND`] packets each).
const FLUSH_ROUNDS: usize = 64;

/// Whether the instant (ns) `mark` holds, 0 for never, is less than `within` before `now`.
pub(crate) fn recent(mark: &AtomicU64, now: u64, within: Duration) -> bool {
    let at = mark.load(Ordering::Relaxed);
    at != 0 && u128::from(now.saturating_sub(at)) < within.as_nanos()
}

/// The handles' share: when the last clone drops, the device's task is told to stop.
#[derive(Debug)]
pub(crate) struct Release(pub(crate) Arc<Shared>);

impl Drop for Release {
    fn drop(&mut self) {
        // ACKs a poll of the network left for the program's next post (there is none), or
        // that the task's turn has not sent yet.
        self.0.flush_pending();
        self.0.released.store(true, Ordering::SeqCst);
        self.0.doorbell.ring();
    }
}
