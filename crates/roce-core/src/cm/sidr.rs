//! Service ID resolution (SIDR): how a UD client learns the QP number and Q_Key behind a
//! service ID (IBA vol. 1 §12.11), as rdma_cm does it for `RDMA_PS_UDP` ids
//! (`cma_resolve_ib_udp`, `cma_sidr_rep_handler`; ib_cm's `cm_sidr_req_handler`).
//!
//! The client's SIDR_REQ waits for a SIDR_REP, sent again every 4096 ms up to 15 times
//! (rdma_cm's `1 << (CMA_CM_RESPONSE_TIMEOUT - 8)` ms and `CMA_MAX_CM_RETRIES`), then is
//! [`CmEvent::Unreachable`]. On the service's side a request for a listener is a
//! [`CmEvent::SidrRequest`]; the consumer answers it with a QP ([`crate::Nic::cm_sidr_accept`])
//! or refuses it; a request nobody listens for is answered at once with the status
//! "unsupported". There is no connection: nothing is left once the SIDR_REP is sent or taken.

use std::collections::BTreeMap;
use std::net::IpAddr;

use roce_wire::Qpn;
use roce_wire::mad::MAD_LEN;
use roce_wire::mad::cm::Message;
use roce_wire::mad::cma::PortSpace;
use roce_wire::mad::sidr_rep::{self, SidrStatus};
use roce_wire::mad::sidr_req;

use super::retry::Retry;
use super::wire::{self, To};
use super::{Cm, CmError, CmEvent, ConnId};
use crate::gsi::{GSI_QPN, GsiDatagram};
use crate::{Duration, Instant, Nic};

/// How long a SIDR_REQ waits for its SIDR_REP before it is sent again (rdma_cm's
/// `1 << (CMA_CM_RESPONSE_TIMEOUT - 8)` ms).
pub(crate) const SIDR_TIMEOUT: Duration = Duration::from_millis(4096);

/// The Q_Key of `RDMA_PS_UDP` QPs (`RDMA_UDP_QKEY`): what rdma_cm's SIDR_REP carries.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// What [`crate::Nic::cm_sidr_resolve`] asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrParams {
    /// Our address (one of the NIC's).
    pub local: IpAddr,
    /// The service's address.
    pub peer: IpAddr,
    /// The service ID; an RDMA IP CM one (UDP port space) gets the `cma_hdr`.
    pub service_id: u64,
    /// Our port, for the `cma_hdr`.
    pub src_port: u16,
    /// The consumer's private data: at most 180 bytes after a `cma_hdr`, 216 without.
    pub private_data: Vec<u8>,
}

/// A SIDR_REQ for a service we listen on: what rdma_cm's CONNECT_REQUEST of a UD id carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrRequest {
    /// The request, to accept or reject.
    pub conn: ConnId,
    /// The listener it came to.
    pub listen: super::ListenHandle,
    /// The service ID of the request.
    pub service_id: u64,
    /// The client's address.
    pub peer: IpAddr,
    /// Our address it came to.
    pub local: IpAddr,
    /// The client's port, from the `cma_hdr`.
    pub peer_port: Option<u16>,
    /// The consumer's private data (after the `cma_hdr` when there is one).
    pub private_data: Vec<u8>,
    /// The P_Key the client's QP sends with.
    pub partition_key: u16,
}

/// A SIDR_REQ of ours waiting for its SIDR_REP.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    to: To,
    service_id: u64,
    mad: [u8; MAD_LEN],
    retry: Retry,
    deadline: Instant,
}

/// A SIDR_REQ waiting for the consumer's answer.
#[derive(Debug, Clone)]
pub(crate) struct Incoming {
    to: To,
    tid: u64,
    request_id: u32,
    service_id: u64,
}

/// The SIDR requests in flight, by our request ID.
#[derive(Debug, Default)]
pub(crate) struct Sidr {
    out: BTreeMap<u32, Outgoing>,
    incoming: BTreeMap<u32, Incoming>,
}

impl Sidr {
    /// The earliest resend.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.out.values().map(|o| o.deadline).min()
    }

    fn holds(&self, id: u32) -> bool {
        self.out.contains_key(&id) || self.incoming.contains_key(&id)
    }
}

