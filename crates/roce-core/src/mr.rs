//! Protection domains and memory regions.
//!
//! A registered region is a buffer that the application and the NIC share through a safe handle:
//! an `Arc` around a `Mutex`, so that the application reads and writes it while remote WRITEs land
//! in it, as with hardware. "DMA" is a bounds-checked copy under the lock. No raw pointer crosses
//! the API: the bytes live behind [`RegionMemory`], which the engine reads and writes only at
//! offsets it has checked against the region's length. The engine's own implementation is an
//! owned buffer; the replacement libibverbs (crates/roce-verbs) implements it over the
//! program's memory in its one `unsafe` module.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// Where a region's bytes are. The engine calls these only with `offset + len <= self.len()`
/// (checked by the region first), so an implementation may rely on it; each call is one copy.
pub trait RegionMemory: Send + Sync + fmt::Debug {
    /// The length in bytes; never changes.
    fn len(&self) -> usize;
    /// Whether the length is 0.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `out.len()` bytes at `offset` into `out`.
    fn read_at(&self, offset: usize, out: &mut [u8]);
    /// Copies `data` to `offset`.
    fn write_at(&self, offset: usize, data: &[u8]);
    /// Replaces the 8 bytes at `offset` (host order, as on the x86 hosts rxe runs on) with
    /// `f(old)` in one step with respect to the NIC's other accesses, and returns `old`.
    fn update_u64(&self, offset: usize, f: &mut dyn FnMut(u64) -> u64) -> u64;

    /// Where byte 0 lies in this process, if the bytes may be handed to the kernel by address
    /// for a send instead of being copied out first ([`crate::Loan`]); it must stay valid
    /// while the value lives. `None` (the default): payloads are copied.
    fn address(&self) -> Option<usize> {
        None
    }

    /// Whether a READ response's payload may be lent too (with an [`address`](Self::address)).
    /// A READ response's ICRC is sealed over the bytes before the kernel copies them, so a
    /// write to them in between, outside the NIC, sends a packet that fails its check: the
    /// requester drops it and asks again. A program writes its own buffers while peers READ
    /// them (a flag, a ring) whenever it likes, so its memory says no; requests are lent
    /// either way, since a program leaves a buffer alone until its WR completes. Default: yes.
    fn lend_read_responses(&self) -> bool {
        true
    }

    /// Calls `f` with the `len` bytes at `offset`, in order, in one piece or more (the ICRC of
    /// a lent payload). The default copies them through a small buffer with `read_at`.
    fn read_with(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        let mut piece = [0; crate::copy::PIECE];
        let mut done = 0;
        while done < len {
            let take = (len - done).min(piece.len());
            self.read_at(offset + done, &mut piece[..take]);
            f(&piece[..take]);
            done += take;
        }
    }
}

/// Memory the engine owns: a zeroed buffer behind a lock.
#[derive(Debug)]
pub struct OwnedMemory {
    bytes: Mutex<Box<[u8]>>,
    /// Where the buffer lies and its length, which never change: read without the lock (a
    /// lent payload asks for both at every packet).
    addr: usize,
    len: usize,
}

