//! The passive side: `rdma_listen`, and a connection request's answer (`rdma_accept`,
//! `rdma_reject`), or a synchronous listener's wait for one (`rdma_get_request`).

use std::net::SocketAddr;

use roce_cabi::cm::CmAccept;

use super::{ConnParam, complete, events_channel, is_sync, service_id, with_rd_atomic};
use crate::Errno;
use crate::abi::event;
use crate::inbox;
use crate::state::{self, EINVAL, Phase, with};
use crate::{ibv, id};

/// `rdma_listen`: binds an unbound id (`id::listen`), then listens on its service ID.
pub(crate) fn listen(id: usize) -> Result<SocketAddr, Errno> {
    let local = id::listen(id)?;
    let made = with(|t| {
        let ch = events_channel(t, id)?;
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        if i.listen.is_some() {
            return Ok(());
        }
        let h = ibv::cm_listen(service_id(i.c.get().ps, local.port()))?;
        i.listen = Some(h);
        inbox::route_listen(h, ch);
        Ok(())
    });
    if let Err(e) = made {
        with(|t| {
            if let Some(i) = t.ids.get_mut(&id) {
                i.phase = Phase::Bound;
            }
        });
        return Err(e);
    }
    Ok(local)
}

/// `rdma_accept`: the QP goes to RTR and RTS and the REP leaves; ESTABLISHED follows the RTU.
/// What the program asks for is capped by what the request offered.
pub(crate) fn accept(id: usize, param: Option<ConnParam>) -> Result<(), Errno> {
    let channel = with(|t| {
        let ch = events_channel(t, id)?;
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let (Phase::Requested, Some(conn), Some(req)) = (i.phase, i.conn, i.request) else {
            return Err(EINVAL);
        };
        let c = i.c.get();
        // Without a QP the program announces its QP's number and moves it itself.
        if c.qp.is_null() && (param.is_none() || c.qp_type == crate::abi::IBV_QPT_UD) {
            return Err(EINVAL);
        }
        if c.qp_type == crate::abi::IBV_QPT_UD {
            // The SIDR_REP: our UD QP and RDMA_UDP_QKEY; nothing follows on this side.
            let data = param.map(|p| p.private_data).unwrap_or_default();
            ibv::cm_sidr_accept(conn, c.qp as usize, crate::abi::RDMA_UDP_QKEY, &data)?;
            i.conn = None;
            i.phase = Phase::Connected;
            inbox::close_conn(conn);
            return Ok(None);
        }
        let param = with_rd_atomic(param.unwrap_or(ConnParam {
            responder_resources: req.initiator_depth,
            initiator_depth: req.responder_resources,
            rnr_retry_count: 7,
            ..ConnParam::default()
        }))?;
        let p = CmAccept {
            qp: c.qp.cast(),
            qp_num: param.qp_num,
            responder_resources: param.responder_resources.min(req.initiator_depth),
            initiator_depth: param.initiator_depth.min(req.responder_resources),
            rnr_retry_count: param.rnr_retry_count.min(7),
            private_data_len: 0,
            private_data: std::ptr::null(),
        };
        ibv::cm_accept(conn, p, &param.private_data)?;
        i.phase = Phase::Accepting;
        Ok(Some(ch))
    })?;
    if let Some(channel) = channel
        && is_sync(id)
    {
        complete(id, channel, event::ESTABLISHED)?;
    }
    Ok(())
}

/// `rdma_reject`: a REJ (CONSUMER_DEFINED) with the program's private data.
pub(crate) fn reject(id: usize, private_data: &[u8]) -> Result<(), Errno> {
    with(|t| {
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let (Phase::Requested, Some(conn)) = (i.phase, i.conn) else {
            return Err(EINVAL);
        };
        ibv::cm_reject(conn, private_data)?;
        i.conn = None;
        i.phase = Phase::Disconnected;
        inbox::close_conn(conn);
        Ok(())
    })
}

/// `rdma_get_request` on a synchronous listener: waits for a connection request and returns
/// its child id, with the QP the endpoint's attributes ask for.
pub(crate) fn get_request(listen: usize) -> Result<usize, Errno> {
    let (ch, child_qp) = with(|t| {
        let i = t.ids.get(&listen).ok_or(EINVAL)?;
        if i.phase != Phase::Listening || i.channel.is_some() {
            return Err(EINVAL);
        }
        Ok((
            i.sync_channel.ok_or(EINVAL)?,
            i.child_qp.as_ref().map(|(pd, a)| (*pd, a.get())),
        ))
    })?;
    let e = state::get_event(ch)?;
    let (kind, child, status) = with(|t| {
        let ev = t.events.get(&(e as usize)).map(|e| e.c.get());
        ev.map(|ev| (ev.event, ev.id as usize, ev.status))
    })
    .ok_or(EINVAL)?;
    let _ = state::ack_event(e as usize);
    if kind != event::CONNECT_REQUEST {
        return Err(Errno(if status < 0 { -status } else { libc::EINVAL }));
    }
    if let Some((pd, attr)) = child_qp
        && let Err(err) = id::create_qp(child, pd, attr)
    {
        let _ = reject(child, &[]);
        let _ = id::destroy_id(child);
        return Err(err);
    }
    Ok(child)
}
