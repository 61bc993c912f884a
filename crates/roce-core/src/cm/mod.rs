//! The IB communication manager (ib_cm): RC connections set up and torn down by CM MADs over
//! QP 1, as the kernel's `drivers/infiniband/core/cm.c` does under rdma_cm.
//!
//! The CM is a sans-IO part of the engine like the rest: its MADs come from the GSI QP at
//! `handle_datagram`, its retransmissions and timewait join the NIC's deadlines
//! (`poll_timeout` / `handle_timeout`), what it sends leaves through QP 1 at `poll_transmit`,
//! and what the application must know comes out of [`crate::Nic::poll_cm_event`]. It drives
//! the connection's QP itself where the kernel CM and librdmacm do: the active side takes its
//! QP to RTR and RTS when the REP comes and answers with an RTU; the passive side takes its QP
//! to RTR and RTS when the application accepts, then sends the REP. A disconnect moves the QP
//! to the error state.
//!
//! One concept per file: `conn.rs` (a connection and its states), `listen.rs` (listeners by
//! service ID), `retry.rs` (the IBA time unit, response timeouts, retries and timewait),
//! `attrs.rs` (REQ/REP fields ⇄ QP attributes), `wire.rs` (the MADs the CM sends), `sidr.rs`
//! (service ID resolution for UD),
//! `passive.rs`, `active.rs` and `disconnect.rs` (the state machine by message), and the
//! `Nic` methods in `nic/cm.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use roce_wire::mad::rej::RejectReason;
use roce_wire::{Psn, Qpn};

use crate::{Instant, Mtu, VerbsError};

mod active;
pub(crate) mod attrs;
mod conn;
mod disconnect;
mod listen;
mod parked;
mod passive;
pub(crate) mod retry;
mod sidr;
mod wire;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_attrs;
#[cfg(test)]
mod tests_consumer_qp;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_loss;
#[cfg(test)]
mod tests_sidr;

pub use conn::CmState;
pub(crate) use conn::{Conn, State};
pub use roce_wire::mad::cma::{PortSpace, ServiceId};
pub use sidr::{RDMA_UDP_QKEY, SidrParams, SidrRequest};

/// Events that wait at most for [`crate::Nic::poll_cm_event`]; beyond, they are lost and counted
/// (`cm_event_overflows`).
pub const MAX_CM_EVENTS: usize = 1024;

/// Connections the CM holds at most; a REQ beyond is rejected (NO_RESOURCES) and a connect
/// refused.
pub const MAX_CM_CONNS: usize = 4096;

/// A listening service ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListenHandle(pub u32);

/// A connection: its Local Communication ID, which the peer's messages name it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// What [`crate::Nic::cm_connect`] sends in its REQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectParams {
    /// Our RC QP, in RESET or INIT: the CM takes it to INIT now and to RTR and RTS on the REP.
    pub qpn: Qpn,
    /// Our address (one of the NIC's).
    pub local: IpAddr,
    /// The peer's address.
    pub peer: IpAddr,
    /// The service to connect to. An RDMA IP CM one ([`ServiceId::new`] of the TCP or UDP
    /// port space) gets the `cma_hdr` at the head of the private data.
    pub service_id: u64,
    /// Our port, for the `cma_hdr` of an RDMA IP CM service ID.
    pub src_port: u16,
    /// The consumer's private data: at most 56 bytes after a `cma_hdr`, 92 without.
    pub private_data: Vec<u8>,
    /// The REQ's Starting PSN: the first PSN our responder expects, where the peer's
    /// requester starts (as the Linux CM reads it). The library draws it: the engine draws
    /// no random number.
    pub psn: Psn,
    /// READs and atomics of the peer we take at once.
    pub responder_resources: u8,
    /// READs and atomics we issue at once.
    pub initiator_depth: u8,
    /// Transport retries.
    pub retry_count: u8,
    /// RNR retries the peer's QP makes towards us (7: for ever).
    pub rnr_retry_count: u8,
    /// The path MTU wanted; the port's is the most.
    pub mtu: Mtu,
    /// The path's packet life time (IBA time unit): `CMA_IBOE_PACKET_LIFETIME`, 16.
    pub packet_life_time: u8,
    /// Both CM response timeouts of the REQ: `CMA_CM_RESPONSE_TIMEOUT`, 20.
    pub cm_response_timeout: u8,
    /// How often a REQ, REP or DREQ is sent again: `CMA_MAX_CM_RETRIES`, 15.
    pub max_cm_retries: u8,
    /// The consumer moves its QP itself (librdmacm's `rdma_connect` on an id without a QP,
    /// with `conn_param->qp_num`): `qpn` is only announced, the CM checks and moves no QP, and
    /// the REP raises [`CmEvent::ConnectResponse`]; the RTU waits for
    /// [`crate::Nic::cm_establish`].
    pub consumer_qp: bool,
}

