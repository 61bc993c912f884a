//! The active side: the REQ leaves; an MRA makes it wait longer; the REP takes our QP to RTR
//! and RTS and is answered with an RTU (a duplicate REP gets the RTU again); a REJ ends it.

use roce_wire::mad::cma::{self, PortSpace, ServiceId};
use roce_wire::mad::rej::{self, RejectReason};
use roce_wire::mad::{mra, rep};

use super::retry::{ack_timeout, iba_ms, req_timeout};
use super::wire::{self, To};
use super::{Cm, CmError, CmEvent, Conn, ConnId, ConnectParams, State, attrs};
use crate::{Instant, Mtu, Nic, QpAttr, QpState};

impl Cm {
    /// Sends a REQ for `params`: the QP goes to INIT now (if it is in RESET).
    pub(crate) fn connect(
        &mut self,
        nic: &mut Nic,
        now: Instant,
        params: &ConnectParams,
    ) -> Result<ConnId, CmError> {
        if !nic.config().addrs.contains(&params.local) {
            return Err(CmError::Invalid(
                "the local address is not one of the NIC's",
            ));
        }
        if !attrs::same_family(params.local, params.peer) {
            return Err(CmError::Invalid("both addresses must be of one family"));
        }
        if params.max_cm_retries > 15 || params.cm_response_timeout > 31 {
            return Err(CmError::Invalid(
                "max CM retries is 0..=15, timeouts 0..=31",
            ));
        }
        if params.retry_count > 7 || params.rnr_retry_count > 7 {
            return Err(CmError::Invalid("retry and RNR retry counts are 0..=7"));
        }
        let sid = ServiceId(params.service_id);
        let ip_cm = sid.is_ip_cm() && matches!(sid.port_space(), PortSpace::TCP | PortSpace::UDP);
        let room = if ip_cm {
            cma::USER_DATA_LEN
        } else {
            roce_wire::mad::req::PRIVATE_DATA_LEN
        };
        if params.private_data.len() > room {
            return Err(CmError::Invalid(
                "a REQ carries at most 56 bytes of private data after a cma_hdr, 92 without",
            ));
        }
        self.check_qp(nic, params.qpn, ConnId(0), params.consumer_qp)?;
        let id = self
            .alloc_id(nic.config())
            .ok_or(CmError::Exhausted("connections"))?;
        if !params.consumer_qp && nic.qp_state(params.qpn)? == QpState::Reset {
            nic.modify_qp(params.qpn, &attrs::init(params.responder_resources))?;
        }
        let port = nic.config().max_mtu;
        let mut conn = Conn::new(ConnId(id), State::ReqSent, params.local, params.peer);
        conn.active = true;
        conn.service_id = params.service_id;
        conn.tid = wire::form_tid(id);
        conn.qpn = Some(params.qpn);
        conn.consumer_qp = params.consumer_qp;
        conn.psn = params.psn;
        conn.mtu = Self::capped(params.mtu, port);
        conn.responder_resources = params.responder_resources;
        conn.initiator_depth = params.initiator_depth;
        conn.retry_count = params.retry_count;
        conn.rnr_retry_offered = params.rnr_retry_count;
        conn.packet_life_time = params.packet_life_time.min(30);
        conn.ack_timeout = conn.packet_life_time + 1;
        conn.response_timeout = req_timeout(conn.packet_life_time, params.cm_response_timeout);
        conn.max_cm_retries = params.max_cm_retries;
        let private = wire::join_cma_hdr(
            params.service_id,
            PortSpace::TCP,
            (params.src_port, params.local, params.peer),
            &params.private_data,
        );
        let guid = wire::ca_guid(nic.config());
        let mad = wire::req(&conn, guid, params.cm_response_timeout, &private);
        let (every, left) = (conn.response_timeout, conn.max_cm_retries);
        conn.wait_for_answer(now, mad, every, left);
        wire::send(nic, To::conn(&conn), mad);
        self.conns.insert(id, conn);
        Ok(ConnId(id))
    }

