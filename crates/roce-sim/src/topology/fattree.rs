//! Generated Clos topologies: a two-tier leaf-spine, the standard k-ary three-tier fat-tree, and
//! the three-tier tree of HPCC's `simulation/mix/fat.txt`.
//!
//! Nodes are numbered as HPCC numbers them: hosts first (0, 1, …, rack by rack), then the switches
//! tier by tier from the hosts up. Links are listed hosts first, then each lower switch's uplinks
//! in id order — for [`hpcc_fat`] exactly the order of `fat.txt`, so that
//! `hpcc_fat().to_hpcc()` is that file line for line.

use roce_core::Duration;

use super::{LinkSpec, NodeId, NodeKind, Topology, TopologyError};

/// A two-tier leaf-spine: `leaves` leaf (ToR) switches with `hosts_per_leaf` hosts each, every
/// leaf linked once to every one of `spines` spine switches.
///
/// Its oversubscription is what a leaf can receive from its hosts over what it can send up:
/// `hosts_per_leaf * host_rate / (spines * fabric_rate)`; 1 is non-blocking, 4 is "4:1".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafSpine {
    /// Leaf (top-of-rack) switches.
    pub leaves: u32,
    /// Spine switches.
    pub spines: u32,
    /// Hosts under each leaf.
    pub hosts_per_leaf: u32,
    /// Host-to-leaf link rate, bit/s.
    pub host_rate_bps: u64,
    /// Leaf-to-spine link rate, bit/s.
    pub fabric_rate_bps: u64,
    /// One-way delay of every link.
    pub delay: Duration,
}

impl LeafSpine {
    /// `hosts_per_leaf * host_rate / (spines * fabric_rate)`.
    pub fn oversubscription(&self) -> f64 {
        let down = f64::from(self.hosts_per_leaf) * self.host_rate_bps as f64;
        let up = f64::from(self.spines) * self.fabric_rate_bps as f64;
        down / up
    }

    /// Hosts `0..leaves*hosts_per_leaf` (leaf `l` has hosts `l*hosts_per_leaf..`), then the
    /// leaves, then the spines.
    pub fn build(&self) -> Result<Topology, TopologyError> {
        if self.leaves == 0 || self.spines == 0 || self.hosts_per_leaf == 0 {
            return Err(TopologyError::BadParameters(format!(
                "leaf-spine: {} leaves, {} spines, {} hosts per leaf: each must be at least 1",
                self.leaves, self.spines, self.hosts_per_leaf
            )));
        }
        let hosts = count(u64::from(self.leaves) * u64::from(self.hosts_per_leaf))?;
        let leaf0 = hosts;
        let spine0 = leaf0 + self.leaves;
        let total = count(u64::from(spine0) + u64::from(self.spines))?;
        let mut b = Builder::new(hosts, total);
        for h in 0..hosts {
            b.link(
                h,
                leaf0 + h / self.hosts_per_leaf,
                self.host_rate_bps,
                self.delay,
            );
        }
        for l in 0..self.leaves {
            for s in 0..self.spines {
                b.link(leaf0 + l, spine0 + s, self.fabric_rate_bps, self.delay);
            }
        }
        b.build()
    }
}

/// The standard k-ary fat-tree (Al-Fares et al., SIGCOMM'08): `k` pods of `k/2` edge and `k/2`
/// aggregation switches, `k/2` hosts per edge switch, `(k/2)^2` core switches, `k^3/4` hosts.
/// Aggregation switch `a` of every pod links to cores `a*k/2 .. (a+1)*k/2`. Host links run at
/// `host_rate_bps`, switch-to-switch links at `fabric_rate_bps`; `k` must be even and at least 2.
pub fn fat_tree(
    k: u32,
    host_rate_bps: u64,
    fabric_rate_bps: u64,
    delay: Duration,
) -> Result<Topology, TopologyError> {
    if k < 2 || !k.is_multiple_of(2) {
        return Err(TopologyError::BadParameters(format!(
            "fat-tree: k = {k}: k must be even and at least 2"
        )));
    }
    let half = k / 2;
    ThreeTier {
        pods: k,
        tors_per_pod: half,
        aggs_per_pod: half,
        hosts_per_tor: half,
        cores_per_agg: half,
        host_rate_bps,
        fabric_rate_bps,
        delay,
    }
    .build()
}

