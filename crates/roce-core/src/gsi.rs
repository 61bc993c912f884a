//! The general services interface: QP 1, the UD QP that carries management datagrams (MADs) —
//! the connection manager's REQ, REP, RTU and the rest — between the NICs of a fabric.
//!
//! Every NIC has it from the start, as rxe has its GSI QP (`rxe_qp.c`, `IB_QPT_GSI`): no
//! verb creates or connects it. What arrives for QP 1 and passes rxe's checks goes where ib_mad
//! sends it (`mad.c` `ib_mad_recv_done`): a MAD `validate_mad` refuses is dropped; CM MADs go
//! to the engine's own connection manager (`crate::cm`); a MAD of a class the application
//! registered an agent for ([`Nic::gsi_register`](crate::Nic::gsi_register)) waits in an inbox
//! ([`Nic::poll_gsi`](crate::Nic::poll_gsi)); a Get or Set no agent takes is answered as ib_mad
//! answers it, and anything else no agent takes is dropped. What an agent sends
//! ([`Nic::send_gsi`](crate::Nic::send_gsi)) leaves as a UD SEND Only from QP 1 at the next
//! `poll_transmit`.

use std::collections::VecDeque;
use std::net::IpAddr;

use roce_wire::mad::{
    ATTR_CLASS_PORT_INFO, BASE_VERSION, CM_CLASS_VERSION, MAX_CLASS_VERSION, METHOD_GET,
    METHOD_GET_RESP, METHOD_SEND, METHOD_SET, MGMT_CLASS_CM, MGMT_CLASS_SUBN_DIRECTED_ROUTE,
    MGMT_CLASS_SUBN_LID_ROUTED, STATUS_UNSUPPORTED_METHOD_ATTRIB,
};
use roce_wire::{Psn, Qpn};

use crate::{NicConfig, SrcPortPolicy, Transmit};

/// The GSI QP's number, its Q_Key (a GSI datagram with another is dropped) and the length of
/// a MAD, as the wire crate defines them.
pub use roce_wire::deth::GSI_QKEY;
pub use roce_wire::mad::MAD_LEN;
pub use roce_wire::mad::gsi::GSI_QPN;

/// Datagrams each way that wait at most; beyond, an arriving one is dropped and counted
/// (`rx_gsi_queue_full`) and a send is refused.
pub const GSI_QUEUE: usize = 256;

/// The UDP source port of QP 1's packets where the NIC may choose (`SrcPortPolicy::PerQp`):
/// rxe's range starts at 0xc000 (`RXE_ROCE_V2_SPORT`).
const GSI_SRC_PORT: u16 = 0xc001;

/// A management datagram to or from QP 1 of a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsiDatagram {
    /// The peer's address: where it came from, or where it goes.
    pub peer: IpAddr,
    /// Our address it came to, or goes from.
    pub local: IpAddr,
    /// The peer's QP (DETH source QP of what came; 1 unless the peer redirected).
    pub peer_qp: Qpn,
    /// The MAD.
    pub mad: [u8; MAD_LEN],
}

/// Where ib_mad sends a MAD that came to QP 1 (`mad.c` `ib_mad_recv_done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `validate_mad` refuses it: a base version other than 1.
    BadBaseVersion,
    /// `validate_mad` refuses it: a subnet management class, QP 0's only.
    SubnetManagement,
    /// `validate_mad` refuses it: a CM MAD other than ClassPortInfo whose method is not Send.
    CmNotSend,
    /// The engine's CM: class CM, version 2, method Send, as ib_cm registers its agent.
    Cm,
    /// An agent the application registered for its class and class version: the inbox.
    Agent,
    /// No agent, and a Get or Set: answered GetResp, status unsupported method/attribute.
    Unsupported,
    /// No agent, and not a Get or Set: dropped.
    NoAgent,
}

