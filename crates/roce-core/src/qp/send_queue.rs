//! The send queue (rxe's `qp->sq`), which the requester and the completer share: its WQEs in
//! posting order and the cursor of the one the requester sends from. The requester advances
//! the cursor and rewinds it for go-back-N; the completer retires WQEs from the front. Every
//! WQE before the cursor has been sent and not yet retired.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

use roce_wire::Psn;

use crate::cq::WcOpcode;
use crate::wr::SendWr;

/// A send WR on the send queue, with the transport's bookkeeping.
#[derive(Debug)]
pub(crate) struct SendWqe {
    /// The WR as posted; an inline WR's bytes, copied at the post, in its `inline_data`.
    pub(crate) wr: SendWr,
    /// Total bytes of the message.
    pub(crate) length: u32,
    /// The PSN of its first packet, once sent.
    pub(crate) first_psn: Option<Psn>,
    /// PSNs it takes: packets of a SEND or WRITE, response packets of a READ, 1 for an atomic.
    pub(crate) npsn: u32,
    /// Whether every request packet has been sent (a READ or atomic: its request).
    pub(crate) sent: bool,
}

impl SendWqe {
    /// The PSN of its last packet (or last expected response).
    pub(crate) fn last_psn(&self) -> Option<Psn> {
        self.first_psn
            .map(|first| first.wrapping_add(self.npsn - 1))
    }

    /// Whether `psn` is one of its PSNs.
    pub(crate) fn contains(&self, psn: Psn) -> bool {
        self.first_psn.is_some_and(|first| {
            let d = psn.distance(first);
            d >= 0 && (d as u32) < self.npsn
        })
    }

    pub(crate) fn wc_opcode(&self) -> WcOpcode {
        self.wr.op.wc_opcode()
    }
}

/// The send queue: WQEs in posting order and the requester's cursor.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    wqes: VecDeque<SendWqe>,
    /// The WQE the requester sends from: an index into `wqes`, at most their number.
    cursor: usize,
}

impl SendQueue {
    pub(crate) fn push(&mut self, wqe: SendWqe) {
        self.wqes.push_back(wqe);
    }

    pub(crate) fn len(&self) -> usize {
        self.wqes.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.wqes.is_empty()
    }

    pub(crate) fn front(&self) -> Option<&SendWqe> {
        self.wqes.front()
    }

    pub(crate) fn get(&self, index: usize) -> Option<&SendWqe> {
        self.wqes.get(index)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &SendWqe> {
        self.wqes.iter()
    }

    /// Whether any WQE has had all its request packets sent and is not retired: those are
    /// the ones before the cursor (a WQE is marked sent as the cursor moves past it, and
    /// unmarked as it moves back), so no walk over the queue, which the completer asks after
    /// every ACK.
    pub(crate) fn any_sent(&self) -> bool {
        debug_assert_eq!(
            self.cursor > 0,
            self.wqes.iter().any(|wqe| wqe.sent),
            "the WQEs marked sent are the ones before the cursor"
        );
        self.cursor > 0
    }

    /// The WQE the requester sends from next.
    pub(crate) fn cursor(&self) -> usize {
        self.cursor
    }

    /// Whether a WQE waits at or after the cursor.
    pub(crate) fn has_unsent(&self) -> bool {
        self.cursor < self.wqes.len()
    }

    /// The WQE at the cursor is sent whole: the cursor moves to the next.
    pub(crate) fn advance(&mut self) {
        self.cursor += 1;
    }

    /// Takes the oldest WQE off the queue (completed, failed or carried out locally); the
    /// cursor keeps naming the same WQE.
    pub(crate) fn retire_front(&mut self) -> Option<SendWqe> {
        let wqe = self.wqes.pop_front()?;
        self.cursor = self.cursor.saturating_sub(1);
        Some(wqe)
    }

    /// Takes the WQE at the cursor off the queue (it cannot be sent); the cursor names the one
    /// after it.
    pub(crate) fn remove_current(&mut self) -> Option<SendWqe> {
        self.wqes.remove(self.cursor)
    }

    /// Go-back-N: the cursor moves back to the WQE that holds `psn`, and it and every WQE
    /// after it are unsent again. Returns that WQE, or `None` (the cursor unmoved) when no
    /// unretired WQE holds `psn`.
    pub(crate) fn rewind_to(&mut self, psn: Psn) -> Option<&SendWqe> {
        let index = self.wqes.iter().position(|wqe| wqe.contains(psn))?;
        self.cursor = index;
        for wqe in self.wqes.iter_mut().skip(index) {
            wqe.sent = false;
        }
        Some(&self.wqes[index])
    }

    /// Whether an unretired WQE holds `psn`.
    pub(crate) fn holds(&self, psn: Psn) -> bool {
        self.wqes.iter().any(|wqe| wqe.contains(psn))
    }

    /// The cursor moves to the first WQE never sent (or past the last).
    pub(crate) fn rewind_to_unsent(&mut self) {
        self.cursor = self
            .wqes
            .iter()
            .position(|wqe| wqe.first_psn.is_none())
            .unwrap_or(self.wqes.len());
    }

    /// Takes every WQE off the queue, oldest first; the cursor goes back to the front.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = SendWqe> + '_ {
        self.cursor = 0;
        self.wqes.drain(..)
    }

    /// Empties the queue without completions.
    pub(crate) fn clear(&mut self) {
        self.cursor = 0;
        self.wqes.clear();
    }

    /// Room held for WQEs (for the memory estimate).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.wqes.capacity()
    }
}

impl Index<usize> for SendQueue {
    type Output = SendWqe;

    fn index(&self, index: usize) -> &SendWqe {
        &self.wqes[index]
    }
}

impl IndexMut<usize> for SendQueue {
    fn index_mut(&mut self, index: usize) -> &mut SendWqe {
        &mut self.wqes[index]
    }
}
