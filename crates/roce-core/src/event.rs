//! Asynchronous events (`ibv_get_async_event`): what the NIC tells the application outside any
//! completion. They wait in one bounded queue per NIC, oldest first; one that finds it full is
//! lost and counted under `async_event_overflows`.
//!
//! Which events exist and when they fire follows rxe (Linux 6.x):
//! - `IBV_EVENT_SRQ_LIMIT_REACHED`: rxe_resp.c `get_srq_wqe`;
//! - `IBV_EVENT_QP_LAST_WQE_REACHED`: rxe_resp.c `flush_recv_queue`, for a QP with an SRQ
//!   whenever it is in the error state (whether the transport or the application put it
//!   there);
//! - `IBV_EVENT_QP_FATAL`: rxe never raises it (its `rxe_qp_error` moves the QP to the error
//!   state and raises nothing; the failed WR's completion says why). The NIC raises it, when
//!   `NicConfig::qp_fatal_events` asks, each time the transport itself moves a QP to the error
//!   state: retries or RNR retries exhausted, a NAK or a responder error that ends the QP, a
//!   WR that could not be carried out.
//! - `IBV_EVENT_COMM_EST`: rxe never raises it, and neither does the NIC.

use std::collections::VecDeque;

use roce_wire::Qpn;

use crate::srq::SrqHandle;
use crate::stats::Stats;

/// An asynchronous event (`ibv_async_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AsyncEvent {
    /// Taking a receive WR left fewer than the SRQ's armed limit waiting; the limit is now 0
    /// (`IBV_EVENT_SRQ_LIMIT_REACHED`).
    SrqLimitReached(SrqHandle),
    /// The transport moved the QP to the error state by itself (`IBV_EVENT_QP_FATAL`); raised
    /// only with `NicConfig::qp_fatal_events`, as rxe raises none.
    QpFatal(Qpn),
    /// A QP with an SRQ went to the error state and will take no more WRs from it
    /// (`IBV_EVENT_QP_LAST_WQE_REACHED`): the application may now destroy it.
    QpLastWqeReached(Qpn),
}

/// The queue of events waiting for the application.
#[derive(Debug)]
pub(crate) struct AsyncEvents {
    queue: VecDeque<AsyncEvent>,
    capacity: usize,
    /// Events raised so far, including those lost to a full queue.
    raised: u64,
}

impl AsyncEvents {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            capacity,
            raised: 0,
        }
    }

    /// Queues `event`, or counts it lost when the queue is full.
    pub(crate) fn raise(&mut self, event: AsyncEvent, stats: &mut Stats) {
        self.raised += 1;
        stats.async_events += 1;
        if self.queue.len() >= self.capacity {
            stats.async_event_overflows += 1;
            tracing::debug!(event = ?event, "async event lost: queue full");
            return;
        }
        tracing::debug!(event = ?event, "async event");
        self.queue.push_back(event);
    }

    pub(crate) fn pop(&mut self) -> Option<AsyncEvent> {
        self.queue.pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn raised(&self) -> u64 {
        self.raised
    }
}
