//! What arrives from the network: each datagram is checked as rxe checks it (rxe_recv.c
//! `rxe_rcv`, `hdr_check`) — structure, ICRC, destination address, QP, transport and state,
//! path, P_Key, Q_Key — and handed to its QP's responder or completer, or to the QP's
//! congestion control for a CNP. A datagram failing any check is dropped, counted under its
//! reason and traced; nothing of it reaches memory. HPCC's INT header, when the BTH flags one,
//! is checked and taken off first (`roce_wire::int`).

use roce_wire::opcode::{Operation, Transport};
use roce_wire::{ParseError, PseudoHeader, RocePacket, bth, icrc, int};

use super::{Nic, Shared};
use crate::qp::{QpState, QpType};
use crate::{Datagram, DatagramMut, Instant};

impl Nic {
    // B. inputs from the network (the clock's are in `schedule.rs`)

    /// Takes in one datagram. It is checked as rxe checks (rxe_recv.c `rxe_rcv`, `hdr_check`):
    /// structure, ICRC, destination address, QP, transport and state, path, P_Key and Q_Key. A
    /// datagram failing any check is dropped, counted under its reason and traced.
    pub fn handle_datagram(&mut self, now: Instant, datagram: Datagram<'_>) {
        if int::flagged(datagram.payload) {
            self.handle_int_datagram(now, datagram);
            return;
        }
        self.receive(now, datagram, None);
    }

    /// [`Nic::handle_datagram`] of a datagram in a buffer the NIC may rewrite: the same
    /// checks and the same outcome, but HPCC's INT header is taken off in place (the BTH moved
    /// over it) rather than by a copy of the datagram.
    /// Inlined, so that a caller's datagram without INT goes to the checks as a plain
    /// [`Datagram`] without a copy.
    #[inline]
    pub fn handle_datagram_mut(&mut self, now: Instant, datagram: DatagramMut<'_>) {
        if int::flagged(datagram.payload) {
            self.handle_int_datagram_mut(now, datagram);
            return;
        }
        self.receive(now, datagram.as_datagram(), None);
    }

    /// [`Nic::handle_datagram_mut`] of a datagram whose BTH flags HPCC's INT header.
    #[inline(never)]
    fn handle_int_datagram_mut(&mut self, now: Instant, datagram: DatagramMut<'_>) {
        let Some(header) = self.int_header(&datagram.as_datagram()) else {
            return;
        };
        // `int_header` found a whole header: the datagram is long enough.
        if int::strip_in_place(datagram.payload).is_some() {
            let stripped = datagram.as_datagram();
            self.receive(
                now,
                stripped.with_payload(&stripped.payload[header.buffer_len()..]),
                Some(header),
            );
        }
    }

    /// A datagram whose BTH flags HPCC's INT header (`roce_wire::int`), which it copies without
    /// the header ([`Nic::handle_datagram_mut`] needs no copy).
    #[inline(never)]
    fn handle_int_datagram(&mut self, now: Instant, datagram: Datagram<'_>) {
        let Some(header) = self.int_header(&datagram) else {
            return;
        };
        let mut scratch = std::mem::take(&mut self.int_scratch);
        scratch.clear();
        scratch.extend_from_slice(datagram.payload);
        if let Some(payload) = int::strip_in_place(&mut scratch) {
            self.receive(now, datagram.with_payload(payload), Some(header));
        }
        self.int_scratch = scratch;
    }

    /// The INT header of a datagram whose BTH flags one: `None`, the datagram dropped and
    /// counted, unless the NIC runs HPCC, the header is whole and well formed and the ICRC
    /// verifies over the datagram as sent (the header masked). The rest is then handled as any
    /// datagram, without the header, which goes with it to the QP (the responder echoes it,
    /// the completer hands it to HPCC).
    #[inline(never)]
    fn int_header(&mut self, datagram: &Datagram<'_>) -> Option<int::Repr> {
        let shared = &mut self.shared;
        if !shared.config.congestion.carries_int() {
            shared.stats.rx_packets += 1;
            shared.drop_rx(|s| &mut s.rx_int_unexpected, "INT without HPCC");
            return None;
        }
        let header = match int::header(datagram.payload) {
            Ok(header) => header,
            Err(err) => {
                shared.stats.rx_packets += 1;
                shared.drop_rx(|s| &mut s.rx_int_malformed, "malformed INT header");
                tracing::trace!(src = %datagram.src, error = %err, "rx drop");
                return None;
            }
        };
        if !shared.icrc_ok(datagram) {
            shared.stats.rx_packets += 1;
            return None;
        }
        Some(header)
    }

