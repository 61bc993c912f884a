//! The NIC's objects — protection domains, memory regions, completion queues, QPs — and the QP
//! attributes `modify_qp` checks against the verbs state table and their ranges.

use crate::splitmix::SplitMix64;
use std::sync::Arc;

use roce_wire::{Qpn, gid};

use super::Nic;
use crate::config::SrcPortPolicy;
use crate::cq::{Cq, CqHandle};
use crate::mr::MrEntry;
use crate::mr::{Access, MemoryRegion, OwnedMemory, PdHandle, RegionMemory};
use crate::qp::{self, Qp, QpState, QpType};
use crate::qp::{QpAttr, QpInit};
use crate::srq::SrqHandle;
use crate::{NicConfig, VerbsError};

/// The numbers the NIC hands out next, some drawn from `NicConfig::seed`.
#[derive(Debug)]
pub(super) struct Ids {
    next_pd: u32,
    next_cq: u32,
    pub(super) next_srq: u32,
    /// The next key's index, in its upper 24 bits.
    next_key: u32,
    next_qpn: u32,
    next_iova: u64,
    /// The NIC's slot when engines share it ([`crate::share`]).
    slot: Option<u8>,
    /// Draws from the seed: key variants.
    draws: SplitMix64,
}

impl Ids {
    pub(super) fn new(config: &NicConfig) -> Self {
        let mut draws = SplitMix64::new(config.seed);
        let next_qpn = crate::share::qpn_in(
            config.slot,
            config.first_qpn + (draws.next() % 0x1000) as u32,
        );
        // Region addresses look like user virtual addresses, as peers see with rxe, from a page
        // drawn among 2^24.
        let next_iova = 0x7f00_0000_0000 + (draws.next() % (1 << 24)) * 4096;
        Self {
            next_pd: 1,
            next_cq: 1,
            next_srq: 1,
            next_key: 0x100,
            next_qpn,
            next_iova,
            slot: config.slot,
            draws,
        }
    }

    /// The next QPN not `taken`, counting up from the last one handed out and wrapping within
    /// the QPN space (the slot's range on a shared NIC) past QPs 0 and 1.
    fn next_qpn(&mut self, taken: impl Fn(Qpn) -> bool) -> Qpn {
        let mut qpn = self.next_qpn;
        loop {
            qpn = crate::share::qpn_in(self.slot, qpn);
            if qpn > 1 && !taken(Qpn::new(qpn)) {
                break;
            }
            qpn = qpn.wrapping_add(1);
        }
        self.next_qpn = qpn.wrapping_add(1);
        Qpn::new(qpn)
    }

    /// The next key of a region or a window (they share the index space): an index in the
    /// upper 24 bits and a variant drawn for the low byte, as rxe makes its keys
    /// (`rxe_mr_init`: index << 8 | a random key byte); `what` names them when none is left.
    /// On a shared NIC the slot takes the index's top byte (65 535 keys per engine).
    fn next_key(&mut self, what: &'static str) -> Result<u32, VerbsError> {
        let key = self.next_key | (self.draws.next() as u32 & 0xff);
        if self.slot.is_some() && key >> crate::share::ID_SLOT_SHIFT != 0 {
            return Err(VerbsError::Exhausted(what));
        }
        self.next_key = self
            .next_key
            .checked_add(0x100)
            .ok_or(VerbsError::Exhausted(what))?;
        Ok(crate::share::id_in(self.slot, key))
    }
}

impl Nic {
    // C. verbs from the application: objects

