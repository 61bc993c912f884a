//! The general services interface: QP 1, the UD QP that carries management datagrams (MADs) —
//! the connection manager's REQ, REP, RTU and the rest — between the NICs of a fabric.
//!
//! Every NIC has it from the start, as rxe has its GSI QP (`rxe_qp.c`, `IB_QPT_GSI`): no
//! verb creates or connects it. What arrives for QP 1 and passes its checks waits in an inbox
//! ([`Nic::poll_gsi`](crate::Nic::poll_gsi)) for a management agent — CM MADs go to the engine's own connection
//! manager (`crate::cm`) instead; what the manager sends ([`Nic::send_gsi`](crate::Nic::send_gsi))
//! leaves as a UD SEND Only from QP 1 at the next `poll_transmit`.

use std::collections::VecDeque;
use std::net::IpAddr;

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

/// QP 1's queues and its PSN.
#[derive(Debug, Default)]
pub(crate) struct Gsi {
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
                (datagram.local, src_port),
                datagram.peer,
                (ip_id, config.icrc.seals()),
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
