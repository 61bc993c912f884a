//! The CM's events as something to await: the engine hands each event to a sink as it is
//! raised (`DeviceHandle::on_cm_event`); this sink queues it and wakes whoever waits, so a
//! tool's connect or accept learns of its REP or REQ at once, without looking at the engine's
//! queue on a timer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use roce_core::cm::CmEvent;
use tokio::sync::Notify;

/// Events raised and not yet taken, and the wake-up of their taker.
#[derive(Debug, Default)]
pub(crate) struct CmInbox {
    queue: Mutex<VecDeque<CmEvent>>,
    arrived: Notify,
}

impl CmInbox {
    /// An empty inbox, shared with the sink that fills it.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Queues `event` (the sink: called with the engine locked, so it only queues) and wakes
    /// the taker, or leaves the wake-up for its next wait.
    pub(crate) fn put(&self, event: CmEvent) {
        self.lock().push_back(event);
        self.arrived.notify_one();
    }

    /// The oldest event, waiting for one until `deadline`; `None` once it has passed.
    pub(crate) async fn next(&self, deadline: Instant) -> Option<CmEvent> {
        loop {
            if let Some(event) = self.lock().pop_front() {
                return Some(event);
            }
            // A `put` between the look above and this wait left its permit: no event is
            // missed.
            let wait = self.arrived.notified();
            if tokio::time::timeout_at(deadline.into(), wait)
                .await
                .is_err()
            {
                return self.lock().pop_front();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<CmEvent>> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_core::cm::ConnId;
    use std::time::Duration;

    #[tokio::test]
    async fn an_event_wakes_its_waiter_and_none_is_lost_or_reordered() {
        let inbox = CmInbox::new();
        let far = Instant::now() + Duration::from_secs(10);
        // Raised before anyone waits: taken at once, in order.
        inbox.put(CmEvent::Unreachable { conn: ConnId(1) });
        inbox.put(CmEvent::Unreachable { conn: ConnId(2) });
        assert_eq!(
            inbox.next(far).await,
            Some(CmEvent::Unreachable { conn: ConnId(1) })
        );
        assert_eq!(
            inbox.next(far).await,
            Some(CmEvent::Unreachable { conn: ConnId(2) })
        );
        // Raised from another thread while the taker waits: it wakes, long before the deadline.
        let raiser = inbox.clone();
        let started = Instant::now();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            raiser.put(CmEvent::Unreachable { conn: ConnId(3) });
        });
        assert_eq!(
            inbox.next(far).await,
            Some(CmEvent::Unreachable { conn: ConnId(3) })
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        // Nothing comes: `None` at the deadline.
        let soon = Instant::now() + Duration::from_millis(30);
        assert_eq!(inbox.next(soon).await, None);
        assert!(Instant::now() >= soon);
    }
}
