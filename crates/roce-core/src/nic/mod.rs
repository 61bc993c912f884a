//! The NIC: its objects, what comes in from the network, the verbs, and what goes out.
//!
//! The state is split as smoltcp splits `Interface` and `InterfaceInner`, so that one QP and
//! everything its parts touch can be borrowed at once:
//! - [`Shared`]: configuration, protection domains, memory regions, CQs, counters and the
//!   completions waiting for delivery; a QP's parts see it through a `Ctx` ([`Shared::ctx`]);
//! - the QP table (`qp_table.rs`);
//! - [`schedule::Schedule`]: which QP may send next, the deadlines, the budget of
//!   unacknowledged packets.
//!
//! One file per concern: `ingress.rs` (rxe_recv.c: checks and dispatch of what arrives),
//! `objects.rs` (PDs, MRs, CQs, QPs and their attributes), `srq.rs` (shared receive queues),
//! `post.rs` (work requests checked and queued), `schedule.rs` (timers and egress), `gsi.rs`
//! (QP 1) and `cm.rs` (the communication manager's calls).

use std::collections::{BTreeMap, BTreeSet};

use roce_wire::{Psn, Qpn};

use crate::cq::{Cq, CqHandle, Cqe};
use crate::event::{AsyncEvent, AsyncEvents};
use crate::mr::Mrs;
use crate::qp::SrqsAndEvents;
use crate::qp::{Ctx, Qp, QpState};
use crate::{CongestionState, Instant, NicConfig, Stats, VerbsError};

mod cm;
mod gsi;
mod ingress;
mod objects;
mod post;
mod qp_table;
mod schedule;
mod srq;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cc;
#[cfg(test)]
mod tests_gsi;
#[cfg(test)]
mod tests_srq;
#[cfg(test)]
mod tests_ud;

/// The largest UDP payload the NIC writes: BTH, HPCC's INT header, RETH, ImmDt, 4096 bytes of
/// payload, pad and ICRC fit. A `poll_transmit` buffer this long always suffices.
pub const MAX_DATAGRAM: usize = 4096 + 128;

/// A RoCEv2 NIC, sans IO. See the crate documentation for the contract.
#[derive(Debug)]
pub struct Nic {
    shared: Shared,
    qps: qp_table::QpTable,
    sched: schedule::Schedule,
    /// The communication manager.
    cm: crate::cm::Cm,
    /// A datagram without its INT header (`ingress.rs`), reused.
    int_scratch: Vec<u8>,
}

/// What a QP's parts may touch while the QP itself is borrowed.
#[derive(Debug)]
pub(crate) struct Shared {
    config: NicConfig,
    pds: BTreeSet<u32>,
    mrs: Mrs,
    mws: crate::mw::Windows,
    cqs: BTreeMap<u32, Cq>,
    /// SRQs, and asynchronous events waiting for the application.
    side: SrqsAndEvents,
    /// Completions made during one call, delivered to their CQs at its end.
    completions: Vec<(CqHandle, Cqe)>,
    /// CQs that gained completions since `poll_completed_cq` last returned them, each once.
    completed: Vec<CqHandle>,
    stats: Stats,
    ids: objects::Ids,
    /// QP 1.
    gsi: crate::gsi::Gsi,
    /// Whether a poll lends payloads (`Nic::poll_transmit_lending` sets it for its call), and
    /// where it puts their loans: kept between calls, so that a poll moves no vector.
    lending: bool,
    loans: Vec<crate::Loan>,
}

impl Nic {
    /// A NIC with no object yet.
    pub fn new(config: NicConfig) -> Self {
        let ids = objects::Ids::new(&config);
        let events = AsyncEvents::new(config.max_async_events);
        Self {
            shared: Shared {
                config,
                pds: BTreeSet::new(),
                mrs: BTreeMap::new(),
                mws: BTreeMap::new(),
                cqs: BTreeMap::new(),
                side: SrqsAndEvents {
                    srqs: BTreeMap::new(),
                    events,
                },
                completions: Vec::new(),
                completed: Vec::new(),
                stats: Stats::default(),
                ids,
                gsi: crate::gsi::Gsi::default(),
                lending: false,
                loans: Vec::new(),
            },
            qps: qp_table::QpTable::default(),
            sched: schedule::Schedule::default(),
            cm: crate::cm::Cm::default(),
            int_scratch: Vec::new(),
        }
    }

    // A. getters

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// The configuration.
    pub fn config(&self) -> &NicConfig {
        &self.shared.config
    }