/// The private data of our SIDR_REQ: the `cma_hdr` for an RDMA IP CM service ID of the UDP
/// port space, then the consumer's data; `None` when that does not fit.
//= ibta:annex11/A11
//# an RDMA IP CM SIDR_REQ's private data starts with the cma_hdr, as a REQ's
fn private_data(params: &SidrParams) -> Option<[u8; sidr_req::PRIVATE_DATA_LEN]> {
    let joined = wire::join_cma_hdr(
        params.service_id,
        PortSpace::UDP,
        (params.src_port, params.local, params.peer),
        &params.private_data,
    );
    let mut out = [0; sidr_req::PRIVATE_DATA_LEN];
    out.get_mut(..joined.len())?.copy_from_slice(&joined);
    Some(out)
}

impl Cm {
    /// A request ID no connection nor SIDR request holds.
    fn alloc_sidr_id(&mut self, config: &crate::NicConfig) -> Option<u32> {
        for _ in 0..16 {
            let id = self.alloc_id(config)?;
            if !self.sidr.holds(id) {
                return Some(id);
            }
        }
        None
    }

    /// Sends a SIDR_REQ for `params`.
    pub(crate) fn sidr_resolve(
        &mut self,
        nic: &mut Nic,
        now: Instant,
        params: &SidrParams,
    ) -> Result<ConnId, CmError> {
        if !nic.config().addrs.contains(&params.local) {
            return Err(CmError::Invalid(
                "the local address is not one of the NIC's",
            ));
        }
        let private = private_data(params).ok_or(CmError::Invalid(
            "a SIDR_REQ carries at most 180 bytes of private data after a cma_hdr, 216 without",
        ))?;
        let id = self
            .alloc_sidr_id(nic.config())
            .ok_or(CmError::Exhausted("connections"))?;
        let repr = sidr_req::Repr {
            request_id: id,
            partition_key: roce_wire::mad::gsi::GSI_PKEY,
            service_id: params.service_id,
            private_data: private,
        };
        let mad = wire::bytes(wire::form_tid(id), Message::SidrReq(repr));
        let to = To {
            peer: params.peer,
            local: params.local,
            peer_qp: GSI_QPN,
        };
        let retry = Retry {
            every: SIDR_TIMEOUT,
            left: super::retry::MAX_CM_RETRIES,
        };
        self.sidr.out.insert(
            id,
            Outgoing {
                to,
                service_id: params.service_id,
                mad,
                retry,
                deadline: retry.deadline(now),
            },
        );
        wire::send(nic, to, mad);
        Ok(ConnId(id))
    }

    /// A SIDR_REQ came.
    pub(crate) fn on_sidr_req(
        &mut self,
        nic: &mut Nic,
        from: &GsiDatagram,
        tid: u64,
        m: &sidr_req::Repr,
    ) {
        //= rxe:cm.c/cm_sidr_req_handler
        //# a SIDR_REQ the CM already holds (same client and request ID) is dropped
        if self
            .sidr
            .incoming
            .values()
            .any(|i| i.request_id == m.request_id && i.to.peer == from.peer)
        {
            nic.stats_mut().cm_rx_duplicates += 1;
            return;
        }
        let answer = |nic: &mut Nic, status: SidrStatus| {
            let mad = sidr_rep_mad(m.request_id, tid, status, Qpn::new(0), 0, m.service_id, &[]);
            wire::send(nic, To::reply(from), mad);
        };
        let Some(listen) = self.listeners.find(m.service_id) else {
            //= rxe:cm.c/cm_sidr_req_handler
            //# a SIDR_REQ no listener takes is answered with the status "unsupported"
            nic.stats_mut().cm_rx_no_listener += 1;
            answer(nic, SidrStatus::Unsupported);
            return;
        };
        let Some((peer_port, private)) = wire::split_cma_hdr(
            nic,
            "SIDR_REQ",
            m.service_id,
            PortSpace::UDP,
            &m.private_data,
        ) else {
            answer(nic, SidrStatus::Reject);
            return;
        };
        let Some(id) = self.alloc_sidr_id(nic.config()) else {
            answer(nic, SidrStatus::NoQp);
            return;
        };
        self.sidr.incoming.insert(
            id,
            Incoming {
                to: To::reply(from),
                tid,
                request_id: m.request_id,
                service_id: m.service_id,
            },
        );
        let request = SidrRequest {
            conn: ConnId(id),
            listen,
            service_id: m.service_id,
            peer: from.peer,
            local: from.local,
            peer_port,
            private_data: private,
            partition_key: m.partition_key,
        };
        self.emit(nic.stats_mut(), CmEvent::SidrRequest(Box::new(request)));
    }

