//! REQs for a service ID nobody listens on yet, held for a moment before they are rejected.
//!
//! ib_cm rejects such a REQ at once, INVALID_SERVICE_ID (`cm_req_handler`). There, a listener
//! that a program asks for exists microseconds after its call, and the completion that makes
//! it call comes from the kernel whatever the program's threads are doing. Ours lives in the
//! program's process: the ACK that completes the program's last send, and then its call to
//! listen, wait for its threads to be given the processor, which a loaded machine holds off
//! for milliseconds. A peer that connects as soon as that send reached it (perftest's `-R`
//! client, whose server listens again after its first connection) was rejected there, where
//! the kernel's listener would have been in place. So a REQ that finds no listener is held, up
//! to [`crate::NicConfig::cm_listen_grace`], handed to a listener of its service ID that
//! appears meanwhile, and rejected INVALID_SERVICE_ID when none does. The requester sees a
//! REP a little later, or the same REJ a little later; the grace is far below its CM
//! response timeout (librdmacm's REQs allow 4.3 s), so it sends no REQ again meanwhile. At
//! most [`MAX_PARKED`] REQs are held: a flood of REQs for services nobody offers is rejected
//! at once, as ib_cm rejects it.

use roce_wire::mad::req;

use crate::Instant;
use crate::gsi::GsiDatagram;

/// The most REQs held at once.
pub(crate) const MAX_PARKED: usize = 64;

/// One REQ held, and until when.
#[derive(Debug, Clone)]
pub(crate) struct ParkedReq {
    pub(crate) until: Instant,
    pub(crate) from: GsiDatagram,
    pub(crate) tid: u64,
    pub(crate) req: req::Repr,
}

/// The REQs held, in the order they came.
#[derive(Debug, Default)]
pub(crate) struct Parked {
    reqs: Vec<ParkedReq>,
}

/// What [`Parked::hold`] did with a REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// Held until a listener comes or its time is up.
    Now,
    /// The same REQ (its requester's comm ID and CA GUID) is held already: a duplicate.
    Already,
    /// No room: reject it now.
    Full,
}

impl Parked {
    /// Holds `req` until `until`.
    pub(crate) fn hold(
        &mut self,
        until: Instant,
        from: &GsiDatagram,
        tid: u64,
        req: &req::Repr,
    ) -> Held {
        let same = |p: &ParkedReq| {
            p.req.local_comm_id == req.local_comm_id && p.req.local_ca_guid == req.local_ca_guid
        };
        if self.reqs.iter().any(same) {
            return Held::Already;
        }
        if self.reqs.len() >= MAX_PARKED {
            return Held::Full;
        }
        self.reqs.push(ParkedReq {
            until,
            from: from.clone(),
            tid,
            req: *req,
        });
        Held::Now
    }

    /// Takes the REQs held for `service_id`, in the order they came.
    pub(crate) fn take_for(&mut self, service_id: u64) -> Vec<ParkedReq> {
        self.take(|p| p.req.service_id == service_id)
    }

    /// Takes the REQs whose time is up at `now`, in the order they came.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<ParkedReq> {
        // Every CM timeout asks: nothing to take (and no vector to build) unless one is due.
        if self.next().is_none_or(|at| at > now) {
            return Vec::new();
        }
        self.take(|p| p.until <= now)
    }

    /// The earliest time a held REQ is up.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.reqs.iter().map(|p| p.until).min()
    }

    fn take(&mut self, which: impl Fn(&ParkedReq) -> bool) -> Vec<ParkedReq> {
        let (taken, kept) = std::mem::take(&mut self.reqs).into_iter().partition(which);
        self.reqs = kept;
        taken
    }
}
