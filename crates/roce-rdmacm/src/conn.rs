//! What an `rdma_cm_id` does through the engine's connection manager: listen, connect,
//! accept, reject, disconnect, and the events these bring (`materialize`), with the
//! behaviour of librdmacm 44 over the kernel's rdma_cm:
//! - the RDMA IP CM service ID of the port space and port (`cma_get_service_id`);
//! - a CONNECT_REQUEST makes a child id on the listener's channel, with the listener's
//!   context (`cma_ib_new_conn_id`); a synchronous listener's child gets its own channel, as
//!   `rdma_get_request` migrates it;
//! - a REJECTED, UNREACHABLE or CONNECT_ERROR moves the id's QP to the error state
//!   (`ucma_process_conn_resp` and friends: a thread waiting on its receives wakes up);
//! - a synchronous id's `rdma_connect`, `rdma_accept`, `rdma_disconnect` and
//!   `rdma_get_request` wait for their event (`ucma_complete`).

use std::ffi::c_int;
use std::net::{IpAddr, SocketAddr};

use roce_cabi::cm::{CmAccept, CmConnect, ip_from_bytes, ip_to_bytes, kind};

use crate::Errno;
use crate::abi::{
    IbvGid, IbvQpAttr, RdmaCmEvent, RdmaCmEventParam, RdmaConnParam, RdmaIbAddr, event, qp,
};
use crate::addr;
use crate::inbox::{self, CmEvent};
use crate::state::{self, EINVAL, Event, Id, Phase, Request, Tables, with};
use crate::{ibv, id};

/// Responder resources and initiator depth without a `conn_param`: the device's
/// `max_qp_rd_atom` (librdmacm takes the device's).
const DEFAULT_RD_ATOMIC: u8 = 128;

/// `RDMA_MAX_RESP_RES` and `RDMA_MAX_INIT_DEPTH`: "as many as the device allows".
const RDMA_MAX_RD_ATOMIC: u8 = 0xff;

/// A `conn_param`'s responder resources or initiator depth as librdmacm takes it
/// (`rdma_connect`, `rdma_accept`, `ucma_valid_param`): `RDMA_MAX_*` is the device's maximum
/// (`max_qp_rd_atom`, `max_qp_init_rd_atom`: 128, as rxe's), a larger value `EINVAL`.
fn rd_atomic(v: u8) -> Result<u8, Errno> {
    match v {
        RDMA_MAX_RD_ATOMIC => Ok(DEFAULT_RD_ATOMIC),
        v if v > DEFAULT_RD_ATOMIC => Err(EINVAL),
        v => Ok(v),
    }
}

/// The RDMA IP CM service ID of port `port` in port space `ps` (`cma_get_service_id`).
pub(crate) fn service_id(ps: c_int, port: u16) -> u64 {
    ((ps as u64 & 0xffff) << 16) | u64::from(port)
}

/// What the program's `struct rdma_conn_param` asks for, read by value.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnParam {
    pub(crate) private_data: Vec<u8>,
    /// The QP number to announce when the id has no QP (the program moves its QP itself).
    pub(crate) qp_num: u32,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
}

/// The channel of `id`'s CM events, made for a synchronous id the first time.
fn events_channel(t: &mut Tables, id: usize) -> Result<usize, Errno> {
    let i = t.ids.get(&id).ok_or(EINVAL)?;
    if let Some(ch) = i.events_channel() {
        return Ok(ch);
    }
    let ch = state::new_channel(t)?;
    if let Some(i) = t.ids.get_mut(&id) {
        i.sync_channel = Some(ch);
    }
    Ok(ch)
}

/// Whether `id` is synchronous (made with a NULL channel).
fn is_sync(id: usize) -> bool {
    with(|t| t.ids.get(&id).is_some_and(|i| i.channel.is_none()))
}

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

