//! The data path's structures: PDs, MRs, CQs, QPs, address handles, work requests and
//! completions (the same source and rules as the rest of [`crate::abi`]).

use std::ffi::{c_int, c_uint, c_void};

use super::IbvContext;

/// `struct ibv_pd` (16 bytes).
#[repr(C)]
#[derive(Debug)]
pub struct IbvPd {
    /// Its context.
    pub context: *mut IbvContext,
    /// Kernel handle; a counter here.
    pub handle: u32,
}

/// `struct ibv_mr` (48 bytes).
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_comp_channel` (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvCompChannel {
    pub context: *mut IbvContext,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq` (128 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_cq_ex` (288 bytes): every CQ is allocated this large, with the `ibv_cq` first
/// and the polling functions filled, so that `ibv_cq_ex_to_cq` and `ibv_create_cq_ex` CQs are
/// the same objects. `status` and `wr_id` are those of the completion being read.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvCqEx {
    pub cq: IbvCq,
    pub comp_mask: u32,
    /// `enum ibv_wc_status`.
    pub status: c_int,
    pub wr_id: u64,
    pub start_poll: *const c_void,
    pub next_poll: *const c_void,
    pub end_poll: *const c_void,
    pub read_opcode: *const c_void,
    pub read_vendor_err: *const c_void,
    pub read_byte_len: *const c_void,
    pub read_imm_data: *const c_void,
    pub read_qp_num: *const c_void,
    pub read_src_qp: *const c_void,
    pub read_wc_flags: *const c_void,
    pub read_slid: *const c_void,
    pub read_sl: *const c_void,
    pub read_dlid_path_bits: *const c_void,
    pub read_completion_ts: *const c_void,
    pub read_cvlan: *const c_void,
    pub read_flow_tag: *const c_void,
    pub read_tm_info: *const c_void,
    pub read_completion_wallclock_ns: *const c_void,
}

/// `struct ibv_cq_init_attr_ex` (56 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvCqInitAttrEx {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut IbvCompChannel,
    pub comp_vector: u32,
    /// `enum ibv_create_cq_wc_flags`.
    pub wc_flags: u64,
    /// `enum ibv_cq_init_attr_mask`.
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut IbvPd,
}

/// `struct ibv_qp` (160 bytes).
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    /// `enum ibv_qp_state`.
    pub state: c_int,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp_ex` (352 bytes): every QP is allocated this large, with the `ibv_qp` first,
/// and its `wr_*` table filled, so that `ibv_qp_to_qp_ex` works for all of them. The
/// functions take the `ibv_qp_ex` itself; slots this library does not offer stay NULL.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct IbvQpEx {
    /// `qp_base`.
    pub qp: IbvQp,
    pub comp_mask: u64,
    /// Set by the application before each `wr_*` verb.
    pub wr_id: u64,
    /// `enum ibv_send_flags`, set by the application.
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: *const c_void,
    pub wr_atomic_fetch_add: *const c_void,
    pub wr_bind_mw: *const c_void,
    pub wr_local_inv: *const c_void,
    pub wr_rdma_read: *const c_void,
    pub wr_rdma_write: *const c_void,
    pub wr_rdma_write_imm: *const c_void,
    pub wr_send: *const c_void,
    pub wr_send_imm: *const c_void,
    pub wr_send_inv: *const c_void,
    pub wr_send_tso: *const c_void,
    pub wr_set_ud_addr: *const c_void,
    pub wr_set_xrc_srqn: *const c_void,
    pub wr_set_inline_data: *const c_void,
    pub wr_set_inline_data_list: *const c_void,
    pub wr_set_sge: *const c_void,
    pub wr_set_sge_list: *const c_void,
    pub wr_start: *const c_void,
    pub wr_complete: *const c_void,
    pub wr_abort: *const c_void,
    pub wr_atomic_write: *const c_void,
}

/// `struct ibv_ah` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvAh {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub handle: u32,
}

/// `struct ibv_srq`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvSrq {
    pub context: *mut IbvContext,
    pub srq_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct IbvSrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvSrqInitAttr {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
}

/// `enum ibv_event_type` values this device raises.
pub const EVENT_QP_FATAL: c_int = 1;
/// `IBV_EVENT_SRQ_LIMIT_REACHED`.
pub const EVENT_SRQ_LIMIT_REACHED: c_int = 15;
/// `IBV_EVENT_QP_LAST_WQE_REACHED`.
pub const EVENT_QP_LAST_WQE_REACHED: c_int = 16;

/// `struct ibv_async_event`: the element (a union of `struct ibv_cq *`, `ibv_qp *`,
/// `ibv_srq *`, `ibv_wq *` and `int port_num`, one pointer wide) and the event's type.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvAsyncEvent {
    pub element: *mut c_void,
    pub event_type: c_int,
}

/// `struct ibv_sge` (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr` (128 bytes). The `wr` union is read as the variant the opcode names.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut Self,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    /// `enum ibv_wr_opcode`.
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// `imm_data` (big-endian) or `invalidate_rkey`.
    pub imm_data: u32,
    /// `wr.rdma.remote_addr`, `wr.atomic.remote_addr`, or `wr.ud.ah` (a pointer).
    pub wr_remote_addr: u64,
    /// `wr.rdma.rkey` (low half) or `wr.atomic.compare_add`; `wr.ud.remote_qpn` and
    /// `remote_qkey` (low and high half).
    pub wr_word1: u64,
    /// `wr.atomic.swap`.
    pub wr_swap: u64,
    /// `wr.atomic.rkey`.
    pub wr_atomic_rkey: u32,
    pub _pad: u32,
    /// `qp_type` (XRC): unused.
    pub _qp_type: u64,
    /// `bind_mw.mw` (a `struct ibv_mw *`; the `tso` union's header pointer otherwise).
    pub bind_mw_mw: *mut IbvMw,
    /// `bind_mw.rkey`: the R_Key the window takes (its low byte).
    pub bind_mw_rkey: u32,
    pub _pad2: u32,
    /// `bind_mw.bind_info`.
    pub bind_info: IbvMwBindInfo,
}

/// `struct ibv_mw` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvMw {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`: 1 or 2.
    pub mw_type: c_int,
}

/// `struct ibv_mw_bind_info` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvMwBindInfo {
    pub mr: *mut IbvMr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `struct ibv_mw_bind` (48 bytes): what `ibv_bind_mw` takes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvMwBind {
    pub wr_id: u64,
    pub send_flags: c_uint,
    pub bind_info: IbvMwBindInfo,
}

/// `struct ibv_recv_wr` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut Self,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `struct ibv_wc` (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Big-endian.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}