impl ConnectParams {
    /// rping's parameters (one READ each way, seven retries of each kind, path MTU 1024) and
    /// rdma_cm's timers, from `local` to `peer`'s `service_id` with our QP `qpn`.
    pub fn new(qpn: Qpn, local: IpAddr, peer: IpAddr, service_id: u64, psn: Psn) -> Self {
        Self {
            qpn,
            local,
            peer,
            service_id,
            src_port: 0,
            private_data: Vec::new(),
            psn,
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            mtu: Mtu::Mtu1024,
            packet_life_time: retry::PACKET_LIFE_TIME,
            cm_response_timeout: retry::CM_RESPONSE_TIMEOUT,
            max_cm_retries: retry::MAX_CM_RETRIES,
            consumer_qp: false,
        }
    }
}

/// What [`crate::Nic::cm_accept`] answers a REQ with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptParams {
    /// Our RC QP, in RESET or INIT: the CM takes it to RTR and RTS before the REP leaves.
    pub qpn: Qpn,
    /// The REP's Starting PSN: the first PSN our responder expects.
    pub psn: Psn,
    /// The consumer's private data of the REP (at most 196 bytes).
    pub private_data: Vec<u8>,
    /// READs and atomics of the peer we take at once (at most the REQ's initiator depth).
    pub responder_resources: u8,
    /// READs and atomics we issue at once (at most the REQ's responder resources).
    pub initiator_depth: u8,
    /// RNR retries the peer's QP makes towards us.
    pub rnr_retry_count: u8,
    /// The consumer moves its QP itself (`rdma_accept` on an id without a QP): `qpn` is only
    /// announced in the REP, and the CM checks and moves no QP.
    pub consumer_qp: bool,
}

impl AcceptParams {
    /// One READ each way and RNR retries for ever, as rping accepts.
    pub fn new(qpn: Qpn, psn: Psn) -> Self {
        Self {
            qpn,
            psn,
            private_data: Vec::new(),
            responder_resources: 1,
            initiator_depth: 1,
            rnr_retry_count: 7,
            consumer_qp: false,
        }
    }
}

/// A REQ for a service we listen on: what rdma_cm's CONNECT_REQUEST event carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The connection to accept or reject.
    pub conn: ConnId,
    /// The listener it came to.
    pub listen: ListenHandle,
    /// The service ID of the REQ.
    pub service_id: u64,
    /// The peer's address.
    pub peer: IpAddr,
    /// Our address it came to.
    pub local: IpAddr,
    /// The peer's port, from the `cma_hdr` of an RDMA IP CM REQ.
    pub peer_port: Option<u16>,
    /// The consumer's private data (after the `cma_hdr` when there is one).
    pub private_data: Vec<u8>,
    /// The peer's QP.
    pub peer_qpn: Qpn,
    /// The REQ's Starting PSN: the first PSN the peer's responder expects, where our
    /// requester starts.
    pub peer_psn: Psn,
    /// The path MTU: the REQ's, capped by our port's.
    pub mtu: Mtu,
    /// The peer's responder resources.
    pub responder_resources: u8,
    /// The peer's initiator depth.
    pub initiator_depth: u8,
    /// Transport retries the peer asks for.
    pub retry_count: u8,
    /// RNR retries our QP makes towards the peer.
    pub rnr_retry_count: u8,
    /// Whether the peer's QP takes receives from an SRQ.
    pub srq: bool,
}