    /// Answers a SIDR request with our UD QP and its Q_Key (`rdma_accept` of a UD id).
    pub(crate) fn sidr_accept(
        &mut self,
        nic: &mut Nic,
        conn: ConnId,
        qpn: Qpn,
        qkey: u32,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let (qp_type, _) = nic.qp_type_state(qpn)?;
        if qp_type != crate::QpType::Ud {
            return Err(CmError::Invalid("a SIDR_REP names a UD QP"));
        }
        self.sidr_answer(nic, conn, (SidrStatus::Success, qpn, qkey), private_data)
    }

    /// Refuses a SIDR request (`rdma_reject` of a UD id: status "rejected").
    pub(crate) fn sidr_reject(
        &mut self,
        nic: &mut Nic,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let answer = (SidrStatus::Reject, Qpn::new(0), 0);
        self.sidr_answer(nic, conn, answer, private_data)
    }

    /// Sends the SIDR_REP of `conn`: its status, QP and Q_Key, and the private data.
    fn sidr_answer(
        &mut self,
        nic: &mut Nic,
        conn: ConnId,
        (status, qpn, qkey): (SidrStatus, Qpn, u32),
        private_data: &[u8],
    ) -> Result<(), CmError> {
        if private_data.len() > sidr_rep::PRIVATE_DATA_LEN {
            return Err(CmError::Invalid(
                "a SIDR_REP carries at most 136 bytes of private data",
            ));
        }
        let i = self
            .sidr
            .incoming
            .remove(&conn.0)
            .ok_or(CmError::UnknownConn(conn))?;
        let mad = sidr_rep_mad(
            i.request_id,
            i.tid,
            status,
            qpn,
            qkey,
            i.service_id,
            private_data,
        );
        wire::send(nic, i.to, mad);
        Ok(())
    }

    /// Whether `conn` is a SIDR request waiting for the consumer.
    pub(crate) fn is_sidr_request(&self, conn: ConnId) -> bool {
        self.sidr.incoming.contains_key(&conn.0)
    }

    /// A SIDR_REP came: the request it answers is resolved, or refused. One for no request of
    /// ours is dropped.
    pub(crate) fn on_sidr_rep(&mut self, nic: &mut Nic, from: &GsiDatagram, m: &sidr_rep::Repr) {
        let ours = self
            .sidr
            .out
            .get(&m.request_id)
            .is_some_and(|o| o.to.peer == from.peer && o.service_id == m.service_id);
        if !ours {
            nic.stats_mut().cm_rx_unmatched += 1;
            tracing::debug!(request = m.request_id, "SIDR_REP for no request of ours");
            return;
        }
        self.sidr.out.remove(&m.request_id);
        let conn = ConnId(m.request_id);
        let event = if m.status == SidrStatus::Success {
            //= rxe:cma.c/cma_sidr_rep_handler
            //# a successful SIDR_REP gives the client the service's QP number and Q_Key
            CmEvent::SidrResolved {
                conn,
                qpn: m.qpn,
                qkey: m.q_key,
                private_data: m.private_data.to_vec(),
            }
        } else {
            CmEvent::SidrRejected {
                conn,
                status: m.status,
                private_data: m.private_data.to_vec(),
            }
        };
        self.emit(nic.stats_mut(), event);
    }

    /// Sends again what is due; a request sent as often as allowed is unreachable.
    pub(crate) fn sidr_timeout(&mut self, nic: &mut Nic, now: Instant) {
        let due: Vec<u32> = self
            .sidr
            .out
            .iter()
            .filter(|(_, o)| o.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            let Some(o) = self.sidr.out.get_mut(&id) else {
                continue;
            };
            if o.retry.left > 0 {
                o.retry.left -= 1;
                o.deadline = o.retry.deadline(now);
                let (to, mad) = (o.to, o.mad);
                nic.stats_mut().cm_retransmits += 1;
                wire::send(nic, to, mad);
            } else {
                self.sidr.out.remove(&id);
                self.emit(nic.stats_mut(), CmEvent::Unreachable { conn: ConnId(id) });
            }
        }
    }
}

/// A SIDR_REP.
fn sidr_rep_mad(
    request_id: u32,
    tid: u64,
    status: SidrStatus,
    qpn: Qpn,
    q_key: u32,
    service_id: u64,
    private_data: &[u8],
) -> [u8; MAD_LEN] {
    let mut private = [0; sidr_rep::PRIVATE_DATA_LEN];
    let len = private_data.len().min(private.len());
    private[..len].copy_from_slice(&private_data[..len]);
    let repr = sidr_rep::Repr {
        request_id,
        status,
        additional_information_length: 0,
        qpn,
        service_id,
        q_key,
        additional_information: [0; sidr_rep::ADDITIONAL_INFORMATION_LEN],
        private_data: private,
    };
    wire::bytes(tid, Message::SidrRep(repr))
}
