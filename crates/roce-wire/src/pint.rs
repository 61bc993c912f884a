//! HPCC-PINT's telemetry value (Ben Basat et al., "PINT: Probabilistic In-band Network
//! Telemetry", SIGCOMM 2020, §4.3), as HPCC's ns-3 computes it (CC_MODE 10;
//! `simulation/src/point-to-point/model/pint.cc` and `switch-node.cc` `SwitchNotifyDequeue`,
//! alibaba-edu/High-Precision-Congestion-Control): each switch egress keeps an estimate U of its
//! utilisation, updated by every PINT packet that leaves it, and raises the packet's value to
//! its own U, encoded on a log scale; the sender reads the path's largest U from the echo. The
//! header that carries the value is [`crate::int`]'s PINT header.

/// ns-3's `Pint::max_concurrent`: the encoding's unit is 1/512 of a link (the smallest
/// utilisation it tells from none).
pub const MAX_CONCURRENT: f64 = 512.0;

/// The value that carries utilisation `u` at log base `base` (above 1): ⌈u·512⌉ (at least 1)
/// on a log scale, rounded up or down at random so that the expectation is exact — up with
/// the probability of its distance from the lower step, by `draw`, uniform over all `u16`s
/// (ns-3 `Pint::encode_u`, whose `rand() % 65536` it stands for).
pub fn encode(u: f64, base: f64, draw: u16) -> u16 {
    let units = (u * MAX_CONCURRENT).ceil().max(1.0);
    // The step at or below `units`, and the next one up (ns-3 takes ⌈power⌉ and ⌊power⌋, and
    // the step above when the two are one): the same pair.
    let lower = (units.ln() / base.ln())
        .floor()
        .min(f64::from(u16::MAX - 1)) as u16;
    let at_lower = decode(lower, base) * MAX_CONCURRENT;
    round(units, lower, (at_lower, at_lower * base), draw)
}

/// `units` between step `lower` and the next, whose values are `at`: the next step with the
/// probability of its distance from `lower`'s, by `draw`.
#[inline]
fn round(units: f64, lower: u16, (at_lower, at_upper): (f64, f64), draw: u16) -> u16 {
    let p_up = (units - at_lower) / (at_upper - at_lower);
    if f64::from(draw) < p_up * 65536.0 {
        lower + 1
    } else {
        lower
    }
}

/// [`encode`] at one log base, by table for utilisations up to [`Scale::TABLE_UNITS`]/512 (a
/// queue of several BDPs): a switch encodes at every hop of every PINT packet, and a logarithm
/// and a power per hop were a tenth of a fat-tree run. The same values as [`encode`].
#[derive(Debug, Clone)]
pub struct Scale {
    base: f64,
    /// base^k, k = 0, 1, …, one past the step above [`Scale::TABLE_UNITS`].
    steps: Box<[f64]>,
    /// For each whole number of units up to [`Scale::TABLE_UNITS`], the largest k with
    /// base^k ≤ units.
    lower: Box<[u16]>,
}

impl Scale {
    /// Units (⌈U·512⌉) the table covers: U up to 8.
    pub const TABLE_UNITS: usize = 4096;

    /// The table of log base `base` (above 1).
    pub fn new(base: f64) -> Self {
        let mut steps = vec![1.0];
        while steps.len() < 2 || steps[steps.len() - 2] <= Self::TABLE_UNITS as f64 {
            steps.push(base.powi(steps.len() as i32));
        }
        let mut lower = vec![0u16; Self::TABLE_UNITS + 1];
        let mut k = 0;
        for (units, slot) in lower.iter_mut().enumerate().skip(1) {
            while steps[k + 1] <= units as f64 {
                k += 1;
            }
            *slot = k as u16;
        }
        Self {
            base,
            steps: steps.into(),
            lower: lower.into(),
        }
    }

    /// The log base.
    pub fn base(&self) -> f64 {
        self.base
    }

    /// [`encode`]`(u, self.base(), draw)`.
    #[inline]
    pub fn encode(&self, u: f64, draw: u16) -> u16 {
        let units = (u * MAX_CONCURRENT).ceil().max(1.0);
        if units > Self::TABLE_UNITS as f64 {
            return encode(u, self.base, draw);
        }
        let lower = self.lower[units as usize];
        let at = usize::from(lower);
        round(units, lower, (self.steps[at], self.steps[at + 1]), draw)
    }
}

impl PartialEq for Scale {
    fn eq(&self, other: &Self) -> bool {
        self.base == other.base
    }
}

/// The utilisation a value carries at log base `base` (ns-3 `Pint::decode_u`).
pub fn decode(value: u16, base: f64) -> f64 {
    base.powi(i32::from(value)) / MAX_CONCURRENT
}

/// One switch egress's utilisation estimate (ns-3 `SwitchNode`'s `m_u`, `m_lastPktTs` and
/// `m_lastPktSize` of a port).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Meter {
    /// U as of the last PINT packet.
    u: f64,
    /// When the last packet of any kind left, ns.
    last_ns: u64,
    /// That packet's length, bytes (0 before the first).
    last_bytes: u64,
}

impl Meter {
    /// The estimate as of the last PINT packet.
    pub fn utilisation(&self) -> f64 {
        self.u
    }

    /// A PINT packet leaves at `now_ns`, leaving `queue_bytes` queued behind it, on a port of
    /// `rate_bps`, with T = `t_ns` (ns-3's `maxRtt`, the fabric's largest base RTT): U becomes
    /// and is returned as
    ///
    /// `qlen·dt/(B·T²) + last/(B·T) + U·(T − dt)/T`,
    ///
    /// dt the time since the port's last packet (at most T), B the port's rate in bytes per
    /// second and `last` that packet's length: an EWMA over T of the queue over the BDP plus
    /// the rate the last packet took. The queue counts in whole 256-byte units and below one
    /// unit as none, as ns-3 does; ns-3 computes the three terms through a 16-bit logarithm
    /// with random rounding (`log2apprx`), here in floating point. Call [`Meter::departed`]
    /// for the packet after.
    pub fn update(&mut self, now_ns: u64, queue_bytes: u64, rate_bps: u64, t_ns: u64) -> f64 {
        let t = t_ns.max(1) as f64;
        let dt = now_ns.saturating_sub(self.last_ns).min(t_ns.max(1)) as f64;
        // 1/(B·T), B in bytes per ns: the BDP's inverse.
        let per_bdp = 8e9 / (rate_bps.max(1) as f64 * t);
        let queue = (queue_bytes >> 8) << 8;
        let (dt_t, mut u) = (dt / t, 0.0);
        if queue > 0 {
            u += dt_t * queue as f64 * per_bdp;
        }
        if self.last_bytes > 0 {
            u += self.last_bytes as f64 * per_bdp;
        }
        if dt_t < 1.0 && self.u > 0.0 {
            u += (1.0 - dt_t) * self.u;
        }
        self.u = u;
        u
    }

    /// A packet of `bytes` (any packet: ns-3 counts them all) left the port at `now_ns`.
    pub fn departed(&mut self, now_ns: u64, bytes: u64) {
        self.last_ns = now_ns;
        self.last_bytes = bytes;
    }
}

#[cfg(test)]
mod tests;
