//! Protection domains and what lives in one: memory regions over the program's buffers, and
//! address handles (where a UD send goes).

use std::ffi::{c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use roce_core::{Access, MemoryRegion, PdHandle, Qpn, UdDest};

use super::{EINVAL, engine_err, handle, step, step_as, with};
use crate::abi::{IbvAh, IbvAhAttr, IbvContext, IbvGid, IbvMr, IbvPd};
use crate::device::{DeviceModel, GID_INDEX_IP};
use crate::memory::CallerMemory;
use crate::state::{self, Errno};
use roce_cabi::CBox;
use roce_device::Verb;

#[derive(Debug)]
pub(super) struct Pd {
    _c: CBox<IbvPd>,
    pub(super) handle: PdHandle,
    pub(super) ctx: usize,
}

#[derive(Debug)]
pub(super) struct Mr {
    _c: CBox<IbvMr>,
    pub(super) mr: MemoryRegion,
    pub(super) pd: usize,
}

/// An address handle: where a UD send goes.
#[derive(Debug)]
pub(super) struct Ah {
    _c: CBox<IbvAh>,
    dst: IpAddr,
    pd: usize,
}

/// `ibv_alloc_pd`.
pub(crate) fn alloc_pd(ctx: usize) -> Result<*mut IbvPd, Errno> {
    let pd = step(ctx, |nic| nic.alloc_pd())?;
    let c = CBox::new(IbvPd {
        context: ctx as *mut IbvContext,
        handle: handle(),
    });
    let ptr = c.ptr();
    let entry = Pd {
        _c: c,
        handle: pd,
        ctx,
    };
    with(|o| o.pds.insert(ptr as usize, entry));
    Ok(ptr)
}

/// `ibv_dealloc_pd`: `EBUSY` while a region, QP or address handle uses it.
pub(crate) fn dealloc_pd(pd: usize) -> Result<(), Errno> {
    with(|o| {
        if !o.pds.contains_key(&pd) {
            return Err(EINVAL);
        }
        if o.mrs.values().any(|m| m.pd == pd)
            || o.mws.values().any(|m| m.pd == pd)
            || o.qps.values().any(|q| q.pd == pd)
            || o.ahs.values().any(|a| a.pd == pd)
            || o.srqs.values().any(|s| s.pd == pd)
        {
            return Err(Errno(libc::EBUSY));
        }
        o.pds.remove(&pd);
        Ok(())
    })
}

/// The engine's rights for the `ibv_access_flags` of `ibv_reg_mr`, as rxe on Debian 12's
/// kernel (Linux 6.1) takes them: the kernel's `ib_check_mr_access` (include/rdma/ib_verbs.h)
/// refuses with `EINVAL` a flag outside `IB_ACCESS_SUPPORTED` (bits 0-7 and the optional range
/// 20-29), `IBV_ACCESS_ON_DEMAND` on a device without on-demand paging (rxe before 6.15; the
/// errno became `EOPNOTSUPP` in 6.2), and remote write or atomic without local write (the
/// engine checks that one). `IBV_ACCESS_MW_BIND` lets windows be bound to the region;
/// `IBV_ACCESS_HUGETLB` is a hint and `IBV_ACCESS_ZERO_BASED` is recorded but changes no
/// address (rxe's `rxe_reg_user_mr` keeps the flags; rxe refuses to bind a window to such a
/// region); the optional bits (`IBV_ACCESS_RELAXED_ORDERING`, ...) may be ignored (verbs.h).
pub(super) fn access(flags: c_int) -> Result<Access, Errno> {
    const ON_DEMAND: c_int = 1 << 6;
    const SUPPORTED: c_int = 0xff | OPTIONAL;
    const OPTIONAL: c_int = 0x3ff0_0000;
    if flags & !SUPPORTED != 0 || flags & ON_DEMAND != 0 {
        return Err(EINVAL);
    }
    let mut a = Access::NONE;
    for (bit, right) in RIGHTS {
        if flags & bit != 0 {
            a = a | right;
        }
    }
    Ok(a)
}

/// `enum ibv_access_flags` bits and the engine's rights they name.
const RIGHTS: [(c_int, Access); 6] = [
    (1, Access::LOCAL_WRITE),
    (2, Access::REMOTE_WRITE),
    (4, Access::REMOTE_READ),
    (8, Access::REMOTE_ATOMIC),
    (16, Access::MW_BIND),
    (32, Access::ZERO_BASED),
];

/// The `enum ibv_access_flags` bits of `a` (the inverse of [`access`]).
pub(super) fn access_flags(a: Access) -> c_int {
    RIGHTS
        .iter()
        .filter(|(_, right)| a.contains(*right))
        .fold(0, |flags, (bit, _)| flags | bit)
}

/// `ibv_reg_mr_iova2`: the program's buffer `memory`, named `iova` by SGEs and peers.
pub(crate) fn reg_mr(
    pd: usize,
    memory: CallerMemory,
    iova: u64,
    flags: c_int,
) -> Result<*mut IbvMr, Errno> {
    let access = access(flags)?;
    let (pd_handle, ctx) = with(|o| o.pds.get(&pd).map(|p| (p.handle, p.ctx))).ok_or(EINVAL)?;
    let memory = Arc::new(memory);
    let (addr, len) = memory.range();
    let mr = step(ctx, |nic| {
        nic.reg_memory(pd_handle, memory, Some(iova), access)
    })?
    .map_err(engine_err)?;
    let c = CBox::new(IbvMr {
        context: ctx as *mut IbvContext,
        pd: pd as *mut IbvPd,
        addr: addr as *mut c_void,
        length: len,
        handle: handle(),
        lkey: mr.lkey(),
        rkey: mr.rkey(),
    });
    let ptr = c.ptr();
    with(|o| o.mrs.insert(ptr as usize, Mr { _c: c, mr, pd }));
    Ok(ptr)
}

/// `ibv_dereg_mr`.
/// A region a memory window is bound to is refused with `EINVAL`, and stays (rxe
/// `rxe_dereg_mr`).
pub(crate) fn dereg_mr(mr: usize) -> Result<(), Errno> {
    let (lkey, pd) = with(|o| o.mrs.get(&mr).map(|m| (m.mr.lkey(), m.pd))).ok_or(EINVAL)?;
    let ctx = with(|o| o.pds.get(&pd).map(|p| p.ctx)).ok_or(EINVAL)?;
    // While no thread is sending: a payload lent from the buffer is read by the kernel after
    // the engine's lock is released, and the program may free the buffer once this returns.
    step_as(ctx, Verb::Deregister, |nic| nic.dereg_mr(lkey))?.map_err(engine_err)?;
    with(|o| o.mrs.remove(&mr));
    Ok(())
}

/// Where an `ibv_ah_attr` points, from where: (source, destination). RoCE needs the GRH; the
/// source must be a GID that carries traffic: our address's (index 1), or GID 0, the
/// link-local one, where it does ([`DeviceModel::source`]); else `EINVAL`. So is a destination
/// of the other IP family than the source (our socket speaks one family).
pub(super) fn destination(ah: &IbvAhAttr, model: &DeviceModel) -> Result<(IpAddr, IpAddr), Errno> {
    if ah.is_global == 0 {
        return Err(EINVAL);
    }
    let index = u32::from(ah.grh.sgid_index);
    let Some(src) = model.source(index) else {
        if let (0, Some(why)) = (index, model.gid0_refusal()) {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "roce-verbs: GID 0 carries no traffic here: {why}; use GID 1 (-g 1, -x 1)"
                );
            });
        }
        return Err(EINVAL);
    };
    let dgid = Ipv6Addr::from(ah.grh.dgid.raw);
    let dst = dgid.to_ipv4_mapped().map_or(IpAddr::V6(dgid), IpAddr::V4);
    if dst.is_ipv4() != src.is_ipv4() {
        return Err(EINVAL);
    }
    Ok((src, dst))
}

