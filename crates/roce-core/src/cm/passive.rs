//! The passive side: a REQ comes (a duplicate, a stale connection, an unknown service ID, or a
//! request for a listener), the application accepts or rejects it, the RTU comes.

use roce_wire::mad::cma::PortSpace;
use roce_wire::mad::rej::{self, RejectReason};
use roce_wire::mad::{req, rtu};

use super::parked::Held;
use super::retry::iba_ms;
use super::wire::{self, To};
use super::{AcceptParams, Cm, CmError, CmEvent, Conn, ConnId, ConnectRequest, State, attrs};
use crate::gsi::GsiDatagram;
use crate::{Instant, Nic, QpState, QpType};

/// Bytes of private data a REP carries, and a REJ.
const REP_PRIVATE: usize = roce_wire::mad::rep::PRIVATE_DATA_LEN;
const REJ_PRIVATE: usize = rej::PRIVATE_DATA_LEN;

impl Cm {
    /// A REQ arrived.
    //= rxe:cm.c/cm_match_req
    //# a REQ is matched in order: a duplicate of a connection we hold (same remote comm ID and CA
    //# GUID), then a stale connection (same remote QPN and CA GUID), then the listener of its service ID
    pub(crate) fn on_req(
        &mut self,
        nic: &mut Nic,
        now: Instant,
        from: &GsiDatagram,
        tid: u64,
        m: &req::Repr,
    ) {
        let guid = m.local_ca_guid;
        if let Some(conn) = self
            .conns
            .values()
            .find(|c| !c.active && c.remote_id == m.local_comm_id && c.remote_guid == guid)
        {
            nic.stats_mut().cm_rx_duplicates += 1;
            self.duplicate_req(nic, conn.id);
            return;
        }
        let reply = |nic: &mut Nic, reason: RejectReason| reject_req(nic, from, tid, m, reason);
        let stale = self
            .conns
            .values()
            .find(|c| c.remote_guid == guid && c.remote_qpn == m.local_qpn && c.qpn.is_some())
            .map(|c| (c.id, c.state));
        if let Some((old, state)) = stale {
            //= rxe:cm.c/cm_match_req
            //# a REQ from a QP we still hold a connection with is rejected STALE_CONN, and a live
            //# connection of that QP is disconnected
            tracing::debug!(conn = ?old, "stale connection");
            reply(nic, RejectReason::StaleConn);
            if state == State::Established {
                let _ = self.disconnect(nic, now, old);
            }
            return;
        }
        let Some(listen) = self.listeners.find(m.service_id) else {
            // Held a moment for a listener to come (parked.rs), unless there is no room.
            let until = now + nic.config().cm_listen_grace;
            let held = if nic.config().cm_listen_grace.is_zero() {
                Held::Full
            } else {
                self.parked.hold(until, from, tid, m)
            };
            match held {
                Held::Now => nic.stats_mut().cm_rx_req_held += 1,
                Held::Already => nic.stats_mut().cm_rx_duplicates += 1,
                Held::Full => {
                    //= rxe:cm.c/cm_req_handler
                    //# a REQ no listener takes is rejected INVALID_SERVICE_ID
                    nic.stats_mut().cm_rx_no_listener += 1;
                    reply(nic, RejectReason::InvalidServiceId);
                }
            }
            return;
        };
        // What rdma_cm's handler turns down: its cm_id is destroyed in REQ_RCVD, which rejects
        // the REQ CONSUMER_DEFINED.
        //= rxe:cm.c/cm_destroy_id
        //# a REQ its consumer refuses (wrong transport, bad cma_hdr) is rejected CONSUMER_DEFINED
        if m.transport_service_type != req::TRANSPORT_RC {
            reply(nic, RejectReason::ConsumerDefined);
            return;
        }
        let Some((peer_port, private)) =
            wire::split_cma_hdr(nic, "REQ", m.service_id, PortSpace::TCP, &m.private_data)
        else {
            reply(nic, RejectReason::ConsumerDefined);
            return;
        };
        let Some(mtu) = attrs::mtu_of(m.path_mtu, nic.config().max_mtu) else {
            reply(nic, RejectReason::InvalidMtu);
            return;
        };
        let Some(id) = self.alloc_id(nic.config()) else {
            reply(nic, RejectReason::NoResources);
            return;
        };
        let mut conn = Conn::new(ConnId(id), State::ReqRcvd, from.local, from.peer);
        conn.remote_id = m.local_comm_id;
        conn.remote_guid = guid;
        conn.listen = Some(listen);
        conn.peer_cm_qp = from.peer_qp;
        conn.service_id = m.service_id;
        conn.tid = tid;
        conn.remote_qpn = m.local_qpn;
        conn.remote_psn = m.starting_psn;
        conn.mtu = mtu;
        //= rxe:cm.c/cm_req_handler
        //# the passive side answers the REQ's initiator depth and issues its responder
        //# resources; its retry counts are the REQ's; its path life time is the REQ's ACK timeout - 1
        conn.responder_resources = m.initiator_depth;
        conn.initiator_depth = m.responder_resources;
        conn.retry_count = m.retry_count;
        conn.rnr_retry = m.rnr_retry_count;
        conn.srq = m.srq;
        conn.packet_life_time = m.primary_path.local_ack_timeout.saturating_sub(1);
        conn.ack_timeout = conn.packet_life_time.saturating_add(1).min(31);
        conn.response_timeout = iba_ms(m.local_cm_response_timeout);
        conn.max_cm_retries = m.max_cm_retries;
        self.conns.insert(id, conn);
        let event = ConnectRequest {
            conn: ConnId(id),
            listen,
            service_id: m.service_id,
            peer: from.peer,
            local: from.local,
            peer_port,
            private_data: private,
            peer_qpn: m.local_qpn,
            peer_psn: m.starting_psn,
            mtu,
            responder_resources: m.responder_resources,
            initiator_depth: m.initiator_depth,
            retry_count: m.retry_count,
            rnr_retry_count: m.rnr_retry_count,
            srq: m.srq,
        };
        self.emit(nic.stats_mut(), CmEvent::ConnectRequest(Box::new(event)));
    }

