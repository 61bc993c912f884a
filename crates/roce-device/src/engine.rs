//! The engine under its one lock, with the sinks of its events: what every path of the device
//! (a verb, the task's turn, a direct send or receive) steps, one step at a time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use roce_core::{AsyncEvent, CmEvent, CqHandle, Nic};

use crate::cq::CompletionQueue;

/// Where asynchronous events go ([`crate::DeviceHandle::on_async_event`]).
type EventSink = Box<dyn FnMut(AsyncEvent) + Send>;

/// Where the CM's events go ([`crate::DeviceHandle::on_cm_event`]).
type CmSink = Box<dyn FnMut(CmEvent) + Send>;

/// The engine and where its asynchronous and CM events go.
pub(crate) struct Engine {
    pub(crate) nic: Nic,
    pub(crate) events: Option<EventSink>,
    pub(crate) cm_events: Option<CmSink>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("nic", &self.nic)
            .field("events", &self.events.is_some())
            .field("cm_events", &self.cm_events.is_some())
            .finish()
    }
}

/// The shared completion queues by the engine's CQ handle (a tree: looked up at every
/// completion and every poll, where SipHash cost more than a few CQs' comparisons). Apart from
/// the engine's lock, so that finding a queue to poll never waits for a step of the device.
pub(crate) type Queues = RwLock<BTreeMap<CqHandle, Arc<CompletionQueue>>>;

impl Engine {
    /// Moves what the engine completed into `queues`; returns whether there was a completion.
    /// A CQ made by a raw [`crate::DeviceHandle::call`] has no shared queue: its completions stay in
    /// the engine, for `Nic::poll_completion`.
    pub(crate) fn deliver(&mut self, queues: &Queues) -> bool {
        let first = self.nic.poll_completed_cq();
        if let Some(cq) = first {
            // One look at the table for all the CQs this turn completed.
            let queues = read(queues);
            let mut next = Some(cq);
            while let Some(cq) = next {
                if let Some(queue) = queues.get(&cq) {
                    let nic = &mut self.nic;
                    queue.push_from(|| nic.poll_completion(cq));
                }
                next = self.nic.poll_completed_cq();
            }
        }
        if let Some(sink) = &mut self.events {
            while let Some(event) = self.nic.poll_event() {
                sink(event);
            }
        }
        if let Some(sink) = &mut self.cm_events {
            while let Some(event) = self.nic.poll_cm_event() {
                sink(event);
            }
        }
        first.is_some()
    }
}

pub(crate) fn read(
    queues: &Queues,
) -> RwLockReadGuard<'_, BTreeMap<CqHandle, Arc<CompletionQueue>>> {
    queues.read().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn write(
    queues: &Queues,
) -> RwLockWriteGuard<'_, BTreeMap<CqHandle, Arc<CompletionQueue>>> {
    queues.write().unwrap_or_else(PoisonError::into_inner)
}

/// The engine behind its lock.
#[derive(Debug)]
pub(crate) struct EngineLock(Mutex<Engine>);

impl EngineLock {
    pub(crate) fn new(nic: Nic) -> Self {
        Self(Mutex::new(Engine {
            nic,
            events: None,
            cm_events: None,
        }))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Engine> {
        // A panic inside the engine is a bug; the state it left is still the best there is.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One step of the engine: `f`, with the lock held for it alone. What it completes stays
    /// in the engine until [`Engine::deliver`]. The caller reads the clock, once for a batch
    /// of steps.
    pub(crate) fn step<R>(&self, f: impl FnOnce(&mut Nic) -> R) -> R {
        f(&mut self.lock().nic)
    }
}
