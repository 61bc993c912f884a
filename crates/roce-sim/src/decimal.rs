//! Exact decimal numbers in text files: `2.5` with a unit of 10^9 is 2 500 000 000, with no float
//! rounding on the way. The HPCC files write rates (`100Gbps`), delays (`1000ns`) and start times
//! (`2.000001`) this way, and the simulator wants integers (bit/s, nanoseconds).

/// `text` (digits, optionally one `.` and more digits; no sign, no exponent) times `unit`, if the
/// product is a whole number that fits a `u64`.
pub(crate) fn scaled(text: &str, unit: u64) -> Option<u64> {
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, f),
        None => (text, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Trailing zeros of the fraction carry no value: "1.500000" at unit 1 is still 3/2 * 1.
    let frac = frac.trim_end_matches('0');
    if frac.len() > 30 {
        return None;
    }
    let mut mantissa: u128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(u128::from(b - b'0'))?;
    }
    let denom = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let product = mantissa.checked_mul(u128::from(unit))?;
    if product % denom != 0 {
        return None;
    }
    u64::try_from(product / denom).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_exactly_and_refuses_what_is_not_whole() {
        assert_eq!(scaled("100", 1_000_000_000), Some(100_000_000_000));
        assert_eq!(scaled("2.5", 1_000_000_000), Some(2_500_000_000));
        assert_eq!(scaled("2.000001", 1_000_000_000), Some(2_000_001_000));
        assert_eq!(scaled("0.000000", 1), Some(0));
        assert_eq!(scaled(".5", 10), Some(5));
        assert_eq!(scaled("1.5", 1), None); // not a whole number of the unit
        assert_eq!(scaled("", 1), None);
        assert_eq!(scaled(".", 1), None);
        assert_eq!(scaled("-1", 1), None);
        assert_eq!(scaled("1e3", 1), None);
        assert_eq!(scaled("1.2.3", 1), None);
        assert_eq!(scaled("99999999999999999999999", 1), None); // overflows u64
    }
}
