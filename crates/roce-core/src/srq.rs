//! Shared receive queues (`ibv_srq`): one queue of receive WRs that several QPs of a protection
//! domain take from, in the order they were posted, whichever QP a message arrives on.
//!
//! As rxe does (rxe_resp.c `get_srq_wqe`), a QP takes a WQE off the SRQ when a request that
//! needs one arrives and holds it, as its own, until the message completes: a multi-packet SEND
//! lands in one WQE however its packets interleave with other QPs' messages, and a QP that goes
//! to the error state completes the WQE it holds with WR_FLUSH_ERR on its own receive CQ. The
//! WQEs still in the SRQ stay there for the other QPs. Taking a WQE that leaves fewer than the
//! armed limit raises [`crate::AsyncEvent::SrqLimitReached`] once and disarms the limit
//! (`IBV_EVENT_SRQ_LIMIT_REACHED`; the application re-arms it with `modify_srq`).

use std::collections::{BTreeMap, VecDeque};

use crate::mr::PdHandle;
use crate::wr::RecvWr;

/// A shared receive queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrqHandle(pub(crate) u32);

impl SrqHandle {
    /// The handle's number (what verbs calls the SRQ number).
    pub const fn value(self) -> u32 {
        self.0
    }
}

/// What an SRQ is created with (`ibv_srq_init_attr.attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrqInit {
    /// Most receive WRs waiting at once: 1 to `NicConfig::max_srq_wr`.
    pub max_wr: usize,
    /// Most SGEs in one of its WRs: at most `NicConfig::max_sge`.
    pub max_sge: usize,
    /// The limit, armed at creation when not 0: see [`SrqAttr::limit`].
    pub limit: usize,
}

/// An SRQ's attributes, as `ibv_query_srq` returns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrqAttr {
    /// Most receive WRs waiting at once.
    pub max_wr: usize,
    /// Most SGEs in one WR.
    pub max_sge: usize,
    /// The armed limit: when taking a WR leaves fewer than this many waiting, the NIC raises
    /// [`crate::AsyncEvent::SrqLimitReached`] and sets the limit back to 0 (disarmed).
    pub limit: usize,
}

/// What `modify_srq` changes (`ibv_srq_attr` plus its mask: `None` is "not in the mask").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SrqModify {
    /// A new depth (`IBV_SRQ_MAX_WR`): 1 to `NicConfig::max_srq_wr`, at least the WRs waiting
    /// and the armed limit.
    pub max_wr: Option<usize>,
    /// Arms the limit (`IBV_SRQ_LIMIT`), at most `max_wr`; 0 disarms it.
    pub limit: Option<usize>,
}

/// An SRQ inside the NIC.
#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) pd: PdHandle,
    pub(crate) max_wr: usize,
    pub(crate) max_sge: usize,
    /// 0: disarmed.
    pub(crate) limit: usize,
    pub(crate) queue: VecDeque<RecvWr>,
    /// QPs created on it: it cannot be destroyed while any is.
    pub(crate) users: usize,
}

impl Srq {
    pub(crate) fn new(pd: PdHandle, init: &SrqInit) -> Self {
        Self {
            pd,
            max_wr: init.max_wr,
            max_sge: init.max_sge,
            limit: init.limit,
            queue: VecDeque::new(),
            users: 0,
        }
    }

    pub(crate) fn attr(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.max_wr,
            max_sge: self.max_sge,
            limit: self.limit,
        }
    }
}

/// The NIC's SRQs by handle number.
pub(crate) type Srqs = BTreeMap<u32, Srq>;

/// Takes the oldest WQE of `srq` for a QP, and whether that left fewer than the armed limit
/// waiting — the limit is then cleared, and the caller raises
/// [`crate::AsyncEvent::SrqLimitReached`] (rxe_resp.c `get_srq_wqe`: the count after the take
/// is compared, and the limit is cleared when the event fires).
//= rxe:rxe_resp.c/get_srq_wqe
//# a QP takes the SRQ's oldest WQE; fewer left than the armed limit raises the event once and disarms it
pub(crate) fn take(srqs: &mut Srqs, srq: SrqHandle) -> Option<(RecvWr, bool)> {
    let entry = srqs.get_mut(&srq.0)?;
    let wr = entry.queue.pop_front()?;
    let limit_reached = entry.limit != 0 && entry.queue.len() < entry.limit;
    if limit_reached {
        entry.limit = 0;
        tracing::debug!(srq = srq.0, left = entry.queue.len(), "srq limit reached");
    }
    Some((wr, limit_reached))
}
