//! One connection (ib_cm's `cm_id_private`): its state, both comm IDs, the peer, what was
//! negotiated for its QP, and the one message it may be waiting to send again.

use std::net::IpAddr;

use roce_wire::mad::MAD_LEN;
use roce_wire::{Psn, Qpn};

use super::retry::Retry;
use super::{ConnId, ListenHandle};
use crate::{Instant, Mtu};

/// A connection's state, as ib_cm names them (`enum ib_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmState {
    /// Active: the REQ is out, no answer yet.
    ReqSent,
    /// Active: the peer sent an MRA for the REQ: it waits longer.
    MraReqRcvd,
    /// Passive: the REQ is with the application (rdma_cm's delayed MRA is armed: a duplicate
    /// REQ gets an MRA).
    ReqRcvd,
    /// Passive: the REP is out, the RTU has not come.
    RepSent,
    /// Active, the QP the consumer's: the REP came, the RTU waits for the consumer
    /// (`rdma_establish`).
    RepRcvd,
    /// Both: connected.
    Established,
    /// Our DREQ is out.
    DreqSent,
    /// The peer's DREQ came; the application has not disconnected yet.
    DreqRcvd,
    /// Disconnected: waiting out stray packets before the QP may be used again.
    Timewait,
}

/// The connection's state inside the CM.
pub(crate) type State = CmState;

/// One connection.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub(crate) id: ConnId,
    pub(crate) state: State,
    /// The peer's Local Communication ID (0 until its first message).
    pub(crate) remote_id: u32,
    /// The peer's Local CA GUID.
    pub(crate) remote_guid: u64,
    /// Whether we sent the REQ.
    pub(crate) active: bool,
    /// The listener a passive connection came through.
    pub(crate) listen: Option<ListenHandle>,
    pub(crate) local: IpAddr,
    pub(crate) peer: IpAddr,
    /// The peer's CM QP (the DETH source QP of its MADs: 1).
    pub(crate) peer_cm_qp: Qpn,
    pub(crate) service_id: u64,
    /// The TID of the REQ: REP, RTU, MRA and REJ carry it.
    pub(crate) tid: u64,
    /// Our QP (passive: from the accept).
    pub(crate) qpn: Option<Qpn>,
    /// Whether the consumer moves that QP itself (librdmacm's id without a QP: only its
    /// number is given): the CM then moves none.
    pub(crate) consumer_qp: bool,
    /// The peer's QP.
    pub(crate) remote_qpn: Qpn,
    /// The Starting PSN we announced (our responder expects it), and the peer's (our
    /// requester starts there).
    pub(crate) psn: Psn,
    pub(crate) remote_psn: Psn,
    pub(crate) mtu: Mtu,
    /// Ours: READs of the peer we answer at once, and READs we issue at once.
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    /// RNR retries our QP makes.
    pub(crate) rnr_retry: u8,
    /// RNR retries the peer's QP makes (what our REQ/REP asks for).
    pub(crate) rnr_retry_offered: u8,
    pub(crate) srq: bool,
    /// The QP's local ACK timeout (ib_cm's `av.timeout`): timewait lasts as long.
    pub(crate) ack_timeout: u8,
    /// The path's packet life time.
    pub(crate) packet_life_time: u8,
    /// What the peer's answers wait for (REQ: its response timeout; passive: the REQ's
    /// local CM response timeout): the DREQ's timeout (`cm_id_priv->timeout_ms`).
    pub(crate) response_timeout: crate::Duration,
    /// How often our REQ, REP or DREQ is sent again.
    pub(crate) max_cm_retries: u8,
    /// The message sent last that waits for an answer, and its retries.
    pub(crate) pending: Option<([u8; MAD_LEN], Retry)>,
    /// The last answer that a duplicate gets again (our RTU, or our DREP in timewait).
    pub(crate) answer: Option<[u8; MAD_LEN]>,
    /// When `pending` is sent again, or timewait ends.
    pub(crate) deadline: Option<Instant>,
}

impl Conn {
    /// A connection in `state` with nothing negotiated yet.
    pub(crate) fn new(id: ConnId, state: State, local: IpAddr, peer: IpAddr) -> Self {
        Self {
            id,
            state,
            remote_id: 0,
            remote_guid: 0,
            active: false,
            listen: None,
            local,
            peer,
            peer_cm_qp: crate::gsi::GSI_QPN,
            service_id: 0,
            tid: 0,
            qpn: None,
            consumer_qp: false,
            remote_qpn: Qpn::new(0),
            psn: Psn::new(0),
            remote_psn: Psn::new(0),
            mtu: Mtu::Mtu1024,
            responder_resources: 0,
            initiator_depth: 0,
            retry_count: 7,
            rnr_retry: 7,
            rnr_retry_offered: 7,
            srq: false,
            ack_timeout: 17,
            packet_life_time: super::retry::PACKET_LIFE_TIME,
            response_timeout: crate::Duration::from_secs(4),
            max_cm_retries: super::retry::MAX_CM_RETRIES,
            pending: None,
            answer: None,
            deadline: None,
        }
    }

    /// `mad` waits for its answer from `now`: sent again every `every`, `left` more times.
    pub(crate) fn wait_for_answer(
        &mut self,
        now: Instant,
        mad: [u8; MAD_LEN],
        every: crate::Duration,
        left: u8,
    ) {
        let retry = Retry { every, left };
        self.deadline = Some(retry.deadline(now));
        self.pending = Some((mad, retry));
    }

    /// The QP the CM moves (to RTR and RTS, to the error state): ours, unless the consumer
    /// moves it.
    pub(crate) fn moved_qp(&self) -> Option<Qpn> {
        self.qpn.filter(|_| !self.consumer_qp)
    }

    /// The answer came: nothing is sent again.
    pub(crate) fn answered(&mut self) {
        self.pending = None;
        self.deadline = None;
    }
}
