//! The verbs API: what applications and the `roce` tools call, from any thread or task.
//!
//! The engine is behind one lock that the device's task takes for one step at a time (one
//! datagram, one timer, one packet to send), never across a whole turn nor across an await. A
//! verb takes it on the caller's thread, runs, and rings the [`Doorbell`](crate::doorbell::Doorbell) so that the task
//! sends what the verb made: no command travels to the task and back. Completions are read
//! from the [`CompletionQueue`]s the task fills, without the engine's lock.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roce_core::{
    Access, AsyncEvent, CmEvent, CongestionState, CqHandle, Cqe, Instant, MemoryRegion, Nic,
    PdHandle, QpAttr, QpInit, QpState, Qpn, RecvWr, SendWr, Stats, VerbsError,
};

use crate::backend::BackendStats;
use crate::cq::CompletionQueue;
use crate::engine::{read, write};
use crate::shared::{BURST_GAP, Release, SPINNING, STEP_BACK, Shared, recent};

/// Empty polls of the network a busy-polling waiter makes before the device's task gets a turn
/// on its thread ([`DeviceHandle::next_completion`]), each followed by a `sched_yield`. A turn
/// is also the runtime's look at its sockets and the task's round: one after every poll made a
/// wait 3-4 times longer than the poll itself. `roce perf send --lat --busy-poll` over a veth,
/// medians of 5-7 alternated runs: a turn per poll 9.1-9.2 µs one-way, p99 21-24 µs; 64 polls
/// per turn without the yields 7.8-8.0 µs, p99 51-53 µs (the softirq thread waited); 64 polls
/// per turn, each followed by a yield, 7.9-8.0 µs, p99 12-15 µs.
const POLLS_PER_TURN: usize = 64;

/// Why a device call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The device's task has stopped.
    #[error("the device has stopped")]
    Stopped,
    /// The verb was refused.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// No completion came in time.
    #[error("no completion within {0:?}")]
    Timeout(Duration),
}

/// What a verb does, which decides what follows it ([`DeviceHandle::verb`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verb {
    /// Posts send WRs (`ibv_post_send`): its packets leave at once on the caller's thread when
    /// it starts a message after a pause (a ping-pong's), from the device's task when it is
    /// part of a stream or a burst of posts; the ACKs a poll of the network left for the
    /// program's next post leave with them.
    PostSend,
    /// Only hands the engine receive buffers (`ibv_post_recv`, `ibv_post_srq_recv`): it makes
    /// nothing to send (as rxe's `rxe_post_recv` schedules no task), so it sends nothing and
    /// wakes nobody. ACKs a poll of the network left for later wait for the program's next
    /// send or empty poll.
    PostRecv,
    /// Deregisters memory (`ibv_dereg_mr`): as [`Verb::Other`], and while no thread is
    /// sending. A payload lent from the region (`roce_core::Loan`) is read by the kernel in
    /// the `sendmsg` of the round that lent it, after the engine's lock is released; the
    /// program may free its buffer once this returns, so it waits for such a round to end.
    Deregister,
    /// Anything else. What the engine has to send is sent first (`Shared::flush_pending`): the
    /// verb may destroy the QP that owes an ACK — one a poll of the network left for the
    /// program's next post ([`DeviceHandle::poll_network`]), or one of a SEND the device's task
    /// handed to the engine and has not sent yet, whose completion another verb delivered.
    Other,
}

/// A handle on a running device. Clones talk to the same device; the device stops when the last
/// handle is dropped. Every verb runs on the caller's thread (see the module's documentation);
/// the async ones are async only where they wait for a completion.
#[derive(Debug, Clone)]
pub struct DeviceHandle {
    shared: Arc<Shared>,
    _release: Arc<Release>,
    /// The CM's events for [`DeviceHandle::next_cm_event`], once it was first called.
    cm_inbox: Arc<std::sync::OnceLock<Arc<crate::cm_inbox::CmInbox>>>,
}

