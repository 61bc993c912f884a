//! The key message of perftest's `-R` exchange: `struct pingpong_dest` itself, sent as one
//! SEND on the control connection rdma_cm made (perftest_communication.c at `v4.5-0.17`,
//! `rdma_write_keys` / `rdma_read_keys`, built with `HAVE_ENDIAN`: every integer big-endian),
//! not the text of the TCP exchange.
//!
//! Layout on x86-64 and aarch64 (perftest_resources.h): `int lid` at 0, `int out_reads` at 4,
//! `int qpn` at 8, `int psn` at 12, `unsigned rkey` at 16, 4 bytes of padding, `unsigned long
//! long vaddr` at 24, `union ibv_gid gid` at 32, `unsigned srqn` at 48, `int gid_index` at 52:
//! [`KEY_STRUCT_SIZE`] bytes, which is also the length of perftest's one posted receive there
//! (`post_one_recv_wqe`), so no message of that exchange may be longer.

use super::messages::PerftestDest;
use crate::OobError;

/// `sizeof(struct pingpong_dest)`.
pub const KEY_STRUCT_SIZE: usize = 56;

/// `struct pingpong_dest` for `dest`, big-endian. The padding and `gid_index` are sent as 0;
/// a missing GID as 16 zero bytes (perftest sends whatever its `-x` index holds: with rdma_cm
/// the peer's address comes from the CM, not from this).
pub fn encode_keys_struct(dest: &PerftestDest) -> [u8; KEY_STRUCT_SIZE] {
    let mut out = [0u8; KEY_STRUCT_SIZE];
    out[0..4].copy_from_slice(&u32::from(dest.lid).to_be_bytes());
    out[4..8].copy_from_slice(&u32::from(dest.out_reads).to_be_bytes());
    out[8..12].copy_from_slice(&dest.qpn.to_be_bytes());
    out[12..16].copy_from_slice(&dest.psn.to_be_bytes());
    out[16..20].copy_from_slice(&dest.rkey.to_be_bytes());
    out[24..32].copy_from_slice(&dest.vaddr.to_be_bytes());
    out[32..48].copy_from_slice(&dest.gid.unwrap_or_default());
    out[48..52].copy_from_slice(&dest.srqn.to_be_bytes());
    out
}

/// The fields `rdma_read_keys` takes from a `struct pingpong_dest` (it leaves `srqn` and
/// `gid_index` alone: `srqn` is 0 here). LID and out_reads above 16 bits are clamped.
pub fn decode_keys_struct(msg: &[u8], message: &'static str) -> Result<PerftestDest, OobError> {
    let Ok(msg) = <&[u8; KEY_STRUCT_SIZE]>::try_from(msg) else {
        return Err(OobError::Length {
            message,
            expected: KEY_STRUCT_SIZE,
            got: msg.len(),
        });
    };
    let u32_at = |at: usize| u32::from_be_bytes([msg[at], msg[at + 1], msg[at + 2], msg[at + 3]]);
    let u16_at = |at: usize| u16::try_from(u32_at(at)).unwrap_or(u16::MAX);
    let mut vaddr = [0u8; 8];
    vaddr.copy_from_slice(&msg[24..32]);
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&msg[32..48]);
    Ok(PerftestDest {
        lid: u16_at(0),
        out_reads: u16_at(4),
        qpn: u32_at(8),
        psn: u32_at(12),
        rkey: u32_at(16),
        vaddr: u64::from_be_bytes(vaddr),
        gid: Some(gid),
        srqn: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_struct_is_big_endian_at_perftests_offsets() {
        let dest = PerftestDest {
            lid: 0x0102,
            out_reads: 0x10,
            qpn: 0x00ab_cdef,
            psn: 0x0012_3456,
            rkey: 0xdead_beef,
            vaddr: 0x0011_2233_4455_6677,
            gid: Some(crate::testing::v4_gid(7)),
            srqn: 0x0a0b_0c0d,
        };
        let bytes = encode_keys_struct(&dest);
        assert_eq!(&bytes[0..4], &[0, 0, 1, 2]);
        assert_eq!(&bytes[4..8], &[0, 0, 0, 0x10]);
        assert_eq!(&bytes[8..12], &[0, 0xab, 0xcd, 0xef]);
        assert_eq!(&bytes[16..20], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&bytes[20..24], &[0; 4], "padding");
        assert_eq!(
            &bytes[24..32],
            &[0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]
        );
        assert_eq!(&bytes[44..48], &[198, 18, 0, 7]);
        assert_eq!(&bytes[48..52], &[0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(&bytes[52..56], &[0; 4], "gid_index");
        let back = decode_keys_struct(&bytes, "keys").unwrap();
        // rdma_read_keys does not read the SRQN.
        assert_eq!(back, PerftestDest { srqn: 0, ..dest });
    }

    #[test]
    fn a_short_or_long_struct_is_refused() {
        for len in [0, 55, 57, 59] {
            let err = decode_keys_struct(&vec![0; len], "keys").unwrap_err();
            assert!(
                matches!(err, OobError::Length { expected: 56, got, .. } if got == len),
                "{err}"
            );
        }
    }

    #[test]
    fn out_of_range_lid_and_out_reads_are_clamped_not_wrapped() {
        let mut bytes = [0u8; KEY_STRUCT_SIZE];
        bytes[0..4].copy_from_slice(&0x0001_0000u32.to_be_bytes());
        bytes[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let dest = decode_keys_struct(&bytes, "keys").unwrap();
        assert_eq!((dest.lid, dest.out_reads), (u16::MAX, u16::MAX));
    }
}