    /// [`Nic::handle_datagram`] of a datagram without INT, or taken off it (`int`: its ICRC
    /// was verified before).
    fn receive(&mut self, now: Instant, datagram: Datagram<'_>, int: Option<int::Repr>) {
        let shared = &mut self.shared;
        shared.stats.rx_packets += 1;
        shared.stats.rx_bytes += datagram.payload.len() as u64;
        //= rxe:rxe_recv.c/rxe_rcv
        //# the packet's structure: lengths, TVer, opcode, pad
        let packet = match RocePacket::new_checked(datagram.payload) {
            Ok(packet) => packet,
            Err(err) => {
                shared.count_parse_error(err);
                tracing::trace!(src = %datagram.src, error = %err, "rx drop");
                return;
            }
        };
        //= rxe:rxe_icrc.c/rxe_icrc_check
        //# the ICRC (Annex A17.4.3)
        if int.is_none() && !shared.icrc_ok(&datagram) {
            return;
        }
        let dst_ip = datagram.dst.ip();
        //= rxe:rxe_recv.c/rxe_match_dgid
        //# the destination address is one of the port's GIDs
        if !shared.config.addrs.contains(&dst_ip) {
            shared.drop_rx(|s| &mut s.rx_dst_addr_mismatch, "not our address");
            return;
        }
        let bth = packet.bth();
        let layout = packet.layout();
        let qpn = bth.dest_qp();
        //= rxe:rxe_recv.c/hdr_check
        //# QP 0 is not served and QP 1 is the GSI's; the QP exists; the opcode's transport is the QP's type; its state takes the packet
        if qpn.value() == 0 {
            shared.drop_rx(|s| &mut s.rx_special_qp, "QP 0");
            return;
        }
        if qpn == crate::gsi::GSI_QPN {
            self.handle_qp1(now, &datagram, &packet);
            return;
        }
        let Some(qp) = self.qps.get_mut(&qpn) else {
            tracing::trace!(
                qpn = %qpn,
                src = %datagram.src,
                psn = %bth.psn(),
                opcode = %bth.opcode(),
                "no such QP"
            );
            shared.drop_rx(|s| &mut s.rx_unknown_qp, "unknown QP");
            return;
        };
        // A CNP names a QP of ours whose packets were marked (Annex A17.9.3): to a connected
        // QP it passes the checks of a response from that QP's peer, so that nobody else can
        // slow the QP down; a UD QP takes it from any host, as it takes datagrams from any.
        //= ibta:annex17/A17.9.3
        //# a CNP names the QP whose packets were marked
        let cnp = layout.transport == Transport::Cnp;
        let type_ok = matches!(
            (layout.transport, qp.qp_type),
            (Transport::Rc, QpType::Rc)
                | (Transport::Uc, QpType::Uc)
                | (Transport::Ud, QpType::Ud)
                | (Transport::Cnp, QpType::Rc | QpType::Uc | QpType::Ud)
        );
        if !type_ok {
            shared.drop_rx(
                |s| &mut s.rx_wrong_transport,
                "transport is not the QP's type",
            );
            return;
        }
        let request = layout.is_request();
        let state_ok = if request {
            qp.can_receive()
        } else {
            matches!(qp.state, QpState::Rts | QpState::Sqd)
        };
        if !state_ok {
            shared.drop_rx(|s| &mut s.rx_qp_not_ready, "QP state");
            return;
        }
        //= rxe:rxe_recv.c/check_addr
        //# a connected QP takes packets only from its peer, to its own address
        if qp.qp_type != QpType::Ud
            && qp
                .av
                .is_none_or(|av| av.dst != datagram.src.ip() || av.src != dst_ip)
        {
            shared.drop_rx(|s| &mut s.rx_path_mismatch, "not the QP's path");
            return;
        }
        //= rxe:rxe_recv.c/check_keys
        //# the P_Key is the default one; a UD QP's Q_Key matches
        if bth.pkey() != bth::DEFAULT_PKEY {
            shared.drop_rx(|s| &mut s.rx_pkey_mismatch, "P_Key");
            return;
        }
        // A CNP has no DETH: a UD QP takes one from any sender of its datagrams, as it takes
        // their datagrams.
        if qp.qp_type == QpType::Ud && !cnp && packet.deth().is_none_or(|d| d.qkey() != qp.qkey) {
            shared.drop_rx(|s| &mut s.rx_qkey_mismatch, "Q_Key");
            return;
        }
        tracing::trace!(qpn = %qpn, psn = %bth.psn(), opcode = %bth.opcode(), "rx");
        shared.stats.rx_accepted += 1;
        if cnp {
            // Congestion control consumes CNPs at the QP's reaction point; without it they
            // are only counted.
            shared.stats.rx_cnps += 1;
            tracing::debug!(qpn = %qpn, time = %now, "rx cnp");
            qp.cc.cnps_received += 1;
            qp.cc.rp.on_cnp(now, &mut qp.timers, &mut shared.stats);
        } else {
            let mut ctx = shared.ctx(now);
            // Only a UD receive shows the IP header (in its GRH area).
            ctx.arrival = (qp.qp_type == QpType::Ud).then(|| crate::qp::responder::Arrival {
                src: datagram.src.ip(),
                dst: dst_ip,
                ecn: datagram.ecn,
                ip_id: datagram.ip_id.unwrap_or(0),
                len: datagram.payload.len(),
            });
            ctx.int = int;
            if request {
                if int.is_some() {
                    qp.resp.int = int;
                }
                qp.notify_ecn(&mut ctx, datagram.ecn, &packet);
                qp.handle_request(&mut ctx, &packet);
            } else {
                if layout.operation == Operation::RdmaReadResponse {
                    qp.notify_read_response_ecn(&ctx, datagram.ecn);
                }
                qp.handle_response(&mut ctx, &packet);
            }
            self.sched.push_ready(qp);
        }
        self.sched.index(qp);
        self.sched.tidy(&mut self.qps, &shared.config);
        shared.deliver_completions();
    }
}

