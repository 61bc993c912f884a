//! A congestion-control algorithm's parameters set one at a time, by name, from text: what
//! `--cc-param KEY=VALUE` and `ROCE_VERBS_CC_PARAMS` give a device on real packets. The names
//! are the fields of [`DcqcnConfig`], [`DctcpConfig`], [`TimelyConfig`] and [`HpccConfig`],
//! the keys of a network scenario's `[network.dcqcn]` … `[network.hpcc]` tables.

use crate::config::{Congestion, DcqcnConfig, DctcpConfig, HpccConfig, TimelyConfig};

/// Why a parameter was not set; the configuration is then as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// The algorithm has no parameter of that name.
    #[error("{algorithm} has no parameter {key:?}; its parameters: {}", .known.join(", "))]
    UnknownKey {
        /// The algorithm's name.
        algorithm: &'static str,
        /// The name given.
        key: String,
        /// The names it has.
        known: &'static [&'static str],
    },
    /// The value does not parse as the parameter's type.
    #[error("{key}={value:?}: {expected}")]
    BadValue {
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
    /// No congestion control runs, so there is nothing to set.
    #[error("{key}: no congestion control runs (choose one with --cc or ROCE_VERBS_CC)")]
    NoAlgorithm {
        /// The parameter given.
        key: String,
    },
}

/// A value of a parameter's type, from text.
trait Param: Sized {
    const EXPECTED: &'static str;
    fn parse(text: &str) -> Option<Self>;
}

impl Param for u32 {
    const EXPECTED: &'static str = "a whole number from 0 to 4294967295";
    fn parse(text: &str) -> Option<Self> {
        text.trim().parse().ok()
    }
}

impl Param for bool {
    const EXPECTED: &'static str = "true or false";
    fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        }
    }
}

fn parse<T: Param>(key: &str, value: &str) -> Result<T, ParamError> {
    T::parse(value).ok_or_else(|| ParamError::BadValue {
        key: key.to_owned(),
        value: value.to_owned(),
        expected: T::EXPECTED,
    })
}

/// `PARAMS` (the names) and `set` for a configuration's fields.
macro_rules! params {
    ($config:ty, $algorithm:literal, [$($field:ident),* $(,)?]) => {
        impl $config {
            /// The parameters [`Self::set`] takes: the fields' names.
            pub const PARAMS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Sets the field `key` names to `value`, or leaves every field as it was.
            pub fn set(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
                match key {
                    $(stringify!($field) => self.$field = parse(key, value)?,)*
                    _ => {
                        return Err(ParamError::UnknownKey {
                            algorithm: $algorithm,
                            key: key.to_owned(),
                            known: Self::PARAMS,
                        })
                    }
                }
                Ok(())
            }
        }
    };
}

params!(
    DcqcnConfig,
    "dcqcn",
    [
        rpg_time_reset,
        rpg_byte_reset,
        rpg_threshold,
        stages_by_timer,
        rpg_ai_rate,
        rpg_hai_rate,
        rpg_gd,
        rpg_min_dec_fac,
        rpg_min_rate,
        dce_tcp_g,
        dce_tcp_rtt,
        alpha_on_cnp,
        initial_alpha_value,
        clamp_tgt_rate,
        clamp_tgt_rate_after_time_inc,
        rate_to_set_on_first_cnp,
        rate_reduce_monitor_period,
        decrease_on_tick,
        min_time_between_cnps,
        window_rtt_ns,
    ]
);
params!(
    DctcpConfig,
    "dctcp",
    [shift_g, initial_alpha, rate_ai, min_rate, base_rtt_ns]
);
params!(
    TimelyConfig,
    "timely",
    [
        t_low_ns,
        t_high_ns,
        min_rtt_ns,
        alpha,
        beta,
        rate_ai,
        rate_hai,
        hai_thresh,
        min_rate,
        window_rtt_ns,
    ]
);
params!(
    HpccConfig,
    "hpcc",
    [
        eta,
        max_stage,
        rate_ai,
        min_rate,
        base_rtt_ns,
        fast_react,
        pint,
        pint_log_base,
        pint_prob,
        window_payload
    ]
);

