//! The engine's CM events made into `rdma_cm_event`s (`materialize`), with the child id a
//! connection request brings.

use std::net::{IpAddr, SocketAddr};

use roce_cabi::cm::{ip_from_bytes, kind};

use super::fail_qp;
use crate::abi::{IbvGid, RdmaCmEvent, RdmaCmEventParam, RdmaConnParam, RdmaIbAddr, event};
use crate::addr;
use crate::inbox::{self, CmEvent};
use crate::state::{self, Event, Id, Phase, Request, Tables};
use crate::{ibv, id};

fn conn_param(data: &[u8], ev: &CmEvent) -> RdmaCmEventParam {
    RdmaCmEventParam {
        conn: RdmaConnParam {
            private_data: if data.is_empty() {
                std::ptr::null()
            } else {
                data.as_ptr().cast()
            },
            private_data_len: u8::try_from(data.len()).unwrap_or(u8::MAX),
            responder_resources: ev.responder_resources,
            initiator_depth: ev.initiator_depth,
            flow_control: u8::from(ev.kind == kind::CONNECT_REQUEST),
            retry_count: ev.retry_count,
            rnr_retry_count: ev.rnr_retry_count,
            srq: ev.srq,
            qp_num: ev.peer_qpn,
        },
    }
}

/// `param.ud` of a UD event: the private data, and for a resolved SIDR the service's QP, Q_Key
/// and the address handle that reaches it (the route's `dgid`, from our GID of its `sgid`:
/// index 0 for the link-local address, else 1).
fn ud_param(data: &[u8], ev: &CmEvent, route: Option<RdmaIbAddr>) -> RdmaCmEventParam {
    let mut ah_attr = crate::abi::IbvAhAttr::default();
    if let Some(route) = route {
        let link_local = matches!(route.sgid.to_ip(), IpAddr::V6(v6) if v6.is_unicast_link_local());
        ah_attr.is_global = 1;
        ah_attr.port_num = 1;
        ah_attr.grh.dgid = route.dgid;
        ah_attr.grh.sgid_index = if link_local { 0 } else { 1 };
        ah_attr.grh.hop_limit = 64;
    }
    RdmaCmEventParam {
        ud: crate::abi::RdmaUdParam {
            private_data: if data.is_empty() {
                std::ptr::null()
            } else {
                data.as_ptr().cast()
            },
            private_data_len: u8::try_from(data.len()).unwrap_or(u8::MAX),
            ah_attr,
            qp_num: if route.is_some() { ev.peer_qpn } else { 0 },
            qkey: if route.is_some() { ev.qkey } else { 0 },
        },
    }
}

/// Turns an engine CM event that came to `channel` into an event for the program: queued in
/// `t.events`, its address returned. `None` when the id it concerns is gone.
pub(crate) fn materialize(t: &mut Tables, channel: usize, ev: CmEvent) -> Option<usize> {
    let data: Box<[u8]> = ev.private_data.clone().into_boxed_slice();
    let mut param = conn_param(&data, &ev);
    let (id, listen_id, kind, status) =
        if matches!(ev.kind, kind::CONNECT_REQUEST | kind::SIDR_REQUEST) {
            let (child, listener) = new_child(t, channel, &ev)?;
            if ev.kind == kind::SIDR_REQUEST {
                param = ud_param(&data, &ev, None);
            }
            (child, listener, event::CONNECT_REQUEST, 0)
        } else {
            let (&addr, i) = t.ids.iter_mut().find(|(_, i)| i.conn == Some(ev.conn))?;
            let (kind, status) = match ev.kind {
                kind::ESTABLISHED => {
                    i.phase = Phase::Connected;
                    (event::ESTABLISHED, 0)
                }
                //= rxe:cma.c/cma_ib_handler
                //# a REP to an id without a QP is CONNECT_RESPONSE; rdma_establish sends the RTU
                kind::CONNECT_RESPONSE => (event::CONNECT_RESPONSE, 0),
                kind::REJECTED => (event::REJECTED, ev.status),
                kind::CONNECT_ERROR => (event::CONNECT_ERROR, -ev.status),
                kind::UNREACHABLE => (event::UNREACHABLE, -libc::ETIMEDOUT),
                kind::DISCONNECTED => {
                    i.phase = Phase::Disconnected;
                    (event::DISCONNECTED, 0)
                }
                kind::TIMEWAIT_EXIT => (event::TIMEWAIT_EXIT, 0),
                //= rxe:cma.c/cma_sidr_rep_handler
                //# a successful SIDR_REP is ESTABLISHED with the service's QP, Q_Key and address
                //# handle; another status is UNREACHABLE with that status
                kind::SIDR_RESOLVED => {
                    i.phase = Phase::Connected;
                    param = ud_param(&data, &ev, Some(i.c.get().route.addr.ibaddr));
                    (event::ESTABLISHED, 0)
                }
                kind::SIDR_REJECTED => (event::UNREACHABLE, ev.status),
                _ => return None,
            };
            let ud = i.c.get().qp_type == crate::abi::IBV_QPT_UD;
            if !ud
                && matches!(
                    kind,
                    event::REJECTED | event::CONNECT_ERROR | event::UNREACHABLE
                )
            {
                fail_qp(i);
            }
            if matches!(
                kind,
                event::REJECTED | event::CONNECT_ERROR | event::UNREACHABLE | event::TIMEWAIT_EXIT
            ) || ev.kind == kind::SIDR_RESOLVED
            {
                // The connection is gone in the engine.
                i.conn = None;
                if !matches!(i.phase, Phase::Disconnected | Phase::Connected) {
                    i.phase = Phase::RouteResolved;
                }
                inbox::close_conn(ev.conn);
            }
            (addr, 0, kind, status)
        };
    let e = Event {
        c: roce_cabi::CBox::new(RdmaCmEvent {
            id: id as *mut _,
            listen_id: listen_id as *mut _,
            event: kind,
            status,
            param,
        }),
        data,
    };
    let a = e.c.addr();
    t.events.insert(a, e);
    Some(a)
}