    /// A QP's state.
    pub fn qp_state(&self, qpn: Qpn) -> Result<QpState, VerbsError> {
        self.qp_ref(qpn).map(|qp| qp.state)
    }

    /// The next PSN a QP's requester will use and the one its responder expects.
    pub fn qp_psns(&self, qpn: Qpn) -> Result<(Psn, Psn), VerbsError> {
        self.qp_ref(qpn).map(|qp| (qp.req.psn, qp.resp.epsn))
    }

    /// A QP's congestion control at `now`: its rate, target rate, α (decayed to `now`) and
    /// CNPs.
    pub fn qp_congestion(&self, qpn: Qpn, now: Instant) -> Result<CongestionState, VerbsError> {
        self.qp_ref(qpn).map(|qp| qp.cc.state(now))
    }

    /// Completions waiting in `cq`.
    pub fn completions_waiting(&self, cq: CqHandle) -> usize {
        self.shared.cqs.get(&cq.0).map_or(0, Cq::len)
    }

    /// Asynchronous events waiting for [`Nic::poll_event`].
    pub fn events_waiting(&self) -> usize {
        self.shared.side.events.len()
    }

    /// How many asynchronous events the NIC has raised (including any a full queue lost): a
    /// driver wakes whoever waits for events only when this moved.
    pub fn events_raised(&self) -> u64 {
        self.shared.side.events.raised()
    }

    /// A QP, for the crate's tests.
    #[cfg(test)]
    pub(crate) fn qp(&self, qpn: Qpn) -> &Qp {
        self.qps.get(&qpn).expect("a QP of the test")
    }

    // D. outputs (the rest are in `schedule.rs`)

    /// The next completion of `cq`.
    pub fn poll_completion(&mut self, cq: CqHandle) -> Option<Cqe> {
        self.shared.cqs.get_mut(&cq.0)?.pop()
    }

    /// A CQ that gained completions since this last returned it (each CQ once, whatever the
    /// number of completions), or `None`. A driver that moves completions into queues of its
    /// own, as a NIC writes them into the host's memory, takes each such CQ's completions with
    /// [`Nic::poll_completion`] and visits no other CQ.
    pub fn poll_completed_cq(&mut self) -> Option<CqHandle> {
        let cq = self.shared.completed.pop()?;
        if let Some(queue) = self.shared.cqs.get_mut(&cq.0) {
            queue.listed = false;
        }
        Some(cq)
    }

    /// The oldest asynchronous event waiting (`ibv_get_async_event`).
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        self.shared.side.events.pop()
    }

    fn qp_ref(&self, qpn: Qpn) -> Result<&Qp, VerbsError> {
        self.qps.get(&qpn).ok_or(VerbsError::UnknownQp(qpn))
    }
}

impl Shared {
    /// The view of the NIC a QP's parts work with, at `now`, for anything but building a
    /// packet to send (which `schedule.rs` sets up with its IPv4 ID and the budget's state).
    fn ctx(&mut self, now: Instant) -> Ctx<'_> {
        Ctx {
            now,
            config: &self.config,
            mrs: &mut self.mrs,
            mws: &mut self.mws,
            side: &mut self.side,
            stats: &mut self.stats,
            completions: &mut self.completions,
            ip_id: 0,
            must_cover: false,
            arrival: None,
            int: None,
            loans: if self.lending {
                Some(&mut self.loans)
            } else {
                None
            },
        }
    }

    /// `cqe` into `cq` now, as a verb that completes its WR when it is posted does.
    pub(super) fn complete_at_once(&mut self, cq: CqHandle, cqe: Cqe) {
        self.completions.push((cq, cqe));
        self.deliver_completions();
    }

    /// Moves the completions made during a call into their CQs. Called at the end of every
    /// input and output; most of the time there is nothing to deliver.
    fn deliver_completions(&mut self) {
        if self.completions.is_empty() {
            return;
        }
        for (cq, cqe) in self.completions.drain(..) {
            let Some(queue) = self.cqs.get_mut(&cq.0) else {
                self.stats.cq_overflows += 1;
                continue;
            };
            if !queue.push(cqe) {
                self.stats.cq_overflows += 1;
            }
            if !queue.listed {
                queue.listed = true;
                self.completed.push(cq);
            }
        }
    }

    /// Counts a dropped datagram under `counter` and traces why.
    fn drop_rx(&mut self, counter: impl FnOnce(&mut Stats) -> &mut u64, why: &'static str) {
        *counter(&mut self.stats) += 1;
        tracing::trace!(why, "rx drop");
    }
}
