//! QP 1 seen from the NIC: management datagrams in and out (the GSI itself is `crate::gsi`).

use roce_wire::RocePacket;

use super::{Nic, Shared};
use crate::gsi::{GSI_QKEY, GSI_QPN, GSI_QUEUE, GsiDatagram, MAD_LEN};
use crate::{Datagram, VerbsError};

impl Nic {
    /// The oldest management datagram that came for QP 1 and is not the CM's (CM MADs of
    /// class version 2 go to the engine's CM).
    pub fn poll_gsi(&mut self) -> Option<GsiDatagram> {
        self.shared.gsi.take()
    }

    /// Sends a management datagram from QP 1 (at the next `poll_transmit`). `local` must be an
    /// address of the NIC's of the peer's family.
    pub fn send_gsi(&mut self, datagram: GsiDatagram) -> Result<(), VerbsError> {
        if !self.shared.config.addrs.contains(&datagram.local)
            || !crate::cm::attrs::same_family(datagram.local, datagram.peer)
        {
            return Err(VerbsError::InvalidWorkRequest {
                qpn: GSI_QPN,
                reason: "a GSI datagram goes from an address of the NIC's of the peer's family",
            });
        }
        if !self.shared.gsi.send(datagram) {
            return Err(VerbsError::QueueFull {
                qpn: GSI_QPN,
                queue: "GSI send",
                depth: GSI_QUEUE,
            });
        }
        Ok(())
    }

    /// Management datagrams waiting to be sent.
    pub fn gsi_waiting(&self) -> usize {
        self.shared.gsi.waiting()
    }
}

impl Shared {
    /// A packet for QP 1, past the structural, ICRC and address checks: rxe's `hdr_check` and
    /// `check_keys` for the GSI QP, then the MAD waits for the connection manager.
    pub(super) fn handle_gsi(&mut self, datagram: &Datagram<'_>, packet: &RocePacket<&[u8]>) {
        let bth = packet.bth();
        //= rxe:rxe_recv.c/hdr_check
        //# QP 1 takes UD packets only
        if bth.opcode() != roce_wire::Opcode::UdSendOnly {
            self.drop_rx(|s| &mut s.rx_wrong_transport, "QP 1 takes UD SENDs only");
            return;
        }
        //= rxe:rxe_recv.c/check_keys
        //# the P_Key is one of the port's; QP 1 takes the GSI Q_Key only
        if bth.pkey() & 0x7fff != 0x7fff {
            self.drop_rx(|s| &mut s.rx_pkey_mismatch, "P_Key");
            return;
        }
        let Some(deth) = packet.deth().filter(|d| d.qkey() == GSI_QKEY) else {
            self.drop_rx(|s| &mut s.rx_qkey_mismatch, "not the GSI Q_Key");
            return;
        };
        let Ok(mad) = <[u8; MAD_LEN]>::try_from(packet.payload()) else {
            self.drop_rx(|s| &mut s.rx_bad_length, "a MAD is 256 bytes");
            return;
        };
        let received = GsiDatagram {
            peer: datagram.src.ip(),
            local: datagram.dst.ip(),
            peer_qp: deth.src_qp(),
            mad,
        };
        let taken = if super::cm::is_cm(&received.mad) {
            self.gsi.receive_cm(received)
        } else {
            self.gsi.receive(received)
        };
        if !taken {
            self.drop_rx(|s| &mut s.rx_gsi_queue_full, "the GSI inbox is full");
            return;
        }
        self.stats.rx_accepted += 1;
        self.stats.rx_gsi_mads += 1;
        tracing::trace!(src = %datagram.src, "rx gsi mad");
    }
}
