//! The private interface between roce-emu's two C libraries for the connection manager:
//! `librdmacm.so.1` (roce-rdmacm) reaches the engine's IB CM, which lives in the NIC that
//! `libibverbs.so.1` (roce-verbs) runs, through functions libibverbs exports at the version
//! node `ROCE_EMU_PRIVATE_1`. The real librdmacm talks to the kernel's rdma_cm through
//! `/dev/infiniband/rdma_cm` (`struct ucma_abi_*` commands); this is the same seam, as C calls.
//!
//! The functions (each returns 0 or an errno value, never sets `errno`):
//! - `int roce_cm_listen(uint64_t service_id, uint32_t *listen)`: `EADDRINUSE` if the
//!   service has a listener;
//! - `int roce_cm_unlisten(uint32_t listen)`;
//! - `int roce_cm_connect(const struct CmConnect *, uint32_t *conn)`: sends the REQ;
//! - `int roce_cm_accept(uint32_t conn, const struct CmAccept *)`: QP to RTR and RTS, REP;
//! - `int roce_cm_reject(uint32_t conn, const uint8_t *data, uint32_t len)`;
//! - `int roce_cm_disconnect(uint32_t conn)`: DREQ, or the DREP that answers the peer's;
//! - `int roce_cm_establish(uint32_t conn)`: the RTU of a connection whose QP the consumer
//!   moves, after its CONNECT_RESPONSE (`rdma_establish`);
//! - `int roce_cm_init_qp_attr(uint32_t conn, int state, struct ibv_qp_attr *, int *mask)`:
//!   the attributes that take the connection's QP to INIT, RTR or RTS (`rdma_init_qp_attr`);
//! - `int roce_cm_sidr_resolve(const struct CmConnect *, uint32_t *conn)`: a SIDR_REQ for a
//!   UD service (the QP and the retry counts of `CmConnect` are not used);
//! - `int roce_cm_sidr_accept(uint32_t conn, void *qp, uint32_t qkey, const uint8_t *data,
//!   uint32_t len)`: the SIDR_REP with our UD QP (`roce_cm_reject` refuses a SIDR request);
//! - `int roce_cm_set_sink(CmSink)`: where the engine's CM events go from then on.
//!
//! A sink runs on the NIC's thread (or on the thread of the call that raised the event), with
//! the engine locked: it must not call any `roce_cm_*` nor `ibv_*` function. The record and
//! what it points to are valid for the length of the call only.

use std::ffi::c_void;
use std::net::{IpAddr, Ipv6Addr};

/// The version node of the private functions in `libibverbs.map`.
pub const VERSION_NODE: &str = "ROCE_EMU_PRIVATE_1";

/// An IP address as 16 bytes: IPv6, or IPv4 mapped (`::ffff:a.b.c.d`), as a GID holds it.
pub fn ip_to_bytes(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The address of 16 bytes, IPv4 when mapped.
pub fn ip_from_bytes(b: [u8; 16]) -> IpAddr {
    Ipv6Addr::from(b).to_canonical()
}

/// What `roce_cm_connect` sends in its REQ.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CmConnect {
    /// The `struct ibv_qp *` (RC, in RESET or INIT) of roce-emu's libibverbs; NULL when the
    /// consumer moves its QP itself (librdmacm's id without a QP).
    pub qp: *mut c_void,
    /// With a NULL `qp`: the QP number the REQ announces (`conn_param->qp_num`).
    pub qp_num: u32,
    /// Our address and the peer's.
    pub local: [u8; 16],
    pub peer: [u8; 16],
    /// The service to connect to (an RDMA IP CM one gets the `cma_hdr`).
    pub service_id: u64,
    /// Our port, for the `cma_hdr`.
    pub src_port: u16,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    /// The consumer's private data (`private_data_len` bytes, NULL when 0).
    pub private_data_len: u8,
    pub private_data: *const u8,
}

/// What `roce_cm_accept` answers a REQ with.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CmAccept {
    /// The `struct ibv_qp *` (RC, in RESET or INIT); NULL when the consumer moves its QP
    /// itself.
    pub qp: *mut c_void,
    /// With a NULL `qp`: the QP number the REP announces (`conn_param->qp_num`).
    pub qp_num: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub rnr_retry_count: u8,
    pub private_data_len: u8,
    pub private_data: *const u8,
}

/// The kind of a [`CmEventRecord`] (the engine's `CmEvent`).
pub mod kind {
    /// A REQ for a listener (`listen`, `conn` and the request's fields are set).
    pub const CONNECT_REQUEST: u32 = 0;
    /// The connection is up (`private_data`: the REP's, on the active side).
    pub const ESTABLISHED: u32 = 1;
    /// The peer rejected (`status`: the REJ's reason).
    pub const REJECTED: u32 = 2;
    /// The REP could not be applied to our QP (`status`: an errno value).
    pub const CONNECT_ERROR: u32 = 3;
    /// No answer after the retries.
    pub const UNREACHABLE: u32 = 4;
    /// The connection is down.
    pub const DISCONNECTED: u32 = 5;
    /// Timewait is over; the connection is gone.
    pub const TIMEWAIT_EXIT: u32 = 6;
    /// A SIDR_REQ for a listener (`listen`, `conn`, the addresses, the service and the
    /// private data are set).
    pub const SIDR_REQUEST: u32 = 7;
    /// Our SIDR_REQ was answered: `peer_qpn` and `qkey` are the service's.
    pub const SIDR_RESOLVED: u32 = 8;
    /// Our SIDR_REQ was refused (`status`: the SIDR_REP's status).
    pub const SIDR_REJECTED: u32 = 9;
    /// The REP came to a connection whose QP the consumer moves (`private_data`: the REP's):
    /// `roce_cm_establish` sends the RTU.
    pub const CONNECT_RESPONSE: u32 = 10;
}

/// One CM event, as the sink receives it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CmEventRecord {
    /// One of [`kind`].
    pub kind: u32,
    /// The connection.
    pub conn: u32,
    /// The listener (CONNECT_REQUEST).
    pub listen: u32,
    /// The REJ's reason (REJECTED), an errno value (CONNECT_ERROR), else 0.
    pub status: i32,
    /// CONNECT_REQUEST: the peer's and our address, the service, the peer's port (0 when the
    /// REQ had no `cma_hdr`), QP, and what it asks for.
    pub peer: [u8; 16],
    pub local: [u8; 16],
    pub service_id: u64,
    pub peer_port: u16,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub peer_qpn: u32,
    /// SIDR_RESOLVED: the service QP's Q_Key.
    pub qkey: u32,
    /// The private data the event carries (REQ, REP or REJ), valid during the call.
    pub private_data_len: u32,
    pub private_data: *const u8,
}

/// Where the CM's events go.
pub type CmSink = extern "C" fn(*const CmEventRecord);

impl Default for CmEventRecord {
    /// A record of no event: every field 0, no private data.
    fn default() -> Self {
        Self {
            kind: 0,
            conn: 0,
            listen: 0,
            status: 0,
            peer: [0; 16],
            local: [0; 16],
            service_id: 0,
            peer_port: 0,
            responder_resources: 0,
            initiator_depth: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: 0,
            peer_qpn: 0,
            qkey: 0,
            private_data_len: 0,
            private_data: std::ptr::null(),
        }
    }
}
