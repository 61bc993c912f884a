//! The async verbs API: what applications and the `roce` tools call. Every verb runs on the
//! device's task (the engine has one owner); the handle sends it there and awaits the answer.

use std::sync::Arc;
use std::time::Duration;

use roce_core::{
    Access, CongestionState, CqHandle, Cqe, Instant, MemoryRegion, Nic, PdHandle, QpAttr, QpInit,
    QpState, Qpn, RecvWr, SendWr, Stats, VerbsError,
};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::backend::{BackendCounters, BackendStats};
use crate::driver::Command;

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

/// A handle on a running device. Clones talk to the same device; the device stops when the last
/// handle is dropped.
#[derive(Debug, Clone)]
pub struct DeviceHandle {
    pub(crate) commands: mpsc::UnboundedSender<Command>,
    pub(crate) completions: Arc<Notify>,
    /// Wait for completions by polling the CQ in a loop instead of sleeping until woken.
    pub(crate) busy_poll: bool,
    /// What the backend drops before the engine sees it, if it counts anything.
    pub(crate) backend: Option<Arc<BackendCounters>>,
}

impl DeviceHandle {
    /// Runs `f` on the device's task with the engine and the current time, and returns its
    /// result. Every verb below is one of these.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Nic, Instant) -> R + Send + 'static,
    ) -> Result<R, DeviceError> {
        let (reply, answer) = oneshot::channel();
        let command: Command = Box::new(move |nic, now| {
            // The caller may have gone away; then nobody wants the answer.
            let _ = reply.send(f(nic, now));
        });
        self.commands
            .send(command)
            .map_err(|_| DeviceError::Stopped)?;
        answer.await.map_err(|_| DeviceError::Stopped)
    }

    /// `ibv_alloc_pd`.
    pub async fn alloc_pd(&self) -> Result<PdHandle, DeviceError> {
        self.call(|nic, _| nic.alloc_pd()).await
    }

    /// `ibv_reg_mr` of a new zeroed region.
    pub async fn reg_mr(
        &self,
        pd: PdHandle,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, DeviceError> {
        Ok(self
            .call(move |nic, _| nic.reg_mr(pd, len, access))
            .await??)
    }

    /// `ibv_create_cq`.
    pub async fn create_cq(&self, depth: usize) -> Result<CqHandle, DeviceError> {
        self.call(move |nic, _| nic.create_cq(depth)).await
    }

    /// `ibv_create_qp`.
    pub async fn create_qp(&self, init: QpInit) -> Result<Qpn, DeviceError> {
        Ok(self.call(move |nic, _| nic.create_qp(&init)).await??)
    }

    /// `ibv_modify_qp`.
    pub async fn modify_qp(&self, qpn: Qpn, attr: QpAttr) -> Result<(), DeviceError> {
        Ok(self.call(move |nic, _| nic.modify_qp(qpn, &attr)).await??)
    }

    /// The QP's state (`ibv_query_qp`).
    pub async fn qp_state(&self, qpn: Qpn) -> Result<QpState, DeviceError> {
        Ok(self.call(move |nic, _| nic.qp_state(qpn)).await??)
    }

    /// `ibv_post_send`.
    pub async fn post_send(&self, qpn: Qpn, wr: SendWr) -> Result<(), DeviceError> {
        Ok(self.call(move |nic, _| nic.post_send(qpn, wr)).await??)
    }

    /// `ibv_post_send` of a list of WRs (on any QPs of the device), in one call to the device:
    /// they are posted in order, and the device sends what they make in one go (one batch of
    /// packets rather than one per WR). On the first one refused the error is returned; those
    /// before it stay posted (`ibv_post_send`'s `bad_wr`).
    pub async fn post_send_list(&self, wrs: Vec<(Qpn, SendWr)>) -> Result<(), DeviceError> {
        Ok(self
            .call(move |nic, _| {
                wrs.into_iter()
                    .try_for_each(|(qpn, wr)| nic.post_send(qpn, wr))
            })
            .await??)
    }

    /// `ibv_post_recv`.
    pub async fn post_recv(&self, qpn: Qpn, wr: RecvWr) -> Result<(), DeviceError> {
        Ok(self.call(move |nic, _| nic.post_recv(qpn, wr)).await??)
    }

    /// `ibv_poll_cq` for one completion, without waiting.
    pub async fn poll_completion(&self, cq: CqHandle) -> Result<Option<Cqe>, DeviceError> {
        self.call(move |nic, _| nic.poll_completion(cq)).await
    }

    /// `ibv_poll_cq` for up to `max` completions, without waiting.
    pub async fn poll_completions(
        &self,
        cq: CqHandle,
        max: usize,
    ) -> Result<Vec<Cqe>, DeviceError> {
        self.call(move |nic, _| {
            std::iter::from_fn(|| nic.poll_completion(cq))
                .take(max)
                .collect()
        })
        .await
    }

    /// Waits for completions of `cq` and returns up to `max` of them (at least one), giving up
    /// after `limit`: [`DeviceHandle::next_completion`] for a batch, as perftest polls 16 at a
    /// time. One poll (one turn of the device) takes them all.
    pub async fn next_completions_within(
        &self,
        cq: CqHandle,
        max: usize,
        limit: Duration,
    ) -> Result<Vec<Cqe>, DeviceError> {
        tokio::time::timeout(limit, self.next_completions(cq, max.max(1)))
            .await
            .map_err(|_| DeviceError::Timeout(limit))?
    }

    /// Waits for the next completion of `cq`: `ibv_get_cq_event` then `ibv_poll_cq`, or, on a
    /// device started with [`crate::DeviceConfig::busy_poll`], `ibv_poll_cq` in a loop (each
    /// poll lets the device's task run a turn: on a single-threaded runtime the two take turns
    /// without ever sleeping, which saves the wake-ups of a latency test).
    pub async fn next_completion(&self, cq: CqHandle) -> Result<Cqe, DeviceError> {
        self.wait_for(|| self.poll_completion(cq)).await
    }

    /// Up to `max` (at least 1) completions of `cq` once there is one.
    async fn next_completions(&self, cq: CqHandle, max: usize) -> Result<Vec<Cqe>, DeviceError> {
        self.wait_for(|| async move {
            let cqes = self.poll_completions(cq, max).await?;
            Ok((!cqes.is_empty()).then_some(cqes))
        })
        .await
    }

    /// Polls with `poll` until it finds something: sleeping until the device delivers a
    /// completion between polls, or, busy polling, yielding to the device's task.
    async fn wait_for<T, F>(&self, mut poll: impl FnMut() -> F) -> Result<T, DeviceError>
    where
        F: Future<Output = Result<Option<T>, DeviceError>>,
    {
        if self.busy_poll {
            loop {
                if let Some(found) = poll().await? {
                    return Ok(found);
                }
                tokio::task::yield_now().await;
            }
        }
        loop {
            // Register for the wake-up before looking, so one that comes in between is not lost.
            let notified = self.completions.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(found) = poll().await? {
                return Ok(found);
            }
            notified.await;
        }
    }

    /// [`DeviceHandle::next_completion`], giving up after `limit`.
    pub async fn next_completion_within(
        &self,
        cq: CqHandle,
        limit: Duration,
    ) -> Result<Cqe, DeviceError> {
        tokio::time::timeout(limit, self.next_completion(cq))
            .await
            .map_err(|_| DeviceError::Timeout(limit))?
    }

    /// The backend's counters: what it dropped before the engine saw it (all zero for a
    /// backend that drops nothing of its own, such as the UDP socket).
    pub fn backend_stats(&self) -> BackendStats {
        self.backend
            .as_ref()
            .map(|counters| counters.snapshot())
            .unwrap_or_default()
    }

    /// A copy of the engine's counters.
    pub async fn stats(&self) -> Result<Stats, DeviceError> {
        self.call(|nic, _| nic.stats().clone()).await
    }

    /// A QP's congestion control now: its rate, target rate, α and CNP counts.
    pub async fn qp_congestion(&self, qpn: Qpn) -> Result<CongestionState, DeviceError> {
        self.call(move |nic, _| nic.qp_congestion(qpn))
            .await?
            .map_err(Into::into)
    }
}