    /// A listener for `service_id` came: the REQs held for it are taken as if they came now.
    pub(crate) fn listener_came(&mut self, nic: &mut Nic, now: Instant, service_id: u64) {
        for held in self.parked.take_for(service_id) {
            self.on_req(nic, now, &held.from, held.tid, &held.req);
        }
    }

    /// The REQs held whose time is up without a listener: rejected INVALID_SERVICE_ID, as they
    /// would have been when they came.
    pub(crate) fn parked_timeout(&mut self, nic: &mut Nic, now: Instant) {
        for held in self.parked.take_due(now) {
            nic.stats_mut().cm_rx_no_listener += 1;
            reject_req(
                nic,
                &held.from,
                held.tid,
                &held.req,
                RejectReason::InvalidServiceId,
            );
        }
    }

    /// A REQ we hold already came again.
    //= rxe:cm.c/cm_dup_req_handler
    //# a duplicate REQ gets the MRA while the consumer holds the REQ, REJ STALE_CONN in timewait,
    //# and nothing in any other state (the REP's own retries answer it)
    fn duplicate_req(&mut self, nic: &mut Nic, id: ConnId) {
        let Some(conn) = self.conns.get(&id.0) else {
            return;
        };
        let mad = match conn.state {
            State::ReqRcvd => wire::mra(conn),
            State::Timewait => wire::rej(
                (conn.id.0, conn.remote_id),
                conn.tid,
                rej::REJECTED_OTHER,
                RejectReason::StaleConn,
                &[],
            ),
            _ => return,
        };
        wire::send(nic, To::conn(conn), mad);
    }

    /// The application accepts a REQ: its QP goes to RTR and RTS, then the REP leaves.
    //= rxe:cm.c/ib_send_cm_rep
    //# the REP is sent again every REQ local CM response timeout, REQ max CM retries times
    pub(crate) fn accept(
        &mut self,
        nic: &mut Nic,
        now: Instant,
        id: ConnId,
        params: &AcceptParams,
    ) -> Result<(), CmError> {
        let conn = self.conns.get(&id.0).ok_or(CmError::UnknownConn(id))?;
        if conn.state != State::ReqRcvd {
            return Err(wrong(conn, "accept"));
        }
        if params.private_data.len() > REP_PRIVATE {
            return Err(CmError::Invalid(
                "a REP carries at most 196 bytes of private data",
            ));
        }
        self.check_qp(nic, params.qpn, id, params.consumer_qp)?;
        let mut next = conn.clone();
        next.qpn = Some(params.qpn);
        next.consumer_qp = params.consumer_qp;
        next.psn = params.psn;
        next.responder_resources = params.responder_resources.min(conn.responder_resources);
        next.initiator_depth = params.initiator_depth.min(conn.initiator_depth);
        next.rnr_retry_offered = params.rnr_retry_count;
        //= rxe:cma.c/cma_accept_ib
        //# rdma_accept takes the QP to RTR and then RTS before the REP is sent
        if !next.consumer_qp {
            attrs::to_rts(nic, params.qpn, &next)?;
        }
        let mad = wire::rep(&next, wire::ca_guid(nic.config()), &params.private_data);
        next.state = State::RepSent;
        let (every, left) = (next.response_timeout, next.max_cm_retries);
        next.wait_for_answer(now, mad, every, left);
        wire::send(nic, To::conn(&next), mad);
        self.conns.insert(id.0, next);
        Ok(())
    }

