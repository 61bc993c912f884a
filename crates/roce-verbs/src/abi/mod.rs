//! The C structures of libibverbs that cross the ABI, as `#[repr(C)]` Rust types.
//!
//! Typed by hand from Debian 12's `/usr/include/infiniband/verbs.h` (libibverbs-dev 44.0-2, the
//! same file as rdma-core v44.0); the header is dual GPL-2.0 / BSD, and only field lists are
//! reproduced. `tests/layout.rs` compiles a C program against the installed header and compares
//! every size and offset below with it. Only the structures the library fills or reads are here;
//! slots the library leaves empty are typed as opaque pointers.

use std::ffi::{c_char, c_int, c_void};

/// `IBV_SYSFS_NAME_MAX`.
pub const SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const SYSFS_PATH_MAX: usize = 256;

/// `enum ibv_node_type`: `IBV_NODE_CA`.
pub const NODE_CA: c_int = 1;
/// `enum ibv_transport_type`: `IBV_TRANSPORT_IB` (RoCE devices report IB transport).
pub const TRANSPORT_IB: c_int = 0;
/// `enum ibv_port_state`: `IBV_PORT_ACTIVE`.
pub const PORT_ACTIVE: c_int = 4;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const LINK_LAYER_ETHERNET: u8 = 2;
/// `enum ibv_atomic_cap`: `IBV_ATOMIC_HCA`.
pub const ATOMIC_HCA: c_int = 1;
/// `enum ibv_gid_type`: `IBV_GID_TYPE_ROCE_V2` (the public enum of `ibv_query_gid_ex`).
pub const GID_TYPE_ROCE_V2: u32 = 2;
/// `enum ibv_gid_type_sysfs`: `IBV_GID_TYPE_SYSFS_ROCE_V2` (the private `ibv_query_gid_type`).
pub const GID_TYPE_SYSFS_ROCE_V2: c_int = 1;
/// `__VERBS_ABI_IS_EXTENDED`: `ibv_context.abi_compat` of a context that is a `verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

/// `struct ibv_device` (664 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvDevice {
    /// `struct _ibv_device_ops`: two obsolete function pointers, left NULL.
    pub _ops: [*const c_void; 2],
    /// `enum ibv_node_type`.
    pub node_type: c_int,
    /// `enum ibv_transport_type`.
    pub transport_type: c_int,
    /// The kernel IB device name (`rxe0`); NUL-terminated.
    pub name: [c_char; SYSFS_NAME_MAX],
    /// The uverbs device name (`uverbs0`).
    pub dev_name: [c_char; SYSFS_NAME_MAX],
    /// sysfs path of the uverbs device.
    pub dev_path: [c_char; SYSFS_PATH_MAX],
    /// sysfs path of the IB device (`ibv_devinfo` reads `board_id` there).
    pub ibdev_path: [c_char; SYSFS_PATH_MAX],
}

/// `struct ibv_context_ops` (256 bytes): what the inline `ibv_poll_cq`, `ibv_post_send`, ...
/// of the application's header call. The `_compat_*` slots are obsolete and stay NULL.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvContextOps {
    /// `_compat_query_device` ... `_compat_dereg_mr` (7 slots).
    pub _compat0: [*const c_void; 7],
    /// `alloc_mw`.
    pub alloc_mw: *const c_void,
    /// `bind_mw`.
    pub bind_mw: *const c_void,
    /// `dealloc_mw`.
    pub dealloc_mw: *const c_void,
    /// `_compat_create_cq`.
    pub _compat1: *const c_void,
    /// `poll_cq`.
    pub poll_cq: *const c_void,
    /// `req_notify_cq`.
    pub req_notify_cq: *const c_void,
    /// `_compat_cq_event` ... `_compat_destroy_srq` (7 slots).
    pub _compat2: [*const c_void; 7],
    /// `post_srq_recv`.
    pub post_srq_recv: *const c_void,
    /// `_compat_create_qp` ... `_compat_destroy_qp` (4 slots).
    pub _compat3: [*const c_void; 4],
    /// `post_send`.
    pub post_send: *const c_void,
    /// `post_recv`.
    pub post_recv: *const c_void,
    /// `_compat_create_ah` ... `_compat_async_event` (5 slots).
    pub _compat4: [*const c_void; 5],
}

/// `struct ibv_context` (328 bytes).
#[repr(C)]
#[derive(Debug)]
pub struct IbvContext {
    /// The device this context was opened on.
    pub device: *mut IbvDevice,
    /// Operations the inline verbs call.
    pub ops: IbvContextOps,
    /// The uverbs command fd; -1 (there is no kernel device).
    pub cmd_fd: c_int,
    /// The fd `ibv_get_async_event` reads; applications poll it.
    pub async_fd: c_int,
    /// Completion vectors (perftest `-e` checks its vector against this): at least 1.
    pub num_comp_vectors: c_int,
    /// `pthread_mutex_t`, initialised.
    pub mutex: libc::pthread_mutex_t,
    /// [`VERBS_ABI_IS_EXTENDED`]: this context is the last field of a [`VerbsContext`].
    pub abi_compat: *mut c_void,
}

