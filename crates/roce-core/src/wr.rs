//! Work requests: what the application posts to a QP's send and receive queues (`ibv_send_wr`,
//! `ibv_recv_wr`).

use std::net::IpAddr;

use roce_wire::Qpn;

/// A scatter/gather element: `length` bytes at `addr` in the region of `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Address inside the region (`MemoryRegion::addr() + offset`).
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// The region's local key.
    pub lkey: u32,
}

/// Where in the peer's memory an RDMA or atomic operation acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Remote {
    /// The peer's virtual address.
    pub addr: u64,
    /// The peer's remote key.
    pub rkey: u32,
}

/// The operation of a send work request (`ibv_wr_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendOp {
    /// SEND: consumes a receive WR at the peer.
    Send,
    /// SEND with immediate data.
    SendWithImm(u32),
    /// SEND that invalidates the peer's `rkey`.
    SendWithInv(u32),
    /// RDMA WRITE.
    RdmaWrite(Remote),
    /// RDMA WRITE with immediate data: also consumes a receive WR at the peer.
    RdmaWriteWithImm(Remote, u32),
    /// RDMA READ into the local SGEs.
    RdmaRead(Remote),
    /// 64-bit compare and swap at an 8-byte aligned remote address; the original value lands in
    /// the first 8 local bytes.
    CompareSwap {
        /// Target.
        remote: Remote,
        /// Value to compare with.
        compare: u64,
        /// Value to store when equal.
        swap: u64,
    },
    /// 64-bit fetch and add; the original value lands in the first 8 local bytes.
    FetchAdd {
        /// Target.
        remote: Remote,
        /// Value to add.
        add: u64,
    },
    /// Binds a memory window to a range of a region (`IBV_WR_BIND_MW`, and what
    /// `ibv_bind_mw` posts for a type 1 window): a local operation, carried out when every
    /// earlier WR of the queue has completed; no packet.
    BindMw(crate::mw::MwBind),
    /// Invalidates a type 2 window's R_Key (`IBV_WR_LOCAL_INV`): a local operation.
    LocalInv(u32),
}

impl SendOp {
    /// The opcode its work completion carries.
    pub(crate) const fn wc_opcode(&self) -> crate::cq::WcOpcode {
        use crate::cq::WcOpcode;
        match self {
            Self::Send | Self::SendWithImm(_) | Self::SendWithInv(_) => WcOpcode::Send,
            Self::RdmaWrite(_) | Self::RdmaWriteWithImm(..) => WcOpcode::RdmaWrite,
            Self::RdmaRead(_) => WcOpcode::RdmaRead,
            Self::CompareSwap { .. } => WcOpcode::CompareSwap,
            Self::FetchAdd { .. } => WcOpcode::FetchAdd,
            Self::BindMw(_) => WcOpcode::BindMw,
            Self::LocalInv(_) => WcOpcode::LocalInv,
        }
    }

    /// Whether the operation is local to the NIC (a bind or a local invalidation): it sends
    /// nothing and takes no PSN.
    pub const fn is_local(&self) -> bool {
        matches!(self, Self::BindMw(_) | Self::LocalInv(_))
    }

    /// Whether the operation is an RDMA READ or an atomic: it takes one of the peer's responder
    /// resources (`max_rd_atomic`) and its data comes back in responses.
    pub const fn is_read_or_atomic(&self) -> bool {
        matches!(
            self,
            Self::RdmaRead(_) | Self::CompareSwap { .. } | Self::FetchAdd { .. }
        )
    }

    /// Whether the operation is an atomic.
    pub const fn is_atomic(&self) -> bool {
        matches!(self, Self::CompareSwap { .. } | Self::FetchAdd { .. })
    }
}

/// The destination of a UD send (`ibv_send_wr.wr.ud`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// The peer's IP address (its GID).
    pub ip: IpAddr,
    /// The peer's QP.
    pub qpn: Qpn,
    /// The Q_Key to send; when its high bit is set the QP's own Q_Key is sent instead
    /// (IBTA vol. 1 §10.2.5).
    pub qkey: u32,
}

/// A send work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// The application's identifier, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local data: the source of SEND and WRITE, the sink of READ and atomics.
    pub sgl: crate::Sgl,
    /// Whether a successful completion is reported (errors always are).
    pub signaled: bool,
    /// Set SE in the last packet: the peer raises a solicited event.
    pub solicited: bool,
    /// Copy the data at post time (`IBV_SEND_INLINE`): the SGEs may be reused at once.
    pub inline: bool,
    /// The data of an inline SEND or WRITE, given as bytes rather than gathered from
    /// registered memory: verbs' `IBV_SEND_INLINE` takes it from any memory of the program's,
    /// registered or not, so a verbs library copies it out and hands it over here. When set,
    /// `sgl` is not read and the message is these bytes.
    pub inline_data: Option<crate::InlineData>,
    /// For UD QPs: where the datagram goes.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled work request with no flags.
    pub fn new(wr_id: u64, op: SendOp, sgl: impl Into<crate::Sgl>) -> Self {
        Self {
            wr_id,
            op,
            sgl: sgl.into(),
            signaled: true,
            solicited: false,
            inline: false,
            inline_data: None,
            ud: None,
        }
    }

    /// Total bytes of the SGEs.
    pub fn length(&self) -> u64 {
        self.sgl.iter().map(|sge| u64::from(sge.length)).sum()
    }
}

/// A receive work request: where an incoming SEND (or the immediate of a WRITE) lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// The application's identifier, returned in the completion.
    pub wr_id: u64,
    /// Where the data goes.
    pub sgl: crate::Sgl,
}