impl Congestion {
    /// Sets the running algorithm's parameter `key` to `value` ([`DcqcnConfig::set`] and the
    /// others), or leaves it as it was.
    pub fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        match self {
            Self::Dcqcn(c) => c.set(key, value),
            Self::Dctcp(c) => c.set(key, value),
            Self::Timely(c) => c.set(key, value),
            Self::Hpcc(c) => c.set(key, value),
            Self::None => Err(ParamError::NoAlgorithm {
                key: key.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_is_set_by_its_field_name() {
        let mut hpcc = Congestion::Hpcc(HpccConfig::default());
        hpcc.set_param("base_rtt_ns", "400000").unwrap();
        hpcc.set_param("fast_react", "false").unwrap();
        let Congestion::Hpcc(h) = hpcc else {
            unreachable!()
        };
        assert_eq!(h.base_rtt_ns, 400_000);
        assert!(!h.fast_react);
        // The others stay the algorithm's defaults.
        assert_eq!(h.eta, HpccConfig::default().eta);

        let mut dcqcn = Congestion::Dcqcn(DcqcnConfig::default());
        dcqcn.set_param("rpg_ai_rate", "40").unwrap();
        dcqcn.set_param("alpha_on_cnp", "1").unwrap();
        assert_eq!(
            dcqcn,
            Congestion::Dcqcn(DcqcnConfig {
                rpg_ai_rate: 40,
                alpha_on_cnp: true,
                ..DcqcnConfig::default()
            })
        );
    }

    #[test]
    fn every_name_sets_its_own_field() {
        // Each name, set to a value no default has, changes the configuration: no name is
        // listed without a field behind it.
        for &key in DcqcnConfig::PARAMS {
            let mut c = DcqcnConfig::default();
            let value = if matches!(
                key,
                "alpha_on_cnp" | "clamp_tgt_rate" | "decrease_on_tick" | "stages_by_timer"
            ) {
                "true"
            } else if key == "clamp_tgt_rate_after_time_inc" {
                "false"
            } else {
                "77777"
            };
            c.set(key, value).unwrap();
            assert_ne!(c, DcqcnConfig::default(), "{key}");
        }
        for &key in DctcpConfig::PARAMS {
            let mut c = DctcpConfig::default();
            c.set(key, "77777").unwrap();
            assert_ne!(c, DctcpConfig::default(), "{key}");
        }
        for &key in TimelyConfig::PARAMS {
            let mut c = TimelyConfig::default();
            c.set(key, "77777").unwrap();
            assert_ne!(c, TimelyConfig::default(), "{key}");
        }
        for &key in HpccConfig::PARAMS {
            let mut c = HpccConfig::default();
            c.set(
                key,
                if key == "fast_react" {
                    "false"
                } else if key == "pint" || key == "window_payload" {
                    "true"
                } else {
                    "77777"
                },
            )
            .unwrap();
            assert_ne!(c, HpccConfig::default(), "{key}");
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_names_there_are_and_nothing_changes() {
        let mut hpcc = Congestion::Hpcc(HpccConfig::default());
        let err = hpcc.set_param("rpg_ai_rate", "5").unwrap_err();
        assert_eq!(
            err.to_string(),
            "hpcc has no parameter \"rpg_ai_rate\"; its parameters: eta, max_stage, rate_ai, \
             min_rate, base_rtt_ns, fast_react, pint, pint_log_base, pint_prob, window_payload"
        );
        assert_eq!(hpcc, Congestion::Hpcc(HpccConfig::default()));
    }

    #[test]
    fn a_value_that_does_not_parse_is_refused_and_nothing_changes() {
        let mut timely = Congestion::Timely(TimelyConfig::default());
        for bad in ["-1", "1.5", "", "4294967296", "fast"] {
            let err = timely.set_param("t_low_ns", bad).unwrap_err();
            assert!(matches!(err, ParamError::BadValue { .. }), "{bad:?}: {err}");
        }
        let err = timely.set_param("t_low_ns", "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t_low_ns=\"x\": a whole number from 0 to 4294967295"
        );
        assert_eq!(timely, Congestion::Timely(TimelyConfig::default()));
        let mut hpcc = Congestion::Hpcc(HpccConfig::default());
        assert!(hpcc.set_param("fast_react", "yes").is_err());
        assert_eq!(hpcc, Congestion::Hpcc(HpccConfig::default()));
    }

    #[test]
    fn without_an_algorithm_there_is_nothing_to_set() {
        let mut none = Congestion::None;
        let err = none.set_param("eta", "990").unwrap_err();
        assert!(matches!(err, ParamError::NoAlgorithm { .. }), "{err}");
        assert_eq!(none, Congestion::None);
    }
}