    /// Allocates a protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&mut self) -> PdHandle {
        let ids = &mut self.shared.ids;
        let pd = ids.next_pd;
        ids.next_pd += 1;
        self.shared.pds.insert(pd);
        PdHandle(pd)
    }

    /// Registers a zeroed region of `len` bytes (`ibv_reg_mr`). The handle returned shares the
    /// bytes with the NIC.
    pub fn reg_mr(
        &mut self,
        pd: PdHandle,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        // Checked before allocating, so that a huge length is refused rather than aborting.
        if !self.shared.pds.contains(&pd.0) {
            return Err(VerbsError::UnknownPd(pd.0));
        }
        if len > self.shared.config.max_mr_size {
            return Err(VerbsError::OutOfRange {
                attr: "length",
                value: len as u64,
                range: "at most NicConfig::max_mr_size bytes",
            });
        }
        self.reg_memory(pd, Arc::new(OwnedMemory::zeroed(len)), None, access)
    }

    /// Registers `memory` (`ibv_reg_mr` over the caller's buffer): its bytes are the region's.
    /// `iova` is the address SGEs and peers name its first byte by (a verbs program's buffer
    /// address); `None` picks one, as [`Nic::reg_mr`] does.
    pub fn reg_memory(
        &mut self,
        pd: PdHandle,
        memory: Arc<dyn RegionMemory>,
        iova: Option<u64>,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        let len = memory.len();
        if iova.is_some_and(|a| a.checked_add(len as u64).is_none()) {
            return Err(VerbsError::OutOfRange {
                attr: "addr",
                value: iova.unwrap_or(0),
                range: "a region that does not wrap around the address space",
            });
        }
        let shared = &mut self.shared;
        if !shared.pds.contains(&pd.0) {
            return Err(VerbsError::UnknownPd(pd.0));
        }
        //= ibta:vol1/10.6.3.1
        //# remote write and atomic rights need local write
        if (access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC))
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(VerbsError::OutOfRange {
                attr: "access",
                value: u64::from(access == Access::NONE),
                range: "remote write or atomic rights need local write",
            });
        }
        let ids = &mut shared.ids;
        let key = ids.next_key("memory regions")?;
        let iova = iova.unwrap_or_else(|| {
            let iova = ids.next_iova;
            // Regions are spaced on 4 KiB boundaries with a gap, so a stray address hits no
            // region.
            ids.next_iova += (len as u64).div_ceil(4096) * 4096 + 0x10_0000;
            iova
        });
        let mr = MemoryRegion {
            pd,
            lkey: key,
            rkey: key,
            iova,
            access,
            len,
            bytes: memory,
        };
        shared.mrs.insert(
            key,
            MrEntry {
                mr: mr.clone(),
                rkey_valid: true,
            },
        );
        Ok(mr)
    }

    /// Deregisters a region (`ibv_dereg_mr`). The application's handle keeps the bytes.
    /// Refused ([`VerbsError::Busy`]) while a memory window is bound to it (rxe
    /// `rxe_dereg_mr`: `EINVAL` while the region has windows).
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        if crate::mw::region_in_use(&self.shared.mws, lkey) {
            return Err(VerbsError::Busy(lkey));
        }
        self.shared
            .mrs
            .remove(&lkey)
            .map(drop)
            .ok_or(VerbsError::UnknownMr(lkey))
    }

    /// Allocates a memory window of `pd` (`ibv_alloc_mw`): its R_Key, an index shared with the
    /// regions' keys and a drawn key byte, as rxe makes them (`rxe_alloc_mw`). A type 1 window
    /// starts valid and unbound, a type 2 one free.
    pub fn alloc_mw(&mut self, pd: PdHandle, ty: crate::MwType) -> Result<u32, VerbsError> {
        let shared = &mut self.shared;
        if !shared.pds.contains(&pd.0) {
            return Err(VerbsError::UnknownPd(pd.0));
        }
        let rkey = shared.ids.next_key("memory windows")?;
        shared.mws.insert(
            rkey >> 8,
            crate::mw::Window {
                pd,
                ty,
                rkey,
                bound: None,
            },
        );
        Ok(rkey)
    }

    /// Frees the memory window whose index `rkey` names (`ibv_dealloc_mw`; its key byte may
    /// be out of date), bound or not: its R_Key stops working at once (rxe `rxe_dealloc_mw`).
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), VerbsError> {
        self.shared
            .mws
            .remove(&(rkey >> 8))
            .map(drop)
            .ok_or(VerbsError::UnknownMr(rkey))
    }

    /// The R_Key of the window whose index `rkey` names (its key byte as the NIC has it now),
    /// whether a bind changed it or not: what a program reads back after `ibv_bind_mw`.
    pub fn mw_rkey(&self, rkey: u32) -> Option<u32> {
        crate::mw::window_of(&self.shared.mws, rkey).map(|w| w.rkey)
    }

    /// Creates a completion queue of `depth` entries (`ibv_create_cq`).
    pub fn create_cq(&mut self, depth: usize) -> CqHandle {
        let ids = &mut self.shared.ids;
        let cq = ids.next_cq;
        ids.next_cq += 1;
        self.shared.cqs.insert(cq, Cq::new(depth.max(1)));
        CqHandle(cq)
    }

    /// Resizes a completion queue (`ibv_resize_cq`): the completions waiting stay, in order.
    /// Refused, with nothing changed, for a depth of 0 or below the completions waiting.
    pub fn resize_cq(&mut self, cq: CqHandle, depth: usize) -> Result<(), VerbsError> {
        let q = self
            .shared
            .cqs
            .get_mut(&cq.0)
            .ok_or(VerbsError::UnknownCq(cq.0))?;
        let too_small = VerbsError::OutOfRange {
            attr: "cqe",
            value: depth as u64,
            range: "at least 1 and the completions waiting",
        };
        if depth == 0 {
            return Err(too_small);
        }
        q.resize(depth).ok_or(too_small)
    }

    /// Creates a QP in RESET (`ibv_create_qp`).
    pub fn create_qp(&mut self, init: &QpInit) -> Result<Qpn, VerbsError> {
        self.create_qp_on(init, None)
    }

    /// Creates a QP, on `srq` if given (then `init.max_recv_wr` is not used), once every
    /// argument is checked.
    pub(super) fn create_qp_on(
        &mut self,
        init: &QpInit,
        srq: Option<SrqHandle>,
    ) -> Result<Qpn, VerbsError> {
        let shared = &mut self.shared;
        if !shared.pds.contains(&init.pd.0) {
            return Err(VerbsError::UnknownPd(init.pd.0));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !shared.cqs.contains_key(&cq.0) {
                return Err(VerbsError::UnknownCq(cq.0));
            }
        }
        if let Some(srq) = srq {
            let entry = shared
                .side
                .srqs
                .get(&srq.0)
                .ok_or(VerbsError::UnknownSrq(srq.0))?;
            //= rxe:rxe_qp.c/rxe_qp_from_init
            //# a QP takes from an SRQ of its own protection domain
            if entry.pd != init.pd {
                return Err(VerbsError::SrqWrongPd {
                    srq: srq.0,
                    srq_pd: entry.pd.0,
                    qp_pd: init.pd.0,
                });
            }
        }
        if self.qps.len() >= shared.config.max_qp {
            return Err(VerbsError::Exhausted("QPs"));
        }
        let qps = &self.qps;
        let qpn = shared.ids.next_qpn(|qpn| qps.contains_key(&qpn));
        let mut qp = Qp::new(qpn, init);
        qp.cc = crate::cc::QpCongestion::new(&shared.config, qpn.value());
        if let Some(srq) = srq
            && let Some(entry) = shared.side.srqs.get_mut(&srq.0)
        {
            entry.users += 1;
            qp.srq = Some(srq);
        }
        if init.qp_type == QpType::Ud {
            // A UD QP has no path MTU attribute: its messages are bounded by the port's active
            // MTU (rxe `get_mtu`; ibv_ud_pingpong sizes its messages by `active_mtu`).
            qp.mtu = shared.config.max_mtu;
        }
        self.qps.insert(qpn, qp);
        Ok(qpn)
    }

    /// Destroys a QP; its outstanding WRs are dropped without completions.
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), VerbsError> {
        let qp = self.qps.remove(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        if let Some(srq) = qp.srq
            && let Some(entry) = self.shared.side.srqs.get_mut(&srq.0)
        {
            entry.users -= 1;
        }
        // Its deadline entries go stale; its packets and its grant leave the budget.
        self.unindex(&qp);
        Ok(())
    }

    /// Modifies a QP (`ibv_modify_qp`): the transition and its attributes are checked against
    /// the verbs state table, values against their ranges, then applied.
    pub fn modify_qp(&mut self, qpn: Qpn, attr: &QpAttr) -> Result<(), VerbsError> {
        let config = &self.shared.config;
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        let to = qp::check_transition(qpn, qp.qp_type, qp.state, attr)?;
        check_ranges(config, attr)?;
        if let Some(access) = attr.access_flags {
            qp.access = access;
        }
        if let Some(qkey) = attr.qkey {
            qp.qkey = qkey;
        }
        if let Some(av) = attr.av {
            qp.av = Some(av);
        }
        if let Some(mtu) = attr.path_mtu {
            qp.mtu = mtu;
        }
        if let Some(dest) = attr.dest_qpn {
            qp.dest_qpn = dest;
        }
        for (value, field) in [
            (attr.max_rd_atomic, &mut qp.max_rd_atomic),
            (attr.max_dest_rd_atomic, &mut qp.max_dest_rd_atomic),
            (attr.min_rnr_timer, &mut qp.min_rnr_timer),
            (attr.timeout, &mut qp.timeout),
            (attr.retry_cnt, &mut qp.retry_cnt),
            (attr.rnr_retry, &mut qp.rnr_retry),
        ] {
            if let Some(value) = value {
                *field = value;
            }
        }
        if let Some(psn) = attr.rq_psn {
            qp.resp = qp::responder::Responder::start(psn);
        }
        if let Some(psn) = attr.sq_psn {
            qp.req = qp::requester::Requester::start(psn);
            qp.comp = qp::completer::Completer::start(psn, qp.retry_cnt, qp.rnr_retry);
            qp.sack.reset(psn);
        }
        qp.src_port = match config.src_port {
            SrcPortPolicy::PerQp => gid::udp_sport_for_qps(qpn.value(), qp.dest_qpn.value()),
            SrcPortPolicy::Fixed(port) => port,
        };
        let from = qp.state;
        match to {
            QpState::Reset => {
                qp.reset();
                qp.cc = crate::cc::QpCongestion::new(config, qpn.value());
            }
            QpState::Err if from != QpState::Err => {
                qp.enter_error(&mut self.shared.completions);
                qp.last_wqe_reached(&mut self.shared.side.events, &mut self.shared.stats);
            }
            QpState::Err => {}
            other => qp.state = other,
        }
        if from != to {
            tracing::debug!(qpn = %qpn, from = ?from, to = ?to, "modify qp");
        }
        self.reindex(qpn);
        self.shared.deliver_completions();
        Ok(())
    }
}