impl OwnedMemory {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        let bytes = vec![0; len].into_boxed_slice();
        Self {
            addr: bytes.as_ptr() as usize,
            len,
            bytes: Mutex::new(bytes),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Box<[u8]>> {
        // A panic while holding the lock cannot leave the bytes invalid: any byte pattern is a
        // valid region content, so a poisoned lock is used as it is.
        self.bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl RegionMemory for OwnedMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn read_at(&self, offset: usize, out: &mut [u8]) {
        crate::copy::copy_payload(out, &self.lock()[offset..offset + out.len()]);
    }

    fn write_at(&self, offset: usize, data: &[u8]) {
        crate::copy::copy_payload(&mut self.lock()[offset..offset + data.len()], data);
    }

    fn update_u64(&self, offset: usize, f: &mut dyn FnMut(u64) -> u64) -> u64 {
        let mut bytes = self.lock();
        let target = &mut bytes[offset..offset + 8];
        let mut raw = [0; 8];
        raw.copy_from_slice(target);
        let old = u64::from_le_bytes(raw);
        target.copy_from_slice(&f(old).to_le_bytes());
        old
    }

    fn address(&self) -> Option<usize> {
        // The boxed slice never moves or changes length while the value lives.
        Some(self.addr)
    }

    fn read_with(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        f(&self.lock()[offset..offset + len]);
    }
}

/// A protection domain: QPs and memory regions of one domain only see each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdHandle(pub(crate) u32);

impl PdHandle {
    /// The handle's number.
    pub const fn value(self) -> u32 {
        self.0
    }
}

/// Access rights of a memory region (`ibv_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// Local reads only (the default of every region).
    pub const NONE: Self = Self(0);
    /// The NIC may write into the region for local operations (receives, READ responses, atomics).
    pub const LOCAL_WRITE: Self = Self(1);
    /// Peers may RDMA WRITE into it.
    pub const REMOTE_WRITE: Self = Self(2);
    /// Peers may RDMA READ from it.
    pub const REMOTE_READ: Self = Self(4);
    /// Peers may run atomics on it.
    pub const REMOTE_ATOMIC: Self = Self(8);
    /// Memory windows may be bound to the region (`IBV_ACCESS_MW_BIND`; IBTA vol. 1 C10-73).
    pub const MW_BIND: Self = Self(16);
    /// Registered zero-based (`IBV_ACCESS_ZERO_BASED`): kept as rxe keeps it, addresses are
    /// still the region's; a window cannot be bound to such a region (rxe `rxe_check_bind_mw`).
    pub const ZERO_BASED: Self = Self(32);
    /// Every right of a region's bytes (local write, remote write, read and atomic).
    pub const ALL: Self = Self(15);

    /// Whether every right of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of two sets of rights.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

/// A registered memory region: the application's handle to the bytes the NIC reads and writes.
/// Clones share the same bytes.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    pub(crate) pd: PdHandle,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) iova: u64,
    pub(crate) access: Access,
    /// The length of `bytes`, which never changes: bounds checks need no lock.
    pub(crate) len: usize,
    pub(crate) bytes: Arc<dyn RegionMemory>,
}

impl MemoryRegion {
    /// The local key, for SGEs.
    pub const fn lkey(&self) -> u32 {
        self.lkey
    }

    /// The remote key, for peers' RETHs and AtomicETHs.
    pub const fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The address of the region's first byte as SGEs and peers name it.
    pub const fn addr(&self) -> u64 {
        self.iova
    }

    /// The region's length in bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The access rights.
    pub const fn access(&self) -> Access {
        self.access
    }

    /// The protection domain.
    pub const fn pd(&self) -> PdHandle {
        self.pd
    }

    /// Copies `data` into the region at `offset`. Returns false, copying nothing, when it does not
    /// fit.
    pub fn write(&self, offset: usize, data: &[u8]) -> bool {
        match offset.checked_add(data.len()) {
            Some(end) if end <= self.len => {
                self.bytes.write_at(offset, data);
                true
            }
            _ => false,
        }
    }

    /// A copy of `len` bytes at `offset`, or `None` when the range is outside the region.
    pub fn read(&self, offset: usize, len: usize) -> Option<Vec<u8>> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then(|| {
            let mut out = vec![0; len];
            self.bytes.read_at(offset, &mut out);
            out
        })
    }

    /// Copies `out.len()` bytes at `offset` into `out`; false, copying nothing, when the range
    /// is outside the region.
    pub fn read_into(&self, offset: usize, out: &mut [u8]) -> bool {
        match offset.checked_add(out.len()) {
            Some(end) if end <= self.len => {
                self.bytes.read_at(offset, out);
                true
            }
            _ => false,
        }
    }

    /// The 8 bytes at `offset` become `f(old)`; returns `old`, or `None` (nothing changed) when
    /// they are outside the region.
    pub fn update_u64(&self, offset: usize, mut f: impl FnMut(u64) -> u64) -> Option<u64> {
        let end = offset.checked_add(8)?;
        (end <= self.len).then(|| self.bytes.update_u64(offset, &mut f))
    }

