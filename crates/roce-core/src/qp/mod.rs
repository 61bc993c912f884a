//! A queue pair: its state, its queues, and the three parts that work them, named as in rxe —
//! the requester turns send WRs into request packets (`requester`), the responder executes
//! requests and answers them (`responder`), the completer reads the answers and retires send
//! WRs (`completer`).

use std::collections::VecDeque;

use roce_wire::Qpn;

use crate::config::{Mtu, NicConfig};
use crate::cq::{Cqe, WcOpcode, WcStatus};
use crate::event::{AsyncEvent, AsyncEvents};
use crate::mr::{Access, MemoryRegion, Mrs, PdHandle};
use crate::srq::{self, SrqHandle, Srqs};
use crate::stats::Stats;
use crate::timer::TimerTable;
use crate::wr::{RecvWr, Sge};
use crate::{CqHandle, Instant};

mod attr;
mod cnp;
pub(crate) mod completer;
mod emit;
pub(crate) mod inline_data;
mod local_ops;
pub(crate) mod requester;
pub(crate) mod responder;
mod selective;
mod send_queue;
mod state;
#[cfg(test)]
mod tests;

pub use attr::{AddressVector, QpAttr, QpInit};
pub(crate) use emit::{EmitError, lend_payload, seal};
pub(crate) use send_queue::{SendQueue, SendWqe};
pub(crate) use state::check_transition;
pub use state::{QpState, QpType};

/// What only some QPs touch — the SRQs and the asynchronous event queue — kept together so
/// that a QP's context carries one pointer for both, and the common path (no SRQ, no event)
/// builds its context as cheaply as before.
#[derive(Debug)]
pub(crate) struct SrqsAndEvents {
    pub(crate) srqs: Srqs,
    pub(crate) events: AsyncEvents,
}

/// What a QP's parts need from the NIC while they work.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Instant,
    pub(crate) config: &'a NicConfig,
    pub(crate) mrs: &'a mut Mrs,
    /// Memory windows: R_Keys onto parts of `mrs`.
    pub(crate) mws: &'a mut crate::mw::Windows,
    /// SRQs and the event queue: touched only by QPs with an SRQ and by QPs that fail.
    pub(crate) side: &'a mut SrqsAndEvents,
    pub(crate) stats: &'a mut Stats,
    pub(crate) completions: &'a mut Vec<(CqHandle, Cqe)>,
    /// The IPv4 identification the packet being built will carry (its ICRC covers it): 0, or
    /// its place in a segmentation-offload batch (see `Nic::poll_transmit_segment`).
    pub(crate) ip_id: u16,
    /// A request packet sent now must ask for an ACK: one more without would take the NIC's
    /// packets in flight after their QP's last AckReq past half its budget (`in_flight.rs`),
    /// or it ends its QP's burst (`nic/schedule.rs`).
    pub(crate) must_cover: bool,
    /// The IP header of the datagram being handled, for the GRH area of a UD receive.
    pub(crate) arrival: Option<responder::Arrival>,
    /// The INT header the datagram being handled carried (HPCC's, `roce_wire::int`), taken off
    /// it before parsing.
    pub(crate) int: Option<roce_wire::int::Repr>,
    /// Where a request's payload is lent rather than copied (`Nic::poll_transmit_lending`):
    /// `None` copies it into the packet.
    pub(crate) loans: Option<&'a mut Vec<crate::Loan>>,
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) qpn: Qpn,
    pub(crate) qp_type: QpType,
    pub(crate) state: QpState,
    pub(crate) pd: PdHandle,
    pub(crate) send_cq: CqHandle,
    pub(crate) recv_cq: CqHandle,
    pub(crate) max_send_wr: usize,
    pub(crate) max_recv_wr: usize,

    /// Remote access rights the responder grants.
    pub(crate) access: Access,
    pub(crate) av: Option<AddressVector>,
    pub(crate) mtu: Mtu,
    pub(crate) dest_qpn: Qpn,
    pub(crate) qkey: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) src_port: u16,

    pub(crate) sq: SendQueue,
    /// The receive queue. With an SRQ it holds at most the one WQE taken from the SRQ for the
    /// message in progress (rxe `resp.srq_wqe`).
    pub(crate) rq: VecDeque<RecvWr>,
    /// The SRQ it takes receive WQEs from, if any (`ibv_qp_init_attr.srq`).
    pub(crate) srq: Option<SrqHandle>,
    pub(crate) req: requester::Requester,
    pub(crate) comp: completer::Completer,
    pub(crate) resp: responder::Responder,
    /// Selective repeat: what the responder holds and what is to be sent again.
    pub(crate) sack: selective::Scoreboard,
    pub(crate) timers: TimerTable,
    /// Congestion control: reaction point, pacer, notification point.
    pub(crate) cc: crate::cc::QpCongestion,
    /// What the NIC's indexes hold for this QP (its deadline in `Deadlines`, its packets in
    /// `InFlight`), to update them only when the QP changed.
    pub(crate) indexed: Indexed,
}

