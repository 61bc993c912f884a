//! The communication manager seen from the NIC: its calls, its events, and the CM MADs QP 1
//! hands it (the CM itself is `crate::cm`).
//!
//! The CM is taken out of the NIC for the length of each call, so that it can drive the QPs
//! and QP 1 through the NIC's own verbs.

use roce_wire::Qpn;
use roce_wire::mad::cm::{CmMad, Message};

use super::Nic;
use crate::cm::{
    AcceptParams, Cm, CmError, CmEvent, CmState, ConnId, ConnectParams, ListenHandle, SidrParams,
};
use crate::gsi::GsiDatagram;
use crate::{Instant, QpState, QpType, Stats, VerbsError};

impl Nic {
    /// Listens on `service_id` (`ib_cm_listen`): REQs for it become
    /// [`CmEvent::ConnectRequest`]s, those held a moment for want of a listener
    /// (`NicConfig::cm_listen_grace`) among them, at once.
    pub fn cm_listen(&mut self, now: Instant, service_id: u64) -> Result<ListenHandle, CmError> {
        self.with_cm(now, |cm, nic| {
            let listen = cm.listeners.add(service_id)?;
            cm.listener_came(nic, now, service_id);
            Ok(listen)
        })
    }

    /// The service IDs the CM listens on (for a shared NIC's steering of REQs).
    pub fn cm_services(&self) -> Vec<u64> {
        self.cm.listeners.services()
    }

    /// How many times the CM's listeners changed so far: [`Nic::cm_services`] is new when
    /// this is.
    pub fn cm_listen_changes(&self) -> u64 {
        self.cm.listeners.changes()
    }

    /// Stops listening; connections that came through the listener stay.
    pub fn cm_unlisten(&mut self, listen: ListenHandle) -> Result<(), CmError> {
        self.cm.listeners.remove(listen)
    }

    /// Sends a REQ (`rdma_connect`): the QP goes to INIT now, to RTR and RTS when the REP
    /// comes, then the RTU leaves and [`CmEvent::Established`] is raised.
    pub fn cm_connect(&mut self, now: Instant, params: &ConnectParams) -> Result<ConnId, CmError> {
        self.with_cm(now, |cm, nic| cm.connect(nic, now, params))
    }

    /// Accepts a connect request (`rdma_accept`): the QP goes to RTR and RTS and the REP
    /// leaves; [`CmEvent::Established`] follows the RTU.
    pub fn cm_accept(
        &mut self,
        now: Instant,
        conn: ConnId,
        params: &AcceptParams,
    ) -> Result<(), CmError> {
        self.with_cm(now, |cm, nic| cm.accept(nic, now, conn, params))
    }

    /// Sends the RTU of a connection whose QP the consumer moves, after its
    /// [`CmEvent::ConnectResponse`] (`rdma_establish`): the connection is up.
    pub fn cm_establish(&mut self, now: Instant, conn: ConnId) -> Result<(), CmError> {
        self.with_cm(now, |cm, nic| cm.establish(nic, conn))
    }

    /// The attributes that take a connection's QP to `state` (INIT, RTR or RTS), as the CM
    /// would give them (`ib_cm_init_qp_attr`, librdmacm's `rdma_init_qp_attr`): for a consumer
    /// that moves its QP itself. The values negotiated so far: the passive side's own
    /// Starting PSN is known once it accepted.
    pub fn cm_qp_attr(&self, conn: ConnId, state: QpState) -> Result<crate::QpAttr, CmError> {
        self.cm.qp_attr(conn, state)
    }

    /// Rejects a connect request with the consumer's private data (`rdma_reject`: reason
    /// CONSUMER_DEFINED, at most 148 bytes).
    pub fn cm_reject(
        &mut self,
        now: Instant,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        self.with_cm(now, |cm, nic| cm.reject(nic, conn, private_data))
    }

    /// Disconnects (`rdma_disconnect`): the QP goes to the error state; a DREQ leaves, or the
    /// DREP that answers the peer's.
    pub fn cm_disconnect(&mut self, now: Instant, conn: ConnId) -> Result<(), CmError> {
        self.with_cm(now, |cm, nic| cm.disconnect(nic, now, conn))
    }

    /// Sends a SIDR_REQ (`rdma_connect` of a UD id): [`CmEvent::SidrResolved`] follows with
    /// the service's QP and Q_Key, or [`CmEvent::SidrRejected`], or [`CmEvent::Unreachable`].
    pub fn cm_sidr_resolve(
        &mut self,
        now: Instant,
        params: &SidrParams,
    ) -> Result<ConnId, CmError> {
        self.with_cm(now, |cm, nic| cm.sidr_resolve(nic, now, params))
    }