/// Why a class cannot have an agent, as `ib_register_mad_agent` refuses one on the GSI QP, or
/// `None` if it can.
pub(crate) fn refuse_agent(mgmt_class: u8, class_version: u8) -> Option<&'static str> {
    //= rxe:mad.c/ib_register_mad_agent
    //# a GSI agent's class version is below 8; class 0, the subnet management classes and
    //# classes past the vendor range are refused; a class version and class has one agent
    if class_version >= MAX_CLASS_VERSION {
        Some("a MAD agent's class version is below 8")
    } else if is_subnet_class(mgmt_class) {
        Some("the subnet management classes are QP 0's, which RoCE does not have")
    } else if mgmt_class == 0 || mgmt_class >= 0x50 {
        Some("no such management class")
    } else if (0x30..0x50).contains(&mgmt_class) {
        Some("vendor classes are routed by OUI, which QP 1 here does not do")
    } else if mgmt_class == MGMT_CLASS_CM && class_version == CM_CLASS_VERSION {
        Some("class CM version 2 is the engine's connection manager's")
    } else {
        None
    }
}

/// The answer ib_mad sends to a Get or Set no agent takes (`mad.c` `generate_unmatched_resp`):
/// the request with method GetResp and status 0x000c, the rest as it came.
pub(crate) fn unsupported_reply(request: &[u8; MAD_LEN]) -> [u8; MAD_LEN] {
    let mut reply = *request;
    reply[3] = METHOD_GET_RESP;
    reply[4..6].copy_from_slice(&STATUS_UNSUPPORTED_METHOD_ATTRIB.to_be_bytes());
    reply
}

/// QP 1's queues and its PSN.
#[derive(Debug, Default)]
pub(crate) struct Gsi {
    /// The (class, class version) pairs the application registered agents for.
    agents: Vec<(u8, u8)>,
    inbox: VecDeque<GsiDatagram>,
    /// CM MADs (class CM, version 2), for the engine's own CM.
    cm_inbox: VecDeque<GsiDatagram>,
    outbox: VecDeque<GsiDatagram>,
    /// The PSN of the next datagram QP 1 sends.
    psn: Psn,
}

/// Queues `datagram` at the back of `queue`: false (and nothing queued) when it holds
/// [`GSI_QUEUE`] already.
fn push_bounded(queue: &mut VecDeque<GsiDatagram>, datagram: GsiDatagram) -> bool {
    if queue.len() >= GSI_QUEUE {
        return false;
    }
    queue.push_back(datagram);
    true
}

impl Gsi {
    /// Registers an agent for a class and class version: false if there is one already.
    pub(crate) fn register(&mut self, mgmt_class: u8, class_version: u8) -> bool {
        if self.agents.contains(&(mgmt_class, class_version)) {
            return false;
        }
        self.agents.push((mgmt_class, class_version));
        true
    }

    /// Where a MAD that came to QP 1 goes: ib_mad's `validate_mad`, then its agent (`mad.c`
    /// `ib_mad_recv_done`, `find_mad_agent`). On RoCE no driver takes a MAD first: rxe has no
    /// `process_mad`, so a Get or Set no agent takes is answered (`generate_unmatched_resp`).
    pub(crate) fn route(&self, mad: &[u8; MAD_LEN]) -> Route {
        let (base_version, mgmt_class, class_version, method) = (mad[0], mad[1], mad[2], mad[3]);
        let attr_id = u16::from_be_bytes([mad[16], mad[17]]);
        //= rxe:mad.c/validate_mad
        //# a MAD whose base version is not 1 is dropped
        if base_version != BASE_VERSION {
            return Route::BadBaseVersion;
        }
        //= rxe:mad.c/validate_mad
        //# a LID-routed or directed-route subnet management MAD is dropped on any QP but QP 0
        if is_subnet_class(mgmt_class) {
            return Route::SubnetManagement;
        }
        //= rxe:mad.c/validate_mad
        //# a CM MAD whose method is not Send is dropped, ClassPortInfo excepted
        if mgmt_class == MGMT_CLASS_CM && attr_id != ATTR_CLASS_PORT_INFO && method != METHOD_SEND {
            return Route::CmNotSend;
        }
        //= rxe:mad.c/find_mad_agent
        //# a MAD goes to the agent registered for its management class and class version
        if mgmt_class == MGMT_CLASS_CM && class_version == CM_CLASS_VERSION && method == METHOD_SEND
        {
            return Route::Cm;
        }
        if self.agents.contains(&(mgmt_class, class_version)) {
            return Route::Agent;
        }
        //= rxe:mad.c/generate_unmatched_resp
        //# a Get or Set no agent takes is answered GetResp with status 0x000c (unsupported
        //# method/attribute); any other MAD no agent takes is dropped
        if method == METHOD_GET || method == METHOD_SET {
            Route::Unsupported
        } else {
            Route::NoAgent
        }
    }

