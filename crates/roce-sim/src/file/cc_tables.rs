//! The congestion-control tables of a network scenario: `[network.dcqcn]`, `[network.dctcp]`,
//! `[network.timely]` and `[network.hpcc]`, each the parameters of one algorithm (named as the
//! fields of [`DcqcnConfig`], [`DctcpConfig`], [`TimelyConfig`], [`HpccConfig`], and set by
//! their `set`, as `--cc-param` sets them on a device) over the profile `network.congestion`
//! names. `--set network.dctcp.rate_ai=100` changes one as the file
//! would.
//!
//! A scenario may carry the tables of several algorithms: only the one `network.congestion`
//! chooses applies, so `--set network.congestion=hpcc`, or a sweep over `network.congestion`,
//! runs each algorithm with its own parameters. Every table is read and checked all the same (an
//! unknown key is refused in a table that is not used, as in one that is). Each table may hold
//! an `ecn` table (`[network.dctcp.ecn]`, the keys of `[network.ecn]`): the switches' marking
//! when that algorithm runs, in place of `[network.ecn]`, as HPCC's `run.py` gives DCTCP its own
//! threshold.

use anyhow::{anyhow, bail};
use roce_core::{Congestion, DcqcnConfig, DctcpConfig, HpccConfig, TimelyConfig};
use serde::Deserialize;

use super::scenario::CongestionName;
use super::switch_keys::EcnFile;
use crate::EcnMarking;

/// One algorithm's table: its parameters, named as the fields of its configuration and set
/// through [`Congestion::set_param`] (the names `--cc-param` gives a device on real packets),
/// and the switches' marking when it runs.
#[derive(Debug, Default, Deserialize)]
pub(super) struct CcFile {
    /// The switches' marking when this algorithm runs, in place of `[network.ecn]`.
    ecn: Option<EcnFile>,
    /// Every other key: a parameter, a whole number or a boolean.
    #[serde(flatten)]
    params: toml::Table,
}

impl CcFile {
    /// Sets the table `[network.<table>]`'s parameters on `congestion`, its algorithm; the first
    /// that the algorithm does not take or whose value does not fit is refused.
    fn apply(&self, table: &str, congestion: &mut Congestion) -> anyhow::Result<()> {
        for (key, value) in &self.params {
            let text = match value {
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => bail!("network.{table}.{key} = {other}: a whole number or true/false"),
            };
            congestion
                .set_param(key, &text)
                .map_err(|err| anyhow!("network.{table}: {err}"))?;
        }
        Ok(())
    }

    /// The table's `ecn` table, checked: the switches' marking when its algorithm runs.
    fn marking(&self, table: &str) -> anyhow::Result<Option<EcnMarking>> {
        self.ecn
            .as_ref()
            .map(|e| e.marking(&format!("network.{table}.ecn")))
            .transpose()
    }
}

/// The tables of a network scenario, one per algorithm.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tables<'a> {
    pub(super) dcqcn: &'a Option<CcFile>,
    pub(super) dctcp: &'a Option<CcFile>,
    pub(super) timely: &'a Option<CcFile>,
    pub(super) hpcc: &'a Option<CcFile>,
}

/// What `network.congestion` chose: the algorithm with its table's parameters over its profile,
/// and the marking its table gives, if any.
#[derive(Debug)]
pub(super) struct Chosen {
    pub(super) congestion: Congestion,
    /// The chosen algorithm's `ecn` table, checked: the switches' marking instead of
    /// `[network.ecn]`.
    pub(super) ecn: Option<EcnMarking>,
}