impl Nic {
    /// A packet for QP 1: the GSI's checks, then a CM MAD goes to the CM. Out of line, so that
    /// the data path's code stays as it was.
    #[cold]
    #[inline(never)]
    fn handle_qp1(&mut self, now: Instant, datagram: &Datagram<'_>, packet: &RocePacket<&[u8]>) {
        self.shared.handle_gsi(datagram, packet);
        if self.shared.gsi.cm_waiting() {
            self.cm_receive(now);
        }
    }
}

impl Shared {
    /// The ICRC check (rxe_icrc.c `rxe_icrc_check`). Where the backend hid the IPv4
    /// identification (UDP sockets), the ID that makes the ICRC verify is solved for
    /// (`icrc::ipv4_id`): a packet passes when some ID fits, which a corruption does one time
    /// in 2^16, and is dropped under `rx_icrc_errors` when none does.
    fn icrc_ok(&mut self, datagram: &Datagram<'_>) -> bool {
        if !self.config.icrc.checks() {
            self.stats.rx_icrc_skipped += 1;
            return true;
        }
        // The first guess for a hidden ID is the datagram's place in its receive batch: a
        // sender batching with segmentation offload (our UDP backend) numbers them so.
        let guess = datagram.ip_id.unwrap_or(datagram.segment);
        let Some(header) = PseudoHeader::for_datagram(datagram.src, datagram.dst, guess) else {
            self.drop_rx(|s| &mut s.rx_dst_addr_mismatch, "mixed IP families");
            return false;
        };
        let verdict = if datagram.ip_id.is_none() && datagram.src.is_ipv4() {
            match icrc::ipv4_id::solve(&header, datagram.payload) {
                // 0: a lone DF datagram from an unconnected socket (a batch of such sends).
                Some(id) if id == guess || id == 0 => Ok(()),
                Some(id) => {
                    self.stats.rx_icrc_id_solved += 1;
                    tracing::trace!(src = %datagram.src, ip_id = id, "ipv4 id solved from the icrc");
                    Ok(())
                }
                None => Err("no IPv4 ID makes the ICRC verify"),
            }
        } else {
            icrc::verify(&header, datagram.payload).map_err(|_| "ICRC mismatch")
        };
        if let Err(why) = verdict {
            self.drop_rx(|s| &mut s.rx_icrc_errors, why);
            return false;
        }
        true
    }

    fn count_parse_error(&mut self, err: ParseError) {
        let stats = &mut self.stats;
        let counter = match err {
            ParseError::BadTver(_) => &mut stats.rx_bad_tver,
            ParseError::UnsupportedOpcode(_) => &mut stats.rx_unsupported_opcode,
            ParseError::BadPad { .. } => &mut stats.rx_bad_pad,
            ParseError::BadPayloadLength { .. } => &mut stats.rx_bad_length,
            ParseError::IcrcMismatch { .. } => &mut stats.rx_icrc_errors,
            _ => &mut stats.rx_truncated,
        };
        *counter += 1;
    }
}
