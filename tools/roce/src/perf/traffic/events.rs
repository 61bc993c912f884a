//! perftest's `-e`: completions waited for through the CQ's completion event, as
//! `ibv_req_notify_cq` and `ibv_get_cq_event` do, instead of polling the CQ
//! (perftest_resources.h `ctx_notify_events`: get the event, acknowledge it, arm the CQ again,
//! then poll what is there).

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use roce_core::{CqHandle, Cqe};
use roce_device::{CompletionQueue, DeviceError, DeviceHandle};
use tokio::sync::Notify;

/// A CQ and the channel its completion events come on.
#[derive(Debug)]
pub(in crate::perf) struct Channel {
    queue: Arc<CompletionQueue>,
    /// Signalled once by the device for each armed CQ's next completion; a signal that comes
    /// while nobody waits is kept for the next wait (a completion channel's fd stays readable).
    event: Arc<Notify>,
    /// Events taken from the channel (perftest acknowledges each with `ibv_ack_cq_events`).
    events: Cell<u64>,
}

impl Channel {
    /// The channel of `cq`, armed for its first completion (perftest arms its CQs once after
    /// the connection, before the traffic).
    pub(in crate::perf) fn new(device: &DeviceHandle, cq: CqHandle) -> Result<Self, DeviceError> {
        let queue = device.completion_queue(cq).ok_or(DeviceError::Verbs(
            roce_core::VerbsError::UnknownCq(cq.value()),
        ))?;
        let channel = Self {
            queue,
            event: Arc::new(Notify::new()),
            events: Cell::new(0),
        };
        channel.arm();
        Ok(channel)
    }

    /// `ibv_req_notify_cq(cq, 0)`: the next completion signals the channel.
    fn arm(&self) {
        let event = self.event.clone();
        self.queue.arm(move || event.notify_one());
    }

    /// The events taken so far.
    pub(in crate::perf) fn events(&self) -> u64 {
        self.events.get()
    }

    /// Up to `max` completions appended to `out`, at least one (how many is returned), within
    /// `limit` ([`Channel::wait_for`]).
    pub(in crate::perf) async fn next(
        &self,
        max: usize,
        limit: Duration,
        out: &mut Vec<Cqe>,
    ) -> Result<usize, DeviceError> {
        self.wait_for(limit, || self.queue.poll_into(max.max(1), out))
            .await
    }

    /// The next completion within `limit` ([`Channel::wait_for`]), taken without a list: a
    /// latency loop takes one per exchange.
    pub(in crate::perf) async fn next_one(&self, limit: Duration) -> Result<Cqe, DeviceError> {
        let mut one = None;
        self.wait_for(limit, || {
            one = self.queue.poll();
            usize::from(one.is_some())
        })
        .await?;
        Ok(one.expect("wait_for returns once `take` took one"))
    }

    /// Until `take` takes completions from the CQ (it returns how many), within `limit`: what
    /// the CQ holds; when it holds nothing, the next event (`ibv_get_cq_event`), the CQ armed
    /// again (`ibv_req_notify_cq`), then what it holds. A completion that came between the poll
    /// and the arm is seen by the poll after the arm, so none is waited for in vain.
    async fn wait_for(
        &self,
        limit: Duration,
        mut take: impl FnMut() -> usize,
    ) -> Result<usize, DeviceError> {
        tokio::time::timeout(limit, async {
            loop {
                let taken = take();
                if taken > 0 {
                    return taken;
                }
                self.event.notified().await;
                self.events.set(self.events.get() + 1);
                self.arm();
            }
        })
        .await
        .map_err(|_| DeviceError::Timeout(limit))
    }
}
