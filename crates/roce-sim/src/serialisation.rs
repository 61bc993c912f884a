//! How long a packet takes on a link: its bytes at the line rate, rounded up to the nanosecond,
//! and a one-entry memo of it for the ports that ask once per packet.

/// Nanoseconds `bytes` take at `rate_bps` (0 counts as 1), rounded up.
pub(crate) fn serialisation_nanos(bytes: u64, rate_bps: u64) -> u64 {
    (bytes * 8 * 1_000_000_000).div_ceil(rate_bps.max(1))
}

/// The last length and rate a port serialised and its time: most packets of a run are of a
/// few lengths, and a hit saves a 64-bit division.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LastSerialised {
    bytes: u64,
    rate_bps: u64,
    nanos: u64,
}

impl LastSerialised {
    /// [`serialisation_nanos`], remembered for the next call.
    #[inline]
    pub(crate) fn nanos(&mut self, bytes: u64, rate_bps: u64) -> u64 {
        if (self.bytes, self.rate_bps) != (bytes, rate_bps) {
            *self = Self {
                bytes,
                rate_bps,
                nanos: serialisation_nanos(bytes, rate_bps),
            };
        }
        self.nanos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo answers what the formula does, whatever the lengths and rates asked before,
    /// the zero it starts from included.
    #[test]
    fn the_memo_is_the_formula() {
        let mut last = LastSerialised::default();
        let asks = [
            (0, 0),
            (1086, 100_000_000_000),
            (1086, 100_000_000_000),
            (1086, 400_000_000_000),
            (64, 400_000_000_000),
            (1086, 100_000_000_000),
            (9000, 0),
        ];
        for (bytes, rate) in asks {
            assert_eq!(
                last.nanos(bytes, rate),
                serialisation_nanos(bytes, rate),
                "{bytes} B at {rate}"
            );
        }
        assert_eq!(
            serialisation_nanos(1086, 100_000_000_000),
            87,
            "86.88 ns, rounded up"
        );
    }
}
