//! A program's own buffer as a region's memory: the raw-pointer side of `ibv_reg_mr`.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use roce_core::RegionMemory;

/// `len` bytes at `addr` in this process, registered by the program with `ibv_reg_mr`.
///
/// What the program promises by registering (the libibverbs contract, as for DMA by a real
/// NIC): the bytes stay mapped until `ibv_dereg_mr`, and the device may read and write them at
/// any time in between. The engine accesses them only inside `[0, len)` (it checks every
/// offset against the region first, `roce_core::MemoryRegion`), with plain copies, never
/// through a Rust reference, so a program that writes its buffer at the same time sees torn
/// data, as it would with hardware, and nothing worse happens on our side.
#[derive(Debug)]
pub(crate) struct CallerMemory {
    addr: usize,
    len: usize,
}

impl CallerMemory {
    /// The registration of `[addr, addr + len)`. `None` for NULL with a length, or a range
    /// that wraps around the address space.
    ///
    /// # Safety
    /// `[addr, addr + len)` is memory of this process that stays mapped, readable and writable,
    /// for as long as the value (and the region made of it) lives, and that no Rust reference
    /// covers meanwhile: `ibv_reg_mr`'s contract with the program, which keeps the buffer until
    /// `ibv_dereg_mr`. The value's reads and writes rely on it.
    pub(crate) unsafe fn new(addr: usize, len: usize) -> Option<Self> {
        ((addr != 0 || len == 0) && addr.checked_add(len).is_some()).then_some(Self { addr, len })
    }

    /// Where the buffer starts, and its length.
    pub(crate) fn range(&self) -> (usize, usize) {
        (self.addr, self.len)
    }
}

impl RegionMemory for CallerMemory {
    fn len(&self) -> usize {
        self.len
    }

    /// The program's buffer, lent to the kernel for RC requests (`roce_core::Loan`): it stays
    /// mapped until `ibv_dereg_mr`, which waits for any send that lent from it
    /// (`roce_device::Verb::Deregister`).
    fn address(&self) -> Option<usize> {
        Some(self.addr)
    }

    /// No: the program may write its buffer while a peer READs it.
    fn lend_read_responses(&self) -> bool {
        false
    }

    /// The bytes in place, for the ICRC of a lent request payload.
    fn read_with(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "the region checks offsets first"
        );
        // SAFETY: in bounds of the registration (asserted), which the program keeps mapped
        // until it deregisters, and deregistration waits for the send that lent it. The engine
        // writes the region only under its lock, which the caller holds (a lent payload's ICRC
        // is sealed while the packet is made), and the program leaves a request's buffer alone
        // until its WR completes (the verbs contract: one that writes anyway sends torn data,
        // as with hardware). The slice lives for this call only.
        f(unsafe { std::slice::from_raw_parts((self.addr + offset) as *const u8, len) });
    }

    fn read_at(&self, offset: usize, out: &mut [u8]) {
        assert!(
            offset + out.len() <= self.len,
            "the region checks offsets first"
        );
        // SAFETY: in bounds of the registration (asserted), which the program keeps mapped
        // until it deregisters; `out` is ours, so the ranges do not overlap.
        unsafe {
            copy_in_pieces(
                (self.addr + offset) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }

    fn write_at(&self, offset: usize, data: &[u8]) {
        assert!(
            offset + data.len() <= self.len,
            "the region checks offsets first"
        );
        // SAFETY: as in read_at; the program registered the memory as writable by the device
        // (the engine checks LOCAL_WRITE / REMOTE_WRITE before it writes).
        unsafe { copy_in_pieces(data.as_ptr(), (self.addr + offset) as *mut u8, data.len()) }
    }

    fn update_u64(&self, offset: usize, f: &mut dyn FnMut(u64) -> u64) -> u64 {
        assert!(offset + 8 <= self.len, "the region checks offsets first");
        let at = self.addr + offset;
        if at.is_multiple_of(8) {
            // SAFETY: 8 aligned bytes inside the registration; AtomicU64 has u64's layout.
            let cell = unsafe { AtomicU64::from_ptr(at as *mut u64) };
            let mut old = cell.load(Ordering::SeqCst);
            loop {
                match cell.compare_exchange_weak(old, f(old), Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(prev) => return prev,
                    Err(now) => old = now,
                }
            }
        }
        // Unaligned: IBTA requires 8-byte aligned atomics (the responder NAKs others first);
        // this copy is never reached by a well-formed request.
        let mut raw = [0; 8];
        self.read_at(offset, &mut raw);
        let old = u64::from_le_bytes(raw);
        self.write_at(offset, &f(old).to_le_bytes());
        old
    }
}

/// `roce_core::copy::copy_payload` for memory known by its address only: `len` bytes from
/// `src` to `dst` in pieces of at most `roce_core::copy::PIECE`, so that glibc never takes the
/// `rep movsb` path that is slow at some distances between the two (see that module).
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]: `src` readable and `dst` writable for `len` bytes,
/// the two ranges disjoint.
unsafe fn copy_in_pieces(src: *const u8, dst: *mut u8, len: usize) {
    let mut done = 0;
    while done < len {
        let piece = (len - done).min(roce_core::copy::PIECE);
        // SAFETY: `done + piece <= len`, inside both ranges the caller vouches for.
        unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), piece) };
        done += piece;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_atomics_land_in_the_buffer() {
        let mut buf = vec![0u64; 4];
        let addr = buf.as_mut_ptr() as usize;
        // SAFETY: `buf` outlives `mem` and is not borrowed while `mem` reads and writes it.
        let mem = unsafe { CallerMemory::new(addr, 32) }.unwrap();
        mem.write_at(8, &7u64.to_le_bytes());
        assert_eq!(mem.update_u64(8, &mut |v| v * 3), 7);
        let mut out = [0; 8];
        mem.read_at(8, &mut out);
        assert_eq!(u64::from_le_bytes(out), 21);
        assert_eq!(buf[1], 21);
    }

    #[test]
    fn copies_longer_than_a_piece_land_whole() {
        let len = 3 * roce_core::copy::PIECE + 13;
        let mut buf = vec![0u8; len + 8];
        let addr = buf.as_mut_ptr() as usize;
        let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let mut out = vec![0; len];
        {
            // SAFETY: as above; nothing borrows `buf` while `mem` lives.
            let mem = unsafe { CallerMemory::new(addr, len + 8) }.unwrap();
            mem.write_at(5, &data);
            mem.read_at(5, &mut out);
        }
        assert_eq!(out, data);
        assert_eq!(&buf[5..5 + len], &data[..]);
        assert_eq!(
            (buf[..5].to_vec(), buf[5 + len..].to_vec()),
            (vec![0; 5], vec![0; 3])
        );
    }

    #[test]
    fn null_and_wrapping_ranges_are_refused() {
        // SAFETY: refused or empty ranges: no value that can touch memory is made.
        unsafe {
            assert!(CallerMemory::new(0, 8).is_none());
            assert!(CallerMemory::new(usize::MAX - 4, 8).is_none());
            assert!(CallerMemory::new(0, 0).is_some());
        }
    }
}