/// The child id of a connection request, on the listener's channel (or a channel of its own
/// for a synchronous listener): `(child, listener)`. A request whose listener is gone is
/// rejected.
fn new_child(t: &mut Tables, channel: usize, ev: &CmEvent) -> Option<(usize, usize)> {
    let Some((&listener, l)) = t.ids.iter().find(|(_, i)| i.listen == Some(ev.listen)) else {
        let _ = ibv::cm_reject(ev.conn, &[]);
        inbox::close_conn(ev.conn);
        return None;
    };
    let lc = l.c.get();
    let (sync, listen_port) = (l.channel.is_none(), addr::from_storage(&lc.route.addr.src));
    let dev = ibv::device().ok()?;
    let local_ip = ip_from_bytes(ev.local);
    let peer_ip = ip_from_bytes(ev.peer);
    // The child's addresses are of the request's family (an IPv4 request to an IPv6 listener
    // gives AF_INET addresses, as the kernel's cma_save_net_info).
    let local = SocketAddr::new(local_ip, listen_port.map_or(0, |a| a.port()));
    let peer = SocketAddr::new(peer_ip, ev.peer_port);
    let mut c = id::blank_id(l.channel, lc.context, lc.ps, lc.qp_type);
    c.route.addr.src = addr::to_storage(local);
    c.route.addr.dst = addr::to_storage(peer);
    c.route.addr.ibaddr.sgid = IbvGid::from_ip(local_ip);
    c.route.addr.ibaddr.dgid = IbvGid::from_ip(peer_ip);
    c.route.addr.ibaddr.pkey = 0xffff_u16.to_be();
    let mut child = Id::new(c, l.channel);
    child.phase = Phase::Requested;
    child.conn = Some(ev.conn);
    child.request = Some(Request {
        responder_resources: ev.responder_resources,
        initiator_depth: ev.initiator_depth,
    });
    let a = child.c.addr();
    t.ids.insert(a, child);
    let own = if t.give_device(a, dev.ctx).is_err() {
        None
    } else if sync {
        // rdma_get_request migrates the child to a channel of its own.
        state::new_channel(t).ok().map(Some)
    } else {
        Some(None)
    };
    let Some(own) = own else {
        // No PD or no channel for it: the request is refused as one without a listener is.
        t.put_device(a);
        t.ids.remove(&a);
        let _ = ibv::cm_reject(ev.conn, &[]);
        inbox::close_conn(ev.conn);
        return None;
    };
    if let Some(own) = own {
        if let Some(child) = t.ids.get_mut(&a) {
            child.sync_channel = Some(own);
        }
        inbox::route_conn(ev.conn, own);
    } else {
        inbox::route_conn(ev.conn, channel);
    }
    Some((a, listener))
}
