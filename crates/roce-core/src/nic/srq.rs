//! Shared receive queues as verbs: created, queried, modified, posted to and destroyed, each
//! call checked whole before it changes anything (rxe_srq.c `rxe_srq_chk_init`,
//! `rxe_srq_chk_attr`; rxe_verbs.c `rxe_post_srq_recv`). What a QP does with one is in
//! `crate::srq` and the responder.

use roce_wire::Qpn;

use super::Nic;
use super::post::check_sgl;
use crate::VerbsError;
use crate::mr::PdHandle;
use crate::qp::QpInit;
use crate::srq::{Srq, SrqAttr, SrqHandle, SrqInit, SrqModify};
use crate::wr::RecvWr;

impl Nic {
    // C. verbs from the application: shared receive queues

    /// Creates a shared receive queue in `pd` (`ibv_create_srq`), its limit armed when
    /// `init.limit` is not 0.
    //= rxe:rxe_srq.c/rxe_srq_chk_attr
    //# max_wr 1 to the device's max_srq_wr, max_sge at most the device's, the limit at most max_wr
    pub fn create_srq(&mut self, pd: PdHandle, init: SrqInit) -> Result<SrqHandle, VerbsError> {
        let shared = &mut self.shared;
        if !shared.pds.contains(&pd.0) {
            return Err(VerbsError::UnknownPd(pd.0));
        }
        let config = &shared.config;
        check_depth(init.max_wr, config.max_srq_wr)?;
        if init.max_sge > config.max_sge {
            return Err(VerbsError::OutOfRange {
                attr: "max_sge",
                value: init.max_sge as u64,
                range: "at most NicConfig::max_sge",
            });
        }
        check_limit(init.limit, init.max_wr)?;
        if shared.side.srqs.len() >= config.max_srq {
            return Err(VerbsError::Exhausted("SRQs"));
        }
        let ids = &mut shared.ids;
        let handle = ids.next_srq;
        ids.next_srq = ids
            .next_srq
            .checked_add(1)
            .ok_or(VerbsError::Exhausted("SRQs"))?;
        // rxe rounds max_sge 0 up to 1 (`RXE_MIN_SRQ_SGE`).
        let init = SrqInit {
            max_sge: init.max_sge.max(1),
            ..init
        };
        shared.side.srqs.insert(handle, Srq::new(pd, &init));
        tracing::debug!(
            srq = handle,
            max_wr = init.max_wr,
            limit = init.limit,
            "create srq"
        );
        Ok(SrqHandle(handle))
    }

    /// An SRQ's attributes (`ibv_query_srq`): a limit of 0 means not armed (or it fired).
    pub fn srq_attr(&self, srq: SrqHandle) -> Result<SrqAttr, VerbsError> {
        self.srq_ref(srq).map(Srq::attr)
    }

    /// Receive WRs waiting in an SRQ (not counting those QPs took for messages in progress).
    pub fn srq_wqes_waiting(&self, srq: SrqHandle) -> Result<usize, VerbsError> {
        self.srq_ref(srq).map(|s| s.queue.len())
    }

    /// Modifies an SRQ (`ibv_modify_srq`): `limit` arms the limit event (`IBV_SRQ_LIMIT`),
    /// `max_wr` resizes it (`IBV_SRQ_MAX_WR`). Everything is checked before anything changes.
    pub fn modify_srq(&mut self, srq: SrqHandle, attr: &SrqModify) -> Result<(), VerbsError> {
        let max_srq_wr = self.shared.config.max_srq_wr;
        let entry = self
            .shared
            .side
            .srqs
            .get_mut(&srq.0)
            .ok_or(VerbsError::UnknownSrq(srq.0))?;
        let max_wr = attr.max_wr.unwrap_or(entry.max_wr);
        if let Some(new) = attr.max_wr {
            check_depth(new, max_srq_wr)?;
            if new < entry.queue.len() {
                return Err(VerbsError::OutOfRange {
                    attr: "max_wr",
                    value: new as u64,
                    range: "at least the work requests waiting in the SRQ",
                });
            }
            // rxe_srq_chk_attr: a new depth below the armed limit is refused.
            if attr.limit.is_none() && entry.limit > new {
                return Err(VerbsError::OutOfRange {
                    attr: "max_wr",
                    value: new as u64,
                    range: "at least the armed limit",
                });
            }
        }
        if let Some(limit) = attr.limit {
            check_limit(limit, max_wr)?;
        }
        entry.max_wr = max_wr;
        if let Some(limit) = attr.limit {
            entry.limit = limit;
        }
        tracing::debug!(
            srq = srq.0,
            max_wr = entry.max_wr,
            limit = entry.limit,
            "modify srq"
        );
        Ok(())
    }

