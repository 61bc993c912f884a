//! Completion queues and completions (`ibv_cq`, `ibv_wc`).

use std::collections::VecDeque;

use roce_wire::Qpn;

/// A completion queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqHandle(pub(crate) u32);

impl CqHandle {
    /// The handle's number.
    pub const fn value(self) -> u32 {
        self.0
    }
}

/// How a work request ended (`ibv_wc_status`; values as in verbs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcStatus {
    /// Success.
    Success,
    /// A local length error: a receive too small for the incoming message.
    LocLenErr,
    /// A local QP operation error: the QP could not carry the work request out (no address of
    /// the NIC's is of its destination's family).
    LocQpOpErr,
    /// A local protection error: an SGE outside its region, or without the rights.
    LocProtErr,
    /// The QP went to the error state before this work request completed.
    WrFlushErr,
    /// The peer NAKed the request as invalid.
    RemInvReqErr,
    /// The peer NAKed an access (R_Key, bounds, rights).
    RemAccessErr,
    /// The peer NAKed an operational error.
    RemOpErr,
    /// The transport retry counter ran out (local ACK timeouts and PSN-sequence NAKs).
    RetryExcErr,
    /// The RNR retry counter ran out.
    RnrRetryExcErr,
    /// A memory window bind failed (`IBV_WC_MW_BIND_ERR`, rxe `rxe_do_local_ops`).
    MwBindErr,
}

/// What completed (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A SEND (any variant).
    Send,
    /// An RDMA WRITE (any variant).
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// A compare and swap.
    CompareSwap,
    /// A fetch and add.
    FetchAdd,
    /// A receive of a SEND.
    Recv,
    /// A receive of the immediate data of an RDMA WRITE with immediate.
    RecvRdmaWithImm,
    /// A memory window bind (`IBV_WC_BIND_MW`).
    BindMw,
    /// A local invalidation (`IBV_WC_LOCAL_INV`).
    LocalInv,
}

/// One completion (`ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cqe {
    /// The work request's `wr_id`.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What it was.
    pub opcode: WcOpcode,
    /// The QP it was posted on.
    pub qpn: Qpn,
    /// Bytes received (receives) or transferred (READ), else 0.
    pub byte_len: u32,
    /// Immediate data, for receives that carried it.
    pub imm_data: Option<u32>,
    /// The R_Key a SEND with invalidate invalidated.
    pub invalidated_rkey: Option<u32>,
    /// The sender's QP, for UD receives.
    pub src_qp: Option<Qpn>,
    /// The network header of the datagram a UD receive came in (its GRH area holds it), as
    /// the kernel's `ib_wc.network_hdr_type`. `None` for every other completion.
    pub network_hdr: Option<NetworkHdr>,
    /// A receive of a message whose sender asked for a solicited event (the Solicited Event
    /// bit of its last packet's BTH, `IBV_SEND_SOLICITED`): it fires a CQ armed for solicited
    /// completions only. `false` for every other completion.
    pub solicited: bool,
}

/// The network header of a RoCEv2 datagram (`rdma_network_type`: `RDMA_NETWORK_IPV4`,
/// `RDMA_NETWORK_IPV6`). verbs has no field for it in `ibv_wc`: RoCE devices report it in `sl`
/// (see `roce-verbs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetworkHdr {
    /// IPv4: the header lies in the last 20 bytes of the GRH area.
    Ipv4,
    /// IPv6: the header fills the GRH area.
    Ipv6,
}

impl Cqe {
    /// A successful completion with no data attached.
    pub const fn success(wr_id: u64, opcode: WcOpcode, qpn: Qpn) -> Self {
        Self::new(WcStatus::Success, wr_id, opcode, qpn)
    }

    /// A completion with `status` and no data attached.
    pub const fn new(status: WcStatus, wr_id: u64, opcode: WcOpcode, qpn: Qpn) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            qpn,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: None,
            src_qp: None,
            network_hdr: None,
            solicited: false,
        }
    }
}

/// A completion queue: completions wait here for `poll_completion`.
#[derive(Debug)]
pub(crate) struct Cq {
    entries: VecDeque<Cqe>,
    depth: usize,
    /// In the NIC's list of CQs that gained completions (`Nic::poll_completed_cq`).
    pub(crate) listed: bool,
}

impl Cq {
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            depth,
            listed: false,
        }
    }

    /// Adds a completion; returns false (and drops it) when the queue is full: an overrun, which
    /// verbs report as an asynchronous error.
    pub(crate) fn push(&mut self, cqe: Cqe) -> bool {
        if self.entries.len() >= self.depth {
            return false;
        }
        self.entries.push_back(cqe);
        true
    }

    /// Gives the queue room for `depth` completions (`ibv_resize_cq`); `None`, and nothing
    /// changed, when more than that wait (rxe `rxe_cq_chk_attr`: "cqe < current # elements
    /// in queue" is `-EINVAL`).
    pub(crate) fn resize(&mut self, depth: usize) -> Option<()> {
        if depth < self.entries.len() {
            return None;
        }
        self.depth = depth;
        Some(())
    }

    pub(crate) fn pop(&mut self) -> Option<Cqe> {
        self.entries.pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}