    /// Answers a SIDR request with our UD QP `qpn` and its Q_Key (`rdma_accept` of a UD id).
    pub fn cm_sidr_accept(
        &mut self,
        now: Instant,
        conn: ConnId,
        qpn: Qpn,
        qkey: u32,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        self.with_cm(now, |cm, nic| {
            cm.sidr_accept(nic, conn, qpn, qkey, private_data)
        })
    }

    /// Refuses a SIDR request (status "rejected").
    pub fn cm_sidr_reject(
        &mut self,
        now: Instant,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        self.with_cm(now, |cm, nic| cm.sidr_reject(nic, conn, private_data))
    }

    /// Whether `conn` is a SIDR request waiting for [`Nic::cm_sidr_accept`].
    pub fn cm_is_sidr_request(&self, conn: ConnId) -> bool {
        self.cm.is_sidr_request(conn)
    }

    /// The oldest CM event waiting.
    pub fn poll_cm_event(&mut self) -> Option<CmEvent> {
        self.cm.events.pop_front()
    }

    /// A connection's state; `None` once it is gone.
    pub fn cm_state(&self, conn: ConnId) -> Option<CmState> {
        self.cm.conns.get(&conn.0).map(|c| c.state)
    }

    /// Connections the CM holds.
    pub fn cm_conns(&self) -> usize {
        self.cm.conns.len()
    }

    /// A QP's type and state, for the CM.
    pub(crate) fn qp_type_state(&self, qpn: Qpn) -> Result<(QpType, QpState), VerbsError> {
        self.qp_ref(qpn).map(|qp| (qp.qp_type, qp.state))
    }

    /// The counters, for the CM.
    pub(crate) fn stats_mut(&mut self) -> &mut Stats {
        &mut self.shared.stats
    }

    /// Runs `f` with the CM out of the NIC, then puts it back with its deadline current.
    fn with_cm<T>(&mut self, now: Instant, f: impl FnOnce(&mut Cm, &mut Self) -> T) -> T {
        let mut cm = std::mem::take(&mut self.cm);
        let out = f(&mut cm, self);
        cm.reindex();
        self.cm = cm;
        self.shared.deliver_completions();
        tracing::trace!(time = %now, next = ?self.cm.next, "cm");
        out
    }

    /// Hands the CM MADs QP 1 took to the CM. Kept out of line: the data path never calls it.
    #[cold]
    #[inline(never)]
    pub(super) fn cm_receive(&mut self, now: Instant) {
        self.with_cm(now, |cm, nic| {
            while let Some(datagram) = nic.shared.gsi.take_cm() {
                nic.cm_dispatch(cm, now, &datagram);
            }
        });
    }

    /// The CM's deadline passed.
    #[cold]
    #[inline(never)]
    pub(super) fn cm_timeout(&mut self, now: Instant) {
        self.with_cm(now, |cm, nic| cm.on_timeout(nic, now));
    }

    /// One CM MAD (ib_mad's checks passed at ingress, `crate::gsi::Gsi::route`): parsed and
    /// handed to its message's handler. A MAD that does not parse is dropped and counted.
    fn cm_dispatch(&mut self, cm: &mut Cm, now: Instant, datagram: &GsiDatagram) {
        self.shared.stats.cm_rx_mads += 1;
        let mad = match CmMad::parse(&datagram.mad) {
            Ok(mad) => mad,
            Err(err) => {
                self.shared.stats.cm_rx_malformed += 1;
                tracing::debug!(peer = %datagram.peer, %err, "cm: malformed MAD dropped");
                return;
            }
        };
        tracing::debug!(peer = %datagram.peer, %mad, "cm rx");
        let tid = mad.header.tid;
        match &mad.message {
            Message::Req(m) => cm.on_req(self, now, datagram, tid, m),
            Message::Mra(m) => cm.on_mra(self, now, m),
            Message::Rej(m) => cm.on_rej(self, now, m),
            Message::Rep(m) => cm.on_rep(self, m),
            Message::Rtu(m) => cm.on_rtu(self, m),
            Message::Dreq(m) => cm.on_dreq(self, now, datagram, tid, m),
            Message::Drep(m) => cm.on_drep(self, now, m),
            Message::SidrReq(m) => cm.on_sidr_req(self, datagram, tid, m),
            Message::SidrRep(m) => cm.on_sidr_rep(self, datagram, m),
        }
    }
}
