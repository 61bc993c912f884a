//! A request before ePSN: answered again, never executed again (IBTA vol. 1 §9.7.5.1.2, rxe
//! `duplicate_request`).

use roce_wire::aeth::CreditCode;
use roce_wire::opcode::Operation;
use roce_wire::{RocePacket, Syndrome};

use super::{Resource, Response, readable};
use crate::qp::{Ctx, Qp};

impl Qp {
    /// A request before ePSN: answered again, never executed again (IBTA vol. 1 §9.7.5.1.2,
    /// rxe `duplicate_request`).
    //= ibta:vol1/9.7.5.1.2
    //# a duplicate request is answered again, never executed again
    pub(super) fn handle_duplicate(&mut self, ctx: &mut Ctx<'_>, packet: &RocePacket<&[u8]>) {
        let psn = packet.bth().psn();
        match packet.layout().operation {
            Operation::Send | Operation::RdmaWrite => {
                //= ibta:vol1/C9-105
                //# a duplicate SEND or WRITE is ACKed with the PSN just before ePSN
                let prev = self.resp.epsn.wrapping_sub(1);
                self.resp.queue_ack(
                    prev,
                    Syndrome::Ack {
                        credits: CreditCode::UNLIMITED,
                    },
                );
            }
            Operation::RdmaReadRequest => {
                let found = self.resp.resources.iter().find_map(|res| match *res {
                    Resource::Read { first, last }
                        if psn.distance(first) >= 0 && last.distance(psn) >= 0 =>
                    {
                        Some((first, last))
                    }
                    _ => None,
                });
                let (Some((first, last)), Some(reth)) = (found, packet.reth()) else {
                    // No resource: a very old duplicate. Dropped (rxe: class D, silently).
                    return;
                };
                // The READ is read again from memory, from the PSN asked, with the RETH of the
                // duplicate (rxe re-validates it). Its responses still waiting to be sent are
                // abandoned: the train starts again from the PSN asked rather than running to
                // its end first (rxe keeps one position per READ resource and moves it back).
                // Without this every retry of a long READ queued another whole train behind
                // the first, and a READ of a GiB never caught up with its own retries.
                let Ok(key) = readable(ctx, self.pd, self.qpn, &reth) else {
                    return;
                };
                self.resp
                    .out
                    .retain(|r| !matches!(*r, Response::Read { last: l, .. } if l == last));
                self.resp.out.push_back(Response::Read {
                    psn,
                    last,
                    key,
                    va: reth.va(),
                    remaining: reth.dma_len(),
                    from_start: psn == first,
                    msn: self.resp.msn,
                });
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let orig = self.resp.resources.iter().find_map(|res| match *res {
                    Resource::Atomic { psn: p, orig } if p == psn => Some(orig),
                    _ => None,
                });
                if let Some(orig) = orig {
                    self.resp.out.push_back(Response::AtomicAck {
                        psn,
                        orig,
                        msn: self.resp.msn,
                    });
                }
            }
            _ => {}
        }
    }
}