/// A QP's entries in the NIC's indexes and queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Indexed {
    /// It is in the NIC's line of QPs to poll for packets.
    pub(crate) ready: bool,
    /// It waits for room in the NIC's budget of unacknowledged packets.
    pub(crate) waiting: bool,
    /// Request packets of room it was granted and has not used (at most
    /// `NicConfig::tx_burst_packets`).
    pub(crate) granted: u32,
    /// The deadline the NIC's deadline heap has for it.
    pub(crate) deadline: Option<Instant>,
    /// The unacknowledged packets the NIC's budget counts for it.
    pub(crate) unacked: u32,
    /// Of those, the ones sent after its last AckReq.
    pub(crate) uncovered: u32,
}

impl Qp {
    pub(crate) fn new(qpn: Qpn, init: &QpInit) -> Self {
        Self {
            qpn,
            qp_type: init.qp_type,
            state: QpState::Reset,
            pd: init.pd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            max_send_wr: init.max_send_wr,
            max_recv_wr: init.max_recv_wr,
            access: Access::NONE,
            av: None,
            mtu: Mtu::Mtu1024,
            dest_qpn: Qpn::new(0),
            qkey: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            src_port: roce_wire::ROCE_V2_UDP_PORT,
            sq: SendQueue::default(),
            rq: VecDeque::new(),
            srq: None,
            req: requester::Requester::default(),
            comp: completer::Completer::default(),
            resp: responder::Responder::default(),
            sack: selective::Scoreboard::default(),
            timers: TimerTable::default(),
            indexed: Indexed::default(),
            cc: crate::cc::QpCongestion::default(),
        }
    }

    /// The local ACK timeout (IBTA vol. 1 §9.7.6.1.3: 4.096 µs × 2^timeout; 0 = infinite).
    //= ibta:vol1/9.7.6.1.3
    //# the local ACK timeout is 4.096 µs × 2^timeout; 0 is infinite
    pub(crate) fn ack_timeout(&self) -> Option<crate::Duration> {
        (self.timeout != 0).then(|| crate::Duration::from_nanos(4096u64 << self.timeout.min(31)))
    }

    /// Moves to the error state: every outstanding WR completes with WR_FLUSH_ERR (IBTA vol. 1
    /// §10.3.1, "Error"), timers stop. Responses already queued still go out (a NAK that caused
    /// the error must reach the peer).
    //= ibta:vol1/10.3.1
    //# in the error state every outstanding WR completes with WR_FLUSH_ERR
    pub(crate) fn enter_error(&mut self, completions: &mut Vec<(CqHandle, Cqe)>) {
        if self.state == QpState::Err {
            return;
        }
        tracing::debug!(qpn = %self.qpn, from = ?self.state, "qp error");
        self.state = QpState::Err;
        self.flush(completions);
        self.timers = TimerTable::default();
    }

    /// Moves to the error state on the transport's own account (retries exhausted, a NAK or a
    /// responder error that ends the QP, a WR that cannot be carried out), raising what the
    /// application is told of it: `QpFatal` when `NicConfig::qp_fatal_events` asks (rxe raises
    /// none), and `QpLastWqeReached` for a QP with an SRQ.
    pub(crate) fn fail(&mut self, ctx: &mut Ctx<'_>) {
        if self.state == QpState::Err {
            return;
        }
        self.enter_error(ctx.completions);
        if ctx.config.qp_fatal_events {
            ctx.side
                .events
                .raise(AsyncEvent::QpFatal(self.qpn), ctx.stats);
        }
        self.last_wqe_reached(&mut ctx.side.events, ctx.stats);
    }