/// What the CM tells the application (rdma_cm's events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// A REQ for a listener: accept it ([`crate::Nic::cm_accept`]) or reject it.
    ConnectRequest(Box<ConnectRequest>),
    /// The connection is up: the active side's QP is in RTS and the RTU left; the passive
    /// side's RTU came.
    Established {
        /// The connection.
        conn: ConnId,
        /// The consumer's private data of the REP (active side; empty on the passive side).
        private_data: Vec<u8>,
    },
    /// The REP came to a connection whose QP the consumer moves: the connection waits for
    /// [`crate::Nic::cm_establish`] to send the RTU (rdma_cm's CONNECT_RESPONSE).
    ConnectResponse {
        /// The connection.
        conn: ConnId,
        /// The consumer's private data of the REP.
        private_data: Vec<u8>,
    },
    /// The peer rejected the REQ or the REP.
    Rejected {
        /// The connection (gone, or in timewait for a stale connection).
        conn: ConnId,
        /// The reason of the REJ.
        reason: RejectReason,
        /// The consumer's private data of the REJ.
        private_data: Vec<u8>,
    },
    /// The REP could not be applied to our QP: the CM rejected it (CONSUMER_DEFINED).
    ConnectError {
        /// The connection (gone).
        conn: ConnId,
        /// Why the QP refused.
        error: VerbsError,
    },
    /// Our REQ or REP was sent as often as allowed and never answered.
    Unreachable {
        /// The connection (gone).
        conn: ConnId,
    },
    /// The connection is down: the peer's DREQ came (answer with
    /// [`crate::Nic::cm_disconnect`], which moves the QP to the error state and sends the
    /// DREP, as rdma_cm's DISCONNECTED is answered with `rdma_disconnect`), or the DREP to ours
    /// came, or our DREQ was never answered.
    Disconnected {
        /// The connection (in timewait, or waiting for our DREP).
        conn: ConnId,
    },
    /// Timewait is over: the connection is gone and its QP may be used again.
    TimewaitExit {
        /// The connection (gone).
        conn: ConnId,
    },
    /// A SIDR_REQ for a listener (UD): answer it with [`crate::Nic::cm_sidr_accept`] or
    /// [`crate::Nic::cm_sidr_reject`].
    SidrRequest(Box<SidrRequest>),
    /// Our SIDR_REQ was answered: the service's UD QP and Q_Key.
    SidrResolved {
        /// The request.
        conn: ConnId,
        /// The service's QP.
        qpn: Qpn,
        /// Its Q_Key.
        qkey: u32,
        /// The consumer's private data of the SIDR_REP.
        private_data: Vec<u8>,
    },
    /// Our SIDR_REQ was refused (any status but success).
    SidrRejected {
        /// The request.
        conn: ConnId,
        /// The SIDR_REP's status.
        status: roce_wire::mad::sidr_rep::SidrStatus,
        /// The consumer's private data of the SIDR_REP.
        private_data: Vec<u8>,
    },
}

/// Why a CM call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CmError {
    /// Someone listens on the service ID already.
    #[error("service ID {0:#018x} already has a listener")]
    ServiceInUse(u64),
    /// No such listener.
    #[error("no listener {0:?}")]
    UnknownListener(ListenHandle),
    /// No such connection.
    #[error("no connection {0:?}")]
    UnknownConn(ConnId),
    /// The connection is not in a state that takes this call.
    #[error("connection {conn:?} is {state:?}: {call} is not possible")]
    WrongState {
        /// The connection.
        conn: ConnId,
        /// Its state.
        state: CmState,
        /// The call.
        call: &'static str,
    },
    /// A parameter out of its range.
    #[error("{0}")]
    Invalid(&'static str),
    /// The QP refused (not RC, not in RESET or INIT, or an attribute out of range).
    #[error(transparent)]
    Qp(#[from] VerbsError),
    /// Too many connections, or QP 1's send queue is full.
    #[error("CM resources exhausted: {0}")]
    Exhausted(&'static str),
}

/// The CM's state: its connections by local comm ID, its listeners, its events.
#[derive(Debug, Default)]
pub(crate) struct Cm {
    pub(crate) conns: BTreeMap<u32, Conn>,
    pub(crate) listeners: listen::Listeners,
    pub(crate) events: VecDeque<CmEvent>,
    /// The SIDR requests in flight (UD).
    pub(crate) sidr: sidr::Sidr,
    /// REQs waiting a moment for a listener of their service ID.
    pub(crate) parked: parked::Parked,
    /// The next local comm ID to try.
    pub(crate) next_id: u32,
    /// The earliest deadline of any connection, kept current after every CM call so that
    /// `poll_timeout` reads one field.
    pub(crate) next: Option<Instant>,
}

impl Cm {
    /// Queues an event for the application, or counts it lost.
    pub(crate) fn emit(&mut self, stats: &mut crate::Stats, event: CmEvent) {
        tracing::debug!(?event, "cm event");
        if self.events.len() >= MAX_CM_EVENTS {
            stats.cm_event_overflows += 1;
            return;
        }
        self.events.push_back(event);
    }

    /// Recomputes the earliest deadline.
    pub(crate) fn reindex(&mut self) {
        let conns = self.conns.values().filter_map(|c| c.deadline);
        self.next = conns
            .chain(self.sidr.next())
            .chain(self.parked.next())
            .min();
    }

    /// A local comm ID no connection holds: counted up from a start drawn from the NIC's seed
    /// (the kernel xors its IDs with a random operand, `cm_alloc_id_priv`), never 0; in the
    /// slot's range on a shared NIC ([`crate::share`]).
    pub(crate) fn alloc_id(&mut self, config: &crate::NicConfig) -> Option<u32> {
        if self.conns.len() >= MAX_CM_CONNS {
            return None;
        }
        let seed = config.seed;
        let operand = (seed ^ (seed >> 32)) as u32;
        loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = crate::share::id_in(config.slot, self.next_id ^ operand);
            if id != 0 && !self.conns.contains_key(&id) {
                return Some(id);
            }
        }
    }
}
