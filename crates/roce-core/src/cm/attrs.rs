//! REQ and REP fields ⇄ QP attributes: what each side's QP is given on the way to RTS, built
//! as the engine's one recipe (`Connect`) so that the steps exist once.

use std::net::IpAddr;

use roce_wire::Qpn;

use super::Conn;
use crate::config::Mtu;
use crate::mr::Access;
use crate::qp::AddressVector;
use crate::qp::QpType;
use crate::{Connect, QpAttr};

/// The hop limit rdma_cm gives a RoCE path (the IP route's: 64).
const HOP_LIMIT: u8 = 64;

/// The INIT step of a connected QP: remote writes, and READs and atomics when it answers
/// some.
//= rxe:cm.c/cm_init_qp_init_attr
//# INIT gives remote write, and remote read and atomic when the connection has responder resources
pub(crate) fn init(responder_resources: u8) -> QpAttr {
    let mut access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    if responder_resources > 0 {
        access = access | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    }
    Connect::init_with(access)
}

/// The path MTU of a REQ's code, capped by the port's; `None` for a code that names none.
pub(crate) fn mtu_of(code: u8, port: Mtu) -> Option<Mtu> {
    let wanted = Mtu::from_bytes(roce_wire::mad::req::mtu_bytes(code)?)?;
    Some(if wanted.bytes() > port.bytes() {
        port
    } else {
        wanted
    })
}

/// The recipe for the connection's QP, from what was negotiated.
//= rxe:cm.c/cm_init_qp_rtr_attr
//# RTR: the peer's QPN, our own starting PSN as rq_psn, the path MTU, responder resources as max_dest_rd_atomic, min_rnr_timer 0
//= rxe:cm.c/cm_init_qp_rts_attr
//# RTS: the peer's starting PSN as sq_psn, the ACK timeout, retry and RNR retry counts, initiator depth as max_rd_atomic
//= rxe:cm.c/cm_req_handler
//# the Starting PSN a REQ or REP carries is the one its sender's receive queue expects: the passive side's send queue starts at the REQ's, the active side's at the REP's
pub(crate) fn recipe(conn: &Conn) -> Connect {
    let av = AddressVector {
        src: conn.local,
        dst: conn.peer,
        dscp: 0,
        hop_limit: HOP_LIMIT,
    };
    Connect {
        qp_type: QpType::Rc,
        av,
        dest_qpn: conn.remote_qpn,
        rq_psn: conn.psn,
        sq_psn: conn.remote_psn,
        access: Access::NONE,
        qkey: 0,
        mtu: conn.mtu,
        max_rd_atomic: conn.initiator_depth,
        max_dest_rd_atomic: conn.responder_resources,
        min_rnr_timer: 0,
        timeout: conn.ack_timeout,
        retry_cnt: conn.retry_count,
        rnr_retry: conn.rnr_retry,
    }
}

/// Takes the connection's QP from INIT (or RESET) to RTS as librdmacm does on both sides: its
/// INIT attributes again with the negotiated responder resources (the program's
/// `rdma_create_qp` left remote access off), then RTR and RTS of the [`recipe`].
//= rxe:librdmacm/cma.c/ucma_modify_qp_rtr
//# the QP is given its INIT attributes again (INIT to INIT) with the negotiated responder resources before RTR
pub(crate) fn to_rts(nic: &mut crate::Nic, qpn: Qpn, conn: &Conn) -> Result<(), crate::VerbsError> {
    let [_, rtr, rts] = recipe(conn).steps();
    nic.modify_qp(qpn, &init(conn.responder_resources))?;
    nic.modify_qp(qpn, &rtr)?;
    nic.modify_qp(qpn, &rts)
}

/// Whether `addr` is of the same family as `other` (a path needs both ends in one).
pub(crate) fn same_family(addr: IpAddr, other: IpAddr) -> bool {
    addr.is_ipv4() == other.is_ipv4()
}

/// The QP number the CM may not use: 0 and QP 1 are the special QPs.
pub(crate) fn is_special(qpn: Qpn) -> bool {
    qpn.value() <= 1
}
