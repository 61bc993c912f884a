//! The NIC: its objects (protection domains, memory regions, completion queues, QPs), ingress
//! validation and dispatch (rxe_recv.c), and egress scheduling across QPs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use roce_wire::opcode::Transport;
use roce_wire::{ParseError, PseudoHeader, Psn, Qpn, RocePacket, bth, gid, icrc};

use crate::config::{IcrcPolicy, QpAttr, QpInit, SrcPortPolicy};
use crate::cq::{Cq, CqHandle, Cqe};
use crate::in_flight::InFlight;
use crate::mr::{Access, MemoryRegion, OwnedMemory, PdHandle, RegionMemory};
use crate::qp::{self, Ctx, MrEntry, Mrs, Qp, QpState, QpType, SendWqe};
use crate::timer::{Deadlines, Timer};
use crate::wr::{RecvWr, SendOp, SendWr};
use crate::{CongestionState, Datagram, Instant, NicConfig, Stats, Transmit, VerbsError};

/// The largest UDP payload the NIC writes: BTH, RETH, ImmDt, 4096 bytes of payload, pad and
/// ICRC fit. A `poll_transmit` buffer this long always suffices.
pub const MAX_DATAGRAM: usize = 4096 + 64;

/// A RoCEv2 NIC, sans IO. See the crate documentation for the contract.
#[derive(Debug)]
pub struct Nic {
    config: NicConfig,
    pds: BTreeSet<u32>,
    mrs: Mrs,
    cqs: BTreeMap<u32, Cq>,
    qps: BTreeMap<Qpn, Qp>,
    /// QPs that may have something to send, in turn (each once: `Qp::indexed.ready`).
    ready: VecDeque<Qpn>,
    /// Each QP's earliest deadline, in order.
    deadlines: Deadlines,
    /// Scratch list of the QPs `handle_timeout` fires (kept to reuse its allocation).
    due: Vec<Qpn>,
    /// Unacknowledged request packets of all RC QPs, and the QPs waiting for room.
    in_flight: InFlight,
    completions: Vec<(CqHandle, Cqe)>,
    /// Completions delivered to CQs so far.
    delivered: u64,
    next_pd: u32,
    next_cq: u32,
    next_key: u32,
    next_qpn: u32,
    next_iova: u64,
    /// Draws from `NicConfig::seed`: key variants.
    draws: SplitMix64,
    stats: Stats,
}

impl Nic {
    /// A NIC with no object yet.
    pub fn new(config: NicConfig) -> Self {
        let mut draws = SplitMix64(config.seed);
        let next_qpn = config.first_qpn + (draws.next() % 0x1000) as u32;
        // Region addresses look like user virtual addresses, as peers see with rxe, from a page
        // drawn among 2^24.
        let next_iova = 0x7f00_0000_0000 + (draws.next() % (1 << 24)) * 4096;
        Self {
            config,
            pds: BTreeSet::new(),
            mrs: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            ready: VecDeque::new(),
            deadlines: Deadlines::default(),
            due: Vec::new(),
            in_flight: InFlight::default(),
            completions: Vec::new(),
            delivered: 0,
            next_pd: 1,
            next_cq: 1,
            next_key: 0x100,
            next_qpn,
            next_iova,
            draws,
            stats: Stats::default(),
        }
    }

    // A. getters

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &NicConfig {
        &self.config
    }

    /// A QP's state.
    pub fn qp_state(&self, qpn: Qpn) -> Result<QpState, VerbsError> {
        self.qps
            .get(&qpn)
            .map(|qp| qp.state)
            .ok_or(VerbsError::UnknownQp(qpn))
    }

    /// The next PSN a QP's requester will use and the one its responder expects.
    pub fn qp_psns(&self, qpn: Qpn) -> Result<(Psn, Psn), VerbsError> {
        self.qps
            .get(&qpn)
            .map(|qp| (qp.req.psn, qp.resp.epsn))
            .ok_or(VerbsError::UnknownQp(qpn))
    }