/// `ibv_init_ah_from_wc`: the address handle that answers the sender of a UD receive, from
/// the 40-byte GRH area in front of its data (`IBV_WC_GRH`). As libibverbs reads it: IPv4
/// when the area's first word is not IPv6's (the IPv4 header in its last 20 bytes), the
/// sender's address as the destination GID, ours as the source GID (index 1), hop limit
/// 0xff, the header's traffic class.
//= rxe:libibverbs/verbs.c/ibv_init_ah_from_wc
//# the reply's destination GID is the GRH's source, its source GID index the one of the GRH's destination
pub(crate) fn ah_attr_from_wc(
    port_num: u8,
    wc_flags: u32,
    slid: u16,
    sl: u8,
    grh: &[u8; 40],
) -> Result<IbvAhAttr, Errno> {
    let mut attr = IbvAhAttr {
        dlid: slid,
        sl,
        port_num,
        ..IbvAhAttr::default()
    };
    if wc_flags & 1 == 0 {
        return Ok(attr);
    }
    let (src, dst, traffic_class, flow_label) = if grh[0] >> 4 == 6 {
        let word = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
        let addr = |at: usize| {
            let mut b = [0u8; 16];
            b.copy_from_slice(&grh[at..at + 16]);
            Ipv6Addr::from(b)
        };
        (addr(8), addr(24), (word >> 20) as u8, word & 0xf_ffff)
    } else if grh[20] >> 4 == 4 {
        let v4 = |at: usize| Ipv4Addr::new(grh[at], grh[at + 1], grh[at + 2], grh[at + 3]);
        (v4(32).to_ipv6_mapped(), v4(36).to_ipv6_mapped(), grh[21], 0)
    } else {
        return Err(Errno(libc::EPROTONOSUPPORT));
    };
    // The reply leaves from the GID the datagram came to: GID 0 for a link-local address
    // (the only one of ours a datagram to such an address reaches), GID 1 for the others.
    let link_local = dst.is_unicast_link_local();
    attr.is_global = 1;
    attr.grh.dgid = IbvGid { raw: src.octets() };
    attr.grh.sgid_index = if link_local { 0 } else { GID_INDEX_IP as u8 };
    attr.grh.hop_limit = 0xff;
    attr.grh.traffic_class = traffic_class;
    attr.grh.flow_label = flow_label;
    Ok(attr)
}

