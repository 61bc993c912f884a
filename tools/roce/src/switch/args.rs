//! The values of `roce switch --rate`, `--ecn` and `--pfc`, and why one is refused.

use roce_sim::EcnMarking;
use roce_sim::switch::Pfc;

/// Why a `--rate`, `--ecn` or `--pfc` value is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(super) enum ArgError {
    /// `--rate` is not a number with an optional k, m or g.
    #[error("{0:?} is not a rate such as 1g, 200m or 5000000")]
    NotARate(String),
    /// `--rate` is out of range.
    #[error("{0}: a rate is between 1k and 10000g bits per second")]
    RateRange(String),
    /// `--ecn` is not three values.
    #[error("{0:?}: expected KMIN,KMAX,PMAX such as 5000,50000,0.1")]
    EcnShape(String),
    /// A threshold is not a byte count.
    #[error("{field} {text:?} is not bytes")]
    NotBytes {
        /// KMIN, KMAX, XOFF or XON.
        field: &'static str,
        /// What was given.
        text: String,
    },
    /// PMAX is not a number.
    #[error("PMAX {0:?} is not a number")]
    PmaxNotANumber(String),
    /// The marking thresholds are not in order.
    #[error("KMIN {kmin} must be below KMAX {kmax}")]
    KminNotBelowKmax {
        /// KMIN.
        kmin: usize,
        /// KMAX.
        kmax: usize,
    },
    /// PMAX is outside 0..=1.
    #[error("PMAX {0} is a probability: 0 to 1")]
    PmaxNotAProbability(f64),
    /// `--pfc` is not two values.
    #[error("{0:?}: expected XOFF,XON bytes such as 60000,40000")]
    PfcShape(String),
    /// The pause thresholds are not in order.
    #[error("XON {xon} must not be above XOFF {xoff}")]
    XonAboveXoff {
        /// XON.
        xon: usize,
        /// XOFF.
        xoff: usize,
    },
}

impl ArgError {
    fn not_bytes(field: &'static str, text: &str) -> Self {
        Self::NotBytes {
            field,
            text: text.to_owned(),
        }
    }
}

/// `1g`, `200m`, `10000k` or plain bits per second.
pub(super) fn parse_rate(text: &str) -> Result<u64, ArgError> {
    let lower = text.to_ascii_lowercase();
    let (digits, scale) = match lower.strip_suffix(['k', 'm', 'g']) {
        Some(digits) => (
            digits,
            match lower.as_bytes()[lower.len() - 1] {
                b'k' => 1e3,
                b'm' => 1e6,
                _ => 1e9,
            },
        ),
        None => (lower.as_str(), 1.0),
    };
    let value: f64 = digits
        .parse()
        .map_err(|_| ArgError::NotARate(text.to_owned()))?;
    let bps = value * scale;
    if (1e3..=1e13).contains(&bps) {
        Ok(bps as u64)
    } else {
        Err(ArgError::RateRange(text.to_owned()))
    }
}

/// `KMIN,KMAX,PMAX`.
pub(super) fn parse_ecn(text: &str) -> Result<EcnMarking, ArgError> {
    let parts: Vec<&str> = text.split(',').collect();
    let [kmin, kmax, pmax] = parts.as_slice() else {
        return Err(ArgError::EcnShape(text.to_owned()));
    };
    let k_min_bytes = bytes("KMIN", kmin)?;
    let k_max_bytes = bytes("KMAX", kmax)?;
    let p_max: f64 = pmax
        .trim()
        .parse()
        .map_err(|_| ArgError::PmaxNotANumber(pmax.to_string()))?;
    if k_min_bytes >= k_max_bytes {
        return Err(ArgError::KminNotBelowKmax {
            kmin: k_min_bytes,
            kmax: k_max_bytes,
        });
    }
    if !(0.0..=1.0).contains(&p_max) {
        return Err(ArgError::PmaxNotAProbability(p_max));
    }
    Ok(EcnMarking {
        k_min_bytes,
        k_max_bytes,
        p_max,
    })
}

/// A byte count, the field named `field` of an option.
fn bytes(field: &'static str, text: &str) -> Result<usize, ArgError> {
    text.trim()
        .parse()
        .map_err(|_| ArgError::not_bytes(field, text))
}

/// `XOFF,XON` on priority 3, pausing for 65535 quanta at a time.
pub(super) fn parse_pfc(text: &str) -> Result<Pfc, ArgError> {
    let Some((xoff, xon)) = text.split_once(',') else {
        return Err(ArgError::PfcShape(text.to_owned()));
    };
    let xoff_bytes = bytes("XOFF", xoff)?;
    let xon_bytes = bytes("XON", xon)?;
    if xon_bytes > xoff_bytes {
        return Err(ArgError::XonAboveXoff {
            xon: xon_bytes,
            xoff: xoff_bytes,
        });
    }
    Ok(Pfc {
        xoff_bytes,
        xon_bytes,
        pause_quanta: u16::MAX,
        priorities: 1 << 3,
    })
}
