//! Memory windows (IBTA vol. 1 §10.6.7; rxe_mw.c): a second R_Key onto part of a registered
//! region, with rights of its own, that the application binds, moves and invalidates without
//! registering memory again.
//!
//! - Type 1 windows are bound by `ibv_bind_mw`, which posts a bind on a QP of their PD; any QP of
//!   that PD may then use the R_Key. Binding again moves them; a bind of length 0 unbinds them.
//!   They cannot be invalidated (o10-37.2.26).
//! - Type 2 windows (rxe's type 2B, as here) are bound by an `IBV_WR_BIND_MW` work request, only
//!   while unbound (o10-37.2.30), to the QP that posted it (C10-72: the QP's PD is the
//!   window's); only that QP may use the R_Key. `IBV_WR_LOCAL_INV` or a peer's SEND with
//!   invalidate unbinds them.
//!
//! A bind gives the window a new R_Key: the window's index (upper 24 bits) stays, the key byte
//! (low 8 bits) is the one the bind names (rxe `rxe_do_bind_mw`), so the R_Key a peer held
//! before stops working.
//!
//! Remote access through a window is checked against the window's rights and range, then lands
//! in its region. rxe checks the range against the region only (rxe_resp.c `check_rkey` calls
//! `mr_check_range`); here the window's bounds hold, as IBTA requires.

use std::collections::BTreeMap;

use roce_wire::Qpn;

use crate::mr::Mrs;
use crate::mr::{Access, PdHandle};

/// A window's type (`enum ibv_mw_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Bound by `ibv_bind_mw`, usable by every QP of its PD.
    Type1,
    /// Bound by a work request to one QP, invalidated by `IBV_WR_LOCAL_INV` or a SEND with
    /// invalidate.
    Type2,
}

/// What a bind asks (`struct ibv_mw_bind_info` plus the R_Keys of `ibv_send_wr.bind_mw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MwBind {
    /// The window's R_Key as the application knows it now.
    pub mw_rkey: u32,
    /// The R_Key the window takes: only its low byte is used, the index stays the window's.
    pub rkey: u32,
    /// The region's L_Key (ignored when `length` is 0).
    pub mr_lkey: u32,
    /// The window's first byte, an address of the region.
    pub addr: u64,
    /// Its length; 0 unbinds a type 1 window.
    pub length: u64,
    /// Its rights: remote read, write, atomic.
    pub access: Access,
}

/// A window the NIC holds.
#[derive(Debug)]
pub(crate) struct Window {
    pub(crate) pd: PdHandle,
    pub(crate) ty: MwType,
    pub(crate) rkey: u32,
    pub(crate) bound: Option<Binding>,
}

/// Where a bound window points.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Binding {
    /// The region's L_Key.
    pub(crate) mr_lkey: u32,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: Access,
    /// The QP a type 2 window is bound to.
    pub(crate) qp: Option<Qpn>,
}

/// The NIC's windows, by index (the R_Key's upper 24 bits, shared with regions' keys).
pub(crate) type Windows = BTreeMap<u32, Window>;

/// The window an R_Key names, if it names one (its key byte aside).
pub(crate) fn window_of(windows: &Windows, rkey: u32) -> Option<&Window> {
    windows.get(&(rkey >> 8))
}