    /// Posts a receive WR to an SRQ (`ibv_post_srq_recv`), checked as `post_recv` checks: the
    /// SRQ's SGE count, every SGE inside a writable region of the SRQ's protection domain,
    /// room in the queue.
    pub fn post_srq_recv(&mut self, srq: SrqHandle, wr: RecvWr) -> Result<(), VerbsError> {
        let entry = self.srq_ref(srq)?;
        if entry.queue.len() >= entry.max_wr {
            return Err(VerbsError::SrqFull {
                srq: srq.0,
                depth: entry.max_wr,
            });
        }
        if wr.sgl.len() > entry.max_sge {
            return Err(VerbsError::InvalidSrqWorkRequest {
                srq: srq.0,
                reason: "more SGEs than the SRQ's max_sge",
            });
        }
        check_sgl(&self.shared, entry.pd, &wr.sgl, true)?;
        if let Some(entry) = self.shared.side.srqs.get_mut(&srq.0) {
            entry.queue.push_back(wr);
        }
        Ok(())
    }

    /// Destroys an SRQ (`ibv_destroy_srq`); refused while a QP was created on it and not yet
    /// destroyed (EBUSY). Its waiting WRs go without completions, as rxe's.
    pub fn destroy_srq(&mut self, srq: SrqHandle) -> Result<(), VerbsError> {
        let entry = self.srq_ref(srq)?;
        if entry.users > 0 {
            return Err(VerbsError::SrqBusy {
                srq: srq.0,
                qps: entry.users,
            });
        }
        self.shared.side.srqs.remove(&srq.0);
        Ok(())
    }

    /// Creates a QP in RESET that takes its receive WRs from `srq` (`ibv_create_qp` with
    /// `ibv_qp_init_attr.srq`): RC, UC or UD, in the SRQ's protection domain.
    /// `init.max_recv_wr` is not used, and `post_recv` on it is refused; its receive
    /// completions go to its own receive CQ with its own QP number.
    pub fn create_qp_with_srq(&mut self, init: &QpInit, srq: SrqHandle) -> Result<Qpn, VerbsError> {
        self.create_qp_on(init, Some(srq))
    }

    /// The SRQ a QP takes its receive WRs from, if any.
    pub fn qp_srq(&self, qpn: Qpn) -> Result<Option<SrqHandle>, VerbsError> {
        self.qp_ref(qpn).map(|qp| qp.srq)
    }

    fn srq_ref(&self, srq: SrqHandle) -> Result<&Srq, VerbsError> {
        self.shared
            .side
            .srqs
            .get(&srq.0)
            .ok_or(VerbsError::UnknownSrq(srq.0))
    }
}

/// An SRQ depth: 1 to the device's `max_srq_wr`.
fn check_depth(max_wr: usize, max_srq_wr: usize) -> Result<(), VerbsError> {
    if max_wr == 0 || max_wr > max_srq_wr {
        return Err(VerbsError::OutOfRange {
            attr: "max_wr",
            value: max_wr as u64,
            range: "1 to NicConfig::max_srq_wr",
        });
    }
    Ok(())
}

/// A limit: at most the SRQ's depth (rxe refuses one over its queue's capacity).
fn check_limit(limit: usize, max_wr: usize) -> Result<(), VerbsError> {
    if limit > max_wr {
        return Err(VerbsError::OutOfRange {
            attr: "srq_limit",
            value: limit as u64,
            range: "at most the SRQ's max_wr",
        });
    }
    Ok(())
}