    /// A QP's congestion control: its rate, target rate, α and CNPs.
    pub fn qp_congestion(&self, qpn: Qpn) -> Result<CongestionState, VerbsError> {
        self.qps
            .get(&qpn)
            .map(|qp| qp.cc.state())
            .ok_or(VerbsError::UnknownQp(qpn))
    }

    /// A QP, for the crate's tests.
    #[cfg(test)]
    pub(crate) fn qp(&self, qpn: Qpn) -> &Qp {
        &self.qps[&qpn]
    }

    // B. inputs from the network and the clock

    /// Takes in one datagram. It is checked as rxe checks (rxe_recv.c `rxe_rcv`, `hdr_check`):
    /// structure, ICRC, destination address, QP, transport and state, path, P_Key and Q_Key. A
    /// datagram failing any check is dropped, counted under its reason and traced.
    pub fn handle_datagram(&mut self, now: Instant, datagram: Datagram<'_>) {
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += datagram.payload.len() as u64;
        let packet = match RocePacket::new_checked(datagram.payload) {
            Ok(packet) => packet,
            Err(err) => {
                self.count_parse_error(err);
                tracing::trace!(src = %datagram.src, error = %err, "rx drop");
                return;
            }
        };
        if !self.icrc_ok(&datagram) {
            return;
        }
        let dst_ip = datagram.dst.ip();
        if !self.config.addrs.contains(&dst_ip) {
            self.drop_rx(|s| &mut s.rx_dst_addr_mismatch, "not our address");
            return;
        }
        let bth = packet.bth();
        let layout = packet.layout();
        let qpn = bth.dest_qp();
        if qpn.value() <= 1 {
            self.drop_rx(|s| &mut s.rx_special_qp, "QP 0 or 1");
            return;
        }
        let Some(qp) = self.qps.get_mut(&qpn) else {
            self.drop_rx(|s| &mut s.rx_unknown_qp, "unknown QP");
            return;
        };
        // A CNP names a connected QP of ours whose packets were marked (Annex A17.9.3): it
        // passes the checks of a response from that QP's peer, so that nobody else can slow
        // the QP down.
        let cnp = layout.transport == Transport::Cnp;
        let type_ok = matches!(
            (layout.transport, qp.qp_type),
            (Transport::Rc, QpType::Rc)
                | (Transport::Uc, QpType::Uc)
                | (Transport::Ud, QpType::Ud)
                | (Transport::Cnp, QpType::Rc | QpType::Uc)
        );
        if !type_ok {
            self.drop_rx(
                |s| &mut s.rx_wrong_transport,
                "transport is not the QP's type",
            );
            return;
        }
        let request = layout.is_request();
        let state_ok = if request {
            qp.can_receive()
        } else {
            matches!(qp.state, QpState::Rts | QpState::Sqd)
        };
        if !state_ok {
            self.drop_rx(|s| &mut s.rx_qp_not_ready, "QP state");
            return;
        }
        // rxe check_addr: a connected QP takes packets only from its peer, to its address.
        if qp.qp_type != QpType::Ud
            && qp
                .av
                .is_none_or(|av| av.dst != datagram.src.ip() || av.src != dst_ip)
        {
            self.drop_rx(|s| &mut s.rx_path_mismatch, "not the QP's path");
            return;
        }
        if bth.pkey() != bth::DEFAULT_PKEY {
            self.drop_rx(|s| &mut s.rx_pkey_mismatch, "P_Key");
            return;
        }
        if qp.qp_type == QpType::Ud && packet.deth().is_none_or(|d| d.qkey() != qp.qkey) {
            self.drop_rx(|s| &mut s.rx_qkey_mismatch, "Q_Key");
            return;
        }
        tracing::trace!(qpn = %qpn, psn = %bth.psn(), opcode = %bth.opcode(), "rx");
        self.stats.rx_accepted += 1;
        if cnp {
            // Congestion control consumes CNPs at the QP's reaction point; without it they
            // are only counted.
            self.stats.rx_cnps += 1;
            tracing::debug!(qpn = %qpn, time = %now, "rx cnp");
            qp.cc.cnps_received += 1;
            qp.cc.rp.on_cnp(now, &mut qp.timers, &mut self.stats);
            index_qp(qp, &mut self.deadlines, &mut self.in_flight);
            self.tidy_indexes();
            return;
        }
        let mut ctx = Ctx {
            now,
            config: &self.config,
            mrs: &mut self.mrs,
            stats: &mut self.stats,
            completions: &mut self.completions,
            ip_id: 0,
            budget_short: false,
        };
        if request {
            qp.notify_ecn(&ctx, datagram.ecn);
            qp.handle_request(&mut ctx, &packet);
        } else {
            qp.handle_response(&mut ctx, &packet);
        }
        push_ready(&mut self.ready, qp);
        index_qp(qp, &mut self.deadlines, &mut self.in_flight);
        self.tidy_indexes();
        self.deliver_completions();
    }