    /// A REP arrived.
    //= rxe:cm.c/cm_rep_handler
    //# a REP answers a REQ_SENT or MRA_REQ_RCVD connection: the peer's comm ID, QPN, PSN and
    //# resources are taken; the ACK timeout covers the peer's target ACK delay
    pub(crate) fn on_rep(&mut self, nic: &mut Nic, m: &rep::Repr) {
        let Some(conn) = self.conns.get_mut(&m.remote_comm_id).filter(|c| c.active) else {
            nic.stats_mut().cm_rx_unmatched += 1;
            return;
        };
        match conn.state {
            State::ReqSent | State::MraReqRcvd => {}
            //= rxe:cm.c/cm_dup_rep_handler
            //# a duplicate REP of an established connection gets the RTU again; otherwise nothing
            State::Established if conn.remote_id == m.local_comm_id => {
                nic.stats_mut().cm_rx_duplicates += 1;
                if let Some(rtu) = conn.answer {
                    wire::send(nic, To::conn(conn), rtu);
                }
                return;
            }
            _ => {
                nic.stats_mut().cm_rx_duplicates += 1;
                return;
            }
        }
        conn.answered();
        conn.remote_id = m.local_comm_id;
        conn.remote_guid = m.local_ca_guid;
        conn.remote_qpn = m.local_qpn;
        conn.remote_psn = m.starting_psn;
        conn.responder_resources = conn.responder_resources.min(m.initiator_depth);
        conn.initiator_depth = conn.initiator_depth.min(m.responder_resources);
        conn.rnr_retry = m.rnr_retry_count;
        conn.ack_timeout = ack_timeout(m.target_ack_delay, conn.ack_timeout.saturating_sub(1));
        let id = conn.id;
        //= rxe:cma.c/cma_ib_handler
        //# a REP to an id without a QP is CONNECT_RESPONSE: the consumer moves its QP and calls
        //# rdma_establish, which sends the RTU
        if conn.consumer_qp {
            conn.state = State::RepRcvd;
            let event = CmEvent::ConnectResponse {
                conn: id,
                private_data: m.private_data.to_vec(),
            };
            self.emit(nic.stats_mut(), event);
            return;
        }
        let qpn = conn.qpn.unwrap_or(roce_wire::Qpn::new(0));
        // librdmacm takes the QP to RTR and RTS on the REP, then asks for the RTU.
        if let Err(error) = attrs::to_rts(nic, qpn, conn) {
            //= rxe:cma.c/cma_rep_recv
            //# a REP the QP cannot take is rejected CONSUMER_DEFINED and the connection fails
            let mad = wire::rej(
                (id.0, m.local_comm_id),
                conn.tid,
                rej::REJECTED_REP,
                RejectReason::ConsumerDefined,
                &[],
            );
            wire::send(nic, To::conn(conn), mad);
            to_error(nic, Some(qpn));
            self.conns.remove(&id.0);
            self.emit(nic.stats_mut(), CmEvent::ConnectError { conn: id, error });
            return;
        }
        send_rtu(nic, conn);
        let event = CmEvent::Established {
            conn: id,
            private_data: m.private_data.to_vec(),
        };
        self.emit(nic.stats_mut(), event);
    }

    /// The consumer has moved its QP after a [`CmEvent::ConnectResponse`]: the RTU leaves and
    /// the connection is up (`rdma_establish`). No event follows, as with rdma_cm.
    //= rxe:cm.c/ib_send_cm_rtu
    //# the RTU is sent from REP_RCVD (or MRA_REP_SENT), and the connection is established
    pub(crate) fn establish(&mut self, nic: &mut Nic, id: ConnId) -> Result<(), CmError> {
        let conn = self.conns.get_mut(&id.0).ok_or(CmError::UnknownConn(id))?;
        if conn.state != State::RepRcvd {
            return Err(super::passive::wrong(conn, "establish"));
        }
        send_rtu(nic, conn);
        Ok(())
    }

    /// An MRA arrived: the peer needs longer for the message it names.
    //= rxe:cm.c/cm_mra_handler
    //# an MRA of our REQ (or REP) makes it wait the service timeout plus the ACK timeout before
    //# it is sent again
    pub(crate) fn on_mra(&mut self, nic: &mut Nic, now: Instant, m: &mra::Repr) {
        let Some(conn) = self.conns.get_mut(&m.remote_comm_id) else {
            nic.stats_mut().cm_rx_unmatched += 1;
            return;
        };
        let waits = match (conn.state, m.message_mraed) {
            (State::ReqSent | State::MraReqRcvd, mra::MRAED_REQ) => true,
            (State::RepSent, mra::MRAED_REP) => conn.remote_id == m.local_comm_id,
            _ => false,
        };
        if !waits || conn.pending.is_none() {
            nic.stats_mut().cm_rx_duplicates += 1;
            return;
        }
        if conn.state == State::ReqSent {
            conn.state = State::MraReqRcvd;
            conn.remote_id = m.local_comm_id;
        }
        conn.deadline = Some(now + iba_ms(m.service_timeout) + iba_ms(conn.ack_timeout));
    }

