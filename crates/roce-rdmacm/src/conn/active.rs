//! The active side: `rdma_connect` sends the REQ (or a SIDR_REQ for UD), and
//! `rdma_establish` the RTU after CONNECT_RESPONSE.

use roce_cabi::cm::{CmConnect, ip_to_bytes};

use super::{
    ConnParam, DEFAULT_RD_ATOMIC, complete, events_channel, is_sync, service_id, with_rd_atomic,
};
use crate::Errno;
use crate::abi::event;
use crate::addr;
use crate::ibv;
use crate::inbox;
use crate::state::{EINVAL, Phase, with};

/// `rdma_connect`: the REQ leaves; ESTABLISHED, REJECTED or UNREACHABLE follows. An RC id
/// without a QP announces `param.qp_num` and gets CONNECT_RESPONSE instead of ESTABLISHED:
/// the program moves its QP (`rdma_init_qp_attr`) and sends the RTU with `rdma_establish`, as
/// with librdmacm (UCX's rdmacm connection manager works so).
pub(crate) fn connect(id: usize, param: Option<ConnParam>) -> Result<(), Errno> {
    let no_qp = with(|t| t.ids.get(&id).map(|i| i.c.get().qp.is_null())).ok_or(EINVAL)?;
    if no_qp && param.is_none() {
        return Err(EINVAL);
    }
    let param = with_rd_atomic(param.unwrap_or(ConnParam {
        responder_resources: DEFAULT_RD_ATOMIC,
        initiator_depth: DEFAULT_RD_ATOMIC,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }))?;
    let channel = with(|t| {
        let ch = events_channel(t, id)?;
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let c = i.c.get();
        // A UD id resolves the service's QP and Q_Key with a SIDR_REQ (cma_resolve_ib_udp).
        let ud = c.qp_type == crate::abi::IBV_QPT_UD;
        if i.phase != Phase::RouteResolved || (ud && c.qp.is_null()) {
            return Err(EINVAL);
        }
        let local = addr::from_storage(&c.route.addr.src)?;
        let peer = addr::from_storage(&c.route.addr.dst)?;
        let p = CmConnect {
            qp: c.qp.cast(),
            qp_num: param.qp_num,
            local: ip_to_bytes(local.ip()),
            peer: ip_to_bytes(peer.ip()),
            service_id: service_id(c.ps, peer.port()),
            src_port: local.port(),
            responder_resources: param.responder_resources,
            initiator_depth: param.initiator_depth,
            retry_count: param.retry_count.min(7),
            rnr_retry_count: param.rnr_retry_count.min(7),
            private_data_len: 0,
            private_data: std::ptr::null(),
        };
        let conn = if ud {
            ibv::cm_sidr_resolve(p, &param.private_data)?
        } else {
            ibv::cm_connect(p, &param.private_data)?
        };
        i.conn = Some(conn);
        i.phase = Phase::Connecting;
        inbox::route_conn(conn, ch);
        Ok(ch)
    })?;
    if is_sync(id) {
        let want = if no_qp {
            event::CONNECT_RESPONSE
        } else {
            event::ESTABLISHED
        };
        complete(id, channel, want)?;
    }
    Ok(())
}

/// `rdma_establish`: after CONNECT_RESPONSE on an id without a QP, the RTU leaves and the
/// connection is up (no event follows, as with librdmacm).
pub(crate) fn establish(id: usize) -> Result<(), Errno> {
    with(|t| {
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let (Phase::Connecting, Some(conn)) = (i.phase, i.conn) else {
            return Err(EINVAL);
        };
        ibv::cm_establish(conn)?;
        i.phase = Phase::Connected;
        Ok(())
    })
}
