//! The responses the responder sends, oldest first: ACKs and NAKs, atomic ACKs, and READ
//! responses read from memory one path MTU at a time (rxe_resp.c `send_ack`, `read_reply`).

use roce_wire::{AethRepr, AtomicAckEthRepr, BthRepr, NakCode, Opcode, RoceRepr, Syndrome};

use super::Response;
use crate::qp::{Ctx, Qp, lend_payload};
use crate::{Congestion, Loan, Transmit};

impl Qp {
    /// The next response, written into `buf`.
    pub(crate) fn poll_response(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Transmit> {
        let dst = self.av?.dst;
        let response = *self.resp.out.front()?;
        // Under DCQCN the QP's rate limits its READ responses as it does its requests: the
        // requester is the notification point of a READ's data (`qp/cnp.rs`), and its CNPs
        // cut this rate.
        let rate_limited = matches!(response, Response::Read { .. })
            && matches!(ctx.config.congestion, Congestion::Dcqcn(_));
        if rate_limited && self.paced(ctx) {
            return None;
        }
        let (repr, read) = match response {
            Response::Ack {
                psn,
                syndrome,
                msn,
                becn,
            } => {
                let mut bth = BthRepr::new(Opcode::RcAcknowledge, self.dest_qpn, psn);
                bth.becn = becn;
                let repr = RoceRepr {
                    aeth: Some(AethRepr {
                        syndrome,
                        msn: msn.value(),
                    }),
                    ..RoceRepr::new(bth)
                };
                (repr, None)
            }
            Response::Sack { epsn, sacked } => {
                // IRN's NACK as `qp/selective.rs` lays it out: a sequence NAK naming ePSN,
                // the AETH's 24-bit MSN field carrying the PSN that arrived.
                let bth = BthRepr::new(Opcode::RcAcknowledge, self.dest_qpn, epsn);
                let repr = RoceRepr {
                    aeth: Some(AethRepr {
                        syndrome: Syndrome::Nak(NakCode::PsnSeqErr),
                        msn: sacked.value(),
                    }),
                    ..RoceRepr::new(bth)
                };
                (repr, None)
            }
            Response::AtomicAck { psn, orig, msn } => {
                let bth = BthRepr::new(Opcode::RcAtomicAcknowledge, self.dest_qpn, psn);
                let repr = RoceRepr {
                    aeth: Some(AethRepr::ack(msn.value())),
                    atomic_ack_eth: Some(AtomicAckEthRepr { orig_data: orig }),
                    ..RoceRepr::new(bth)
                };
                (repr, None)
            }
            Response::Read {
                psn,
                key,
                va,
                remaining,
                from_start,
                msn,
                ..
            } => {
                let mtu = self.mtu.bytes();
                let chunk = remaining.min(mtu);
                let last = remaining <= mtu;
                let opcode = match (from_start, last) {
                    (true, true) => Opcode::RcRdmaReadResponseOnly,
                    (true, false) => Opcode::RcRdmaReadResponseFirst,
                    (false, true) => Opcode::RcRdmaReadResponseLast,
                    (false, false) => Opcode::RcRdmaReadResponseMiddle,
                };
                let mut bth = BthRepr::new(opcode, self.dest_qpn, psn);
                bth.pad_count = RoceRepr::pad_for(chunk as usize);
                let aeth = (opcode != Opcode::RcRdmaReadResponseMiddle)
                    .then_some(AethRepr::ack(msn.value()));
                let repr = RoceRepr {
                    aeth,
                    payload_len: chunk as usize,
                    ..RoceRepr::new(bth)
                };
                (repr, Some((key, va, chunk)))
            }
        };
        let mrs = &*ctx.mrs;
        // A READ response's payload is lent as a request's is (`requester::emit_segment`),
        // unless its memory says no (`RegionMemory::lend_read_responses`).
        let lent = match read {
            Some((key, va, chunk)) => {
                let len = chunk as usize;
                lend_payload(
                    ctx.loans.as_deref_mut(),
                    ctx.config,
                    (&repr, len),
                    |loans, hole| {
                        let loan = mrs
                            .get(&key)
                            .filter(|entry| entry.mr.bytes.lend_read_responses())
                            .and_then(|entry| {
                                let at = entry.mr.offset_of(va, chunk.into())?;
                                Loan::new(&entry.mr.bytes, at, len, hole)
                            });
                        loan.map(|loan| loans.push(loan)).is_some()
                    },
                )
            }
            None => None,
        };
        let transmit =
            self.emit(
                ctx.config,
                (ctx.ip_id, lent),
                &repr,
                dst,
                buf,
                |payload| match read {
                    None => true,
                    Some((_, _, 0)) => true,
                    Some((key, va, chunk)) => mrs.get(&key).is_some_and(|entry| {
                        entry
                            .mr
                            .offset_of(va, chunk.into())
                            .is_some_and(|at| entry.mr.read_into(at, payload))
                    }),
                },
            );
        let mut transmit = match transmit {
            Ok(transmit) => transmit,
            Err(err) => {
                // The region went away under a READ in progress: stop answering it.
                tracing::debug!(qpn = %self.qpn, error = ?err, "response not sent");
                self.resp.out.pop_front();
                return None;
            }
        };
        ctx.stats.tx_packets += 1;
        ctx.stats.tx_bytes += transmit.len as u64;
        if rate_limited {
            // Data, as a request's: ECN-capable, so that a switch marks rather than drops it.
            transmit.ecn = crate::cc::request_ecn(ctx.config);
            let wire = crate::cc::pacer::wire_len(&transmit);
            self.cc
                .on_rate_limited_sent(ctx.now, wire, &mut self.timers, ctx.stats);
        }
        self.resp.ack_waited = false;
        tracing::trace!(qpn = %self.qpn, psn = %repr.bth.psn, opcode = %repr.bth.opcode, "tx response");
        match (response, self.resp.out.front_mut()) {
            (
                Response::Read { remaining, .. },
                Some(Response::Read {
                    psn,
                    va,
                    remaining: left,
                    from_start,
                    ..
                }),
            ) if remaining > self.mtu.bytes() => {
                let chunk = self.mtu.bytes();
                *psn = psn.wrapping_add(1);
                *va += u64::from(chunk);
                *left -= chunk;
                *from_start = false;
            }
            (Response::Ack { syndrome, .. }, _) => {
                if let Syndrome::Ack { .. } = syndrome {
                    ctx.stats.tx_acks += 1;
                }
                self.resp.out.pop_front();
            }
            (Response::AtomicAck { .. }, _) => {
                ctx.stats.tx_acks += 1;
                self.resp.out.pop_front();
            }
            _ => {
                self.resp.out.pop_front();
            }
        }
        Some(transmit)
    }
}