/// `rdma_connect`: the REQ leaves; ESTABLISHED, REJECTED or UNREACHABLE follows. An RC id
/// without a QP announces `param.qp_num` and gets CONNECT_RESPONSE instead of ESTABLISHED:
/// the program moves its QP (`rdma_init_qp_attr`) and sends the RTU with `rdma_establish`, as
/// with librdmacm (UCX's rdmacm connection manager works so).
pub(crate) fn connect(id: usize, param: Option<ConnParam>) -> Result<(), Errno> {
    let no_qp = with(|t| t.ids.get(&id).map(|i| i.c.get().qp.is_null())).ok_or(EINVAL)?;
    if no_qp && param.is_none() {
        return Err(EINVAL);
    }
    let param = param.unwrap_or(ConnParam {
        responder_resources: DEFAULT_RD_ATOMIC,
        initiator_depth: DEFAULT_RD_ATOMIC,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    });
    let param = ConnParam {
        responder_resources: rd_atomic(param.responder_resources)?,
        initiator_depth: rd_atomic(param.initiator_depth)?,
        ..param
    };
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

/// `rdma_init_qp_attr`: the attributes that take the id's QP to `qp_attr->qp_state` (INIT,
/// RTR or RTS) and their mask, as the CM would give them: from the connection once there is
/// one (the REQ came, or the REP), else INIT's alone (`id::init_attr`).
pub(crate) fn init_qp_attr(id: usize, state: c_int) -> Result<(IbvQpAttr, c_int), Errno> {
    let (conn, qp_type) =
        with(|t| t.ids.get(&id).map(|i| (i.conn, i.c.get().qp_type))).ok_or(EINVAL)?;
    match (conn, state) {
        (Some(conn), _) => ibv::cm_init_qp_attr(conn, state),
        //= rxe:cma.c/cma_ib_init_qp_attr
        //# INIT before a connection: P_Key index, port, and no remote access (a Q_Key for UD)
        (None, qp::STATE_INIT) => Ok(id::init_attr(qp_type)),
        (None, _) => Err(EINVAL),
    }
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
        let param = param.unwrap_or(ConnParam {
            responder_resources: req.initiator_depth,
            initiator_depth: req.responder_resources,
            rnr_retry_count: 7,
            ..ConnParam::default()
        });
        let param = ConnParam {
            responder_resources: rd_atomic(param.responder_resources)?,
            initiator_depth: rd_atomic(param.initiator_depth)?,
            ..param
        };
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

/// `rdma_disconnect`: the QP to the error state, and a DREQ (or the DREP that answers the
/// peer's). A connection already down is no error, as with rdma_cm.
pub(crate) fn disconnect(id: usize) -> Result<(), Errno> {
    let wait = with(|t| {
        let ch = events_channel(t, id)?;
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let Some(conn) = i.conn else {
            return Err(EINVAL);
        };
        let was = i.phase;
        i.phase = Phase::Disconnected;
        // The engine moves the QP to the error state and sends the DREQ or DREP; a connection
        // already in timewait refuses, which rdma_cm does not report.
        let sent = ibv::cm_disconnect(conn).is_ok();
        if !sent {
            fail_qp(i);
        }
        // A synchronous id waits for DISCONNECTED unless it was reported already.
        Ok((sent && was != Phase::Disconnected).then_some(ch))
    })?;
    if let Some(ch) = wait
        && is_sync(id)
    {
        complete(id, ch, event::DISCONNECTED)?;
    }
    Ok(())
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

/// Waits on a synchronous id's channel for `want` (`ucma_complete`): its failure as librdmacm
/// gives it (REJECTED is `ECONNREFUSED`, UNREACHABLE `ETIMEDOUT`).
fn complete(id: usize, channel: usize, want: c_int) -> Result<(), Errno> {
    loop {
        let e = state::get_event(channel)? as usize;
        let got = with(|t| t.events.get(&e).map(|e| e.c.get()));
        let _ = state::ack_event(e);
        let Some(ev) = got else { continue };
        if ev.id as usize != id {
            continue;
        }
        return match ev.event {
            x if x == want => Ok(()),
            event::REJECTED => Err(Errno(libc::ECONNREFUSED)),
            _ if ev.status < 0 => Err(Errno(-ev.status)),
            // DISCONNECTED while waiting for ESTABLISHED, and the like.
            _ => Err(Errno(libc::ECONNRESET)),
        };
    }
}

/// Moves an id's QP to the error state.
fn fail_qp(i: &Id) {
    let qp = i.c.get().qp as usize;
    if qp != 0 {
        let err = IbvQpAttr {
            qp_state: qp::STATE_ERR,
            ..IbvQpAttr::default()
        };
        let _ = ibv::modify_qp(qp, err, qp::ATTR_STATE);
    }
}

/// At exit, what the kernel does when a process's rdma_cm file closes (`ucma_close` destroys
/// every id of the file): each id still listening stops, a request not answered is rejected,
/// a connection up or being made is disconnected (the DREQ leaves; libibverbs's at-exit,
/// which runs after this one, lets the NIC send it), and a DREQ not answered gets its DREP.
/// A program that returns from `main` with a connection up (qperf's server does) thus ends it
/// at once for the peer, which otherwise would wait out its own timeouts.
pub(crate) fn close_all() {
    with(|t| {
        for i in t.ids.values_mut() {
            close(i);
        }
    });
}

/// What `rdma_destroy_id` does to the id's connection and listener: a request not answered
/// is rejected, a connection up is disconnected, the listener goes; later events of either
/// are dropped.
pub(crate) fn close(i: &mut Id) {
    if let Some(h) = i.listen.take() {
        inbox::unroute_listen(h);
        let _ = ibv::cm_unlisten(h);
    }
    if let Some(conn) = i.conn.take() {
        inbox::close_conn(conn);
        let _ = match i.phase {
            Phase::Requested => ibv::cm_reject(conn, &[]),
            // Disconnected: the peer's DREQ came and the program did not answer it; the DREP
            // leaves now (ib_destroy_cm_id in DREQ_RCVD sends it). In timewait the engine
            // refuses, harmlessly.
            Phase::Connecting | Phase::Accepting | Phase::Connected | Phase::Disconnected => {
                ibv::cm_disconnect(conn)
            }
            _ => Ok(()),
        };
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_ids_are_the_port_space_and_the_port() {
        // rping's default port 7174 in the TCP port space (cma_get_service_id).
        assert_eq!(
            service_id(crate::abi::RDMA_PS_TCP, 7174),
            0x0000_0000_0106_1c06
        );
        assert_eq!(
            service_id(crate::abi::RDMA_PS_UDP, 1),
            0x0000_0000_0111_0001
        );
    }
}
