//! Data to send that shows where it went wrong: every byte depends on a seed and its position
//! (xorshift64), so a misplaced, stale or foreign byte differs from what was expected.

/// `len` bytes that depend on `seed` and position.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_depends_on_its_seed_and_its_length_only_cuts_it() {
        let long = pattern(3, 64);
        assert_eq!(pattern(3, 16), long[..16]);
        assert_ne!(pattern(4, 64), long);
        // Not a run of one value: a byte moved by one place shows.
        assert!(long.windows(2).any(|w| w[0] != w[1]));
    }
}