/// `query_port` of `struct verbs_context`: what `ibv_query_port()` in the application's header
/// calls, with the size of the application's `struct ibv_port_attr`.
pub type QueryPortFn = unsafe extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr, usize) -> c_int;

/// `struct verbs_context` (648 bytes): the extended operations, at negative offsets from the
/// `ibv_context` the application holds. An operation counts as present only if `sz` covers it
/// (its distance from the end) and it is not NULL; NULL ones make the inline wrappers fall back
/// to an exported function or fail with `EOPNOTSUPP` (rdma-core 44's verbs.h).
#[repr(C)]
#[derive(Debug)]
pub struct VerbsContext {
    /// `query_port`.
    pub query_port: Option<QueryPortFn>,
    /// `advise_mr` ... `query_rt_values` (24 slots), all NULL.
    pub _ops1: [*const c_void; 24],
    /// `create_cq_ex`: what `ibv_create_cq_ex` calls.
    pub create_cq_ex: *const c_void,
    /// `priv`.
    pub priv_: *mut c_void,
    /// `query_device_ex`: what `ibv_query_device_ex` calls (without it, libibverbs' fallback
    /// zeroes every extended field, `phys_port_cnt_ex` included).
    pub query_device_ex: Option<QueryDeviceExFn>,
    /// `ibv_destroy_flow`, `ABI_placeholder2`, `ibv_create_flow`, `ABI_placeholder1`.
    pub _ops2: [*const c_void; 4],
    /// `open_qp`.
    pub open_qp: *const c_void,
    /// `create_qp_ex`: what `ibv_create_qp_ex` calls for more than a PD in `comp_mask`.
    pub create_qp_ex: *const c_void,
    /// `get_srq_num`, `create_srq_ex`, `open_xrcd`, `close_xrcd`.
    pub _ops3: [*const c_void; 4],
    /// `_ABI_placeholder3`.
    pub _abi_placeholder3: u64,
    /// `sizeof(struct verbs_context)` as this library was built: 648.
    pub sz: usize,
    /// The context the application sees. Must be last.
    pub context: IbvContext,
}

/// `struct ibv_device_attr` (232 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    /// Big-endian, as on the wire.
    pub node_guid: u64,
    /// Big-endian.
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_device_attr_ex` (400 bytes): what `ibv_query_device_ex` fills. The capability
/// structures this device leaves at zero (ODP, TSO, RSS, packet pacing, tag matching, CQ
/// moderation, PCI atomics) are typed as plain words of their size.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvDeviceAttrEx {
    pub orig_attr: IbvDeviceAttr,
    pub comp_mask: u32,
    pub _pad0: u32,
    /// `struct ibv_odp_caps` (24 bytes).
    pub odp_caps: [u64; 3],
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    /// `struct ibv_tso_caps` (8 bytes).
    pub tso_caps: [u32; 2],
    /// `struct ibv_rss_caps` (32 bytes).
    pub rss_caps: [u64; 4],
    pub max_wq_type_rq: u32,
    /// `struct ibv_packet_pacing_caps` (12 bytes).
    pub packet_pacing_caps: [u32; 3],
    pub raw_packet_caps: u32,
    /// `struct ibv_tm_caps` (20 bytes).
    pub tm_caps: [u32; 5],
    /// `struct ibv_cq_moderation_caps` (4 bytes).
    pub cq_mod_caps: [u16; 2],
    pub _pad1: u32,
    pub max_dm_size: u64,
    /// `struct ibv_pci_atomic_caps` (6 bytes).
    pub pci_atomic_caps: [u16; 3],
    pub _pad2: u16,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

/// `query_device_ex` of `struct verbs_context`: what `ibv_query_device_ex()` in the
/// application's header calls, with the size of the application's `struct ibv_device_attr_ex`.
pub type QueryDeviceExFn =
    unsafe extern "C" fn(*mut IbvContext, *const u32, *mut IbvDeviceAttrEx, usize) -> c_int;

/// `struct ibv_port_attr` (52 bytes in v44; the exported `ibv_query_port@IBVERBS_1.1` gets the
/// 48-byte `_compat_ibv_port_attr` prefix, without `flags` and `port_cap_flags2`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct IbvPortAttr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// Bytes of `struct _compat_ibv_port_attr`: what `ibv_query_port@IBVERBS_1.1` may write.
pub const COMPAT_PORT_ATTR_LEN: usize = 48;

/// `struct ibv_gid_entry` (32 bytes): what `_ibv_query_gid_ex` fills.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvGidEntry {
    /// The GID.
    pub gid: IbvGid,
    /// Its index in the port's table.
    pub gid_index: u32,
    /// The port (1).
    pub port_num: u32,
    /// `enum ibv_gid_type`.
    pub gid_type: u32,
    /// The interface index of the netdev; 0 (none).
    pub ndev_ifindex: u32,
}

mod data_path;
pub use data_path::*;
pub use roce_cabi::ibv::{
    IbvAhAttr, IbvGid, IbvGlobalRoute, IbvQpAttr, IbvQpCap, IbvQpInitAttr, IbvQpInitAttrEx,
};
