//! Selective repeat, the responder's side (the design is in `qp/selective.rs`): requests that
//! arrive past ePSN are kept, each is answered with a NACK naming ePSN and itself (IRN,
//! Mittal et al., SIGCOMM 2018, §3.1), and once the request at ePSN has executed, the kept
//! ones that follow it execute in PSN order by the same code as any request.

use std::collections::VecDeque;

use roce_wire::aeth::CreditCode;
use roce_wire::opcode::Operation;
use roce_wire::{Psn, RocePacket, Syndrome};

use super::Response;
use crate::qp::{Ctx, Qp};

/// Requests kept past ePSN, in PSN order, each as the bytes it arrived as (already checked
/// at ingress: ICRC, QP, path, keys).
#[derive(Debug, Default)]
pub(crate) struct Reorder {
    held: VecDeque<(Psn, Box<[u8]>)>,
}

/// What keeping a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Kept.
    Kept,
    /// One with its PSN was kept already.
    Already,
}

impl Reorder {
    /// Keeps `bytes`, the request with PSN `psn` past `epsn`.
    pub(crate) fn hold(&mut self, epsn: Psn, psn: Psn, bytes: &[u8]) -> Hold {
        let d = psn.distance(epsn);
        let at = self.held.partition_point(|(p, _)| p.distance(epsn) < d);
        if self.held.get(at).is_some_and(|(p, _)| *p == psn) {
            return Hold::Already;
        }
        self.held.insert(at, (psn, bytes.into()));
        Hold::Kept
    }

    /// The kept request at `epsn`, if there is one; those before it (PSNs a READ took) are
    /// dropped.
    pub(crate) fn take(&mut self, epsn: Psn) -> Option<Box<[u8]>> {
        while let Some((psn, _)) = self.held.front() {
            let d = psn.distance(epsn);
            if d > 0 {
                return None;
            }
            let (_, bytes) = self.held.pop_front()?;
            if d == 0 {
                return Some(bytes);
            }
        }
        None
    }

    /// Requests kept.
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// Forgets everything kept (the QP failed or was reset).
    pub(crate) fn clear(&mut self) {
        self.held.clear();
    }
}

impl Qp {
    /// A request `d` PSNs past ePSN under selective repeat: kept (or already kept), and a NACK
    /// naming ePSN and its PSN is queued. Beyond twice the BDP cap it is dropped and counted
    /// (`rx_beyond_reorder_window`): the requester's BDP-FC never sends it there.
    pub(super) fn hold_out_of_order(
        &mut self,
        ctx: &mut Ctx<'_>,
        packet: &RocePacket<&[u8]>,
        d: i32,
        bdp_packets: u32,
    ) {
        let psn = packet.bth().psn();
        if d as u32 > bdp_packets.saturating_mul(2) {
            ctx.stats.rx_beyond_reorder_window += 1;
            tracing::trace!(qpn = %self.qpn, psn = %psn, epsn = %self.resp.epsn, "request beyond the reorder window dropped");
            return;
        }
        let epsn = self.resp.epsn;
        match self.resp.reorder.hold(epsn, psn, packet.as_bytes()) {
            Hold::Kept => ctx.stats.rx_held_out_of_order += 1,
            Hold::Already => ctx.stats.rx_duplicate_requests += 1,
        }
        ctx.stats.tx_sacks += 1;
        self.resp
            .out
            .push_back(Response::Sack { epsn, sacked: psn });
    }

    /// After the request at ePSN executed: the kept requests that now follow in sequence
    /// execute, each as if it had just arrived. The last SEND or WRITE among them is
    /// acknowledged, asked or not, so that the requester's window opens.
    pub(super) fn run_held(&mut self, ctx: &mut Ctx<'_>) {
        let mut last_data = None;
        while let Some(bytes) = self.resp.reorder.take(self.resp.epsn) {
            let Ok(packet) = RocePacket::new_checked(&bytes[..]) else {
                // Checked when it arrived; kept bytes do not change.
                continue;
            };
            let psn = packet.bth().psn();
            let op = packet.layout().operation;
            if !self.accept_in_sequence(ctx, &packet) {
                return;
            }
            last_data = matches!(op, Operation::Send | Operation::RdmaWrite).then_some(psn);
        }
        if let Some(psn) = last_data {
            self.resp.queue_ack(
                psn,
                Syndrome::Ack {
                    credits: CreditCode::UNLIMITED,
                },
            );
        }
    }
}
