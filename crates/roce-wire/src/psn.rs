//! Packet sequence numbers and queue pair numbers: 24-bit quantities of the BTH.

use core::fmt;

/// A 24-bit packet sequence number (IBTA vol. 1 §9.7.1). Arithmetic wraps mod 2^24. There is no
/// `PartialOrd`, because serial-number order is not total: compare with [`Psn::distance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// The 24 bits a PSN has.
    pub const MASK: u32 = 0x00ff_ffff;
    /// Half the PSN space: the size of the valid and the duplicate windows.
    pub const HALF: u32 = 0x0080_0000;

    /// A PSN from the low 24 bits of `raw` (higher bits are dropped).
    pub const fn new(raw: u32) -> Self {
        Self(raw & Self::MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` on the 24-bit circle.
    #[must_use]
    pub const fn wrapping_add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// `self - n` on the 24-bit circle.
    #[must_use]
    pub const fn wrapping_sub(self, n: u32) -> Self {
        Self::new(self.0.wrapping_sub(n))
    }

    /// `self - other` on the 24-bit circle, in `-2^23..2^23`: positive when `self` comes after
    /// `other`. This is rxe's `psn_compare` (`(s32)((a - b) << 8)`), sign-extended back to 24 bits.
    //= ibta:vol1/9.7.1
    //# PSNs are 24-bit serial numbers
    pub const fn distance(self, other: Self) -> i32 {
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// A 24-bit queue pair number (BTH DestQP, DETH SrcQP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Qpn(u32);

impl Qpn {
    /// The 24 bits a QPN has.
    pub const MASK: u32 = 0x00ff_ffff;
    /// QP1, the General Services Interface (connection management MADs).
    pub const GSI: Self = Self(1);

    /// A QPN from the low 24 bits of `raw`.
    pub const fn new(raw: u32) -> Self {
        Self(raw & Self::MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn distance_wraps_at_2_pow_24() {
        assert_eq!(Psn::new(0).distance(Psn::new(Psn::MASK)), 1);
        assert_eq!(Psn::new(Psn::MASK).distance(Psn::new(0)), -1);
        assert_eq!(Psn::new(5).distance(Psn::new(5)), 0);
        assert_eq!(Psn::new(Psn::MASK).wrapping_add(1), Psn::new(0));
        assert_eq!(Psn::new(0).wrapping_sub(1), Psn::new(Psn::MASK));
    }

    #[test]
    fn new_drops_bits_above_24() {
        assert_eq!(Psn::new(0x0123_4567).value(), 0x0023_4567);
        assert_eq!(Qpn::new(0xff00_0011).value(), 0x11);
    }

    #[test]
    fn display_is_hex() {
        assert_eq!(Psn::new(0x42577c).to_string(), "0x42577c");
        assert_eq!(Qpn::new(0x11).to_string(), "0x000011");
    }

    proptest! {
        #[test]
        fn add_then_distance_is_n(p in 0u32..=Psn::MASK, n in 0u32..Psn::HALF) {
            let p = Psn::new(p);
            prop_assert_eq!(p.wrapping_add(n).distance(p), n as i32);
            prop_assert_eq!(p.distance(p.wrapping_add(n)), -(n as i32));
            prop_assert_eq!(p.wrapping_add(n).wrapping_sub(n), p);
        }
    }
}
