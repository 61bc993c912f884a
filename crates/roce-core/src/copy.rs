//! Copying payload bytes between a memory region and a packet.
//!
//! Every data packet's payload is copied once on each side: from the sender's region into the
//! packet (gather) and from the packet into the receiver's region (scatter). A plain
//! `copy_from_slice` of a whole 4 KiB payload is one `memcpy`, which glibc serves with `rep
//! movsb` above its threshold (2 112 bytes on processors with fast short `rep movsb`, FSRM). On
//! the AMD EPYC (Zen 4) this project is measured on, `rep movsb` is slow when the destination
//! lies a few bytes after the source modulo 4 KiB, and a packet's payload does exactly that:
//! it starts 12 bytes (the BTH) into a buffer whose layout matches the region's page offsets.
//! Measured there (4 KiB from page-aligned sources, destinations at 16 positions):
//!
//! | destination − source (mod 4 KiB) | one `memcpy` | 1 KiB pieces |
//! |---|---|---|
//! | 12 | 1 190–1 263 ns | 76–77 ns |
//! | 28 | 113–131 ns | 76 ns |
//! | 44 | 163–175 ns | 81–91 ns |
//! | 32, 64, 1000 | 73–86 ns | 72–89 ns |
//!
//! The profile of a `roce perf write` client put 13 % of its time in that `rep movsb`. Copies
//! in pieces of at most [`PIECE`] bytes stay on glibc's vector loop, whose speed does not
//! depend on the distance, on every x86 processor glibc knows and elsewhere, at the cost of a
//! call per KiB. `copy/*` in `benches/engine.rs` shows both on the machine it runs on.

/// The largest piece one `memcpy` call is given: below glibc's smallest `rep movsb` threshold
/// (2 048 bytes with SSE2 vectors, 2 112 with FSRM).
pub const PIECE: usize = 1024;

/// Copies `src` into `dst` (of the same length) in pieces of at most [`PIECE`] bytes.
///
/// # Panics
/// If the lengths differ, as `copy_from_slice`.
#[inline]
pub fn copy_payload(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "a copy between slices of one length");
    for (to, from) in dst.chunks_mut(PIECE).zip(src.chunks(PIECE)) {
        // Opaque to the optimiser: LLVM's loop idiom pass turns a loop of `memcpy`s over
        // consecutive pieces back into one `memcpy` of the whole, which it did once the
        // release profile optimised the program whole (fat LTO: `copy/pieces/12` 57 → 1 145
        // ns, as slow as one `memcpy`). A piece it cannot see through stays a piece.
        std::hint::black_box(&mut *to).copy_from_slice(from);
    }
}

/// Moves `buf[from..from + len]` to the front of `buf` (`from` may be less than `len`: the
/// ranges may overlap), in pieces of at most [`PIECE`] bytes.
///
/// # Panics
/// If `from + len` exceeds the buffer.
#[inline]
pub fn move_to_front(buf: &mut [u8], from: usize, len: usize) {
    assert!(
        from + len <= buf.len(),
        "the bytes to move lie in the buffer"
    );
    // Front to back: piece `i` writes `[i·P, (i+1)·P)` and a later piece reads from
    // `from + j·P` with `j > i`, at or past where piece `i` wrote, so no byte is overwritten
    // before it is read.
    let mut done = 0;
    while done < len {
        let piece = (len - done).min(PIECE);
        // Opaque for the reason `copy_payload` gives.
        std::hint::black_box(&mut *buf).copy_within(from + done..from + done + piece, done);
        done += piece;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn every_length_and_distance_copies_each_byte_once() {
        let src = pattern(3 * PIECE + 77);
        for len in [0, 1, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE, 3 * PIECE + 77] {
            for at in [0, 1, 12, 28, 63] {
                let mut dst = vec![0xa5u8; at + len + 9];
                copy_payload(&mut dst[at..at + len], &src[..len]);
                assert_eq!(&dst[at..at + len], &src[..len], "len {len} at {at}");
                assert!(dst[..at].iter().all(|&b| b == 0xa5), "nothing before");
                assert!(dst[at + len..].iter().all(|&b| b == 0xa5), "nothing after");
            }
        }
    }

    #[test]
    fn moving_to_the_front_survives_overlap() {
        for (from, len) in [
            (5, 3 * PIECE),
            (PIECE, 2 * PIECE + 3),
            (4 * PIECE, 100),
            (0, 10),
        ] {
            let original = pattern(from + len + 50);
            let mut buf = original.clone();
            move_to_front(&mut buf, from, len);
            assert_eq!(
                &buf[..len],
                &original[from..from + len],
                "from {from} len {len}"
            );
            assert_eq!(
                &buf[from.max(len)..],
                &original[from.max(len)..],
                "the rest stays"
            );
        }
    }

    #[test]
    #[should_panic(expected = "one length")]
    fn lengths_must_match() {
        copy_payload(&mut [0; 4], &[0; 5]);
    }
}
