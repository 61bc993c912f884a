//! Which IPv4 identification makes an ICRC check out, for receivers that cannot see the ID.
//!
//! A UDP socket hands over the payload but not the IPv4 header, and the ICRC covers the 16-bit
//! identification (IBA vol. 1 Annex A17.4.3 masks TOS, TTL and the checksum, not the ID). CRC-32
//! is affine over GF(2): for two inputs of one length that differ in the ID bytes alone, the
//! CRCs differ by the *raw* CRC (zero initial state, no final inversion) of the difference,
//! which is the raw CRC of the two ID bytes advanced over the `k` bytes that follow them in
//! the ICRC's input. Advancing a CRC register over `k` zero bytes is multiplication by
//! `x^(8k)` modulo the CRC polynomial (zlib's `crc32_combine` rests on the same fact), and
//! `x` is invertible modulo that polynomial (its constant term is 1). So
//!
//! ```text
//! icrc(id) ^ icrc(guess) = x^(8k) · raw(id ^ guess)   ⇒   raw(id ^ guess) = x^(-8k) · (found ^ icrc(guess))
//! ```
//!
//! and `raw` is an injective linear map from 16 bits into 32: the right-hand side either lies in
//! its 16-dimensional image, which names the one ID that makes the packet check out, or it does
//! not, and then no ID does. One CRC of the packet and about 30 multiplications of 32-bit
//! polynomials decide it exactly. What it cannot do is tell a corruption from an ID: a damaged
//! packet passes when its error happens to look like an ID change, one chance in 2^16 for an
//! error that is random over the CRC's 32 bits, against certainty when every failure was
//! accepted.

use super::{IpFields, PseudoHeader, compute};
use crate::packet::ICRC_LEN;

/// The IPv4 identification for which `packet`'s ICRC (its last 4 bytes) verifies, given the other
/// covered fields in `header` (an IPv4 pseudo-header; its `identification` is the first guess,
/// and costs nothing more when it is right). `None` when no identification makes it verify (the
/// packet is corrupt, or another covered field is not what `header` says), when `header` is
/// IPv6 (which has no ID: check it with [`super::verify`]), or when `packet` has no ICRC.
//= ibta:annex17/A17.4.3
//# the IPv4 identification is not masked: it is covered by the ICRC
pub fn solve(header: &PseudoHeader, packet: &[u8]) -> Option<u16> {
    let IpFields::V4 { identification, .. } = header.ip else {
        return None;
    };
    let slot = packet.len().checked_sub(ICRC_LEN)?;
    let mut raw = [0; ICRC_LEN];
    raw.copy_from_slice(&packet[slot..]);
    let found = u32::from_le_bytes(raw);
    let delta = found ^ compute(header, packet);
    if delta == 0 || cfg!(fuzzing) {
        return Some(identification);
    }
    // The ID's two bytes are followed by the rest of the IPv4 header, UDP and the packet up to
    // its ICRC (the LRH's ones and the first 4 bytes of the IPv4 header come before them).
    let after = (IPV4_LEN - ID_END) + UDP_LEN + slot;
    let target = mul(pow_x_inverse(8 * after as u64), delta);
    decode(target).map(|diff| identification ^ diff)
}

/// What giving a sealed IPv4 packet another identification does to its ICRC, for packets of
/// one length, without a pass over the packet. By the affinity above the ICRC changes by
/// `x^(8k) · raw(from ^ to)`, linear in the two IDs' difference: one ICRC per bit of it,
/// tabled once per length (32 multiplications), then at most 16 XORs a packet. A sender that
/// sealed a packet for the ID of one place in an offload batch and sends it at another (the
/// device's packet carried over to the next batch) moves it with [`Rekey::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rekey {
    packet_len: usize,
    /// The ICRC's change for a difference of each bit of the ID, bit 0 first.
    bits: [u32; 16],
}

impl Rekey {
    /// For packets of `packet_len` bytes (the RoCE UDP payload, ICRC included).
    pub fn new(packet_len: usize) -> Self {
        let body = packet_len.saturating_sub(ICRC_LEN);
        let after = (IPV4_LEN - ID_END) + UDP_LEN + body;
        let shift = pow_x(8 * after as u64);
        Self {
            packet_len,
            bits: std::array::from_fn(|j| mul(shift, raw_crc(1 << j))),
        }
    }

    /// The length it is for.
    pub fn packet_len(&self) -> usize {
        self.packet_len
    }

    /// The ICRC of a packet of this length sealed as `icrc` for the identification `from`,
    /// had it been sealed for `to` (every other covered field the same).
    pub fn apply(&self, icrc: u32, from: u16, to: u16) -> u32 {
        let diff = from ^ to;
        (0..16)
            .filter(|j| diff & (1 << j) != 0)
            .fold(icrc, |icrc, j| icrc ^ self.bits[j])
    }

