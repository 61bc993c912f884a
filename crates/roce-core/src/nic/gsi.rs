//! QP 1 seen from the NIC: management datagrams in and out (the GSI itself is `crate::gsi`).

use roce_wire::RocePacket;

use super::{Nic, Shared};
use crate::gsi::{GSI_QKEY, GSI_QPN, GSI_QUEUE, GsiDatagram, MAD_LEN, Route};
use crate::{Datagram, VerbsError};

impl Nic {
    /// The oldest management datagram that came for QP 1 for an agent registered with
    /// [`gsi_register`](Self::gsi_register). Nothing else waits here: CM MADs go to the engine's
    /// CM, and a MAD no agent takes is answered or dropped as ib_mad does.
    pub fn poll_gsi(&mut self) -> Option<GsiDatagram> {
        self.shared.gsi.take()
    }

    /// Registers the application as the agent of a management class and class version, as
    /// `ib_register_mad_agent` does on the GSI QP: from now on their MADs, whatever the method,
    /// wait in [`poll_gsi`](Self::poll_gsi), and answering a Get or Set is the agent's to do.
    /// Refused for what ib_mad refuses on QP 1 (class versions 8 and up, class 0, the subnet
    /// management classes, classes past the vendor range), for the OUI-routed vendor classes
    /// (0x30–0x4F), for class CM version 2 (the engine's CM) and for a class already registered.
    pub fn gsi_register(&mut self, mgmt_class: u8, class_version: u8) -> Result<(), VerbsError> {
        let refused = crate::gsi::refuse_agent(mgmt_class, class_version).or_else(|| {
            (!self.shared.gsi.register(mgmt_class, class_version))
                .then_some("that class and class version have an agent already")
        });
        match refused {
            Some(reason) => Err(VerbsError::InvalidWorkRequest {
                qpn: GSI_QPN,
                reason,
            }),
            None => Ok(()),
        }
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
    /// `check_keys` for the GSI QP, then ib_mad's checks and routing (`Gsi::route`): the MAD
    /// goes to the CM or a registered agent, is answered, or is dropped and counted.
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
        let taken = match self.gsi.route(&received.mad) {
            Route::BadBaseVersion => {
                self.drop_rx(|s| &mut s.rx_gsi_bad_base_version, "MAD base version not 1");
                return;
            }
            Route::SubnetManagement => {
                self.drop_rx(
                    |s| &mut s.rx_gsi_smp_class,
                    "a subnet management MAD on QP 1",
                );
                return;
            }
            Route::CmNotSend => {
                self.drop_rx(
                    |s| &mut s.rx_gsi_cm_method,
                    "a CM MAD whose method is not Send",
                );
                return;
            }
            Route::NoAgent => {
                self.drop_rx(|s| &mut s.rx_gsi_no_agent, "no agent for the MAD");
                return;
            }
            Route::Unsupported => {
                // Answers take at most half the send queue: a flood of Gets leaves room for
                // what the CM and the agents send.
                if self.gsi.waiting() >= GSI_QUEUE / 2 {
                    self.drop_rx(|s| &mut s.rx_gsi_queue_full, "no room to answer the MAD");
                    return;
                }
                let reply = GsiDatagram {
                    mad: crate::gsi::unsupported_reply(&received.mad),
                    ..received
                };
                let sent = self.gsi.send(reply);
                debug_assert!(sent, "half the send queue was free");
                self.stats.rx_accepted += 1;
                self.stats.gsi_unsupported_replies += 1;
                tracing::trace!(src = %datagram.src, "rx gsi mad no agent takes: answered");
                return;
            }
            Route::Cm => self.gsi.receive_cm(received),
            Route::Agent => self.gsi.receive(received),
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