    /// A REJ arrived.
    //= rxe:cm.c/cm_rej_handler
    //# a REJ of our REQ or REP ends the connection (timewait for STALE_CONN) and moves the QP
    //# to the error state
    pub(crate) fn on_rej(&mut self, nic: &mut Nic, now: Instant, m: &rej::Repr) {
        let Some(conn) = self.conns.get_mut(&m.remote_comm_id) else {
            nic.stats_mut().cm_rx_unmatched += 1;
            return;
        };
        let ours = match conn.state {
            State::ReqSent | State::MraReqRcvd => true,
            State::RepSent => conn.remote_id == m.local_comm_id,
            _ => false,
        };
        if !ours {
            nic.stats_mut().cm_rx_unexpected += 1;
            return;
        }
        let id = conn.id;
        conn.answered();
        to_error(nic, conn.moved_qp());
        if m.reason == RejectReason::StaleConn {
            self.enter_timewait(now, id);
        } else {
            self.conns.remove(&id.0);
        }
        let event = CmEvent::Rejected {
            conn: id,
            reason: m.reason,
            private_data: m.private_data.to_vec(),
        };
        self.emit(nic.stats_mut(), event);
    }

    /// See [`crate::Nic::cm_qp_attr`]: a connection whose peer's QP is known (active: its REP
    /// came; passive: its REQ came), for INIT, RTR or RTS.
    //= rxe:cm.c/ib_cm_init_qp_attr
    //# INIT, RTR and RTS attributes from the connection, in the states where they are known
    pub(crate) fn qp_attr(&self, id: ConnId, state: QpState) -> Result<QpAttr, CmError> {
        let conn = self.conns.get(&id.0).ok_or(CmError::UnknownConn(id))?;
        let known = match conn.state {
            State::RepRcvd | State::Established => true,
            State::ReqRcvd | State::RepSent => !conn.active,
            _ => false,
        };
        if !known {
            return Err(super::passive::wrong(conn, "init_qp_attr"));
        }
        // INIT is the connection's (its negotiated remote access), as `attrs::to_rts` gives it,
        // not the recipe's first step.
        let [_, rtr, rts] = attrs::recipe(conn).steps();
        match state {
            QpState::Init => Ok(attrs::init(conn.responder_resources)),
            QpState::Rtr => Ok(rtr),
            QpState::Rts => Ok(rts),
            _ => Err(CmError::Invalid(
                "the CM gives INIT, RTR and RTS attributes",
            )),
        }
    }

    /// The path MTU a connect asks for, capped by the port's.
    pub(crate) fn capped(mtu: Mtu, port: Mtu) -> Mtu {
        if mtu.bytes() > port.bytes() {
            port
        } else {
            mtu
        }
    }
}

/// Sends the RTU of an active connection whose REP came, keeps it for a duplicate REP, and
/// marks the connection up.
fn send_rtu(nic: &mut Nic, conn: &mut Conn) {
    let rtu = wire::rtu(conn);
    conn.answer = Some(rtu);
    conn.state = State::Established;
    wire::send(nic, To::conn(conn), rtu);
}

/// Moves a connection's QP to the error state (as rdma_cm does on REJ and disconnect); a QP
/// that is gone or already there is left as it is.
pub(crate) fn to_error(nic: &mut Nic, qpn: Option<roce_wire::Qpn>) {
    let Some(qpn) = qpn else {
        return;
    };
    if nic.qp_state(qpn).is_ok_and(|s| s != QpState::Err) {
        let attr = QpAttr {
            qp_state: Some(QpState::Err),
            ..QpAttr::default()
        };
        if let Err(err) = nic.modify_qp(qpn, &attr) {
            tracing::debug!(%err, %qpn, "cm: QP not moved to the error state");
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn a_connect_asks_for_no_more_than_the_ports_mtu() {
        assert_eq!(Cm::capped(Mtu::Mtu4096, Mtu::Mtu1024), Mtu::Mtu1024);
        assert_eq!(Cm::capped(Mtu::Mtu512, Mtu::Mtu1024), Mtu::Mtu512);
    }
}
