//! The largest base RTT between two hosts of a network, and a congestion control whose RTT
//! setting strays far from it.
//!
//! HPCC's ns-3 takes T from the topology: `third.cc` computes every host pair's base RTT
//! (`pairRtt`: twice the links' delays plus one packet's serialization at each hop) and, with
//! `GLOBAL_T 1` as `run.py` sets it, gives every QP the largest (`maxRtt`) as HPCC's T and
//! the window's RTT (`maxBdp` = maxRtt × rate), for HPCC, DCTCP and the windowed profiles
//! alike. Here those are the algorithm's settings (HPCC's `base_rtt_ns`, 13 µs by default:
//! about HPCC's fat tree's), which a scenario on another fabric keeps unless it sets them.
//! [`rtt_note`] says when one is more than a quarter off the topology's, and what to set.

use roce_core::{Congestion, Duration};

use super::Network;

/// How far (either way) a setting may stray from the topology's RTT before [`rtt_note`] speaks:
/// a quarter, the tolerance of the comparison with ns-3 (docs/congestion.md).
const STRAY: f64 = 1.25;

impl Network {
    /// The largest base RTT between two hosts, as `third.cc`'s `maxRtt` (with a packet of the
    /// hosts' path MTU, where ns-3 takes its `packet_payload_size`).
    pub fn max_base_rtt(&self) -> Duration {
        let mtu = u64::from(self.config.host.mtu.bytes());
        let hosts: Vec<_> = self.routes.topology().hosts().collect();
        let mut max = Duration::ZERO;
        for &a in &hosts {
            for &b in &hosts {
                if let Some(path) = self.routes.path_info(a, b, mtu) {
                    max = max.max(path.base_rtt());
                }
            }
        }
        max
    }
}

/// A sentence for the user when `congestion` runs with an RTT setting (HPCC's T, the window's
/// RTT of DCTCP and of the windowed DCQCN and TIMELY) more than a quarter away from
/// `max_rtt`, the topology's largest base RTT ([`Network::max_base_rtt`]); `None` otherwise,
/// and for an algorithm with no such setting (or with its window off).
pub fn rtt_note(congestion: &Congestion, max_rtt: Duration) -> Option<String> {
    let (what, key, ns) = match congestion {
        Congestion::Hpcc(c) => ("HPCC's T", "network.hpcc.base_rtt_ns", c.base_rtt_ns),
        Congestion::Dctcp(c) if c.base_rtt_ns > 0 => (
            "DCTCP's window RTT",
            "network.dctcp.base_rtt_ns",
            c.base_rtt_ns,
        ),
        Congestion::Dcqcn(c) if c.window_rtt_ns > 0 => (
            "DCQCN's window RTT",
            "network.dcqcn.window_rtt_ns",
            c.window_rtt_ns,
        ),
        Congestion::Timely(c) if c.window_rtt_ns > 0 => (
            "TIMELY's window RTT",
            "network.timely.window_rtt_ns",
            c.window_rtt_ns,
        ),
        _ => return None,
    };
    let topology = max_rtt.as_nanos();
    if topology == 0 {
        return None;
    }
    let ratio = f64::from(ns) / topology as f64;
    if (1.0 / STRAY..=STRAY).contains(&ratio) {
        return None;
    }
    Some(format!(
        "{what} ({key}) is {:.1} µs, and the largest base RTT between two hosts of this \
         topology is {:.1} µs (twice the links' delays and a packet's serialization at each \
         hop: ns-3's maxRtt, which it takes as T and as the window's RTT); \
         `--set {key}={topology}` runs as ns-3 would",
        f64::from(ns) / 1e3,
        topology as f64 / 1e3
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_core::{DcqcnConfig, DctcpConfig, HpccConfig, TimelyConfig};

    const RTT: Duration = Duration::from_nanos(4_000);

    #[test]
    fn the_largest_base_rtt_is_the_farthest_pairs_as_third_cc_counts_it() {
        use crate::topology::fat_tree;
        const G100: u64 = 100_000_000_000;
        // Hosts in different pods are six links apart through a core: 2 × 6 µs of delay, and
        // a 1 024-byte packet's serialization on two 100 Gb/s host links (81 ns each, rounded
        // down as third.cc's integer nanoseconds) and four 400 Gb/s ones (20 ns each). (With
        // ns-3's 1 000-byte packets the same sum is HPCC's maxRtt of 12 240 ns.)
        let topology = fat_tree(4, G100, 4 * G100, Duration::from_micros(1)).unwrap();
        let network = Network::new(topology, super::super::NetworkConfig::default()).unwrap();
        assert_eq!(network.config.host.mtu.bytes(), 1024);
        assert_eq!(
            network.max_base_rtt(),
            Duration::from_nanos(12_000 + 2 * 81 + 4 * 20)
        );
    }

    /// HPCC with T = `ns`.
    fn hpcc(ns: u32) -> Congestion {
        Congestion::Hpcc(HpccConfig {
            base_rtt_ns: ns,
            ..HpccConfig::default()
        })
    }

    #[test]
    fn a_setting_within_a_quarter_of_the_topologys_rtt_says_nothing() {
        for ns in [3_201, 4_000, 5_000] {
            assert_eq!(rtt_note(&hpcc(ns), RTT), None, "{ns} ns");
        }
    }

    #[test]
    fn a_setting_a_quarter_off_names_its_key_and_the_topologys_value() {
        for ns in [3_000, 5_100, 13_000] {
            let note = rtt_note(&hpcc(ns), RTT).expect("a note");
            assert!(
                note.starts_with("HPCC's T (network.hpcc.base_rtt_ns)"),
                "{note}"
            );
            assert!(note.contains("is 4.0 µs"), "{note}");
            assert!(
                note.contains("--set network.hpcc.base_rtt_ns=4000"),
                "{note}"
            );
        }
        let windowed = [
            (
                Congestion::Dctcp(DctcpConfig {
                    base_rtt_ns: 13_000,
                    ..DctcpConfig::default()
                }),
                "network.dctcp.base_rtt_ns=4000",
            ),
            (
                Congestion::Dcqcn(DcqcnConfig {
                    window_rtt_ns: 13_000,
                    ..DcqcnConfig::default()
                }),
                "network.dcqcn.window_rtt_ns=4000",
            ),
            (
                Congestion::Timely(TimelyConfig {
                    window_rtt_ns: 13_000,
                    ..TimelyConfig::default()
                }),
                "network.timely.window_rtt_ns=4000",
            ),
        ];
        for (congestion, set) in windowed {
            let note = rtt_note(&congestion, RTT).expect("a note");
            assert!(note.contains(set), "{note}");
        }
    }

    #[test]
    fn no_window_or_no_rtt_setting_says_nothing() {
        let far = Duration::from_nanos(100);
        for congestion in [
            Congestion::None,
            Congestion::Dcqcn(DcqcnConfig::default()),
            Congestion::Timely(TimelyConfig {
                window_rtt_ns: 0,
                ..TimelyConfig::default()
            }),
            Congestion::Dctcp(DctcpConfig {
                base_rtt_ns: 0,
                ..DctcpConfig::default()
            }),
        ] {
            assert_eq!(rtt_note(&congestion, far), None, "{congestion:?}");
        }
        let hpcc = Congestion::Hpcc(HpccConfig::default());
        assert_eq!(rtt_note(&hpcc, Duration::ZERO), None);
    }
}