/// The algorithm `name` names, with the parameters of its table (`[network.dcqcn]`,
/// `[network.dctcp]`, `[network.timely]`, `[network.hpcc]`) over its profile. The tables of the
/// other algorithms are not used, but they are checked as the chosen one is: their parameters
/// over their defaults, their `ecn` tables.
pub(super) fn congestion(name: CongestionName, t: Tables<'_>) -> anyhow::Result<Chosen> {
    // Each table with its name and its algorithm at its defaults.
    let tables = [
        ("dcqcn", t.dcqcn, Congestion::Dcqcn(DcqcnConfig::default())),
        ("dctcp", t.dctcp, Congestion::Dctcp(DctcpConfig::default())),
        (
            "timely",
            t.timely,
            Congestion::Timely(TimelyConfig::default()),
        ),
        ("hpcc", t.hpcc, Congestion::Hpcc(HpccConfig::default())),
    ];
    for (table, file, mut defaults) in tables {
        if let Some(file) = file {
            file.apply(table, &mut defaults)?;
            file.marking(table)?;
        }
    }
    let mut congestion = name.nic().config();
    let mut ecn = None;
    // The chosen profile's algorithm's table, if the scenario has one.
    let same = |c: &Congestion| std::mem::discriminant(c) == std::mem::discriminant(&congestion);
    if let Some(&(table, Some(file), _)) = tables.iter().find(|(_, _, c)| same(c)) {
        file.apply(table, &mut congestion)?;
        ecn = file.marking(table)?;
    }
    Ok(Chosen { congestion, ecn })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use roce_core::{Congestion, DcqcnConfig, DctcpConfig, HpccConfig, TimelyConfig};

    use crate::EcnMarking;
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

    /// A scenario with the tables of all four algorithms, DCTCP's with a marking of its own.
    const ALL_FOUR: &str = "[network]\ncongestion = \"dcqcn\"\n\
        [network.dcqcn]\nrpg_ai_rate = 20\nrpg_byte_reset = 4294967295\n\
        [network.dctcp]\nrate_ai = 615\nbase_rtt_ns = 9000\n\
        [network.dctcp.ecn]\nkmin_bytes = 300000\nkmax_bytes = 300000\npmax = 1.0\n\
        [network.timely]\nrate_ai = 100\nrate_hai = 500\n\
        [network.hpcc]\neta = 990\nrate_ai = 40\n\
        [network.ecn]\nkmin_bytes = 400000\nkmax_bytes = 1600000\npmax = 0.2\n";

    /// The built congestion control and switch marking of `text` with `sets`.
    fn built(text: &str, sets: &[&str]) -> (Congestion, Option<EcnMarking>) {
        let sets: Vec<Set> = sets.iter().map(|s| s.parse().unwrap()).collect();
        let s = load(
            Path::new("t.toml"),
            &format!("{BASE}{text}"),
            None,
            false,
            &sets,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (s.config.host.nic.congestion, s.config.switch.ecn)
    }

    #[test]
    fn only_the_chosen_algorithms_table_applies() {
        let red = Some(EcnMarking {
            k_min_bytes: 400_000,
            k_max_bytes: 1_600_000,
            p_max: 0.2,
        });
        let dcqcn = DcqcnConfig {
            rpg_ai_rate: 20,
            rpg_byte_reset: u32::MAX,
            ..DcqcnConfig::default()
        };
        assert_eq!(built(ALL_FOUR, &[]), (Congestion::Dcqcn(dcqcn), red));
        assert_eq!(
            built(ALL_FOUR, &["network.congestion=dcqcn-paper"]).0,
            Congestion::Dcqcn(DcqcnConfig {
                rpg_ai_rate: 20,
                rpg_byte_reset: u32::MAX,
                ..DcqcnConfig::paper()
            })
        );
        // DCTCP: its rate_ai, not HPCC's or TIMELY's, and its own marking.
        assert_eq!(
            built(ALL_FOUR, &["network.congestion=dctcp"]),
            (
                Congestion::Dctcp(DctcpConfig {
                    rate_ai: 615,
                    base_rtt_ns: 9000,
                    ..DctcpConfig::default()
                }),
                Some(EcnMarking {
                    k_min_bytes: 300_000,
                    k_max_bytes: 300_000,
                    p_max: 1.0,
                })
            )
        );
        // TIMELY and HPCC: their own values, not DCTCP's base_rtt_ns or rate_ai, and
        // [network.ecn] (DCTCP's marking stays DCTCP's).
        assert_eq!(
            built(ALL_FOUR, &["network.congestion=timely"]),
            (
                Congestion::Timely(TimelyConfig {
                    rate_ai: 100,
                    rate_hai: 500,
                    ..TimelyConfig::default()
                }),
                red
            )
        );
        assert_eq!(
            built(ALL_FOUR, &["network.congestion=hpcc"]),
            (
                Congestion::Hpcc(HpccConfig {
                    eta: 990,
                    rate_ai: 40,
                    ..HpccConfig::default()
                }),
                red
            )
        );
        // The windowed profiles take their algorithm's table, over a window of 13 µs.
        assert_eq!(
            built(ALL_FOUR, &["network.congestion=dcqcn-vwin"]).0,
            Congestion::Dcqcn(DcqcnConfig {
                window_rtt_ns: 13_000,
                ..dcqcn
            })
        );
        assert_eq!(
            built(ALL_FOUR, &["network.congestion=timely-vwin"]).0,
            Congestion::Timely(TimelyConfig {
                rate_ai: 100,
                rate_hai: 500,
                window_rtt_ns: 13_000,
                ..TimelyConfig::default()
            })
        );
        assert_eq!(
            built(ALL_FOUR, &["network.congestion=none"]),
            (Congestion::None, red)
        );
    }

    #[test]
    fn an_unknown_algorithm_or_key_is_refused_in_any_table() {
        let err = congestion("[network]\ncongestion = \"hpc\"\n", &[]).unwrap_err();
        assert!(
            err.contains("unknown variant `hpc`") && err.contains("`hpcc`"),
            "{err}"
        );
        let err = congestion(ALL_FOUR, &["network.congestion=swift"]).unwrap_err();
        assert!(err.contains("unknown variant `swift`"), "{err}");
        // A typo in a table that is not used is refused as in the one that is.
        let err = congestion(
            "[network]\ncongestion = \"dctcp\"\n[network.dctcp]\ng = 4\n",
            &[],
        )
        .unwrap_err();
        assert!(
            err.contains("network.dctcp: dctcp has no parameter \"g\"; its parameters: shift_g"),
            "{err}"
        );
        let err = congestion(ALL_FOUR, &["network.timely.t_lo_ns=1"]).unwrap_err();
        assert!(err.contains("timely has no parameter \"t_lo_ns\""), "{err}");
        // A value of the wrong kind or out of range, in any table.
        let err = congestion(ALL_FOUR, &["network.hpcc.eta=-1"]).unwrap_err();
        assert!(
            err.contains("network.hpcc: eta=\"-1\": a whole number"),
            "{err}"
        );
        let err = congestion(ALL_FOUR, &["network.dcqcn.alpha_on_cnp=2"]).unwrap_err();
        assert!(err.contains("alpha_on_cnp=\"2\": true or false"), "{err}");
        let err = congestion(ALL_FOUR, &["network.dctcp.rate_ai=1.5"]).unwrap_err();
        assert!(
            err.contains("network.dctcp.rate_ai = 1.5: a whole number or true/false"),
            "{err}"
        );
        // And so is a marking that cannot be, in any algorithm's table.
        let err = congestion(ALL_FOUR, &["network.dctcp.ecn.pmax=2.0"]).unwrap_err();
        assert!(
            err.contains("network.dctcp.ecn.pmax = 2: from 0 to 1"),
            "{err}"
        );
        let err = congestion(ALL_FOUR, &["network.timely.ecn.kmin_bytes=1"]).unwrap_err();
        assert!(err.contains("missing field `kmax_bytes`"), "{err}");
    }
}
