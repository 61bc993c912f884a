//! The congestion-control tables of a network scenario: `[network.dcqcn]`, `[network.dctcp]`,
//! `[network.timely]` and `[network.hpcc]`, each the parameters of one algorithm (named as the
//! fields of [`DcqcnConfig`], [`DctcpConfig`], [`TimelyConfig`], [`HpccConfig`]) over the
//! profile `network.congestion`
//! names. `--set network.dctcp.rate_ai=100` changes one as the file would.

use anyhow::bail;
use roce_core::{Congestion, DcqcnConfig, DctcpConfig, HpccConfig, TimelyConfig};
use serde::Deserialize;

use super::scenario::CongestionName;

/// DCQCN knobs over the profile `congestion` names; the names are [`DcqcnConfig`]'s.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DcqcnFile {
    rpg_time_reset: Option<u32>,
    rpg_byte_reset: Option<u32>,
    rpg_threshold: Option<u32>,
    rpg_ai_rate: Option<u32>,
    rpg_hai_rate: Option<u32>,
    rpg_gd: Option<u32>,
    rpg_min_dec_fac: Option<u32>,
    rpg_min_rate: Option<u32>,
    dce_tcp_g: Option<u32>,
    dce_tcp_rtt: Option<u32>,
    initial_alpha_value: Option<u32>,
    clamp_tgt_rate: Option<bool>,
    clamp_tgt_rate_after_time_inc: Option<bool>,
    rate_to_set_on_first_cnp: Option<u32>,
    rate_reduce_monitor_period: Option<u32>,
    min_time_between_cnps: Option<u32>,
}

/// DCTCP's parameters over [`DctcpConfig::default`]; the names are its fields'.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DctcpFile {
    shift_g: Option<u32>,
    initial_alpha: Option<u32>,
    rate_ai: Option<u32>,
    min_rate: Option<u32>,
    base_rtt_ns: Option<u32>,
}

/// TIMELY's parameters over [`TimelyConfig::default`]; the names are its fields'.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TimelyFile {
    t_low_ns: Option<u32>,
    t_high_ns: Option<u32>,
    min_rtt_ns: Option<u32>,
    alpha: Option<u32>,
    beta: Option<u32>,
    rate_ai: Option<u32>,
    rate_hai: Option<u32>,
    hai_thresh: Option<u32>,
    min_rate: Option<u32>,
}

/// HPCC's parameters over [`HpccConfig::default`]; the names are its fields'.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HpccFile {
    eta: Option<u32>,
    max_stage: Option<u32>,
    rate_ai: Option<u32>,
    min_rate: Option<u32>,
    base_rtt_ns: Option<u32>,
    fast_react: Option<bool>,
}

/// The tables of a network scenario, one per algorithm.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tables<'a> {
    pub(super) dcqcn: &'a Option<DcqcnFile>,
    pub(super) dctcp: &'a Option<DctcpFile>,
    pub(super) timely: &'a Option<TimelyFile>,
    pub(super) hpcc: &'a Option<HpccFile>,
}

/// The algorithm `name` names, with the parameters of its table (`[network.dcqcn]`,
/// `[network.dctcp]`, `[network.timely]`, `[network.hpcc]`) over its profile; a table of
/// another algorithm is refused.
pub(super) fn congestion(name: CongestionName, t: Tables<'_>) -> anyhow::Result<Congestion> {
    let Tables {
        dcqcn,
        dctcp,
        timely,
        hpcc,
    } = t;
    {
        let tables = [
            ("dcqcn", dcqcn.is_some()),
            ("dctcp", dctcp.is_some()),
            ("timely", timely.is_some()),
            ("hpcc", hpcc.is_some()),
        ];
        let config = name.nic().config();
        let name = name.as_str();
        for (table, set) in tables {
            let ours = matches!(
                (table, config),
                ("dcqcn", Congestion::Dcqcn(_))
                    | ("dctcp", Congestion::Dctcp(_))
                    | ("timely", Congestion::Timely(_))
                    | ("hpcc", Congestion::Hpcc(_))
            );
            if set && !ours {
                bail!("network.{table} is set but network.congestion is \"{name}\"");
            }
        }
        Ok(match config {
            Congestion::Dcqcn(d) => Congestion::Dcqcn(dcqcn.as_ref().map_or(d, |o| o.over(d))),
            Congestion::Dctcp(d) => Congestion::Dctcp(dctcp.as_ref().map_or(d, |o| o.over(d))),
            Congestion::Timely(t) => Congestion::Timely(timely.as_ref().map_or(t, |o| o.over(t))),
            Congestion::Hpcc(h) => Congestion::Hpcc(hpcc.as_ref().map_or(h, |o| o.over(h))),
            c => c,
        })
    }
}