    /// Seals `packet` (of this length, its ICRC in its last 4 bytes, sealed for `from`) for
    /// `to` instead. Does nothing to a packet of another length.
    pub fn reseal(&self, packet: &mut [u8], from: u16, to: u16) {
        let Some(slot) = packet
            .len()
            .checked_sub(ICRC_LEN)
            .filter(|_| packet.len() == self.packet_len)
        else {
            return;
        };
        let mut icrc = [0; ICRC_LEN];
        icrc.copy_from_slice(&packet[slot..]);
        let icrc = self.apply(u32::from_le_bytes(icrc), from, to);
        packet[slot..].copy_from_slice(&icrc.to_le_bytes());
    }
}

/// The reflected CRC-32 polynomial (x^32 is implied), as crc32fast and zlib use it.
const POLY: u32 = 0xedb8_8320;
/// `1`, the polynomial x^0, in the reflected representation (bit 31 holds x^0, bit 0 x^31).
const ONE: u32 = 0x8000_0000;
/// x^-1 modulo the polynomial: (P - 1) / x, since P has the constant term 1.
const X_INVERSE: u32 = (POLY << 1) | 1;
/// Where the IPv4 identification ends in the IPv4 header.
const ID_END: usize = 6;
const IPV4_LEN: usize = 20;
const UDP_LEN: usize = 8;

/// `a · b` modulo the polynomial, both reflected (zlib's `multmodp` computes the same product).
const fn mul(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = ONE;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        // b · x: a shift towards higher powers, reduced by the polynomial on overflow.
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    product
}

/// `squares(b)[i]` = b^(2^i) modulo the polynomial: the table [`power`] raises b by.
const fn squares(base: u32) -> [u32; 64] {
    let mut table = [0; 64];
    table[0] = base;
    let mut i = 1;
    while i < 64 {
        table[i] = mul(table[i - 1], table[i - 1]);
        i += 1;
    }
    table
}

/// x^(2^i) and x^(-2^i) modulo the polynomial.
const POWERS: [u32; 64] = squares(ONE >> 1);
const INVERSE_POWERS: [u32; 64] = squares(X_INVERSE);

/// b^n modulo the polynomial, by squares: `table` is [`squares`]`(b)`.
fn power(table: &[u32; 64], mut n: u64) -> u32 {
    let mut product = ONE;
    let mut i = 0;
    while n != 0 {
        if n & 1 != 0 {
            product = mul(table[i], product);
        }
        n >>= 1;
        i += 1;
    }
    product
}

/// x^n modulo the polynomial.
fn pow_x(n: u64) -> u32 {
    power(&POWERS, n)
}

/// x^(-n) modulo the polynomial.
fn pow_x_inverse(n: u64) -> u32 {
    power(&INVERSE_POWERS, n)
}

/// The raw CRC (zero initial state, no final inversion) of the two bytes of `id`, big-endian
/// as they stand in the header.
const fn raw_crc(id: u16) -> u32 {
    let bytes = id.to_be_bytes();
    let mut state = 0u32;
    let mut i = 0;
    while i < 2 {
        state ^= bytes[i] as u32;
        let mut bit = 0;
        while bit < 8 {
            state = if state & 1 != 0 {
                (state >> 1) ^ POLY
            } else {
                state >> 1
            };
            bit += 1;
        }
        i += 1;
    }
    state
}

/// The image of `raw_crc` in echelon form: `ECHELON[j] = (vector, ids)` where `vector` is a
/// combination of the 16 basis images whose highest set bit is the `j`-th pivot, and `ids` the
/// ID bits that make it. Built at compile time by Gaussian elimination over GF(2).
const ECHELON: [(u32, u16); 16] = {
    let mut rows = [(0u32, 0u16); 16];
    let mut count = 0;
    let mut j = 0;
    while j < 16 {
        let mut vector = raw_crc(1 << j);
        let mut ids = 1u16 << j;
        let mut r = 0;
        while r < count {
            if vector & (1 << (31 - rows[r].0.leading_zeros())) != 0 {
                vector ^= rows[r].0;
                ids ^= rows[r].1;
            }
            r += 1;
        }
        assert!(vector != 0, "raw_crc is injective on 16 bits");
        // Keep the rows sorted by pivot, highest first, and reduced: no row has another's pivot.
        let pivot = 1u32 << (31 - vector.leading_zeros());
        let mut k = 0;
        while k < count {
            if rows[k].0 & pivot != 0 {
                rows[k].0 ^= vector;
                rows[k].1 ^= ids;
            }
            k += 1;
        }
        let mut at = count;
        while at > 0 && rows[at - 1].0.leading_zeros() > vector.leading_zeros() {
            rows[at] = rows[at - 1];
            at -= 1;
        }
        rows[at] = (vector, ids);
        count += 1;
        j += 1;
    }
    rows
};