/// The topology of HPCC's evaluation, `simulation/mix/fat.txt` (header `376 56 480`): 320 hosts
/// (0–319), 20 ToRs (320–339) of 16 hosts each, 20 aggregation switches (340–359) and 16 cores
/// (360–375). 5 pods of 4 ToRs and 4 aggs; each ToR links to the 4 aggs of its pod; agg `i` of
/// each pod links to cores `4i .. 4i+4`, so each core serves 5 aggs. Host links 100 Gb/s,
/// switch links 400 Gb/s, all 1 µs: no oversubscription (16 × 100G down, 4 × 400G up per ToR).
/// Read from the file itself (2019 snapshot) through the search tool, not copied.
pub fn hpcc_fat() -> Topology {
    ThreeTier {
        pods: 5,
        tors_per_pod: 4,
        aggs_per_pod: 4,
        hosts_per_tor: 16,
        cores_per_agg: 4,
        host_rate_bps: 100_000_000_000,
        fabric_rate_bps: 400_000_000_000,
        delay: Duration::from_micros(1),
    }
    .build()
    .expect("fat.txt's parameters describe a valid tree")
}

/// A three-tier tree of pods: `tors_per_pod` ToRs and `aggs_per_pod` aggs per pod, all ToRs of a
/// pod linked to all its aggs; `aggs_per_pod * cores_per_agg` cores, agg `a` of every pod linked
/// to cores `a*cores_per_agg ..`.
struct ThreeTier {
    pods: u32,
    tors_per_pod: u32,
    aggs_per_pod: u32,
    hosts_per_tor: u32,
    cores_per_agg: u32,
    host_rate_bps: u64,
    fabric_rate_bps: u64,
    delay: Duration,
}

impl ThreeTier {
    fn build(&self) -> Result<Topology, TopologyError> {
        let tors = count(u64::from(self.pods) * u64::from(self.tors_per_pod))?;
        let aggs = count(u64::from(self.pods) * u64::from(self.aggs_per_pod))?;
        let cores = count(u64::from(self.aggs_per_pod) * u64::from(self.cores_per_agg))?;
        let hosts = count(u64::from(tors) * u64::from(self.hosts_per_tor))?;
        let (tor0, agg0) = (hosts, hosts + tors);
        let core0 = agg0 + aggs;
        let total = count(u64::from(core0) + u64::from(cores))?;
        let mut b = Builder::new(hosts, total);
        for h in 0..hosts {
            b.link(
                h,
                tor0 + h / self.hosts_per_tor,
                self.host_rate_bps,
                self.delay,
            );
        }
        for t in 0..tors {
            let pod = t / self.tors_per_pod;
            for a in 0..self.aggs_per_pod {
                let agg = agg0 + pod * self.aggs_per_pod + a;
                b.link(tor0 + t, agg, self.fabric_rate_bps, self.delay);
            }
        }
        for g in 0..aggs {
            let a = g % self.aggs_per_pod;
            for c in 0..self.cores_per_agg {
                let core = core0 + a * self.cores_per_agg + c;
                b.link(agg0 + g, core, self.fabric_rate_bps, self.delay);
            }
        }
        b.build()
    }
}

/// Collects nodes (hosts first) and links.
struct Builder {
    kinds: Vec<NodeKind>,
    links: Vec<LinkSpec>,
}

impl Builder {
    fn new(hosts: u32, total: u32) -> Self {
        let kinds = (0..total)
            .map(|i| {
                if i < hosts {
                    NodeKind::Host
                } else {
                    NodeKind::Switch
                }
            })
            .collect();
        Self {
            kinds,
            links: Vec::new(),
        }
    }