impl DeviceHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            _release: Arc::new(Release(shared.clone())),
            shared,
            cm_inbox: Arc::default(),
        }
    }

    /// Runs the verb `f` with the engine and the current time, on this thread, then does what
    /// that kind of verb leaves to do ([`Verb`]): send the packets it made, on this thread too
    /// where the backend allows it, and ring the doorbell only if the device's task has work
    /// from it (packets left to send, or a deadline earlier than the one its timer waits for).
    /// Every verb below is one of these; a verb that makes nothing (a query) wakes nobody.
    pub fn verb<R>(
        &self,
        kind: Verb,
        f: impl FnOnce(&mut Nic, Instant) -> R,
    ) -> Result<R, DeviceError> {
        match kind {
            Verb::PostSend => self.run_post_send(f),
            Verb::PostRecv => self.run(f).map(|(result, ..)| result),
            Verb::Other | Verb::Deregister => {
                self.shared.flush_pending();
                // A deregistration holds the sending lock, as a round holds it from its first
                // loan to its last `sendmsg` (the order every sender takes: this lock, then
                // the engine's).
                let sending = (kind == Verb::Deregister)
                    .then(|| self.shared.direct.as_ref().map(crate::cq::lock))
                    .flatten();
                let mut changes = 0;
                let (result, sends, streaming, now) = self.run(|nic, now| {
                    let result = f(nic, now);
                    changes = nic.cm_listen_changes();
                    result
                })?;
                drop(sending);
                self.shared.tell_listeners(changes);
                self.shared.after_verb(sends, !streaming, now);
                Ok(result)
            }
        }
    }

    /// [`Verb::PostSend`]: the ACKs a poll of the network left for it leave with its packets,
    /// in one offload batch behind its first request packet (the engine lets a positive ACK
    /// wait for one request of its QP). A ping-pong's answer then leaves first, and its ACK
    /// costs no system call of its own.
    ///
    /// A post that follows another within `BURST_GAP` leaves its packets to the device's
    /// task, as a post with requests in flight does (`Shared::after_verb`): UD and UC have
    /// none in flight, and without this each datagram of a burst of one-WR posts (UCX's
    /// ud_verbs, libfabric's rxd) was one `sendmsg` on the program's thread. The doorbell
    /// rings at once, so the packets leave without waiting for another post, and those of the
    /// posts that come while the task wakes join them in one offload batch. The first post
    /// after a pause, a ping-pong's among them, still sends on the caller's thread.
    ///
    /// A program that spins on its CQ (`ibv_poll_cq` in a loop, as perftest's bandwidth tests
    /// and UCX's progress do) rings for nobody: what such a post leaves waits for the
    /// program's next poll, which sends it on the program's thread with whatever the
    /// posts in between added ([`Shared::leave_for_the_next_poll`]). Rung, the device's thread
    /// woke and took the engine's lock beside the program's posts (perf stat of `roce exec --
    /// ib_write_bw -s 64`'s client, 300 000 WRITEs: 30 766 futex calls, 991 without the ring).
    fn run_post_send<R>(&self, f: impl FnOnce(&mut Nic, Instant) -> R) -> Result<R, DeviceError> {
        let (result, sends, streaming, now) = self.run(f)?;
        let shared = &self.shared;
        let burst = recent(&shared.posted_at, now.as_nanos(), BURST_GAP);
        let at_once = !(streaming || burst);
        if sends && !at_once && shared.spun_within(now.as_nanos(), STEP_BACK) {
            shared.leave_for_the_next_poll();
        } else {
            shared.after_verb(sends, at_once, now);
        }
        shared
            .posted_at
            .store(now.as_nanos().max(1), Ordering::Relaxed);
        Ok(result)
    }

    /// [`Verb::Other`], the kind of most verbs.
    fn other<R>(&self, f: impl FnOnce(&mut Nic, Instant) -> R) -> Result<R, DeviceError> {
        self.verb(Verb::Other, f)
    }

    /// Makes this NIC a member of its shared address: the agent hears of the CM's listeners
    /// from now on. The engine must have been made in the member's slot.
    pub(crate) fn join(&self, member: crate::share::member::Member) {
        let _ = self.shared.member.set(Mutex::new(member));
        let changes = self.shared.step(|nic| nic.cm_listen_changes());
        self.shared
            .listen_changes_told
            .store(u64::MAX, Ordering::SeqCst);
        self.shared.tell_listeners(changes);
    }

    /// Sends on this thread what a program spinning on the network left owed (ACKs a poll
    /// left for a post, packets posts left for a poll: `Shared::leave_for_the_next_poll`),
    /// if anything: for a program that is about to wait for a completion event
    /// (`ibv_req_notify_cq`) and so polls no more. Without it those packets would wait for
    /// the device's task to look again, up to two milliseconds later.
    pub fn send_owed(&self) {
        if self.shared.owed.load(Ordering::SeqCst) {
            self.shared.flush();
        }
    }

    /// Sends on this thread what the engine has to send now, ACKs left for a post among them,
    /// waiting for another thread's send to end. For an exit handler: the process may end
    /// before the device's thread takes another turn.
    pub fn flush(&self) {
        self.shared.flush();
    }

    /// `f` under the engine's lock, and the delivery of what it completed: its result, whether
    /// the engine may have packets to send, whether a stream was in flight before it, and the
    /// engine instant it ran at.
    fn run<R>(
        &self,
        f: impl FnOnce(&mut Nic, Instant) -> R,
    ) -> Result<(R, bool, bool, Instant), DeviceError> {
        if self.shared.halted.load(Ordering::SeqCst) {
            return Err(DeviceError::Stopped);
        }
        Ok({
            let mut engine = self.shared.engine();
            let now = self.shared.clock.now();
            let streaming = engine.nic.unacked_packets() > 0;
            let result = f(&mut engine.nic, now);
            engine.deliver(&self.shared.queues);
            (result, engine.nic.may_transmit(), streaming, now)
        })
    }

    /// One look at the network on this thread, for a program that spins on an empty CQ: what
    /// waits on the socket is received and handed to the engine here, and what that makes
    /// (ACKs, responses, completions) is delivered and sent — no other thread has to wake for a
    /// completion the program waits for. Does nothing when the backend has no receiver for
    /// every thread or another thread is receiving. Returns whether a datagram came.
    ///
    /// Completions first: when a spinning program's poll delivers a completion, the packets
    /// the datagrams made (an ACK) wait for the program's answer — its next post takes them
    /// along ([`Verb::PostSend`]), its next poll or any other verb sends them,
    /// and so does the device's task once the program stops polling, or the handle's drop.
    /// Sent before the completion, a ping-pong's ACK cost a `sendmsg` on the critical path
    /// (on a veth, the delivery into the peer's socket too): `roce perf send --lat
    /// --busy-poll` went from 10.2–12.2 to 6.6–9.7 µs one-way in alternated runs.
    pub fn poll_network(&self) -> bool {
        let shared = &self.shared;
        let Some(Ok(mut rx)) = shared.rx.as_ref().map(Mutex::try_lock) else {
            return false;
        };
        let now = shared.clock.now();
        let now_ns = now.as_nanos().max(1);
        let before = shared.network_polled_at.swap(now_ns, Ordering::Relaxed);
        if before != 0 && u128::from(now_ns.saturating_sub(before)) < SPINNING.as_nanos() {
            shared.network_spun_at.store(now_ns, Ordering::Relaxed);
        }
        // What came is handed to the engine at the instant read above, and what it makes
        // leaves stamped with it: one read of the clock per poll.
        let came = match shared.receive_round(&mut rx, || now) {
            Ok((_, came)) => came,
            Err(err) => {
                tracing::debug!(error = %err, "backend receive error");
                0
            }
        };
        drop(rx);
        // A spinning program keeps the task off the socket (`driver::receive`), and the task
        // sends what is owed when the program stops polling: nothing owed is left behind.
        // What was owed before this poll (its posts' packets, or the ACKs of the poll before)
        // leaves now: a poll leaves its own ACKs for one post at most. A program whose every
        // poll brings datagrams (a rank of an all-to-all) would otherwise never send.
        let owed = shared.owed.load(Ordering::SeqCst);
        if came > 0 && !owed && shared.spun_within(now_ns, STEP_BACK) && shared.deliver() {
            shared.owed.store(true, Ordering::SeqCst);
        } else if came > 0 || owed {
            shared.after_verb(true, true, now);
        }
        came > 0
    }

    /// [`Verb::Other`], for async callers.
    pub async fn call<R>(&self, f: impl FnOnce(&mut Nic, Instant) -> R) -> Result<R, DeviceError> {
        self.other(f)
    }

    /// `ibv_alloc_pd`.
    pub async fn alloc_pd(&self) -> Result<PdHandle, DeviceError> {
        self.other(|nic, _| nic.alloc_pd())
    }

    /// `ibv_reg_mr` of a new zeroed region.
    pub async fn reg_mr(
        &self,
        pd: PdHandle,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, DeviceError> {
        Ok(self.other(move |nic, _| nic.reg_mr(pd, len, access))??)
    }

    /// `ibv_create_cq`: a CQ of `depth` entries whose completions are read without a call
    /// to the device ([`DeviceHandle::completion_queue`]).
    pub async fn create_cq(&self, depth: usize) -> Result<CqHandle, DeviceError> {
        Ok(self.create_completion_queue(depth)?.handle())
    }

    /// `ibv_create_cq`, returning the queue itself.
    pub fn create_completion_queue(
        &self,
        depth: usize,
    ) -> Result<Arc<CompletionQueue>, DeviceError> {
        if self.shared.halted.load(Ordering::SeqCst) {
            return Err(DeviceError::Stopped);
        }
        let depth = depth.max(1);
        let cq = self.shared.engine().nic.create_cq(depth);
        // No QP can complete into it yet: the queue may join the table after the engine's lock.
        let queue = Arc::new(CompletionQueue::new(cq, depth));
        write(&self.shared.queues).insert(cq, queue.clone());
        Ok(queue)
    }

    /// `ibv_resize_cq`: room for `depth` completions in `cq`, the completions waiting kept in
    /// order. Refused with [`VerbsError::OutOfRange`], nothing changed, for a depth of 0 or
    /// below the completions waiting (those the engine made and has not handed over count:
    /// they are moved into the queue first).
    pub fn resize_completion_queue(&self, cq: CqHandle, depth: usize) -> Result<(), DeviceError> {
        let queue = self.queue(cq)?;
        let mut engine = self.shared.engine();
        engine.deliver(&self.shared.queues);
        let nic = &mut engine.nic;
        queue
            .resize(depth, || nic.resize_cq(cq, depth))
            .map_err(|e| {
                DeviceError::Verbs(e.unwrap_or(VerbsError::OutOfRange {
                    attr: "cqe",
                    value: depth as u64,
                    range: "at least 1 and the completions waiting",
                }))
            })
    }

    /// Hands every asynchronous event of the engine (`ibv_get_async_event`'s) to `sink`, on
    /// the device's task at the end of the turn that raised it, or on the thread of the verb
    /// that did; `sink` must not call the device. Without a sink, events wait in the engine's
    /// bounded queue (`Nic::poll_event`).
    pub fn on_async_event(&self, sink: impl FnMut(AsyncEvent) + Send + 'static) {
        let mut engine = self.shared.engine();
        engine.events = Some(Box::new(sink));
        engine.deliver(&self.shared.queues);
    }

    /// Hands every event of the engine's connection manager (`Nic::poll_cm_event`'s) to
    /// `sink`, as [`DeviceHandle::on_async_event`] does; `sink` must not call the device.
    /// Without a sink, the events wait in the engine for `Nic::poll_cm_event`.
    pub fn on_cm_event(&self, sink: impl FnMut(CmEvent) + Send + 'static) {
        let mut engine = self.shared.engine();
        engine.cm_events = Some(Box::new(sink));
        engine.deliver(&self.shared.queues);
    }

    /// The next CM event, waiting for it until `deadline`; `None` once that has passed. The
    /// first call takes the CM's events from then on (it installs the sink of
    /// [`DeviceHandle::on_cm_event`]): events that were waiting in the engine come first.
    /// For a NIC driven from Rust; roce-verbs installs the C library's sink instead.
    pub async fn next_cm_event(&self, deadline: std::time::Instant) -> Option<CmEvent> {
        let inbox = self.cm_inbox.get_or_init(|| {
            let inbox = crate::cm_inbox::CmInbox::new();
            let sink = inbox.clone();
            self.on_cm_event(move |event| sink.put(event));
            inbox
        });
        inbox.next(deadline).await
    }

    /// The shared queue of a CQ made by [`DeviceHandle::create_cq`].
    pub fn completion_queue(&self, cq: CqHandle) -> Option<Arc<CompletionQueue>> {
        read(&self.shared.queues).get(&cq).cloned()
    }

    /// Forgets a CQ's shared queue (`ibv_destroy_cq`): later completions stay in the engine.
    pub fn destroy_completion_queue(&self, cq: CqHandle) {
        let removed = write(&self.shared.queues).remove(&cq);
        if let Some(queue) = removed {
            queue.disarm();
        }
    }

    /// `ibv_create_qp`.
    pub async fn create_qp(&self, init: QpInit) -> Result<Qpn, DeviceError> {
        Ok(self.other(move |nic, _| nic.create_qp(&init))??)
    }

    /// `ibv_modify_qp`.
    pub async fn modify_qp(&self, qpn: Qpn, attr: QpAttr) -> Result<(), DeviceError> {
        Ok(self.other(move |nic, _| nic.modify_qp(qpn, &attr))??)
    }

    /// The QP's state (`ibv_query_qp`).
    pub async fn qp_state(&self, qpn: Qpn) -> Result<QpState, DeviceError> {
        Ok(self.other(move |nic, _| nic.qp_state(qpn))??)
    }

    /// `ibv_post_send`.
    pub async fn post_send(&self, qpn: Qpn, wr: SendWr) -> Result<(), DeviceError> {
        Ok(self.verb(Verb::PostSend, move |nic, _| nic.post_send(qpn, wr))??)
    }

    /// `ibv_post_send` of a list of WRs (on any QPs of the device), with one ring of the
    /// doorbell: they are posted in order, and the device sends what they make in one go (one
    /// batch of packets rather than one per WR). On the first one refused the error is
    /// returned; those before it stay posted (`ibv_post_send`'s `bad_wr`).
    pub async fn post_send_list(
        &self,
        wrs: impl IntoIterator<Item = (Qpn, SendWr)>,
    ) -> Result<(), DeviceError> {
        Ok(self.verb(Verb::PostSend, move |nic, _| {
            wrs.into_iter()
                .try_for_each(|(qpn, wr)| nic.post_send(qpn, wr))
        })??)
    }

    /// `ibv_post_recv`.
    pub async fn post_recv(&self, qpn: Qpn, wr: RecvWr) -> Result<(), DeviceError> {
        Ok(self.verb(Verb::PostRecv, move |nic, _| nic.post_recv(qpn, wr))??)
    }

    fn queue(&self, cq: CqHandle) -> Result<Arc<CompletionQueue>, DeviceError> {
        self.completion_queue(cq)
            .ok_or(DeviceError::Verbs(VerbsError::UnknownCq(cq.value())))
    }

    /// `ibv_poll_cq` for one completion, without waiting.
    pub async fn poll_completion(&self, cq: CqHandle) -> Result<Option<Cqe>, DeviceError> {
        Ok(self.queue(cq)?.poll())
    }

    /// `ibv_poll_cq` for up to `max` completions, without waiting.
    pub async fn poll_completions(
        &self,
        cq: CqHandle,
        max: usize,
    ) -> Result<Vec<Cqe>, DeviceError> {
        let mut out = Vec::new();
        self.queue(cq)?.poll_into(max, &mut out);
        Ok(out)
    }

    /// Waits for completions of `cq` and returns up to `max` of them (at least one), giving up
    /// after `limit`: [`DeviceHandle::next_completion`] for a batch, as perftest polls 16 at a
    /// time.
    pub async fn next_completions_within(
        &self,
        cq: CqHandle,
        max: usize,
        limit: Duration,
    ) -> Result<Vec<Cqe>, DeviceError> {
        let mut out = Vec::new();
        self.next_completions_into(cq, max, limit, &mut out).await?;
        Ok(out)
    }

    /// [`DeviceHandle::next_completions_within`] into the caller's buffer, which a loop
    /// reuses (perftest's `ibv_poll_cq` into one array of `ibv_wc`): appends up to `max`
    /// completions, at least one, and returns how many.
    pub async fn next_completions_into(
        &self,
        cq: CqHandle,
        max: usize,
        limit: Duration,
        out: &mut Vec<Cqe>,
    ) -> Result<usize, DeviceError> {
        let queue = self.queue(cq)?;
        let max = max.max(1);
        // What is there is taken without a timer, as in `next_completion_within`.
        let taken = queue.poll_into(max, out);
        if taken > 0 {
            return Ok(taken);
        }
        tokio::time::timeout(limit, async {
            loop {
                self.wait(&queue).await;
                let taken = queue.poll_into(max, out);
                if taken > 0 {
                    return taken;
                }
            }
        })
        .await
        .map_err(|_| DeviceError::Timeout(limit))
    }

    /// Waits for the next completion of `cq`: `ibv_get_cq_event` then `ibv_poll_cq`, or, on a
    /// device started with [`crate::DeviceConfig::busy_poll`], `ibv_poll_cq` in a loop that
    /// yields to the other tasks between polls (on a single-threaded runtime the device's task
    /// and this one take turns without ever sleeping, which saves the wake-ups of a latency
    /// test).
    pub async fn next_completion(&self, cq: CqHandle) -> Result<Cqe, DeviceError> {
        let queue = self.queue(cq)?;
        loop {
            if let Some(cqe) = queue.poll() {
                return Ok(cqe);
            }
            self.wait(&queue).await;
        }
    }

    /// Until `queue` may hold a completion: a yield when busy polling, else a sleep until the
    /// device delivers one.
    async fn wait(&self, queue: &CompletionQueue) {
        if self.shared.busy_poll {
            // The network first, on this thread, a few dozen times, giving the core away
            // after each empty poll (the kernel's own work on it, the softirq thread that
            // carries the peer's packets, would otherwise wait for the scheduler's slice);
            // then the device's task gets its turn (its timers, what other threads rang for).
            for _ in 0..POLLS_PER_TURN {
                if self.poll_network() || !queue.is_empty() {
                    return;
                }
                std::thread::yield_now();
            }
            tokio::task::yield_now().await;
        } else {
            queue.wait().await;
        }
    }

    /// [`DeviceHandle::next_completion`], giving up after `limit`.
    pub async fn next_completion_within(
        &self,
        cq: CqHandle,
        limit: Duration,
    ) -> Result<Cqe, DeviceError> {
        let queue = self.queue(cq)?;
        // What is there is taken without a timer (arming one and taking it back is most of
        // a completion's cost when it is there already).
        if let Some(cqe) = queue.poll() {
            return Ok(cqe);
        }
        if self.shared.busy_poll {
            // A spinning wait looks at the clock between its turns instead.
            let deadline = tokio::time::Instant::now() + limit;
            loop {
                self.wait(&queue).await;
                if let Some(cqe) = queue.poll() {
                    return Ok(cqe);
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(DeviceError::Timeout(limit));
                }
            }
        }
        tokio::time::timeout(limit, async {
            loop {
                self.wait(&queue).await;
                if let Some(cqe) = queue.poll() {
                    return cqe;
                }
            }
        })
        .await
        .map_err(|_| DeviceError::Timeout(limit))
    }

    /// The backend's counters: what it dropped before the engine saw it (all zero for a
    /// backend that drops nothing of its own, such as the UDP socket).
    pub fn backend_stats(&self) -> BackendStats {
        self.shared
            .backend
            .as_ref()
            .map(|counters| counters.snapshot())
            .unwrap_or_default()
    }

    /// A copy of the engine's counters; `cq_overflows` includes what the shared queues lost.
    pub async fn stats(&self) -> Result<Stats, DeviceError> {
        Ok(self.stats_now())
    }

    /// [`DeviceHandle::stats`] from any thread, without a runtime (an exit handler's, say).
    pub fn stats_now(&self) -> Stats {
        let mut stats = self.shared.engine().nic.stats().clone();
        stats.cq_overflows += read(&self.shared.queues)
            .values()
            .map(|q| q.overflows())
            .sum::<u64>();
        stats
    }

    /// A QP's congestion control now: its rate, target rate, α and CNP counts.
    pub async fn qp_congestion(&self, qpn: Qpn) -> Result<CongestionState, DeviceError> {
        Ok(self.other(move |nic, now| nic.qp_congestion(qpn, now))??)
    }
}
