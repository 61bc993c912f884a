//! What an `rdma_cm_id` does before a connection: bind, resolve the address and the route
//! (both answered in the call: the device reaches every address over UDP, so nothing is
//! looked up; the events are written after the call returns, by the library's work thread,
//! `work.rs`), listen, carry a QP. Every refusal leaves the id as
//! it was: the checks come first, the event is queued next (it can fail: a full pipe), and
//! the id changes last, all under the tables' lock so a reader never sees half of it.

use std::ffi::{c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::Errno;
use crate::abi::{
    self, IbvGid, IbvQpAttr, IbvQpInitAttr, IbvSaPathRec, RdmaCmId, RdmaRoute, event, qp,
};
use crate::addr;
use crate::ibv::{self, Device};
use crate::state::{EINVAL, Id, Phase, Tables, with};
use crate::work::report_later;
use roce_cabi::CBox;

/// A fresh `rdma_cm_id`, nothing bound.
pub(crate) fn blank_id(
    channel: Option<usize>,
    context: *mut c_void,
    ps: c_int,
    qp_type: c_int,
) -> RdmaCmId {
    RdmaCmId {
        verbs: std::ptr::null_mut(),
        channel: channel.map_or(std::ptr::null_mut(), |c| c as *mut _),
        context,
        qp: std::ptr::null_mut(),
        route: RdmaRoute {
            addr: abi::RdmaAddr::default(),
            path_rec: std::ptr::null_mut(),
            num_paths: 0,
        },
        ps,
        port_num: 0,
        event: std::ptr::null_mut(),
        send_cq_channel: std::ptr::null_mut(),
        send_cq: std::ptr::null_mut(),
        recv_cq_channel: std::ptr::null_mut(),
        recv_cq: std::ptr::null_mut(),
        srq: std::ptr::null_mut(),
        pd: std::ptr::null_mut(),
        qp_type,
    }
}

/// `rdma_create_id`: `RDMA_PS_TCP` and `RDMA_PS_IB` ids carry RC QPs, `RDMA_PS_UDP` and
/// `RDMA_PS_IPOIB` UD QPs (as librdmacm decides); other port spaces are `EINVAL`.
pub(crate) fn create_id(
    channel: Option<usize>,
    context: *mut c_void,
    ps: c_int,
) -> Result<*mut RdmaCmId, Errno> {
    let qp_type = match ps {
        abi::RDMA_PS_TCP | abi::RDMA_PS_IB => abi::IBV_QPT_RC,
        abi::RDMA_PS_UDP | abi::RDMA_PS_IPOIB => abi::IBV_QPT_UD,
        _ => return Err(EINVAL),
    };
    with(|t| {
        if let Some(c) = channel
            && !t.channels.contains_key(&c)
        {
            return Err(EINVAL);
        }
        let id = Id::new(blank_id(channel, context, ps, qp_type), channel);
        let ptr = id.c.ptr();
        t.ids.insert(id.c.addr(), id);
        Ok(ptr)
    })
}

/// `rdma_destroy_id`: events already taken stay valid until acked; queued ones go. A QP the
/// program did not destroy is left to it (as librdmacm does); CQs this library made are freed
/// unless that QP still uses them, and the device's PD with the last id that holds it.
///
/// A connection request not yet answered is rejected, a connection still up disconnected
/// and a listener closed (`conn::close`).
pub(crate) fn destroy_id(id: usize) -> Result<(), Errno> {
    with(|t| {
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        crate::conn::close(i);
        if i.c.get().qp.is_null() {
            for cq in &i.own_cqs {
                ibv::destroy_cq(*cq);
            }
            for ch in &i.own_channels {
                ibv::destroy_comp_channel(*ch);
            }
        }
        let sync_channel = i.sync_channel;
        t.put_device(id);
        t.drop_queued(id);
        t.ids.remove(&id);
        if let Some(ch) = sync_channel {
            let _ = t.drop_channel(ch);
        }
        Ok(())
    })
}

/// The address `want` gives the id in `t`, checked but not taken: `EADDRNOTAVAIL` for an
/// address that is not the device's, `EADDRINUSE` for a port another id of the same port
/// space holds; port 0 picks a free one.
fn choose_local(
    t: &mut Tables,
    id: usize,
    dev: &Device,
    want: SocketAddr,
) -> Result<SocketAddr, Errno> {
    let i = t.ids.get(&id).ok_or(EINVAL)?;
    if i.phase != Phase::Idle {
        return Err(EINVAL);
    }
    if !want.ip().is_unspecified() && !dev.has(want.ip()) {
        return Err(Errno(libc::EADDRNOTAVAIL));
    }
    let ps = i.c.get().ps;
    let port = if want.port() == 0 {
        t.ephemeral_port()?
    } else {
        let taken = t.ids.values().any(|o| {
            o.c.get().ps == ps
                && o.local.is_some_and(|a| {
                    a.port() == want.port()
                        && (a.ip() == want.ip()
                            || a.ip().is_unspecified()
                            || want.ip().is_unspecified())
                })
        });
        if taken {
            return Err(Errno(libc::EADDRINUSE));
        }
        want.port()
    };
    let mut local = want;
    local.set_port(port);
    Ok(local)
}

/// Takes `local` for the id: its source address, and the device when the address is the
/// device's (a wildcard bind has no device yet, as with librdmacm). Fails only if the
/// device's PD cannot be allocated, and then changes nothing.
fn take_local(t: &mut Tables, id: usize, dev: &Device, local: SocketAddr) -> Result<(), Errno> {
    if !local.ip().is_unspecified() {
        t.give_device(id, dev.ctx)?;
    }
    let Some(i) = t.ids.get_mut(&id) else {
        return Err(EINVAL);
    };
    i.local = Some(local);
    i.phase = Phase::Bound;
    i.c.update(|c| {
        c.route.addr.src = addr::to_storage(local);
        if !local.ip().is_unspecified() {
            c.route.addr.ibaddr.sgid = IbvGid::from_ip(local.ip());
            c.route.addr.ibaddr.pkey = 0xffff_u16.to_be();
        }
    });
    Ok(())
}

/// `rdma_bind_addr`: to the device's address, the id gets the device (`id->verbs`, `id->pd`).
pub(crate) fn bind(id: usize, want: SocketAddr) -> Result<(), Errno> {
    let dev = ibv::device()?;
    with(|t| {
        let local = choose_local(t, id, &dev, want)?;
        take_local(t, id, &dev, local)
    })
}

/// `rdma_resolve_addr`: binds first if the id is not bound (to `src`, or the device's address
/// with a free port), gives the id the device (`id->verbs`, `id->pd`), then reports
/// `RDMA_CM_EVENT_ADDR_RESOLVED`.
pub(crate) fn resolve_addr(
    id: usize,
    src: Option<SocketAddr>,
    dst: SocketAddr,
) -> Result<(), Errno> {
    let broadcast = matches!(dst.ip(), IpAddr::V4(v4) if v4.is_broadcast());
    if dst.ip().is_unspecified() || broadcast || dst.ip().is_multicast() {
        return Err(EINVAL);
    }
    let dev = ibv::device()?;
    with(|t| {
        let i = t.ids.get(&id).ok_or(EINVAL)?;
        let bind_to = match (i.phase, i.local) {
            (Phase::Idle, _) => Some(choose_local(
                t,
                id,
                &dev,
                src.unwrap_or(dev.source_for(dst, 0)),
            )?),
            (Phase::Bound, Some(_)) => None,
            _ => return Err(EINVAL),
        };
        let serial = t.reportable(id)?;
        if let Some(local) = bind_to {
            take_local(t, id, &dev, local)?;
        }
        t.give_device(id, dev.ctx)?;
        let Some(i) = t.ids.get_mut(&id) else {
            return Err(EINVAL);
        };
        // A wildcard bind resolves to the address the destination is reached from.
        let local = i.local.map(|a| {
            if a.ip().is_unspecified() {
                dev.source_for(dst, a.port())
            } else {
                a
            }
        });
        let sgid = local.map_or(dev.ip, |l| l.ip());
        i.local = local;
        i.phase = Phase::AddrResolved;
        i.c.update(|c| {
            if let Some(l) = local {
                c.route.addr.src = addr::to_storage(l);
            }
            c.route.addr.dst = addr::to_storage(dst);
            c.route.addr.ibaddr.sgid = IbvGid::from_ip(sgid);
            c.route.addr.ibaddr.dgid = IbvGid::from_ip(dst.ip());
            c.route.addr.ibaddr.pkey = 0xffff_u16.to_be();
        });
        Ok(serial)
    })
    .map(|serial| {
        if let Some(serial) = serial {
            report_later(id, serial, event::ADDR_RESOLVED);
        }
    })
}

/// `rdma_resolve_route`: one path, the GIDs of the two addresses, the port's active MTU;
/// reports `RDMA_CM_EVENT_ROUTE_RESOLVED`. `EINVAL` before the address is resolved.
pub(crate) fn resolve_route(id: usize) -> Result<(), Errno> {
    let dev = ibv::device()?;
    with(|t| {
        if t.ids.get(&id).ok_or(EINVAL)?.phase != Phase::AddrResolved {
            return Err(EINVAL);
        }
        let serial = t.reportable(id)?;
        let Some(i) = t.ids.get_mut(&id) else {
            return Err(EINVAL);
        };
        let ib = i.c.get().route.addr.ibaddr;
        let path = CBox::new(IbvSaPathRec {
            dgid: ib.dgid,
            sgid: ib.sgid,
            pkey: ib.pkey,
            hop_limit: 64,
            reversible: 1,
            numb_path: 1,
            mtu_selector: 2, // exactly
            mtu: dev.active_mtu,
            rate_selector: 2,
            rate: 3, // IBV_RATE_10_GBPS, as rxe reports
            packet_life_time_selector: 2,
            packet_life_time: 16, // CMA_IBOE_PACKET_LIFETIME
            ..IbvSaPathRec::default()
        });
        let p = path.ptr();
        i.path = Some(path);
        i.phase = Phase::RouteResolved;
        i.c.update(|c| {
            c.route.path_rec = p;
            c.route.num_paths = 1;
        });
        Ok(serial)
    })
    .map(|serial| {
        if let Some(serial) = serial {
            report_later(id, serial, event::ROUTE_RESOLVED);
        }
    })
}

/// The binding half of `rdma_listen` (`conn::listen` does the rest): an unbound id binds to
/// the wildcard address with a free port first.
pub(crate) fn listen(id: usize) -> Result<SocketAddr, Errno> {
    let dev = ibv::device()?;
    with(|t| {
        let i = t.ids.get(&id).ok_or(EINVAL)?;
        let local = match (i.phase, i.local) {
            (Phase::Idle, _) => {
                // As the kernel's rdma_listen: the IPv4 wildcard, which hears both families.
                let any = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
                let l = choose_local(t, id, &dev, any)?;
                take_local(t, id, &dev, l)?;
                l
            }
            (Phase::Bound, Some(l)) => l,
            _ => return Err(EINVAL),
        };
        if let Some(i) = t.ids.get_mut(&id) {
            i.phase = Phase::Listening;
        }
        Ok(local)
    })
}

/// `rdma_create_qp`: on `pd` (0: the id's, the device's PD), with CQs made for
/// the id where `attr` has none, each on a completion channel of its own
/// (`id->send_cq_channel`, `id->recv_cq_channel`, which `rdma_get_send_comp` and
/// `rdma_get_recv_comp` wait on, as librdmacm's `ucma_create_cqs` makes them); the QP is moved to INIT (RC, UC) or up to RTS with
/// `RDMA_UDP_QKEY` (UD), as librdmacm does. Returns `attr` with the granted capabilities.
pub(crate) fn create_qp(
    id: usize,
    pd: usize,
    mut attr: IbvQpInitAttr,
) -> Result<IbvQpInitAttr, Errno> {
    with(|t| {
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let c = i.c.get();
        if c.verbs.is_null() || !c.qp.is_null() {
            return Err(EINVAL);
        }
        let ctx = c.verbs as usize;
        let pd = if pd == 0 { c.pd as usize } else { pd };
        let mut made_cqs = Vec::new();
        let mut made_channels = Vec::new();
        let undo = |cqs: &[usize], channels: &[usize]| {
            for cq in cqs {
                ibv::destroy_cq(*cq);
            }
            for ch in channels {
                ibv::destroy_comp_channel(*ch);
            }
        };
        let mut channels = [0usize; 2];
        for (k, (slot, depth)) in [
            (&mut attr.send_cq, attr.cap.max_send_wr),
            (&mut attr.recv_cq, attr.cap.max_recv_wr),
        ]
        .into_iter()
        .enumerate()
        {
            if slot.is_null() {
                let made = ibv::create_comp_channel(ctx).and_then(|ch| {
                    made_channels.push(ch);
                    ibv::create_cq(ctx, depth, ch).map(|cq| (cq, ch))
                });
                match made {
                    Ok((cq, ch)) => {
                        *slot = cq as *mut _;
                        made_cqs.push(cq);
                        channels[k] = ch;
                    }
                    Err(e) => {
                        undo(&made_cqs, &made_channels);
                        return Err(e);
                    }
                }
            }
        }
        let qp = match ibv::create_qp(pd, &mut attr) {
            Ok(q) => q,
            Err(e) => {
                undo(&made_cqs, &made_channels);
                return Err(e);
            }
        };
        if let Err(e) = init_qp(qp, attr.qp_type) {
            let _ = ibv::destroy_qp(qp);
            undo(&made_cqs, &made_channels);
            return Err(e);
        }
        i.own_cqs = made_cqs;
        i.own_channels = made_channels;
        let (send_cq, recv_cq) = (attr.send_cq, attr.recv_cq);
        i.c.update(|c| {
            c.qp = qp as *mut _;
            c.pd = pd as *mut _;
            c.send_cq = send_cq;
            c.recv_cq = recv_cq;
            if channels[0] != 0 {
                c.send_cq_channel = channels[0] as *mut _;
            }
            if channels[1] != 0 {
                c.recv_cq_channel = channels[1] as *mut _;
            }
        });
        Ok(attr)
    })
}

/// The states librdmacm puts a new QP in (`ucma_init_conn_qp`, `ucma_init_ud_qp`,
/// rdma-core v44 librdmacm/cma.c): INIT with P_Key index 0 on port 1 and no remote access
/// before a connection; a UD QP goes on to RTR and RTS with `RDMA_UDP_QKEY`.
fn init_qp(qp: usize, qp_type: c_int) -> Result<(), Errno> {
    let (init, mask) = init_attr(qp_type);
    ibv::modify_qp(qp, init, mask)?;
    if qp_type != abi::IBV_QPT_UD {
        return Ok(());
    }
    let rtr = IbvQpAttr {
        qp_state: qp::STATE_RTR,
        ..IbvQpAttr::default()
    };
    ibv::modify_qp(qp, rtr, qp::ATTR_STATE)?;
    let rts = IbvQpAttr {
        qp_state: qp::STATE_RTS,
        sq_psn: 0,
        ..IbvQpAttr::default()
    };
    ibv::modify_qp(qp, rts, qp::ATTR_STATE | qp::ATTR_SQ_PSN)
}

/// INIT before a connection, and its mask, as the kernel's `cma_ib_init_qp_attr` gives it:
/// P_Key index 0 on port 1, then no remote access (RC, UC) or `RDMA_UDP_QKEY` (UD).
pub(crate) fn init_attr(qp_type: c_int) -> (IbvQpAttr, c_int) {
    let init = IbvQpAttr {
        qp_state: qp::STATE_INIT,
        pkey_index: 0,
        port_num: 1,
        qkey: abi::RDMA_UDP_QKEY,
        ..IbvQpAttr::default()
    };
    let base = qp::ATTR_STATE | qp::ATTR_PKEY_INDEX | qp::ATTR_PORT;
    if qp_type == abi::IBV_QPT_UD {
        (init, base | qp::ATTR_QKEY)
    } else {
        (init, base | qp::ATTR_ACCESS_FLAGS)
    }
}

/// `rdma_destroy_qp`: the QP, and the CQs made for it.
pub(crate) fn destroy_qp(id: usize) -> Result<(), Errno> {
    with(|t| {
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let qp = i.c.get().qp as usize;
        if qp == 0 {
            return Ok(());
        }
        ibv::destroy_qp(qp)?;
        let own = std::mem::take(&mut i.own_cqs);
        let channels = std::mem::take(&mut i.own_channels);
        i.c.update(|c| {
            c.qp = std::ptr::null_mut();
            if own.contains(&(c.send_cq as usize)) {
                c.send_cq = std::ptr::null_mut();
            }
            if own.contains(&(c.recv_cq as usize)) {
                c.recv_cq = std::ptr::null_mut();
            }
            if channels.contains(&(c.send_cq_channel as usize)) {
                c.send_cq_channel = std::ptr::null_mut();
            }
            if channels.contains(&(c.recv_cq_channel as usize)) {
                c.recv_cq_channel = std::ptr::null_mut();
            }
        });
        for cq in own {
            ibv::destroy_cq(cq);
        }
        for ch in channels {
            ibv::destroy_comp_channel(ch);
        }
        Ok(())
    })
}

/// `rdma_set_option`: the `RDMA_OPTION_ID` options (TOS, REUSEADDR, AFONLY, ACK_TIMEOUT)
/// are accepted with their C sizes and change nothing yet (no connections); `RDMA_OPTION_IB_PATH`
/// is `ENOSYS`; anything else, or a wrong size, `EINVAL`.
pub(crate) fn set_option(id: usize, level: c_int, name: c_int, len: usize) -> Result<(), Errno> {
    with(|t| t.ids.contains_key(&id))
        .then_some(())
        .ok_or(EINVAL)?;
    match (level, name, len) {
        (0, 0 | 3, 1) | (0, 1 | 2, 4) => Ok(()),
        (1, 1, _) => Err(Errno(libc::ENOSYS)),
        _ => Err(EINVAL),
    }
}
