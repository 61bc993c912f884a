//! Completion queues the device shares with the application, as a NIC writes its completions
//! into a ring in the host's memory that the verbs library reads (rxe's `rxe_cq` is a queue
//! mapped into the process; `ibv_poll_cq` reads it without a system call).
//!
//! The device's task moves each completion the engine makes into its queue at the end of the
//! step that made it ([`crate::shared::Shared::step`]); the application takes them without
//! asking the task anything. A poll holds this queue's lock alone, for a copy; an empty queue is
//! seen with one atomic load, so a program that spins on an empty CQ costs the device nothing.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use roce_core::{CqHandle, Cqe, WcStatus};
use tokio::sync::Notify;

/// What `ibv_req_notify_cq` asked for: called once, at the next completion.
type Arm = Box<dyn FnOnce() + Send>;

/// A completion queue as the application sees it.
pub struct CompletionQueue {
    handle: CqHandle,
    /// Read and written under `entries`' lock; atomic so that [`CompletionQueue::depth`] needs
    /// no lock.
    depth: AtomicUsize,
    entries: Mutex<VecDeque<Cqe>>,
    /// `entries.len()`, readable without the lock.
    len: AtomicUsize,
    /// Completions lost because the queue was full (an overrun).
    overflows: AtomicU64,
    /// Tasks waiting for a completion ([`CompletionQueue::wait`]).
    waiters: Notify,
    /// Set while `arm` holds a notification, so that a push looks at the lock only then.
    is_armed: AtomicBool,
    /// The notification waits for a solicited or unsuccessful completion only
    /// ([`CompletionQueue::arm_solicited`]). Written under `arm`'s lock.
    solicited_only: AtomicBool,
    arm: Mutex<Option<Arm>>,
}

impl fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("handle", &self.handle)
            .field("depth", &self.depth())
            .field("len", &self.len())
            .field("overflows", &self.overflows())
            .finish_non_exhaustive()
    }
}