    /// For a QP with an SRQ that is now in the error state: it takes no more WQEs from the SRQ
    /// (the one it held was flushed), which the application learns by
    /// `IBV_EVENT_QP_LAST_WQE_REACHED` (rxe_resp.c `flush_recv_queue`).
    //= rxe:rxe_resp.c/flush_recv_queue
    //# a QP with an SRQ in the error state raises LAST_WQE_REACHED instead of flushing the SRQ
    pub(crate) fn last_wqe_reached(&self, events: &mut AsyncEvents, stats: &mut Stats) {
        if self.srq.is_some() {
            events.raise(AsyncEvent::QpLastWqeReached(self.qpn), stats);
        }
    }

    /// For a QP with an SRQ whose receive queue is empty: takes the SRQ's oldest WQE into it,
    /// to be the QP's own until its message completes. False when there is none (or no SRQ).
    #[cold]
    pub(crate) fn take_from_srq(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(handle) = self.srq else {
            return false;
        };
        match srq::take(&mut ctx.side.srqs, handle) {
            Some((wr, limit_reached)) => {
                if limit_reached {
                    let event = AsyncEvent::SrqLimitReached(handle);
                    ctx.side.events.raise(event, ctx.stats);
                }
                self.rq.push_back(wr);
                true
            }
            None => false,
        }
    }

    /// Whether a receive WQE is at the head of the receive queue, taking one from the SRQ if
    /// the QP has one and holds none. Without an SRQ this is one test of the queue.
    #[inline]
    pub(crate) fn has_recv_wqe(&mut self, ctx: &mut Ctx<'_>) -> bool {
        !self.rq.is_empty() || self.take_from_srq(ctx)
    }

    /// Completes every queued WR with WR_FLUSH_ERR.
    pub(crate) fn flush(&mut self, completions: &mut Vec<(CqHandle, Cqe)>) {
        for wqe in self.sq.drain() {
            let cqe = Cqe::new(
                WcStatus::WrFlushErr,
                wqe.wr.wr_id,
                wqe.wc_opcode(),
                self.qpn,
            );
            completions.push((self.send_cq, cqe));
        }
        // With an SRQ this is the one WQE the QP took for the message in progress; the SRQ's
        // own WQEs stay for its other QPs (rxe `check_resource` in the error state).
        for wr in self.rq.drain(..) {
            let cqe = Cqe::new(WcStatus::WrFlushErr, wr.wr_id, WcOpcode::Recv, self.qpn);
            completions.push((self.recv_cq, cqe));
        }
        self.req = requester::Requester {
            psn: self.req.psn,
            ..Default::default()
        };
        self.comp = completer::Completer {
            una: self.req.psn,
            ..Default::default()
        };
        self.sack.reset(self.req.psn);
        self.resp.abort_message();
        self.resp.reorder.clear();
    }

    /// Back to a fresh QP in RESET: queues emptied without completions (IBTA: "all WRs are
    /// removed"), PSNs and counters cleared.
    pub(crate) fn reset(&mut self) {
        self.state = QpState::Reset;
        self.sq.clear();
        self.rq.clear();
        self.req = requester::Requester::default();
        self.comp = completer::Completer::default();
        self.resp = responder::Responder::default();
        self.sack = selective::Scoreboard::default();
        self.timers = TimerTable::default();
    }

    /// Whether the requester may start or continue send WRs.
    pub(crate) fn can_send(&self) -> bool {
        matches!(self.state, QpState::Rts)
            || (self.state == QpState::Sqd && self.message_in_progress())
    }

    /// Whether the responder accepts requests.
    pub(crate) fn can_receive(&self) -> bool {
        matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
    }
}

/// Copies `out.len()` bytes starting `offset` bytes into the message that `sgl` describes.
/// Returns false if an SGE names no valid region or lies outside it.
pub(crate) fn gather(mrs: &Mrs, sgl: &[Sge], mut offset: u64, out: &mut [u8]) -> bool {
    let mut done = 0;
    for sge in sgl {
        let len = u64::from(sge.length);
        if offset >= len {
            offset -= len;
            continue;
        }
        let take = ((len - offset) as usize).min(out.len() - done);
        let Some(entry) = mrs.get(&sge.lkey) else {
            return false;
        };
        let Some(at) = entry.mr.offset_of(sge.addr + offset, take as u64) else {
            return false;
        };
        if !entry.mr.read_into(at, &mut out[done..done + take]) {
            return false;
        }
        done += take;
        offset = 0;
        if done == out.len() {
            return true;
        }
    }
    done == out.len()
}