    /// Runs `f` on a copy of the region's bytes and writes the copy back: for the application's
    /// bulk set-up of a region that no operation is using (not atomic with respect to the
    /// NIC's own accesses; use [`MemoryRegion::read`]/[`MemoryRegion::write`] otherwise).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut copy = vec![0; self.len];
        self.bytes.read_at(0, &mut copy);
        let r = f(&mut copy);
        self.bytes.write_at(0, &copy);
        r
    }

    /// The offset of `[addr, addr + len)` inside the region, if it lies inside.
    pub(crate) fn offset_of(&self, addr: u64, len: u64) -> Option<usize> {
        let offset = addr.checked_sub(self.iova)?;
        let end = offset.checked_add(len)?;
        (end <= self.len as u64).then_some(offset as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(len: usize) -> MemoryRegion {
        MemoryRegion {
            pd: PdHandle(1),
            lkey: 0x100,
            rkey: 0x200,
            iova: 0x1000,
            access: Access::LOCAL_WRITE | Access::REMOTE_READ,
            len,
            bytes: Arc::new(OwnedMemory::zeroed(len)),
        }
    }

    #[test]
    fn bounds_are_checked() {
        let mr = region(16);
        assert!(mr.write(12, b"abcd"));
        assert!(!mr.write(13, b"abcd"));
        assert_eq!(mr.read(12, 4).unwrap(), b"abcd");
        assert_eq!(mr.read(13, 4), None);
        assert_eq!(mr.offset_of(0x1000, 16), Some(0));
        assert_eq!(mr.offset_of(0x1008, 9), None);
        assert_eq!(mr.offset_of(0xfff, 1), None);
        assert_eq!(mr.offset_of(u64::MAX, 2), None);
    }

    #[test]
    fn access_rights() {
        let mr = region(1);
        assert!(mr.access().contains(Access::REMOTE_READ));
        assert!(!mr.access().contains(Access::REMOTE_WRITE));
        assert!(Access::ALL.contains(Access::REMOTE_ATOMIC | Access::LOCAL_WRITE));
    }

    #[test]
    fn clones_share_bytes() {
        let mr = region(4);
        let other = mr.clone();
        assert!(other.write(0, b"xy"));
        assert_eq!(mr.read(0, 2).unwrap(), b"xy");
    }

    #[test]
    fn atomics_and_reads_are_bounds_checked() {
        let mr = region(16);
        assert!(mr.write(8, &5u64.to_le_bytes()));
        assert_eq!(mr.update_u64(8, |v| v + 1), Some(5));
        assert_eq!(mr.read(8, 8).unwrap(), 6u64.to_le_bytes());
        assert_eq!(mr.update_u64(9, |_| 0), None);
        assert_eq!(
            mr.read(8, 8).unwrap(),
            6u64.to_le_bytes(),
            "a refused update changes nothing"
        );
        let mut out = [0; 4];
        assert!(!mr.read_into(14, &mut out));
        assert!(mr.read_into(8, &mut out));
        assert_eq!(out, [6, 0, 0, 0]);
    }

    #[test]
    fn memory_of_the_caller_is_registered_at_its_address() {
        let mut nic = crate::Nic::new(crate::NicConfig::default());
        let pd = nic.alloc_pd();
        let memory = Arc::new(OwnedMemory::zeroed(64));
        let mr = nic
            .reg_memory(
                pd,
                memory.clone(),
                Some(0x7f00_0000_1000),
                Access::LOCAL_WRITE,
            )
            .unwrap();
        assert_eq!((mr.addr(), mr.len()), (0x7f00_0000_1000, 64));
        assert!(mr.write(60, b"abcd"));
        let mut out = [0; 4];
        memory.read_at(60, &mut out);
        assert_eq!(&out, b"abcd", "the region's bytes are the memory given");
        // A region that would wrap around the address space is refused, and nothing changes.
        let before = nic.reg_mr(pd, 1, Access::NONE).unwrap().lkey();
        assert!(
            nic.reg_memory(pd, memory, Some(u64::MAX - 8), Access::NONE)
                .is_err()
        );
        let after = nic.reg_mr(pd, 1, Access::NONE).unwrap().lkey();
        assert_eq!(
            after >> 8,
            (before >> 8) + 1,
            "no key was used by the refused registration"
        );
    }
}

/// The memory regions of a NIC by key (lkey = rkey, as rxe's MRs), with whether the rkey is
/// still valid (SEND with invalidate clears it).
pub(crate) type Mrs = BTreeMap<u32, MrEntry>;

/// A registered region and the validity of its rkey.
#[derive(Debug)]
pub(crate) struct MrEntry {
    pub(crate) mr: MemoryRegion,
    pub(crate) rkey_valid: bool,
}
