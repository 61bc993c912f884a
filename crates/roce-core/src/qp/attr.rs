//! What a QP is made with ([`QpInit`]) and moved by ([`QpAttr`]), and its path
//! ([`AddressVector`]): the attributes of `ibv_create_qp` and `ibv_modify_qp`.

use std::net::IpAddr;

use roce_wire::{Psn, Qpn};

use super::{QpState, QpType};
use crate::config::Mtu;
use crate::{CqHandle, PdHandle};

/// Where a connected QP's packets go and how they are marked (`ibv_ah_attr` with its GRH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressVector {
    /// Our address to send from (the source GID); must be one of the NIC's.
    pub src: IpAddr,
    /// The peer's address (the destination GID).
    pub dst: IpAddr,
    /// DSCP of the packets (GRH traffic class bits 7:2).
    pub dscp: u8,
    /// TTL (GRH hop limit). rxe sends 64 whatever is asked; 0 here means 64.
    pub hop_limit: u8,
}

impl AddressVector {
    /// A path from `src` to `dst` with DSCP 0 and TTL 64.
    pub const fn new(src: IpAddr, dst: IpAddr) -> Self {
        Self {
            src,
            dst,
            dscp: 0,
            hop_limit: 64,
        }
    }
}

/// What a QP is created with (`ibv_qp_init_attr`). A QP that takes its receive WRs from a
/// shared receive queue (`ibv_qp_init_attr.srq`) is created with `Nic::create_qp_with_srq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInit {
    /// Its protection domain.
    pub pd: PdHandle,
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Where send completions go.
    pub send_cq: CqHandle,
    /// Where receive completions go.
    pub recv_cq: CqHandle,
    /// Send queue depth.
    pub max_send_wr: usize,
    /// Receive queue depth.
    pub max_recv_wr: usize,
}

impl QpInit {
    /// A QP of `qp_type` in `pd` whose send and receive completions both go to `cq`, with
    /// queues of `depth` work requests each (what ibv_rc_pingpong and perftest create).
    pub const fn new(qp_type: QpType, pd: PdHandle, cq: CqHandle, depth: usize) -> Self {
        Self {
            pd,
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: depth,
            max_recv_wr: depth,
        }
    }
}

/// Attributes of `modify_qp` (`ibv_qp_attr` plus its mask: `None` is "not in the mask").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttr {
    /// The state to move to (`IBV_QP_STATE`).
    pub qp_state: Option<QpState>,
    /// The partition key index (only index 0, P_Key 0xffff, exists).
    pub pkey_index: Option<u16>,
    /// The port (only port 1 exists).
    pub port_num: Option<u8>,
    /// The Q_Key (UD).
    pub qkey: Option<u32>,
    /// Remote access rights the responder grants (`IBV_QP_ACCESS_FLAGS`).
    pub access_flags: Option<crate::Access>,
    /// The path: addresses and marking (`IBV_QP_AV`).
    pub av: Option<AddressVector>,
    /// The path MTU.
    pub path_mtu: Option<Mtu>,
    /// The peer's QP.
    pub dest_qpn: Option<Qpn>,
    /// The first PSN the responder expects (`IBV_QP_RQ_PSN`).
    pub rq_psn: Option<Psn>,
    /// The first PSN the requester sends (`IBV_QP_SQ_PSN`).
    pub sq_psn: Option<Psn>,
    /// READs and atomics the responder serves at once.
    pub max_dest_rd_atomic: Option<u8>,
    /// READs and atomics the requester has outstanding at once.
    pub max_rd_atomic: Option<u8>,
    /// The RNR timer code the responder puts in its RNR NAKs (0..=31, IBTA Table 46).
    pub min_rnr_timer: Option<u8>,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout, 0 = infinite (0..=31).
    pub timeout: Option<u8>,
    /// Transport retries (0..=7).
    pub retry_cnt: Option<u8>,
    /// RNR retries (0..=7; 7 = infinite).
    pub rnr_retry: Option<u8>,
}