/// The attribute values `modify_qp` accepts, whatever the transition (rxe `rxe_qp_chk_attr`).
fn check_ranges(config: &NicConfig, attr: &QpAttr) -> Result<(), VerbsError> {
    let range = |attr: &'static str, value: Option<u8>, max: u8, text: &'static str| match value {
        Some(v) if v > max => Err(VerbsError::OutOfRange {
            attr,
            value: v.into(),
            range: text,
        }),
        _ => Ok(()),
    };
    range("timeout", attr.timeout, 31, "0..=31")?;
    range("retry_cnt", attr.retry_cnt, 7, "0..=7")?;
    range("rnr_retry", attr.rnr_retry, 7, "0..=7")?;
    range("min_rnr_timer", attr.min_rnr_timer, 31, "0..=31")?;
    range("max_rd_atomic", attr.max_rd_atomic, 128, "0..=128")?;
    range(
        "max_dest_rd_atomic",
        attr.max_dest_rd_atomic,
        128,
        "0..=128",
    )?;
    // The one port is port 1 (verbs number ports from 1; 0 is no port).
    if let Some(port) = attr.port_num.filter(|&p| p != 1) {
        return Err(VerbsError::OutOfRange {
            attr: "port_num",
            value: port.into(),
            range: "1",
        });
    }
    if let Some(index) = attr.pkey_index.filter(|&i| i != 0) {
        return Err(VerbsError::OutOfRange {
            attr: "pkey_index",
            value: index.into(),
            range: "0",
        });
    }
    if let Some(mtu) = attr.path_mtu.filter(|&mtu| mtu > config.max_mtu) {
        // rxe accepts this and then drops every packet, so both sides hang: refuse it.
        return Err(VerbsError::OutOfRange {
            attr: "path_mtu",
            value: mtu.bytes().into(),
            range: "at most the port's active MTU (NicConfig::max_mtu)",
        });
    }
    if let Some(av) = attr.av {
        if !config.addrs.contains(&av.src) {
            return Err(VerbsError::OutOfRange {
                attr: "av.src",
                value: 0,
                range: "one of the NIC's addresses (NicConfig::addrs)",
            });
        }
        if av.src.is_ipv4() != av.dst.is_ipv4() {
            return Err(VerbsError::OutOfRange {
                attr: "av.dst",
                value: 0,
                range: "the IP family of av.src",
            });
        }
    }
    Ok(())
}