    /// The application rejects a REQ, with its private data.
    //= rxe:cm.c/ib_send_cm_rej
    //# a consumer's REJ of a REQ it holds, and the connection is gone
    pub(crate) fn reject(&mut self, nic: &mut Nic, id: ConnId, data: &[u8]) -> Result<(), CmError> {
        let conn = self.conns.get(&id.0).ok_or(CmError::UnknownConn(id))?;
        if conn.state != State::ReqRcvd {
            return Err(wrong(conn, "reject"));
        }
        if data.len() > REJ_PRIVATE {
            return Err(CmError::Invalid(
                "a REJ carries at most 148 bytes of private data",
            ));
        }
        let mad = wire::rej(
            (conn.id.0, conn.remote_id),
            conn.tid,
            rej::REJECTED_REQ,
            RejectReason::ConsumerDefined,
            data,
        );
        wire::send(nic, To::conn(conn), mad);
        self.conns.remove(&id.0);
        Ok(())
    }

    /// An RTU arrived: the passive side is established.
    //= rxe:cm.c/cm_rtu_handler
    //# an RTU establishes a connection in REP_SENT; in any other state it is a duplicate
    pub(crate) fn on_rtu(&mut self, nic: &mut Nic, m: &rtu::Repr) {
        let Some(conn) = self.find(m.remote_comm_id, m.local_comm_id) else {
            nic.stats_mut().cm_rx_unmatched += 1;
            return;
        };
        if conn.state != State::RepSent {
            nic.stats_mut().cm_rx_duplicates += 1;
            return;
        }
        conn.answered();
        conn.state = State::Established;
        let id = conn.id;
        self.emit(
            nic.stats_mut(),
            CmEvent::Established {
                conn: id,
                private_data: Vec::new(),
            },
        );
    }

    /// The connection of ours `local_id` whose peer is `remote_id`.
    pub(crate) fn find(&mut self, local_id: u32, remote_id: u32) -> Option<&mut Conn> {
        self.conns
            .get_mut(&local_id)
            .filter(|c| c.remote_id == remote_id)
    }

    /// The QP a connection is to use: not a special QP, and, unless the consumer moves it
    /// itself (`consumer_qp`: only its number is announced), ours, RC, in RESET or INIT, and no
    /// other connection's.
    pub(crate) fn check_qp(
        &self,
        nic: &Nic,
        qpn: roce_wire::Qpn,
        id: ConnId,
        consumer_qp: bool,
    ) -> Result<(), CmError> {
        if attrs::is_special(qpn) {
            return Err(CmError::Invalid("QP 0 and QP 1 are not for connections"));
        }
        if consumer_qp {
            return Ok(());
        }
        let (qp_type, state) = nic.qp_type_state(qpn)?;
        if qp_type != QpType::Rc {
            return Err(CmError::Invalid("the CM connects RC QPs"));
        }
        if !matches!(state, QpState::Reset | QpState::Init) {
            return Err(CmError::Invalid("the QP must be in RESET or INIT"));
        }
        if self
            .conns
            .values()
            .any(|c| c.qpn == Some(qpn) && c.id != id)
        {
            return Err(CmError::Invalid("the QP belongs to another connection"));
        }
        Ok(())
    }
}

/// The error of a call in the wrong state.
pub(crate) fn wrong(conn: &Conn, call: &'static str) -> CmError {
    CmError::WrongState {
        conn: conn.id,
        state: conn.state,
        call,
    }
}

/// Rejects the REQ `m` (transaction `tid`) that came from `from`, for `reason`.
fn reject_req(nic: &mut Nic, from: &GsiDatagram, tid: u64, m: &req::Repr, reason: RejectReason) {
    let mad = wire::rej((0, m.local_comm_id), tid, rej::REJECTED_REQ, reason, &[]);
    wire::send(nic, To::reply(from), mad);
}
