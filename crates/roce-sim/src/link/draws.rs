//! The random numbers that decide an offered packet's luck on the cable, and the bit flip of a
//! corruption.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use roce_wire::bth;

/// The random numbers one offered packet uses, drawn in this order whether they are needed or
/// not.
#[derive(Debug, Clone, Copy)]
pub(super) struct Draws {
    pub(super) loss: f64,
    pub(super) corrupt: f64,
    pub(super) bit: u64,
    pub(super) duplicate: f64,
    pub(super) jitter: u64,
    pub(super) duplicate_jitter: u64,
    pub(super) red: f64,
}

impl Draws {
    pub(super) fn new(rng: &mut ChaCha8Rng) -> Self {
        // Struct fields are evaluated in the order written: that is the draw order.
        Self {
            loss: rng.random(),
            corrupt: rng.random(),
            bit: rng.random(),
            duplicate: rng.random(),
            jitter: rng.random(),
            duplicate_jitter: rng.random(),
            red: rng.random(),
        }
    }
}

/// Flips one bit of `payload`, chosen by `draw` among the bits the ICRC covers, so that the
/// receiver must notice. Returns false for an empty payload.
pub(super) fn flip_one_bit(payload: &mut [u8], draw: u64) -> bool {
    // The ICRC replaces BTH byte 4 (FECN, BECN, reserved) with ones before hashing (IBA vol. 1
    // Annex A17.4.3; rxe_icrc.c), so a flip there would go unnoticed: skip it when the payload
    // is long enough to hold a BTH.
    let skip = payload.len() >= bth::HEADER_LEN;
    let bytes = payload.len() - usize::from(skip);
    if bytes == 0 {
        return false;
    }
    let bit = scale(draw, bytes as u128 * 8);
    let Ok(mut byte) = usize::try_from(bit / 8) else {
        return false;
    };
    if skip && byte >= BTH_FECN_BECN {
        byte += 1;
    }
    payload[byte] ^= 1 << (bit % 8);
    true
}

/// Maps a uniform 64-bit draw onto `0..n` (Lemire's multiply-shift; `n` up to 2^64).
pub(super) fn scale(draw: u64, n: u128) -> u64 {
    u64::try_from((u128::from(draw) * n) >> 64).expect("a draw below 2^64 scaled by n <= 2^64")
}

/// Offset of the BTH's FECN/BECN byte, which the ICRC does not cover.
pub(super) const BTH_FECN_BECN: usize = 4;
