//! The C structures of `<rdma/rdma_cma.h>` (librdmacm-dev 44.0-2, x86_64), and the few of
//! `<infiniband/verbs.h>` and `<infiniband/sa.h>` this library fills or reads. The verbs
//! objects themselves (`ibv_context`, `ibv_pd`, `ibv_qp`, ...) belong to roce-emu's
//! libibverbs and are opaque here. `tests/layout.rs` checks every size and offset against the
//! installed headers.

use std::ffi::{c_char, c_int, c_uint, c_void};

pub use roce_cabi::ibv::{
    IBV_QP_INIT_ATTR_PD, IbvAhAttr, IbvGid, IbvGlobalRoute, IbvQpAttr, IbvQpCap, IbvQpInitAttr,
    IbvQpInitAttrEx,
};

/// `enum rdma_cm_event_type`.
pub mod event {
    #![allow(missing_docs)]
    pub const ADDR_RESOLVED: i32 = 0;
    pub const ADDR_ERROR: i32 = 1;
    pub const ROUTE_RESOLVED: i32 = 2;
    pub const ROUTE_ERROR: i32 = 3;
    pub const CONNECT_REQUEST: i32 = 4;
    pub const CONNECT_RESPONSE: i32 = 5;
    pub const CONNECT_ERROR: i32 = 6;
    pub const UNREACHABLE: i32 = 7;
    pub const REJECTED: i32 = 8;
    pub const ESTABLISHED: i32 = 9;
    pub const DISCONNECTED: i32 = 10;
    pub const DEVICE_REMOVAL: i32 = 11;
    pub const MULTICAST_JOIN: i32 = 12;
    pub const MULTICAST_ERROR: i32 = 13;
    pub const ADDR_CHANGE: i32 = 14;
    pub const TIMEWAIT_EXIT: i32 = 15;
}

/// `enum rdma_port_space`.
pub const RDMA_PS_IPOIB: c_int = 0x0002;
/// `RDMA_PS_TCP`: reliable connected QPs.
pub const RDMA_PS_TCP: c_int = 0x0106;
/// `RDMA_PS_UDP`: unreliable datagram QPs.
pub const RDMA_PS_UDP: c_int = 0x0111;
/// `RDMA_PS_IB`: any QP type.
pub const RDMA_PS_IB: c_int = 0x013F;
/// The Q_Key of `RDMA_PS_UDP` QPs.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// `RAI_PASSIVE`: the node names the local (source) address.
pub const RAI_PASSIVE: c_int = 1;
/// `RAI_NUMERICHOST`.
pub const RAI_NUMERICHOST: c_int = 2;
/// `RAI_NOROUTE`.
pub const RAI_NOROUTE: c_int = 4;
/// `RAI_FAMILY`.
pub const RAI_FAMILY: c_int = 8;

/// `enum ibv_qp_type` values used here.
pub const IBV_QPT_RC: c_int = 2;
/// `IBV_QPT_UC`.
pub const IBV_QPT_UC: c_int = 3;
/// `IBV_QPT_UD`.
pub const IBV_QPT_UD: c_int = 4;

/// An `ibv_context`, `ibv_pd`, `ibv_cq`, `ibv_qp`, ...: owned by libibverbs, opaque here.
pub type Opaque = c_void;

/// `struct sockaddr_storage`: 128 bytes, the family first.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct SockaddrStorage {
    /// `ss_family`.
    pub family: u16,
    /// The rest, as the family says (`sockaddr_in`: port, address, zero).
    pub data: [u8; 126],
}

impl Default for SockaddrStorage {
    fn default() -> Self {
        Self {
            family: 0,
            data: [0; 126],
        }
    }
}

/// `struct rdma_ib_addr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct RdmaIbAddr {
    pub sgid: IbvGid,
    pub dgid: IbvGid,
    /// Network order.
    pub pkey: u16,
}

/// `struct rdma_addr`: the unions are their largest members.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct RdmaAddr {
    pub src: SockaddrStorage,
    pub dst: SockaddrStorage,
    pub ibaddr: RdmaIbAddr,
}

/// `struct ibv_sa_path_rec` (`<infiniband/sa.h>`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct IbvSaPathRec {
    pub dgid: IbvGid,
    pub sgid: IbvGid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

/// `struct rdma_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct RdmaRoute {
    pub addr: RdmaAddr,
    pub path_rec: *mut IbvSaPathRec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RdmaEventChannel {
    /// Readable when an event is waiting (a pipe).
    pub fd: c_int,
}

/// `struct rdma_cm_id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct RdmaCmId {
    pub verbs: *mut Opaque,
    pub channel: *mut RdmaEventChannel,
    pub context: *mut c_void,
    pub qp: *mut Opaque,
    pub route: RdmaRoute,
    pub ps: c_int,
    pub port_num: u8,
    pub event: *mut RdmaCmEvent,
    pub send_cq_channel: *mut Opaque,
    pub send_cq: *mut Opaque,
    pub recv_cq_channel: *mut Opaque,
    pub recv_cq: *mut Opaque,
    pub srq: *mut Opaque,
    pub pd: *mut Opaque,
    pub qp_type: c_int,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct RdmaConnParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct RdmaUdParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: IbvAhAttr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The union `param` of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub union RdmaCmEventParam {
    pub conn: RdmaConnParam,
    pub ud: RdmaUdParam,
}

impl std::fmt::Debug for RdmaCmEventParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RdmaCmEventParam")
    }
}

/// `struct rdma_cm_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct RdmaCmEvent {
    pub id: *mut RdmaCmId,
    pub listen_id: *mut RdmaCmId,
    pub event: c_int,
    pub status: c_int,
    pub param: RdmaCmEventParam,
}

/// `struct rdma_addrinfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct RdmaAddrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: c_uint,
    pub ai_dst_len: c_uint,
    pub ai_src_addr: *mut SockaddrStorage,
    pub ai_dst_addr: *mut SockaddrStorage,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut Self,
}

/// `enum ibv_qp_state` and `enum ibv_qp_attr_mask` values used here.
pub mod qp {
    #![allow(missing_docs)]
    pub const STATE_INIT: i32 = 1;
    pub const STATE_RTR: i32 = 2;
    pub const STATE_RTS: i32 = 3;
    pub const STATE_ERR: i32 = 6;
    pub const ATTR_STATE: i32 = 1;
    pub const ATTR_ACCESS_FLAGS: i32 = 1 << 3;
    pub const ATTR_PKEY_INDEX: i32 = 1 << 4;
    pub const ATTR_PORT: i32 = 1 << 5;
    pub const ATTR_QKEY: i32 = 1 << 6;
    pub const ATTR_SQ_PSN: i32 = 1 << 16;
}

/// `struct ibv_port_attr` up to `active_mtu` (the exported `ibv_query_port` fills the
/// compat struct; the rest is room for it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvPortAttrHead {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub rest: [u8; 116],
}

impl Default for IbvPortAttrHead {
    fn default() -> Self {
        Self {
            state: 0,
            max_mtu: 0,
            active_mtu: 0,
            rest: [0; 116],
        }
    }
}