impl DctcpFile {
    fn over(&self, mut d: DctcpConfig) -> DctcpConfig {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { d.$f = v; } )* };
        }
        set!(shift_g, initial_alpha, rate_ai, min_rate, base_rtt_ns);
        d
    }
}

impl HpccFile {
    fn over(&self, mut h: HpccConfig) -> HpccConfig {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { h.$f = v; } )* };
        }
        set!(eta, max_stage, rate_ai, min_rate, base_rtt_ns, fast_react);
        h
    }
}

impl TimelyFile {
    fn over(&self, mut t: TimelyConfig) -> TimelyConfig {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { t.$f = v; } )* };
        }
        set!(
            t_low_ns, t_high_ns, min_rtt_ns, alpha, beta, rate_ai, rate_hai, hai_thresh, min_rate
        );
        t
    }
}

impl DcqcnFile {
    fn over(&self, mut d: DcqcnConfig) -> DcqcnConfig {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { d.$f = v; } )* };
        }
        set!(
            rpg_time_reset,
            rpg_byte_reset,
            rpg_threshold,
            rpg_ai_rate,
            rpg_hai_rate,
            rpg_gd,
            rpg_min_dec_fac,
            rpg_min_rate,
            dce_tcp_g,
            dce_tcp_rtt,
            initial_alpha_value,
            clamp_tgt_rate,
            clamp_tgt_rate_after_time_inc,
            rate_to_set_on_first_cnp,
            rate_reduce_monitor_period,
            min_time_between_cnps
        );
        d
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use roce_core::{Congestion, DcqcnConfig, DctcpConfig, HpccConfig, TimelyConfig};

    use crate::file::network::load;
    use crate::file::overrides::Set;

    const BASE: &str = "[topology]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 1\n\
        hosts_per_leaf = 2\n[workload]\ncdf = \"websearch\"\nload = 0.1\nduration_us = 10\n";

    fn congestion(text: &str, sets: &[&str]) -> Result<Congestion, String> {
        let sets: Vec<Set> = sets.iter().map(|s| s.parse().unwrap()).collect();
        load(
            Path::new("t.toml"),
            &format!("{BASE}{text}"),
            None,
            false,
            &sets,
        )
        .map(|s| s.config.host.nic.congestion)
        .map_err(|e| format!("{:#}", e.0))
    }

    #[test]
    fn each_algorithm_is_chosen_by_name_with_its_table_over_its_defaults() {
        assert_eq!(
            congestion("[network]\ncongestion = \"dctcp\"\n", &[]),
            Ok(Congestion::Dctcp(DctcpConfig::default()))
        );
        assert_eq!(
            congestion(
                "[network]\ncongestion = \"dctcp\"\n[network.dctcp]\nrate_ai = 100\n",
                &["network.dctcp.base_rtt_ns=8000"]
            ),
            Ok(Congestion::Dctcp(DctcpConfig {
                rate_ai: 100,
                base_rtt_ns: 8000,
                ..DctcpConfig::default()
            }))
        );
        assert_eq!(
            congestion(
                "[network]\ncongestion = \"timely\"\n",
                &["network.timely.t_low_ns=10000", "network.timely.beta=500"]
            ),
            Ok(Congestion::Timely(TimelyConfig {
                t_low_ns: 10_000,
                beta: 500,
                ..TimelyConfig::default()
            }))
        );
        assert_eq!(
            congestion(
                "[network.hpcc]\neta = 990\n",
                &["network.congestion=hpcc", "network.hpcc.fast_react=false"]
            ),
            Ok(Congestion::Hpcc(HpccConfig {
                eta: 990,
                fast_react: false,
                ..HpccConfig::default()
            }))
        );
        assert_eq!(
            congestion(
                "[network]\ncongestion = \"dcqcn\"\n[network.dcqcn]\nrpg_ai_rate = 20\n",
                &[]
            ),
            Ok(Congestion::Dcqcn(DcqcnConfig {
                rpg_ai_rate: 20,
                ..DcqcnConfig::default()
            }))
        );
    }

    #[test]
    fn a_table_of_another_algorithm_or_an_unknown_key_is_refused() {
        let err = congestion(
            "[network]\ncongestion = \"dcqcn\"\n",
            &["network.timely.beta=500"],
        )
        .unwrap_err();
        assert!(
            err.contains("network.timely is set but network.congestion is \"dcqcn\""),
            "{err}"
        );
        let err = congestion("[network]\n[network.dctcp]\nrate_ai = 1\n", &[]).unwrap_err();
        assert!(err.contains("network.congestion is \"none\""), "{err}");
        let err = congestion(
            "[network]\ncongestion = \"dctcp\"\n[network.dctcp]\ng = 4\n",
            &[],
        )
        .unwrap_err();
        assert!(err.contains("unknown field `g`"), "{err}");
    }
}