    /// Fires every timer due at `now`. Early or spurious calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut due = std::mem::take(&mut self.due);
        due.clear();
        while let Some((at, qpn)) = self.deadlines.peek()
            && at <= now
        {
            self.deadlines.pop();
            if let Some(qp) = self.qps.get_mut(&qpn)
                && qp.indexed.deadline == Some(at)
            {
                // Popped: `reindex` pushes its next deadline.
                qp.indexed.deadline = None;
                due.push(qpn);
            }
        }
        due.sort_unstable();
        for &qpn in &due {
            let Some(qp) = self.qps.get_mut(&qpn) else {
                continue;
            };
            let mut ctx = Ctx {
                now,
                config: &self.config,
                mrs: &mut self.mrs,
                stats: &mut self.stats,
                completions: &mut self.completions,
                ip_id: 0,
                budget_short: false,
            };
            for timer in Timer::ALL {
                if qp.timers.expire(timer, now) {
                    tracing::trace!(qpn = %qpn, timer = ?timer, "expired");
                    match timer {
                        Timer::Retransmit => qp.on_retransmit_timer(&mut ctx),
                        Timer::RnrRetry => qp.on_rnr_timer(&mut ctx),
                        Timer::AlphaUpdate | Timer::RateIncrease => {
                            qp.cc.rp.on_timer(timer, now, &mut qp.timers, ctx.stats);
                        }
                        // The QP is put back in line below: its next packet may go.
                        Timer::Pacing => {}
                    }
                }
            }
            if !qp.indexed.ready {
                qp.indexed.ready = true;
                self.ready.push_back(qpn);
            }
            self.reindex(qpn);
        }
        self.due = due;
        self.deliver_completions();
    }

    // C. verbs from the application

    /// Allocates a protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&mut self) -> PdHandle {
        let pd = self.next_pd;
        self.next_pd += 1;
        self.pds.insert(pd);
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
        if !self.pds.contains(&pd.0) {
            return Err(VerbsError::UnknownPd(pd.0));
        }
        if len > self.config.max_mr_size {
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
        if !self.pds.contains(&pd.0) {
            return Err(VerbsError::UnknownPd(pd.0));
        }
        if len > self.config.max_mr_size {
            return Err(VerbsError::OutOfRange {
                attr: "length",
                value: len as u64,
                range: "at most NicConfig::max_mr_size bytes",
            });
        }
        // IBTA vol. 1 §10.6.3.1: remote write and atomic rights need local write.
        if (access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC))
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(VerbsError::OutOfRange {
                attr: "access",
                value: u64::from(access == Access::NONE),
                range: "remote write or atomic rights need local write",
            });
        }
        // An index in the upper 24 bits and a variant drawn for the low byte, as rxe makes
        // its keys (`rxe_mr_init`: index << 8 | a random key byte).
        let key = self.next_key | (self.draws.next() as u32 & 0xff);
        self.next_key = self
            .next_key
            .checked_add(0x100)
            .ok_or(VerbsError::Exhausted("memory regions"))?;
        let iova = iova.unwrap_or_else(|| {
            let iova = self.next_iova;
            // Regions are spaced on 4 KiB boundaries with a gap, so a stray address hits no region.
            self.next_iova += (len as u64).div_ceil(4096) * 4096 + 0x10_0000;
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
        self.mrs.insert(
            key,
            MrEntry {
                mr: mr.clone(),
                rkey_valid: true,
            },
        );
        Ok(mr)
    }

    /// Deregisters a region (`ibv_dereg_mr`). The application's handle keeps the bytes.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        self.mrs
            .remove(&lkey)
            .map(drop)
            .ok_or(VerbsError::UnknownMr(lkey))
    }

    /// Creates a completion queue of `depth` entries (`ibv_create_cq`).
    pub fn create_cq(&mut self, depth: usize) -> CqHandle {
        let cq = self.next_cq;
        self.next_cq += 1;
        self.cqs.insert(cq, Cq::new(depth.max(1)));
        CqHandle(cq)
    }

    /// Creates a QP in RESET (`ibv_create_qp`).
    pub fn create_qp(&mut self, init: &QpInit) -> Result<Qpn, VerbsError> {
        if !self.pds.contains(&init.pd.0) {
            return Err(VerbsError::UnknownPd(init.pd.0));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !self.cqs.contains_key(&cq.0) {
                return Err(VerbsError::UnknownCq(cq.0));
            }
        }
        if self.qps.len() >= self.config.max_qp {
            return Err(VerbsError::Exhausted("QPs"));
        }
        let mut qpn = Qpn::new(self.next_qpn);
        while qpn.value() <= 1 || self.qps.contains_key(&qpn) {
            qpn = Qpn::new(qpn.value() + 1);
        }
        self.next_qpn = qpn.value() + 1;
        let mut qp = Qp::new(qpn, init);
        qp.cc = crate::cc::QpCongestion::new(&self.config);
        if init.qp_type == QpType::Ud {
            // A UD QP has no path MTU attribute: its messages are bounded by the port's active
            // MTU (rxe `get_mtu`; ibv_ud_pingpong sizes its messages by `active_mtu`).
            qp.mtu = self.config.max_mtu;
        }
        self.qps.insert(qpn, qp);
        Ok(qpn)
    }

    /// Destroys a QP; its outstanding WRs are dropped without completions.
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), VerbsError> {
        let qp = self.qps.remove(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        // Its deadline entries go stale; its packets and its grant leave the budget.
        self.in_flight.update(qp.indexed.unacked, 0);
        if qp.indexed.granted {
            self.in_flight.grant_used();
        }
        self.reindex(qpn);
        Ok(())
    }

    /// Modifies a QP (`ibv_modify_qp`): the transition and its attributes are checked against
    /// the verbs state table, values against their ranges, then applied.
    pub fn modify_qp(&mut self, qpn: Qpn, attr: &QpAttr) -> Result<(), VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        let to = qp::check_transition(qpn, qp.qp_type, qp.state, attr)?;
        self.check_ranges(attr)?;
        let qp = self.qps.get_mut(&qpn).expect("looked up above");
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
            qp.req = qp::requester::Requester::start(psn, qp.retry_cnt, qp.rnr_retry);
        }
        qp.src_port = match self.config.src_port {
            SrcPortPolicy::PerQp => gid::udp_sport_for_qps(qpn.value(), qp.dest_qpn.value()),
            SrcPortPolicy::Fixed(port) => port,
        };
        let from = qp.state;
        let mut ctx = Ctx {
            now: Instant::ZERO,
            config: &self.config,
            mrs: &mut self.mrs,
            stats: &mut self.stats,
            completions: &mut self.completions,
            ip_id: 0,
            budget_short: false,
        };
        match to {
            QpState::Reset => {
                qp.reset();
                qp.cc = crate::cc::QpCongestion::new(ctx.config);
            }
            QpState::Err => qp.enter_error(&mut ctx),
            other => qp.state = other,
        }
        if from != to {
            tracing::debug!(qpn = %qpn, from = ?from, to = ?to, "modify qp");
        }
        self.mark_ready(qpn);
        self.reindex(qpn);
        self.deliver_completions();
        Ok(())
    }

    /// Posts a send WR (`ibv_post_send`). The QP must be in RTS (or, for SQD, the WR waits).
    pub fn post_send(&mut self, now: Instant, qpn: Qpn, wr: SendWr) -> Result<(), VerbsError> {
        let _ = now;
        let qp = self.qps.get(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        if !matches!(qp.state, QpState::Rts | QpState::Sqd) {
            return Err(VerbsError::WrongState {
                qpn,
                state: qp.state,
                what: "post_send",
            });
        }
        if qp.sq.len() >= qp.max_send_wr {
            return Err(VerbsError::QueueFull {
                qpn,
                queue: "send",
                depth: qp.max_send_wr,
            });
        }
        let invalid = |reason| Err(VerbsError::InvalidWorkRequest { qpn, reason });
        if wr.sgl.len() > self.config.max_sge {
            return invalid("more SGEs than the device allows");
        }
        let length = wr.length();
        if length > u64::from(self.config.max_msg_size) {
            return invalid("message longer than the device allows");
        }
        match (qp.qp_type, wr.op) {
            (QpType::Ud, SendOp::Send | SendOp::SendWithImm(_)) => {
                if wr.ud.is_none() {
                    return invalid("a UD send needs a destination");
                }
                if length > u64::from(qp.mtu.bytes()) {
                    return invalid("a UD message must fit in one packet (path MTU)");
                }
            }
            (QpType::Ud, _) => return invalid("UD QPs only SEND"),
            (QpType::Uc, op) if op.is_read_or_atomic() || matches!(op, SendOp::SendWithInv(_)) => {
                return invalid("UC QPs do not READ, run atomics or SEND with invalidate");
            }
            (QpType::Rc, op) if op.is_read_or_atomic() && qp.max_rd_atomic == 0 => {
                return invalid("max_rd_atomic is 0: no READ or atomic can be outstanding");
            }
            (_, op) if op.is_atomic() && length < 8 => {
                return invalid("an atomic needs 8 bytes of local memory for the original value");
            }
            _ => {}
        }
        let inline = if wr.inline {
            if length > self.config.max_inline as u64 {
                return invalid("inline data over max_inline");
            }
            let mut data = vec![0; length as usize];
            if !qp::gather(&self.mrs, &wr.sgl, 0, &mut data) {
                let sge = wr.sgl.first().copied().unwrap_or(crate::wr::Sge {
                    addr: 0,
                    length: 0,
                    lkey: 0,
                });
                return Err(VerbsError::BadSge {
                    addr: sge.addr,
                    len: sge.length,
                    lkey: sge.lkey,
                });
            }
            Some(data)
        } else {
            self.check_sgl(
                qp.pd,
                &wr.sgl,
                matches!(wr.op, SendOp::RdmaRead(_)) || wr.op.is_atomic(),
            )?;
            None
        };
        let mtu = qp.mtu.bytes();
        let npsn = match wr.op {
            op if op.is_atomic() => 1,
            _ => (length as u32).div_ceil(mtu).max(1),
        };
        let wqe = SendWqe {
            wr,
            inline,
            length: length as u32,
            first_psn: None,
            npsn,
            sent: false,
        };
        self.qps
            .get_mut(&qpn)
            .expect("looked up above")
            .sq
            .push_back(wqe);
        self.mark_ready(qpn);
        self.reindex(qpn);
        Ok(())
    }

    /// Posts a receive WR (`ibv_post_recv`). Allowed from INIT on.
    pub fn post_recv(&mut self, qpn: Qpn, wr: RecvWr) -> Result<(), VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        if matches!(qp.state, QpState::Reset | QpState::Err) {
            return Err(VerbsError::WrongState {
                qpn,
                state: qp.state,
                what: "post_recv",
            });
        }
        if qp.rq.len() >= qp.max_recv_wr {
            return Err(VerbsError::QueueFull {
                qpn,
                queue: "receive",
                depth: qp.max_recv_wr,
            });
        }
        if wr.sgl.len() > self.config.max_sge {
            return Err(VerbsError::InvalidWorkRequest {
                qpn,
                reason: "more SGEs than the device allows",
            });
        }
        self.check_sgl(qp.pd, &wr.sgl, true)?;
        self.qps
            .get_mut(&qpn)
            .expect("looked up above")
            .rq
            .push_back(wr);
        Ok(())
    }

    // D. outputs

    /// The next datagram to send, written into `buf` (at least [`MAX_DATAGRAM`] bytes long), or
    /// `None` when nothing is due. QPs take turns, one packet each; a QP's responses go before
    /// its requests. Its ICRC covers an IPv4 identification of 0.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.poll_transmit_segment(now, buf, 0)
    }

    /// [`Nic::poll_transmit`] for a datagram that will leave with the IPv4 identification
    /// `ip_id`, which its ICRC covers (IPv6 has none: the value is then ignored). With UDP
    /// segmentation offload, Linux numbers the segments of one `sendmsg` 0, 1, 2, … (from 0 on
    /// an unconnected socket with DF set; `inet_gso_segment` counts the ID up per segment), so
    /// a device that batches packets into one send asks for packet `i` of the batch with `i`.
    pub fn poll_transmit_segment(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        ip_id: u16,
    ) -> Option<Transmit> {
        // Every QP's path MTU is at most the port's (checked by modify_qp), so this bounds every
        // packet without a look at each QP.
        if buf.len() < MAX_DATAGRAM.min(self.config.max_mtu.bytes() as usize + 64) {
            self.stats.tx_buffer_too_small += 1;
            return None;
        }
        while let Some(qpn) = self.ready.pop_front() {
            let Some(qp) = self.qps.get_mut(&qpn) else {
                continue;
            };
            qp.indexed.ready = false;
            // The NIC's budget of unacknowledged packets: without room (or while others wait
            // for it and this QP has no grant) its requests wait.
            let (spent, budget) = (self.in_flight.total(), self.config.max_unacked_total);
            let granted = std::mem::take(&mut qp.indexed.granted);
            if granted {
                self.in_flight.grant_used();
            }
            let gated = qp.qp_type == QpType::Rc && !self.in_flight.may_send(budget, granted);
            let mut ctx = Ctx {
                now,
                config: &self.config,
                mrs: &mut self.mrs,
                stats: &mut self.stats,
                completions: &mut self.completions,
                ip_id,
                budget_short: spent.saturating_mul(2) >= budget,
            };
            let transmit = match qp.poll_cnp(&mut ctx, buf) {
                Some(t) => Some(t),
                None => match qp.poll_response(&mut ctx, buf) {
                    Some(t) => Some(t),
                    None if gated => None,
                    None => qp.poll_request(&mut ctx, buf),
                },
            };
            if gated && !qp.indexed.waiting && qp.has_requests() {
                qp.indexed.waiting = true;
                self.in_flight.wait(qpn, granted);
            }
            if transmit.is_some() {
                // It may have more: back in line, behind the others.
                qp.indexed.ready = true;
                self.ready.push_back(qpn);
            }
            index_qp(qp, &mut self.deadlines, &mut self.in_flight);
            self.tidy_indexes();
            if let Some(transmit) = transmit {
                self.deliver_completions();
                return Some(transmit);
            }
            self.deliver_completions();
        }
        None
    }

    /// How many completions the NIC has delivered to its CQs (including any a full CQ lost):
    /// a driver wakes whoever waits on a CQ only when this moved.
    pub fn completions_delivered(&self) -> u64 {
        self.delivered
    }

    /// The earliest time `handle_timeout` has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // `reindex` keeps a current entry at the top.
        let first = self.deadlines.peek().map(|(at, _)| at);
        debug_assert_eq!(
            first,
            self.qps.values().filter_map(|qp| qp.timers.next()).min(),
            "the deadline index missed a timer change"
        );
        first
    }

    /// The next completion of `cq`.
    pub fn poll_completion(&mut self, cq: CqHandle) -> Option<Cqe> {
        self.cqs.get_mut(&cq.0)?.pop()
    }

    /// Completions waiting in `cq`.
    pub fn completions_waiting(&self, cq: CqHandle) -> usize {
        self.cqs.get(&cq.0).map_or(0, Cq::len)
    }

    // helpers

    fn check_ranges(&self, attr: &QpAttr) -> Result<(), VerbsError> {
        let range = |attr: &'static str, value: Option<u8>, max: u8, text: &'static str| match value
        {
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
        range(
            "port_num",
            attr.port_num.map(|p| p.saturating_sub(1)),
            0,
            "1",
        )?;
        if let Some(index) = attr.pkey_index.filter(|&i| i != 0) {
            return Err(VerbsError::OutOfRange {
                attr: "pkey_index",
                value: index.into(),
                range: "0",
            });
        }
        if let Some(mtu) = attr.path_mtu.filter(|&mtu| mtu > self.config.max_mtu) {
            // rxe accepts this and then drops every packet, so both sides hang: refuse it.
            return Err(VerbsError::OutOfRange {
                attr: "path_mtu",
                value: mtu.bytes().into(),
                range: "at most the port's active MTU (NicConfig::max_mtu)",
            });
        }
        if let Some(av) = attr.av {
            if !self.config.addrs.contains(&av.src) {
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

    /// Every SGE lies inside a region of the PD; `write` asks for local write rights.
    fn check_sgl(
        &self,
        pd: PdHandle,
        sgl: &[crate::wr::Sge],
        write: bool,
    ) -> Result<(), VerbsError> {
        for sge in sgl {
            let bad = || VerbsError::BadSge {
                addr: sge.addr,
                len: sge.length,
                lkey: sge.lkey,
            };
            let entry = self.mrs.get(&sge.lkey).ok_or_else(bad)?;
            if entry.mr.pd() != pd
                || (write && !entry.mr.access().contains(Access::LOCAL_WRITE))
                || entry.mr.offset_of(sge.addr, sge.length.into()).is_none()
            {
                return Err(bad());
            }
        }
        Ok(())
    }

    /// Records the QP's earliest deadline and its unacknowledged packets in the NIC's indexes,
    /// after anything that may have changed them; QPs that waited for room in the budget get
    /// back in line when there is some.
    fn reindex(&mut self, qpn: Qpn) {
        if let Some(qp) = self.qps.get_mut(&qpn) {
            index_qp(qp, &mut self.deadlines, &mut self.in_flight);
        }
        self.tidy_indexes();
    }

    /// Drops stale deadline entries at the top of the heap (and compacts it when they pile
    /// up), and grants room to QPs that wait for it, if there is some.
    fn tidy_indexes(&mut self) {
        while let Some((at, top)) = self.deadlines.peek() {
            if self
                .qps
                .get(&top)
                .is_some_and(|qp| qp.indexed.deadline == Some(at))
            {
                break;
            }
            self.deadlines.pop();
        }
        if self.deadlines.len() > 4 * self.qps.len() + 64 {
            let qps = &self.qps;
            self.deadlines.retain(|at, qpn| {
                qps.get(&qpn)
                    .is_some_and(|qp| qp.indexed.deadline == Some(at))
            });
        }
        let (qps, ready) = (&mut self.qps, &mut self.ready);
        self.in_flight
            .release(self.config.max_unacked_total, |qpn| {
                if let Some(qp) = qps.get_mut(&qpn) {
                    qp.indexed.waiting = false;
                    qp.indexed.granted = true;
                    push_ready(ready, qp);
                }
            });
    }

    fn mark_ready(&mut self, qpn: Qpn) {
        if let Some(qp) = self.qps.get_mut(&qpn) {
            push_ready(&mut self.ready, qp);
        }
    }

    fn deliver_completions(&mut self) {
        // Called after every input and output: most of the time there is nothing to deliver.
        if self.completions.is_empty() {
            return;
        }
        self.delivered += self.completions.len() as u64;
        for (cq, cqe) in self.completions.drain(..) {
            let pushed = self.cqs.get_mut(&cq.0).is_some_and(|q| q.push(cqe));
            if !pushed {
                self.stats.cq_overflows += 1;
            }
        }
    }

    /// The ICRC check (rxe_icrc.c `rxe_icrc_check`). Where the backend hid the IPv4
    /// identification (UDP sockets), the ID that makes the ICRC verify is solved for
    /// (`icrc::ipv4_id`): a packet passes when some ID fits, which a corruption does one time
    /// in 2^16, and is dropped under `rx_icrc_errors` when none does.
    fn icrc_ok(&mut self, datagram: &Datagram<'_>) -> bool {
        if self.config.icrc == IcrcPolicy::Skip {
            self.stats.rx_icrc_skipped += 1;
            return true;
        }
        // The first guess for a hidden ID is the datagram's place in its receive batch: a
        // sender batching with segmentation offload (our UDP backend) numbers them so.
        let guess = datagram.ip_id.unwrap_or(datagram.segment);
        let Some(header) = PseudoHeader::for_datagram(datagram.src, datagram.dst, guess) else {
            self.drop_rx(|s| &mut s.rx_dst_addr_mismatch, "mixed IP families");
            return false;
        };
        let verdict = if datagram.ip_id.is_none() && datagram.src.is_ipv4() {
            match icrc::ipv4_id::solve(&header, datagram.payload) {
                // 0: a lone DF datagram from an unconnected socket (a batch of such sends).
                Some(id) if id == guess || id == 0 => Ok(()),
                Some(id) => {
                    self.stats.rx_icrc_id_solved += 1;
                    tracing::trace!(src = %datagram.src, ip_id = id, "ipv4 id solved from the icrc");
                    Ok(())
                }
                None => Err("no IPv4 ID makes the ICRC verify"),
            }
        } else {
            icrc::verify(&header, datagram.payload).map_err(|_| "ICRC mismatch")
        };
        if let Err(why) = verdict {
            self.drop_rx(|s| &mut s.rx_icrc_errors, why);
            return false;
        }
        true
    }

    fn count_parse_error(&mut self, err: ParseError) {
        let counter = match err {
            ParseError::BadTver(_) => &mut self.stats.rx_bad_tver,
            ParseError::UnsupportedOpcode(_) => &mut self.stats.rx_unsupported_opcode,
            ParseError::BadPad { .. } => &mut self.stats.rx_bad_pad,
            ParseError::BadPayloadLength { .. } => &mut self.stats.rx_bad_length,
            ParseError::IcrcMismatch { .. } => &mut self.stats.rx_icrc_errors,
            _ => &mut self.stats.rx_truncated,
        };
        *counter += 1;
    }

    fn drop_rx(&mut self, counter: impl FnOnce(&mut Stats) -> &mut u64, why: &'static str) {
        *counter(&mut self.stats) += 1;
        tracing::trace!(why, "rx drop");
    }
}

/// Records `qp`'s earliest deadline and its unacknowledged packets in the NIC's indexes (the
/// QP's half of `Nic::reindex`, for callers that hold the QP already).
fn index_qp(qp: &mut Qp, deadlines: &mut Deadlines, in_flight: &mut InFlight) {
    let next = qp.timers.next();
    if next != qp.indexed.deadline {
        qp.indexed.deadline = next;
        if let Some(at) = next {
            deadlines.push(qp.qpn, at);
        }
    }
    // A QP out of RTS/SQD (an error flushed it, or it was reset) holds none.
    let unacked = if qp.qp_type == QpType::Rc && matches!(qp.state, QpState::Rts | QpState::Sqd) {
        qp.req.unacked()
    } else {
        0
    };
    if unacked != qp.indexed.unacked {
        in_flight.update(qp.indexed.unacked, unacked);
        qp.indexed.unacked = unacked;
    }
}

/// Puts `qp` in line to send, unless it is already.
fn push_ready(ready: &mut VecDeque<Qpn>, qp: &mut Qp) {
    if !qp.indexed.ready {
        qp.indexed.ready = true;
        ready.push_back(qp.qpn);
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a small, well-mixed stream from a 64-bit seed, for
/// the NIC's unpredictable values. Not a cryptographic generator: the seed is what is secret.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