/// A lock of the crate's, whatever a panic elsewhere left behind (the state is still the best
/// there is).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CompletionQueue {
    pub(crate) fn new(handle: CqHandle, depth: usize) -> Self {
        Self {
            handle,
            depth: AtomicUsize::new(depth.max(1)),
            entries: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            overflows: AtomicU64::new(0),
            waiters: Notify::new(),
            is_armed: AtomicBool::new(false),
            solicited_only: AtomicBool::new(false),
            arm: Mutex::new(None),
        }
    }

    /// The engine's handle of this CQ.
    pub fn handle(&self) -> CqHandle {
        self.handle
    }

    /// How many completions it holds at most.
    pub fn depth(&self) -> usize {
        self.depth.load(Ordering::Relaxed)
    }

    /// `ibv_resize_cq`: room for `depth` completions from now on; those waiting stay, in
    /// order. `also` runs under the queue's lock once the depth is known to fit (the engine's
    /// own queue is resized there); if it fails, or `depth` is 0 or below the completions
    /// waiting (rxe `rxe_cq_chk_attr`), nothing changes and its error (or `Err(None)`) is
    /// returned.
    pub(crate) fn resize<E>(
        &self,
        depth: usize,
        also: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), Option<E>> {
        let entries = lock(&self.entries);
        if depth == 0 || depth < entries.len() {
            return Err(None);
        }
        also().map_err(Some)?;
        self.depth.store(depth, Ordering::Relaxed);
        Ok(())
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        // SeqCst with the store in `push_from` and `arm`'s flag: a program that arms and then
        // polls, while the device pushes and then looks at the flag, sees the completion or
        // has it announced (the store-load pattern that Acquire/Release alone lets slip).
        self.len.load(Ordering::SeqCst)
    }

    /// No completion waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Completions lost to a full queue so far.
    pub fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }

    /// `ibv_poll_cq` for one completion.
    pub fn poll(&self) -> Option<Cqe> {
        if self.is_empty() {
            return None;
        }
        let mut entries = lock(&self.entries);
        let cqe = entries.pop_front();
        self.len.store(entries.len(), Ordering::Release);
        cqe
    }

    /// `ibv_poll_cq` for up to `max` completions, appended to `out`; returns how many.
    pub fn poll_into(&self, max: usize, out: &mut Vec<Cqe>) -> usize {
        self.poll_with(max, |cqe| out.push(cqe))
    }

    /// `ibv_poll_cq` for up to `max` completions, each handed to `f` in order (under the
    /// queue's lock: `f` should only copy it out); returns how many.
    pub fn poll_with(&self, max: usize, mut f: impl FnMut(Cqe)) -> usize {
        if self.is_empty() || max == 0 {
            return 0;
        }
        let mut entries = lock(&self.entries);
        let n = max.min(entries.len());
        entries.drain(..n).for_each(&mut f);
        self.len.store(entries.len(), Ordering::Release);
        n
    }

    /// `ibv_req_notify_cq`: `notify` runs once, on the device's task, when the next completion
    /// arrives (completions already waiting do not count, as with verbs: a program polls after
    /// arming). Arming again before that replaces the notification.
    pub fn arm(&self, notify: impl FnOnce() + Send + 'static) {
        self.arm_for(false, Box::new(notify));
    }

    /// `ibv_req_notify_cq` with `solicited_only`: as [`CompletionQueue::arm`], but `notify`
    /// waits for the next completion that is a receive of a solicited message or unsuccessful
    /// (IBTA vol. 1 §11.4.2.2); other completions leave it armed. UCX's ud_verbs arms its
    /// receive CQ so after each run of its asynchronous progress, and sends solicited only
    /// the datagrams that ask for an ACK: fired by every completion, its progress thread woke
    /// for nearly every datagram of a stream.
    pub fn arm_solicited(&self, notify: impl FnOnce() + Send + 'static) {
        self.arm_for(true, Box::new(notify));
    }

    fn arm_for(&self, solicited_only: bool, notify: Arm) {
        {
            let mut arm = lock(&self.arm);
            *arm = Some(notify);
            self.solicited_only.store(solicited_only, Ordering::SeqCst);
        }
        self.is_armed.store(true, Ordering::SeqCst);
    }

    /// Drops a pending notification (the CQ is being destroyed).
    pub fn disarm(&self) {
        self.is_armed.store(false, Ordering::Release);
        lock(&self.arm).take();
    }

    /// Waits until a completion waits (at once if one does).
    pub async fn wait(&self) {
        loop {
            // Register before looking, so that a push in between is not missed.
            let notified = self.waiters.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Moves the completions `next` yields into the queue (the device's side): those past the
    /// depth are lost and counted. Wakes the waiters and fires an armed notification once, if
    /// anything came.
    pub(crate) fn push_from(&self, mut next: impl FnMut() -> Option<Cqe>) {
        let mut came = false;
        // A completion that fires a notification armed for solicited ones only.
        let mut solicited = false;
        {
            let mut entries = lock(&self.entries);
            while let Some(cqe) = next() {
                came = true;
                solicited |= cqe.solicited || cqe.status != WcStatus::Success;
                if entries.len() < self.depth.load(Ordering::Relaxed) {
                    entries.push_back(cqe);
                } else {
                    self.overflows.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.len.store(entries.len(), Ordering::SeqCst);
        }
        if !came {
            return;
        }
        self.waiters.notify_waiters();
        if !self.is_armed.load(Ordering::SeqCst) {
            return;
        }
        let notify = {
            let mut arm = lock(&self.arm);
            if solicited || !self.solicited_only.load(Ordering::SeqCst) {
                self.is_armed.store(false, Ordering::SeqCst);
                arm.take()
            } else {
                None
            }
        };
        if let Some(notify) = notify {
            notify();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use roce_core::{Cqe, Qpn, WcOpcode};

    use super::*;

    fn cqes(ids: std::ops::Range<u64>) -> impl FnMut() -> Option<Cqe> {
        let mut ids = ids;
        move || {
            ids.next()
                .map(|id| Cqe::success(id, WcOpcode::Send, Qpn::new(1)))
        }
    }

    fn queue(depth: usize) -> CompletionQueue {
        CompletionQueue::new(
            roce_core::Nic::new(Default::default()).create_cq(depth),
            depth,
        )
    }

    #[test]
    fn completions_come_out_in_order_and_a_full_queue_counts_what_it_loses() {
        let q = queue(4);
        assert_eq!(q.poll(), None);
        q.push_from(cqes(0..6));
        assert_eq!(
            (q.len(), q.overflows()),
            (4, 2),
            "two past the depth are lost"
        );
        let mut out = Vec::new();
        assert_eq!(q.poll_into(3, &mut out), 3);
        assert_eq!(out.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(q.poll().map(|c| c.wr_id), Some(3));
        assert_eq!((q.poll(), q.len()), (None, 0));
    }

    #[test]
    fn a_resize_keeps_the_waiting_completions_and_a_refused_one_changes_nothing() {
        let q = queue(4);
        q.push_from(cqes(0..3));
        // rxe_cq_chk_attr: fewer entries than wait, or none, is EINVAL; nothing changes.
        for bad in [0, 2] {
            assert_eq!(q.resize(bad, || Ok::<(), ()>(())), Err(None), "depth {bad}");
            assert_eq!(
                (q.depth(), q.len()),
                (4, 3),
                "depth {bad} changed the queue"
            );
        }
        let mut called = false;
        assert_eq!(
            q.resize(8, || {
                called = true;
                Err("engine said no")
            }),
            Err(Some("engine said no"))
        );
        assert!(called);
        assert_eq!(
            (q.depth(), q.len()),
            (4, 3),
            "the engine's refusal changed the queue"
        );

        assert_eq!(
            q.resize(3, || Ok::<(), ()>(())),
            Ok(()),
            "exactly what waits fits"
        );
        q.push_from(cqes(3..4));
        assert_eq!((q.len(), q.overflows()), (3, 1), "the new depth holds");
        assert_eq!(q.resize(6, || Ok::<(), ()>(())), Ok(()));
        q.push_from(cqes(4..7));
        let mut out = Vec::new();
        q.poll_into(10, &mut out);
        assert_eq!(
            out.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            [0, 1, 2, 4, 5, 6],
            "the completions queued before the resizes come first, in order"
        );
    }

    #[test]
    fn a_queue_armed_for_solicited_completions_waits_for_one_or_an_error() {
        let q = queue(8);
        let fired = Arc::new(AtomicUsize::new(0));
        let arm = |q: &CompletionQueue| {
            let count = fired.clone();
            q.arm_solicited(move || {
                count.fetch_add(1, Ordering::SeqCst);
            });
        };
        arm(&q);
        q.push_from(cqes(0..3));
        assert_eq!(fired.load(Ordering::SeqCst), 0, "unsolicited completions");
        let mut solicited = Some(Cqe {
            solicited: true,
            ..Cqe::success(3, WcOpcode::Recv, Qpn::new(1))
        });
        q.push_from(|| solicited.take());
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        arm(&q);
        let mut failed = Some(Cqe::new(
            WcStatus::WrFlushErr,
            4,
            WcOpcode::Send,
            Qpn::new(1),
        ));
        q.push_from(|| failed.take());
        assert_eq!(fired.load(Ordering::SeqCst), 2, "an error fires it too");
        // Armed again for any completion: the first one fires it.
        let count = fired.clone();
        q.arm(move || {
            count.fetch_add(1, Ordering::SeqCst);
        });
        q.push_from(cqes(5..6));
        assert_eq!(fired.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn an_armed_queue_notifies_once_at_the_next_completion_only() {
        let q = queue(8);
        q.push_from(cqes(0..1));
        let fired = Arc::new(AtomicUsize::new(0));
        let count = fired.clone();
        q.arm(move || {
            count.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(
            fired.load(Ordering::SeqCst),
            0,
            "a waiting completion does not fire it"
        );
        q.push_from(cqes(0..0));
        assert_eq!(fired.load(Ordering::SeqCst), 0, "nothing came");
        q.push_from(cqes(1..3));
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        q.push_from(cqes(3..4));
        assert_eq!(fired.load(Ordering::SeqCst), 1, "once per arming");

        let count = fired.clone();
        q.arm(move || {
            count.fetch_add(1, Ordering::SeqCst);
        });
        q.disarm();
        q.push_from(cqes(4..5));
        assert_eq!(
            fired.load(Ordering::SeqCst),
            1,
            "a disarmed queue stays silent"
        );
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_a_completion_arrives() {
        let q = Arc::new(queue(8));
        let waiter = tokio::spawn({
            let q = q.clone();
            async move {
                q.wait().await;
                q.poll().map(|c| c.wr_id)
            }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "nothing to wake it yet");
        q.push_from(cqes(7..8));
        assert_eq!(waiter.await.unwrap(), Some(7));
    }
}