    fn link(&mut self, a: u32, b: u32, rate_bps: u64, delay: Duration) {
        let (a, b) = (NodeId(a), NodeId(b));
        self.links.push(LinkSpec {
            a,
            b,
            rate_bps,
            delay,
            error_rate: 0.0,
        });
    }

    fn build(self) -> Result<Topology, TopologyError> {
        Topology::new(self.kinds, self.links)
    }
}

/// A node count that fits the `u32` ids (and a sane memory budget: 16 M nodes).
fn count(n: u64) -> Result<u32, TopologyError> {
    u32::try_from(n)
        .ok()
        .filter(|&n| n <= 1 << 24)
        .ok_or_else(|| {
            TopologyError::BadParameters(format!("{n} nodes: more than the 16777216 supported"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    #[test]
    fn hpcc_fat_is_fat_txt_line_for_line_where_read() {
        let t = hpcc_fat();
        let text = t.to_hpcc();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + 480);
        assert_eq!(lines[0], "376 56 480");
        let switches: Vec<String> = (320..376).map(|i: u32| i.to_string()).collect();
        assert_eq!(lines[1], switches.join(" "));
        // Lines of fat.txt as read (file line n is lines[n - 1]).
        assert_eq!(lines[2], "0 320 100Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 16], "16 321 100Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 319], "319 339 100Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 320], "320 340 400Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 320 + 19], "324 347 400Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 400], "340 360 400Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 404], "341 364 400Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 416], "344 360 400Gbps 1000ns 0.000000");
        assert_eq!(lines[2 + 479], "359 375 400Gbps 1000ns 0.000000");
        // Every core serves one agg in each of the 5 pods.
        for core in 360..376 {
            assert_eq!(t.neighbors(NodeId(core)).len(), 5);
        }
    }

    #[test]
    fn fat_tree_has_the_k_ary_counts() {
        for k in [2u32, 4, 8] {
            let t = fat_tree(k, 100 * G, 100 * G, Duration::from_micros(1)).unwrap();
            let half = k / 2;
            assert_eq!(t.hosts().count() as u32, k * k * k / 4);
            assert_eq!(t.switches().count() as u32, k * k + half * half);
            // Every switch has k ports (edges and aggs k/2 down and k/2 up, cores one per pod).
            for s in t.switches() {
                assert_eq!(t.neighbors(s).len() as u32, k, "switch {s}");
            }
            for h in t.hosts() {
                assert_eq!(t.neighbors(h).len(), 1);
            }
        }
        assert!(
            fat_tree(3, G, G, Duration::ZERO)
                .unwrap_err()
                .to_string()
                .contains("even")
        );
        assert!(fat_tree(0, G, G, Duration::ZERO).is_err());
    }

    #[test]
    fn leaf_spine_counts_and_oversubscription() {
        let ls = LeafSpine {
            leaves: 8,
            spines: 4,
            hosts_per_leaf: 16,
            host_rate_bps: 100 * G,
            fabric_rate_bps: 100 * G,
            delay: Duration::from_micros(1),
        };
        assert_eq!(ls.oversubscription(), 4.0);
        let t = ls.build().unwrap();
        assert_eq!(t.hosts().count(), 128);
        assert_eq!(t.switches().count(), 12);
        assert_eq!(t.links().len(), 128 + 32);
        assert_eq!(t.neighbors(NodeId(128)).len(), 16 + 4); // leaf 0
        assert_eq!(t.neighbors(NodeId(136)).len(), 8); // spine 0
        let even = LeafSpine {
            fabric_rate_bps: 400 * G,
            ..ls
        };
        assert_eq!(even.oversubscription(), 1.0);
        let bad = LeafSpine { spines: 0, ..ls };
        assert!(bad.build().unwrap_err().to_string().contains("at least 1"));
    }
}