/// The ID whose raw CRC is `target`, if `target` lies in the image.
fn decode(mut target: u32) -> Option<u16> {
    let mut id = 0;
    for &(vector, ids) in &ECHELON {
        let pivot = 1u32 << (31 - vector.leading_zeros());
        if target & pivot != 0 {
            target ^= vector;
            id ^= ids;
        }
    }
    (target == 0).then_some(id)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use proptest::prelude::*;

    use super::*;
    use crate::icrc::{seal, verify};

    fn header(id: u16) -> PseudoHeader {
        PseudoHeader {
            ip: IpFields::V4 {
                src: Ipv4Addr::new(198, 18, 0, 12),
                dst: Ipv4Addr::new(198, 18, 0, 11),
                identification: id,
                dont_fragment: true,
            },
            src_port: 49681,
            dst_port: 4791,
        }
    }

    /// A WRITE_ONLY-shaped packet of `len` bytes (BTH first), sealed for `id`.
    fn packet(len: usize, fill: u8, id: u16) -> Vec<u8> {
        let mut packet: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(fill)).collect();
        packet[0] = 0x0a;
        packet[1] = 0x40;
        seal(&header(id), &mut packet);
        packet
    }

    #[test]
    fn x_inverse_times_x_is_one() {
        assert_eq!(mul(X_INVERSE, ONE >> 1), ONE);
        assert_eq!(
            mul(pow_x_inverse(8 * 1000), mul(ONE >> 1, ONE)),
            mul(pow_x_inverse(7999), ONE)
        );
    }

    #[test]
    fn the_id_a_packet_was_sealed_for_is_found_from_any_guess() {
        let p = packet(96, 7, 0x718c);
        assert_eq!(solve(&header(0), &p), Some(0x718c));
        assert_eq!(solve(&header(0x718c), &p), Some(0x718c));
        assert_eq!(solve(&header(0xffff), &p), Some(0x718c));
    }

    /// The rule read literally: try every identification. Slow, so over a few packets only.
    #[test]
    fn solve_agrees_with_trying_all_65536_ids() {
        for (len, id, flip) in [
            (28, 1, None),
            (96, 0xbeef, None),
            (96, 7, Some(40)),
            (60, 3, Some(0)),
        ] {
            let mut p = packet(len, 3, id);
            if let Some(byte) = flip {
                p[byte] ^= 0x10;
            }
            let brute: Vec<u16> = (0..=u16::MAX)
                .filter(|&id| verify(&header(id), &p).is_ok())
                .collect();
            assert!(brute.len() <= 1, "one ID at most: {brute:?}");
            assert_eq!(
                solve(&header(0), &p),
                brute.first().copied(),
                "len {len} id {id}"
            );
        }
    }

    #[test]
    fn a_flipped_icrc_is_caught() {
        let mut p = packet(96, 5, 0);
        let end = p.len();
        for byte in &mut p[end - 4..] {
            *byte ^= 0xa5;
        }
        assert_eq!(solve(&header(0), &p), None);
    }

    /// Over many corruptions the residual is one in 2^16: of 20 000 single-byte errors at
    /// seeded places, none or next to none passes (0.3 expected).
    #[test]
    fn random_corruptions_pass_about_once_in_65536() {
        let mut passed = 0;
        let mut state = 0x2545_f491_u32;
        for round in 0..20_000u32 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let len = 28 + (state as usize % 200);
            let mut p = packet(len, (round % 251) as u8, round as u16);
            let at = (state >> 8) as usize % len;
            // BTH byte 4 is masked: a change there is no corruption the ICRC sees.
            if at == 4 {
                continue;
            }
            // So is an INT header the BTH flags (`crate::int`).
            if crate::int::flagged(&p) && (12..12 + crate::int::header_len(&p)).contains(&at) {
                continue;
            }
            p[at] ^= 1 << ((state >> 3) % 8);
            if let Some(id) = solve(&header(0), &p) {
                assert!(verify(&header(id), &p).is_ok(), "a solution verifies");
                passed += 1;
            }
        }
        assert!(passed <= 3, "{passed} corrupted packets passed");
    }

    #[test]
    fn x_to_the_n_undoes_x_to_the_minus_n() {
        for n in [0, 1, 8, 31, 32, 33, 8 * 4150] {
            assert_eq!(mul(pow_x(n), pow_x_inverse(n)), ONE, "n = {n}");
        }
    }

    proptest! {
        /// A packet sealed for one ID, rekeyed to another, is the packet sealed for that one.
        #[test]
        fn a_rekeyed_icrc_is_the_icrc_sealed_for_the_new_id(
            len in 16usize..4200, from: u16, to: u16, fill: u8,
        ) {
            let sealed = packet(len, fill, from);
            let icrc = u32::from_le_bytes(sealed[len - 4..].try_into().unwrap());
            let rekey = Rekey::new(len);
            prop_assert_eq!(rekey.packet_len(), len);
            let want = packet(len, fill, to);
            prop_assert_eq!(
                &rekey.apply(icrc, from, to).to_le_bytes()[..],
                &want[len - 4..]
            );
            let mut resealed = sealed.clone();
            rekey.reseal(&mut resealed, from, to);
            prop_assert_eq!(&resealed, &want);
            let mut longer = [&sealed[..], &[0]].concat();
            rekey.reseal(&mut longer, from, to);
            prop_assert_eq!(&longer[..len], &sealed[..], "another length: untouched");
        }

        #[test]
        fn any_id_and_length_is_recovered(len in 16usize..4200, id: u16, guess: u16, fill: u8) {
            let p = packet(len, fill, id);
            prop_assert_eq!(solve(&header(guess), &p), Some(id));
        }
    }
}