    /// Datagrams waiting in the inbox.
    #[cfg(test)]
    pub(crate) fn inbox_len(&self) -> usize {
        self.inbox.len()
    }

    /// The oldest datagram that arrived.
    pub(crate) fn take(&mut self) -> Option<GsiDatagram> {
        self.inbox.pop_front()
    }

    /// The oldest CM MAD that arrived.
    pub(crate) fn take_cm(&mut self) -> Option<GsiDatagram> {
        self.cm_inbox.pop_front()
    }

    /// Whether CM MADs wait for the CM.
    pub(crate) fn cm_waiting(&self) -> bool {
        !self.cm_inbox.is_empty()
    }

    /// Takes a CM MAD for the engine's CM: false when its inbox is full.
    pub(crate) fn receive_cm(&mut self, datagram: GsiDatagram) -> bool {
        push_bounded(&mut self.cm_inbox, datagram)
    }

    /// Datagrams waiting to be sent.
    #[inline]
    pub(crate) fn waiting(&self) -> usize {
        self.outbox.len()
    }

    /// Queues a datagram to send: false when the outbox is full.
    pub(crate) fn send(&mut self, datagram: GsiDatagram) -> bool {
        push_bounded(&mut self.outbox, datagram)
    }

    /// Takes what arrived: false when the inbox is full.
    pub(crate) fn receive(&mut self, datagram: GsiDatagram) -> bool {
        push_bounded(&mut self.inbox, datagram)
    }

    /// Writes the next datagram to send, if any, into `buf` and seals it; a datagram that
    /// cannot be written (no address of the NIC's is of the peer's family) is dropped.
    pub(crate) fn poll_transmit(
        &mut self,
        config: &NicConfig,
        ip_id: u16,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        while let Some(datagram) = self.outbox.pop_front() {
            let psn = self.psn;
            self.psn = psn.wrapping_add(1);
            //= ibta:vol1/13.5.1
            //# a GSI datagram is a UD SEND from QP1 to the peer's QP1 with the GSI Q_Key
            let mut repr = roce_wire::mad::gsi::roce_repr(psn);
            repr.bth.dest_qp = datagram.peer_qp;
            let src_port = match config.src_port {
                SrcPortPolicy::PerQp => GSI_SRC_PORT,
                SrcPortPolicy::Fixed(port) => port,
            };
            let sealed = crate::qp::seal(
                &repr,
                None,
                (datagram.local, src_port),
                datagram.peer,
                (ip_id, config.icrc.seals(), None),
                buf,
                |payload| {
                    payload.copy_from_slice(&datagram.mad);
                    true
                },
            );
            match sealed {
                Ok(transmit) => return Some(transmit),
                Err(err) => tracing::debug!(peer = %datagram.peer, ?err, "gsi datagram dropped"),
            }
        }
        None
    }
}

/// Whether `mgmt_class` is one of subnet management's (LID-routed or directed-route SMPs),
/// which only QP 0 carries.
fn is_subnet_class(mgmt_class: u8) -> bool {
    mgmt_class == MGMT_CLASS_SUBN_LID_ROUTED || mgmt_class == MGMT_CLASS_SUBN_DIRECTED_ROUTE
}
