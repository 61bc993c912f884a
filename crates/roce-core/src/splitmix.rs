//! SplitMix64 (Steele, Lea and Flood, 2014): a small, well-mixed stream from a 64-bit seed, for
//! the NIC's unpredictable values (keys, the first QPN, PINT's sampling). Not a cryptographic
//! generator: the seed is what is secret. Seeds that differ in one bit give unrelated streams.

/// The generator's state.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream of `seed`.
    pub(crate) const fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Its next 64 bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
