//! The end of a connection: DREQ and DREP either way, timewait, and what the clock does —
//! REQ, REP and DREQ sent again until their retries run out, timewait's end.

use roce_wire::mad::{drep, dreq};

use super::active::to_error;
use super::passive::wrong;
use super::retry::iba_ms;
use super::wire::{self, To};
use super::{Cm, CmError, CmEvent, ConnId, State};
use crate::gsi::GsiDatagram;
use crate::{Instant, Nic};

impl Cm {
    /// The application disconnects: a connection that is up sends a DREQ; one whose peer's
    /// DREQ came answers with the DREP and enters timewait. The QP goes to the error state.
    //= rxe:cm.c/ib_send_cm_dreq
    //# a DREQ is sent from ESTABLISHED (or REP_SENT) and sent again every CM response timeout,
    //# max CM retries times
    pub(crate) fn disconnect(
        &mut self,
        nic: &mut Nic,
        now: Instant,
        id: ConnId,
    ) -> Result<(), CmError> {
        let conn = self.conns.get_mut(&id.0).ok_or(CmError::UnknownConn(id))?;
        match conn.state {
            State::Established | State::RepSent => {
                to_error(nic, conn.moved_qp());
                let mad = wire::dreq(conn);
                conn.tid = wire::form_tid(conn.id.0);
                let (every, left) = (conn.response_timeout, conn.max_cm_retries);
                conn.wait_for_answer(now, mad, every, left);
                conn.state = State::DreqSent;
                wire::send(nic, To::conn(conn), mad);
            }
            //= rxe:cm.c/ib_send_cm_drep
            //# the DREP answers the peer's DREQ and the connection enters timewait
            State::DreqRcvd => {
                to_error(nic, conn.moved_qp());
                let mad = wire::drep((conn.id.0, conn.remote_id), conn.tid);
                conn.answer = Some(mad);
                wire::send(nic, To::conn(conn), mad);
                self.enter_timewait(now, id);
            }
            //= rxe:cm.c/cm_destroy_id
            //# a connection in REP_RCVD whose consumer gives up is rejected (REJ of the REP)
            State::RepRcvd => {
                let mad = wire::rej(
                    (conn.id.0, conn.remote_id),
                    conn.tid,
                    roce_wire::mad::rej::REJECTED_REP,
                    roce_wire::mad::rej::RejectReason::ConsumerDefined,
                    &[],
                );
                wire::send(nic, To::conn(conn), mad);
                self.conns.remove(&id.0);
            }
            _ => return Err(wrong(conn, "disconnect")),
        }
        Ok(())
    }

    /// A DREQ arrived.
    //= rxe:cm.c/cm_dreq_handler
    //# a DREQ of an established connection is reported; a duplicate in timewait gets the DREP again;
    //# a DREQ of no connection gets a DREP all the same
    pub(crate) fn on_dreq(
        &mut self,
        nic: &mut Nic,
        now: Instant,
        from: &GsiDatagram,
        tid: u64,
        m: &dreq::Repr,
    ) {
        let Some(conn) = self.find(m.remote_comm_id, m.local_comm_id) else {
            nic.stats_mut().cm_rx_unmatched += 1;
            let mad = wire::drep((m.remote_comm_id, m.local_comm_id), tid);
            wire::send(nic, To::reply(from), mad);
            return;
        };
        let id = conn.id;
        match conn.state {
            State::Established | State::RepSent => {
                conn.answered();
                conn.tid = tid;
                conn.state = State::DreqRcvd;
                self.emit(nic.stats_mut(), CmEvent::Disconnected { conn: id });
            }
            // Both sides sent a DREQ: each answers the other's and waits no more for its own.
            State::DreqSent => {
                let mad = wire::drep((conn.id.0, conn.remote_id), tid);
                conn.answer = Some(mad);
                wire::send(nic, To::conn(conn), mad);
                self.enter_timewait(now, id);
                self.emit(nic.stats_mut(), CmEvent::Disconnected { conn: id });
            }
            State::Timewait => {
                nic.stats_mut().cm_rx_duplicates += 1;
                let mad = wire::drep((conn.id.0, conn.remote_id), tid);
                wire::send(nic, To::conn(conn), mad);
            }
            _ => nic.stats_mut().cm_rx_duplicates += 1,
        }
    }

    /// A DREP arrived.
    //= rxe:cm.c/cm_drep_handler
    //# a DREP of our DREQ ends the connection: timewait
    pub(crate) fn on_drep(&mut self, nic: &mut Nic, now: Instant, m: &drep::Repr) {
        let Some(conn) = self.find(m.remote_comm_id, m.local_comm_id) else {
            nic.stats_mut().cm_rx_unmatched += 1;
            return;
        };
        if conn.state != State::DreqSent {
            nic.stats_mut().cm_rx_duplicates += 1;
            return;
        }
        let id = conn.id;
        self.enter_timewait(now, id);
        self.emit(nic.stats_mut(), CmEvent::Disconnected { conn: id });
    }

    /// The connection waits out its packets still in the network: as long as its QP's ACK
    /// timeout.
    //= rxe:cm.c/cm_enter_timewait
    //# timewait lasts the connection's ACK timeout (av.timeout)
    pub(crate) fn enter_timewait(&mut self, now: Instant, id: ConnId) {
        if let Some(conn) = self.conns.get_mut(&id.0) {
            conn.answered();
            conn.state = State::Timewait;
            conn.deadline = Some(now + iba_ms(conn.ack_timeout));
        }
    }

    /// Fires what is due at `now`.
    //= rxe:cm.c/cm_process_send_error
    //# a REQ or REP without an answer after its retries: the connection is unreachable and gone;
    //# a DREQ without one: timewait all the same
    pub(crate) fn on_timeout(&mut self, nic: &mut Nic, now: Instant) {
        self.sidr_timeout(nic, now);
        self.parked_timeout(nic, now);
        let due: Vec<u32> = self
            .conns
            .values()
            .filter(|c| c.deadline.is_some_and(|at| at <= now))
            .map(|c| c.id.0)
            .collect();
        for id in due {
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            let conn_id = conn.id;
            if conn.state == State::Timewait {
                self.conns.remove(&id);
                self.emit(nic.stats_mut(), CmEvent::TimewaitExit { conn: conn_id });
                continue;
            }
            let Some((mad, mut retry)) = conn.pending else {
                conn.deadline = None;
                continue;
            };
            if retry.left > 0 {
                retry.left -= 1;
                conn.deadline = Some(retry.deadline(now));
                conn.pending = Some((mad, retry));
                nic.stats_mut().cm_retransmits += 1;
                tracing::debug!(conn = id, left = retry.left, "cm: sent again");
                wire::send(nic, To::conn(conn), mad);
                continue;
            }
            match conn.state {
                State::DreqSent => {
                    self.enter_timewait(now, conn_id);
                    self.emit(nic.stats_mut(), CmEvent::Disconnected { conn: conn_id });
                }
                _ => {
                    self.conns.remove(&id);
                    self.emit(nic.stats_mut(), CmEvent::Unreachable { conn: conn_id });
                }
            }
        }
    }
}
