//! Payloads lent, not copied: a packet whose payload stays in its memory region until the
//! backend's `sendmsg` gathers it from there by address, as a NIC's DMA reads a WR's buffer
//! while the packet leaves ([`Nic::poll_transmit_lending`](crate::Nic::poll_transmit_lending)).
//!
//! For an RC request (its WR's SGL) or a READ response (the region the READ names) of 1 KiB
//! or more ([`MIN_LENT`]), the engine writes the packet's headers into the caller's buffer as
//! always, leaves the payload's bytes there untouched, seals the ICRC over the region's bytes
//! (`roce_wire::icrc::seal_around`), and hands back one [`Loan`] per piece of the payload (one
//! per SGE it spans). A loan holds its region's memory alive; the bytes are those the kernel
//! copies when the batch is sent, within the same round. A program that writes a buffer
//! while a WR that sends it is outstanding sends torn data, as with hardware, and here the
//! ICRC may no longer match it: the peer drops the packet and the requester sends it again.
//! UC and UD requests are copied: their WR completes as the packet is made, before the send,
//! and the program may then write the buffer again at once.

use std::fmt;
use std::sync::Arc;

use crate::mr::RegionMemory;

/// The shortest payload lent. A loan costs a reference counted, the region's lock for its
/// ICRC and the kernel's walk over two more pieces, which a small payload's copy does not pay;
/// 1 KiB is chosen, not measured against other thresholds (lent 4 KiB packets: −8 % user CPU,
/// docs/benchmarks.md).
pub(crate) const MIN_LENT: usize = 1024;

/// Bytes of a region that a packet carries by address: `len` bytes at [`Loan::addr`], which
/// belong at [`Loan::at`] in the packet.
#[derive(Clone)]
pub struct Loan {
    memory: Arc<dyn RegionMemory>,
    /// Where the bytes start in the region.
    offset: usize,
    /// Where they lie in this process.
    addr: usize,
    /// Where they belong, counted from the start of the packet (the caller may move it with
    /// the packet: the device counts it from the start of its batch).
    pub at: usize,
    /// How many bytes.
    pub len: usize,
}

impl Loan {
    /// A loan of `len` bytes at `offset` in `memory`, for the packet at `at`; `None` when the
    /// memory cannot lend (it has no address) or does not hold the range.
    pub fn new(
        memory: &Arc<dyn RegionMemory>,
        offset: usize,
        len: usize,
        at: usize,
    ) -> Option<Self> {
        let end = offset.checked_add(len)?;
        if end > memory.len() {
            return None;
        }
        let addr = memory.address()?.checked_add(offset)?;
        Some(Self {
            memory: memory.clone(),
            offset,
            addr,
            at,
            len,
        })
    }

    /// The address of the first byte in this process, valid while the loan lives.
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Calls `f` with the bytes, in order, in one piece or more.
    pub fn read_with(&self, f: &mut dyn FnMut(&[u8])) {
        self.memory.read_with(self.offset, self.len, f);
    }
}

impl fmt::Debug for Loan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loan")
            .field("at", &self.at)
            .field("len", &self.len)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}