/// `ibv_create_ah`.
pub(crate) fn create_ah(pd: usize, attr: &IbvAhAttr) -> Result<*mut IbvAh, Errno> {
    let model = &state::device()?.ok_or(EINVAL)?.model;
    let (_, dst) = destination(attr, model)?;
    let ctx = with(|o| o.pds.get(&pd).map(|p| p.ctx)).ok_or(EINVAL)?;
    state::engine(ctx)?;
    let c = CBox::new(IbvAh {
        context: ctx as *mut IbvContext,
        pd: pd as *mut IbvPd,
        handle: handle(),
    });
    let ptr = c.ptr();
    with(|o| o.ahs.insert(ptr as usize, Ah { _c: c, dst, pd }));
    Ok(ptr)
}

/// `ibv_destroy_ah`.
pub(crate) fn destroy_ah(ah: usize) -> Result<(), Errno> {
    with(|o| o.ahs.remove(&ah)).map(drop).ok_or(EINVAL)
}

/// The destination of a UD send: the address handle's, the WR's QPN, and its Q_Key, or the
/// QP's when the WR's has the high bit set (IBTA vol. 1 §10.2.5).
pub(crate) fn ud_dest(
    qp: usize,
    ah: usize,
    remote_qpn: u32,
    remote_qkey: u32,
) -> Result<UdDest, Errno> {
    with(|o| {
        let dst = o.ahs.get(&ah)?.dst;
        let qkey = if remote_qkey & 0x8000_0000 != 0 {
            o.qps.get(&qp)?.attr.qkey
        } else {
            remote_qkey
        };
        Some(UdDest {
            ip: dst,
            qpn: Qpn::new(remote_qpn & 0x00ff_ffff),
            qkey,
        })
    })
    .ok_or(EINVAL)
}
