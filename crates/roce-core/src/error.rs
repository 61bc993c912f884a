//! Misuse of the verbs API. Never used for what arrives from the network: that is dropped and
//! counted in [`crate::Stats`].

use crate::qp::{QpState, QpType};
use roce_wire::Qpn;

/// Why a verb was refused. Each names what was wrong, as `ibv_*` calls return an errno plus the
/// kernel log would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// No QP with this number.
    #[error("no QP {0}")]
    UnknownQp(Qpn),
    /// No protection domain with this handle.
    #[error("no protection domain {0}")]
    UnknownPd(u32),
    /// No completion queue with this handle.
    #[error("no completion queue {0}")]
    UnknownCq(u32),
    /// No memory region with this key.
    #[error("no memory region with key {0:#x}")]
    UnknownMr(u32),
    /// The state transition is not one the QP state machine allows (IBTA vol. 1 §10.3.1).
    #[error("QP {qpn}: cannot go from {from:?} to {to:?}")]
    InvalidTransition {
        /// The QP.
        qpn: Qpn,
        /// Its current state.
        from: QpState,
        /// The state asked for.
        to: QpState,
    },
    /// A transition needs an attribute that was not given.
    #[error("QP {qpn}: the transition to {to:?} needs the attribute {attr}")]
    MissingAttribute {
        /// The QP.
        qpn: Qpn,
        /// The state asked for.
        to: QpState,
        /// The attribute's name (`ibv_qp_attr` field).
        attr: &'static str,
    },
    /// An attribute the transition does not accept for this QP type.
    #[error("QP {qpn}: the attribute {attr} is not allowed going to {to:?} on a {qp_type:?} QP")]
    UnexpectedAttribute {
        /// The QP.
        qpn: Qpn,
        /// The QP type.
        qp_type: QpType,
        /// The state asked for.
        to: QpState,
        /// The attribute's name.
        attr: &'static str,
    },
    /// An attribute out of its range.
    #[error("attribute {attr} = {value} is out of range ({range})")]
    OutOfRange {
        /// The attribute's name.
        attr: &'static str,
        /// The value given.
        value: u64,
        /// What is allowed.
        range: &'static str,
    },
    /// The QP's state does not allow this verb (posting a send before RTS, …).
    #[error("QP {qpn} is in state {state:?}: {what} is not allowed")]
    WrongState {
        /// The QP.
        qpn: Qpn,
        /// Its state.
        state: QpState,
        /// The verb.
        what: &'static str,
    },
    /// The work queue is full.
    #[error("QP {qpn}: the {queue} queue is full ({depth} work requests)")]
    QueueFull {
        /// The QP.
        qpn: Qpn,
        /// "send" or "receive".
        queue: &'static str,
        /// Its depth.
        depth: usize,
    },
    /// The work request does not fit the QP (an RDMA opcode on a UD QP, too many SGEs, a
    /// message longer than the device allows, inline data over the limit, …).
    #[error("QP {qpn}: invalid work request: {reason}")]
    InvalidWorkRequest {
        /// The QP.
        qpn: Qpn,
        /// What is wrong.
        reason: &'static str,
    },
    /// An SGE does not lie inside its memory region, or the region does not allow local access.
    #[error("SGE addr {addr:#x} len {len} is not inside memory region {lkey:#x}")]
    BadSge {
        /// The SGE's address.
        addr: u64,
        /// The SGE's length.
        len: u32,
        /// The SGE's lkey.
        lkey: u32,
    },
    /// The device limit on this object is reached.
    #[error("too many {0}")]
    Exhausted(&'static str),
    /// The memory region still has QPs or bindings using it.
    #[error("memory region {0:#x} is in use")]
    Busy(u32),
    /// No shared receive queue with this handle.
    #[error("no shared receive queue {0}")]
    UnknownSrq(u32),
    /// The SRQ still has QPs taking from it (`ibv_destroy_srq` returns EBUSY).
    #[error("shared receive queue {srq} is used by {qps} QP(s)")]
    SrqBusy {
        /// The SRQ.
        srq: u32,
        /// QPs created on it and not yet destroyed.
        qps: usize,
    },
    /// The SRQ is in another protection domain than the QP.
    #[error("shared receive queue {srq} is in protection domain {srq_pd}, the QP in {qp_pd}")]
    SrqWrongPd {
        /// The SRQ.
        srq: u32,
        /// The SRQ's protection domain.
        srq_pd: u32,
        /// The QP's protection domain.
        qp_pd: u32,
    },
    /// The QP takes its receive WRs from an SRQ: post them there (`post_srq_recv`).
    #[error("QP {0} receives through a shared receive queue: post to it instead")]
    RecvThroughSrq(Qpn),
    /// The SRQ is full.
    #[error("shared receive queue {srq} is full ({depth} work requests)")]
    SrqFull {
        /// The SRQ.
        srq: u32,
        /// Its depth.
        depth: usize,
    },
    /// The receive WR does not fit the SRQ (more SGEs than its `max_sge`).
    #[error("shared receive queue {srq}: invalid work request: {reason}")]
    InvalidSrqWorkRequest {
        /// The SRQ.
        srq: u32,
        /// What is wrong.
        reason: &'static str,
    },
}