/// Binds the window `bind.mw_rkey` names, for `qpn` of `qp_pd`, or says why not (then the
/// bind completes with `IBV_WC_MW_BIND_ERR` and nothing changed): rxe `rxe_bind_mw` and
/// `rxe_check_bind_mw`.
pub(crate) fn bind(
    windows: &mut Windows,
    mrs: &Mrs,
    qp_pd: PdHandle,
    qpn: Qpn,
    bind: &MwBind,
) -> Result<(), &'static str> {
    let mw = windows
        .get_mut(&(bind.mw_rkey >> 8))
        .ok_or("no such window")?;
    if mw.rkey != bind.mw_rkey {
        return Err("the window's R_Key is not the one given");
    }
    let remote = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    if !remote.contains(bind.access) {
        return Err("a window's rights are remote read, write and atomic");
    }
    match mw.ty {
        // A type 1 window is bound through a QP of its PD (libibverbs' ibv_bind_mw checks the
        // region's PD; the QP's is checked here).
        MwType::Type1 if mw.pd != qp_pd => return Err("a type 1 window of another PD"),
        MwType::Type1 => {}
        MwType::Type2 => {
            //= ibta:vol1/o10-37.2.30
            //# a type 2 window is bound only while it is free
            if mw.bound.is_some() {
                return Err("a type 2 window that is bound (o10-37.2.30)");
            }
            //= ibta:vol1/C10-72
            //# a type 2 window is bound by a QP of the window's PD
            if mw.pd != qp_pd {
                return Err("a type 2 window bound by a QP of another PD (C10-72)");
            }
            //= ibta:vol1/o10-37.2.40
            //# a type 2 window cannot be bound with length 0
            if bind.length == 0 {
                return Err("a type 2 window bound with length 0 (o10-37.2.40)");
            }
        }
    }
    if bind.length > 0 {
        let mr = &mrs
            .get(&bind.mr_lkey)
            .ok_or("no region with that L_Key")?
            .mr;
        if mr.pd() != mw.pd {
            return Err("the region is in another PD than the window");
        }
        if mr.access().contains(Access::ZERO_BASED) {
            return Err("a window on a zero-based region");
        }
        //= ibta:vol1/C10-73
        //# the region must allow windows to be bound (IBV_ACCESS_MW_BIND)
        if !mr.access().contains(Access::MW_BIND) {
            return Err("the region does not allow windows (C10-73)");
        }
        //= ibta:vol1/C10-74
        //# a window with remote write or atomic rights needs local write on its region
        let writes = bind.access.contains(Access::REMOTE_WRITE)
            || bind.access.contains(Access::REMOTE_ATOMIC);
        if writes && !mr.access().contains(Access::LOCAL_WRITE) {
            return Err("a writable window on a region without local write (C10-74)");
        }
        //= ibta:vol1/C10-75
        //# the window lies inside its region
        if mr.offset_of(bind.addr, bind.length).is_none() {
            return Err("the window is not inside the region (C10-75)");
        }
    }
    mw.rkey = (mw.rkey & !0xff) | (bind.rkey & 0xff);
    mw.bound = (bind.length > 0).then_some(Binding {
        mr_lkey: bind.mr_lkey,
        addr: bind.addr,
        length: bind.length,
        access: bind.access,
        qp: (mw.ty == MwType::Type2).then_some(qpn),
    });
    Ok(())
}

/// Invalidates the type 2 window `rkey` names, in `pd` (rxe `rxe_invalidate_mw`), or says why
/// not.
//= ibta:vol1/o10-37.2.26
//# a type 1 window cannot be invalidated
pub(crate) fn invalidate(
    windows: &mut Windows,
    pd: PdHandle,
    rkey: u32,
) -> Result<(), &'static str> {
    let mw = windows.get_mut(&(rkey >> 8)).ok_or("no such window")?;
    if mw.rkey != rkey {
        return Err("the window's R_Key is not the one given");
    }
    if mw.pd != pd {
        return Err("a window of another PD");
    }
    if mw.ty == MwType::Type1 {
        return Err("a type 1 window cannot be invalidated (o10-37.2.26)");
    }
    mw.bound.take().map(drop).ok_or("the window is not bound")
}

/// The region (its L_Key) and the offset in it of `[va, va + len)` reached through the window
/// `rkey` names, for the QP `by` (its PD and number) asking `rights`; `None` if the window does
/// not allow it (rxe `rxe_lookup_mw`: the R_Key, the PD, a type 2 window's QP, a bound window,
/// the rights; and the window's range).
pub(crate) fn resolve(
    window: &Window,
    mrs: &Mrs,
    (pd, qpn): (PdHandle, Qpn),
    rkey: u32,
    va: u64,
    len: u64,
    rights: Access,
) -> Option<(u32, usize)> {
    let b = window.bound.as_ref()?;
    if window.rkey != rkey || window.pd != pd || !b.access.contains(rights) {
        return None;
    }
    if b.qp.is_some_and(|bound| bound != qpn) {
        return None;
    }
    //= rxe:rxe_mw.c/rxe_lookup_mw
    //# the R_Key, the PD, a type 2 window's QP, a bound window and the rights are checked
    // and, as IBTA vol. 1 §10.6.7 has it (rxe checks the region's range only), the window's
    // bounds.
    let end = va.checked_add(len)?;
    if va < b.addr || end > b.addr + b.length {
        return None;
    }
    let offset = mrs.get(&b.mr_lkey)?.mr.offset_of(va, len)?;
    Some((b.mr_lkey, offset))
}

/// Whether a window is bound to the region `lkey` (which then cannot be deregistered: rxe
/// `rxe_dereg_mr` refuses a region with windows).
pub(crate) fn region_in_use(windows: &Windows, lkey: u32) -> bool {
    windows
        .values()
        .any(|w| w.bound.is_some_and(|b| b.mr_lkey == lkey))
}
