//! Protection domains and memory regions.
//!
//! A registered region is a buffer that the application and the NIC share through a safe handle:
//! an `Arc` around a `Mutex`, so that the application reads and writes it while remote WRITEs land
//! in it, as with hardware. "DMA" is a bounds-checked copy under the lock. No raw pointer crosses
//! the API; a later registration of caller memory (to host unmodified verbs programs) would sit
//! behind one small, documented module.

use std::sync::{Arc, Mutex, MutexGuard};

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
    /// Every right.
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
    pub(crate) bytes: Arc<Mutex<Box<[u8]>>>,
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
        let mut bytes = self.lock();
        match offset.checked_add(data.len()) {
            Some(end) if end <= bytes.len() => {
                bytes[offset..end].copy_from_slice(data);
                true
            }
            _ => false,
        }
    }

    /// A copy of `len` bytes at `offset`, or `None` when the range is outside the region.
    pub fn read(&self, offset: usize, len: usize) -> Option<Vec<u8>> {
        let bytes = self.lock();
        let end = offset.checked_add(len)?;
        bytes.get(offset..end).map(<[u8]>::to_vec)
    }

    /// Runs `f` on the region's bytes, under the lock.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut self.lock())
    }

    /// The offset of `[addr, addr + len)` inside the region, if it lies inside.
    pub(crate) fn offset_of(&self, addr: u64, len: u64) -> Option<usize> {
        let offset = addr.checked_sub(self.iova)?;
        let end = offset.checked_add(len)?;
        (end <= self.len as u64).then_some(offset as usize)
    }

    fn lock(&self) -> MutexGuard<'_, Box<[u8]>> {
        // A panic while holding the lock cannot leave the bytes invalid: any byte pattern is a
        // valid region content, so a poisoned lock is used as it is.
        self.bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
            bytes: Arc::new(Mutex::new(vec![0; len].into_boxed_slice())),
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
}