/// [`gather`] without the copy: records where each piece of the `len` bytes from `offset` into
/// `sgl`'s message lies, as [`Loan`](crate::Loan)s, the first belonging at `at` in the packet.
/// False, leaving `loans` as it was, when a piece cannot be lent (its memory has no address) or
/// cannot be read: the caller copies then, and meets the same checks.
pub(crate) fn lend(
    mrs: &Mrs,
    sgl: &[Sge],
    offset: u64,
    len: usize,
    at: usize,
    loans: &mut Vec<crate::Loan>,
) -> bool {
    let before = loans.len();
    let lent = walk(sgl, offset, len, |sge, addr, take, done| {
        let loan = mrs.get(&sge.lkey).and_then(|entry| {
            let region = entry.mr.offset_of(addr, take as u64)?;
            crate::Loan::new(&entry.mr.bytes, region, take, at + done)
        });
        loan.map(|loan| loans.push(loan)).is_some()
    });
    if !lent {
        loans.truncate(before);
    }
    lent
}

/// Copies `data` into the message that `sgl` describes, starting `offset` bytes into it. Every
/// piece is checked first (a valid region with local write rights that holds it), so that
/// nothing lands unless all of it can: returns false, having written nothing, otherwise.
pub(crate) fn scatter(mrs: &Mrs, sgl: &[Sge], offset: u64, data: &[u8]) -> bool {
    writable(mrs, sgl, offset, data.len())
        && pieces(mrs, sgl, offset, data.len(), |mr, at, range| {
            mr.write(at, &data[range]);
        })
}

/// Whether `len` bytes from `offset` into the message that `sgl` describes may land: every
/// piece in a valid region with local write rights that holds it. Checking a whole message
/// first lets its parts be scattered one by one without one landing when another cannot.
pub(crate) fn writable(mrs: &Mrs, sgl: &[Sge], offset: u64, len: usize) -> bool {
    pieces(mrs, sgl, offset, len, |_, _, _| {})
}

/// Walks the pieces of `len` bytes from `offset` into `sgl`'s message: for each, its region,
/// its offset there and the bytes of the message it holds. False when a piece names no region
/// with local write rights that holds it, or the SGL is shorter than the bytes.
fn pieces(
    mrs: &Mrs,
    sgl: &[Sge],
    offset: u64,
    len: usize,
    mut each: impl FnMut(&MemoryRegion, usize, std::ops::Range<usize>),
) -> bool {
    walk(sgl, offset, len, |sge, addr, take, done| {
        let Some(entry) = mrs.get(&sge.lkey) else {
            return false;
        };
        if !entry.mr.access().contains(Access::LOCAL_WRITE) {
            return false;
        }
        let Some(at) = entry.mr.offset_of(addr, take as u64) else {
            return false;
        };
        each(&entry.mr, at, done..done + take);
        true
    })
}

/// Walks the SGEs that hold the `len` bytes from `offset` into `sgl`'s message, in order: for
/// each, the SGE, the address of its part's first byte, the part's length and where the part
/// starts among the `len` bytes. False at the first part `each` refuses, and when the SGL is
/// shorter than the bytes.
fn walk(
    sgl: &[Sge],
    mut offset: u64,
    len: usize,
    mut each: impl FnMut(&Sge, u64, usize, usize) -> bool,
) -> bool {
    let mut done = 0;
    for sge in sgl {
        if done == len {
            break;
        }
        let sge_len = u64::from(sge.length);
        if offset >= sge_len {
            offset -= sge_len;
            continue;
        }
        let take = ((sge_len - offset) as usize).min(len - done);
        if !each(sge, sge.addr + offset, take, done) {
            return false;
        }
        done += take;
        offset = 0;
    }
    done == len
}

/// Total bytes an SGL can hold.
pub(crate) fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().map(|sge| u64::from(sge.length)).sum()
}
