//! Multi-switch topologies as data: nodes (hosts and switches, by index) and full-duplex links
//! between them, each with a rate, a one-way propagation delay and an optional packet error rate.
//!
//! A [`Topology`] comes from HPCC's topology file ([`hpcc`]), from a generator ([`fattree`]) or
//! from code ([`Topology::new`]); [`Routes`] turns it into per-switch equal-cost next hops and
//! the ECMP choice of one of them. Nothing here moves packets: the fabric that does reads this.
//!
//! Node numbering follows HPCC: a node is a host unless its id is listed as a switch, and a
//! host's IPv4 address is [`NodeId::hpcc_ipv4`] (`scratch/third.cc`, `node_id_to_ip`).

pub mod fattree;
pub mod hpcc;
pub mod routes;

use core::fmt;

use roce_core::Duration;

pub use fattree::{LeafSpine, fat_tree, hpcc_fat};
pub use hpcc::{HpccParseError, HpccParseErrorKind};
pub use routes::{FiveTuple, PathInfo, Routes, ecmp_hash};

/// The index of a node in its [`Topology`], as HPCC's files number them (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The node as an index into per-node tables.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The IPv4 address HPCC gives host `id`: `0x0b000001 + (id << 8)` (11.0.x.1), which
    /// `scratch/third.cc` writes as `0x0b000001 + (id / 256) * 0x10000 + (id % 256) * 0x100` —
    /// the same number. HPCC maps back with `(ip >> 8) & 0xffff`, so ids above 65535 alias.
    pub const fn hpcc_ipv4(self) -> u32 {
        0x0b00_0001_u32.wrapping_add(self.0 << 8)
    }

    /// The inverse of [`NodeId::hpcc_ipv4`] as HPCC computes it: `(ip >> 8) & 0xffff`.
    pub const fn from_hpcc_ipv4(ip: u32) -> Self {
        Self((ip >> 8) & 0xffff)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// An end host with a NIC: flows start and end here, packets never pass through.
    Host,
    /// A switch: forwards packets towards their destination host.
    Switch,
}

/// One full-duplex link: the same rate, delay and error rate in both directions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    /// One end.
    pub a: NodeId,
    /// The other end.
    pub b: NodeId,
    /// Line rate in bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Probability that a packet is lost on the link (HPCC's per-link `error_rate`), 0 for none.
    pub error_rate: f64,
}

/// Why a set of nodes and links is not a topology the simulator can run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// A link names a node beyond the node count.
    #[error("link {a}-{b}: node {node} does not exist ({nodes} nodes)")]
    NoSuchNode {
        /// One end of the link.
        a: NodeId,
        /// The other end.
        b: NodeId,
        /// The end that does not exist.
        node: NodeId,
        /// How many nodes there are.
        nodes: usize,
    },
    /// A link from a node to itself.
    #[error("link {0}-{0}: a node cannot link to itself")]
    SelfLink(NodeId),
    /// A second link between the same two nodes (in either order).
    #[error("link {a}-{b} is listed twice")]
    DuplicateLink {
        /// One end.
        a: NodeId,
        /// The other end.
        b: NodeId,
    },
    /// A link of rate 0.
    #[error("link {a}-{b}: rate 0 bit/s")]
    ZeroRate {
        /// One end.
        a: NodeId,
        /// The other end.
        b: NodeId,
    },
    /// An error rate outside `[0, 1]`.
    #[error("link {a}-{b}: error rate {rate} is not in [0, 1]")]
    BadErrorRate {
        /// One end.
        a: NodeId,
        /// The other end.
        b: NodeId,
        /// The rate given.
        rate: f64,
    },
    /// A host no other host can reach through switches (packets never transit a host).
    #[error("host {host} cannot reach host {other}: it is cut off from the fabric")]
    HostCutOff {
        /// The host cut off.
        host: NodeId,
        /// A host it cannot reach.
        other: NodeId,
    },
    /// A generator's parameters that describe no topology (e.g. an odd fat-tree `k`).
    #[error("{0}")]
    BadParameters(String),
}

/// Hosts, switches and the links between them. Built only through [`Topology::new`] (or the
/// parsers and generators, which call it), so every link is between two distinct existing nodes,
/// is listed once, and has a nonzero rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    kinds: Vec<NodeKind>,
    links: Vec<LinkSpec>,
    /// Per node: (neighbour, index into `links`), in link order.
    adjacency: Vec<Vec<(NodeId, usize)>>,
}

impl Topology {
    /// Checks the links (existing endpoints, no self-link, no duplicate, rate > 0, error rate in
    /// [0, 1]) and builds the adjacency lists. Reachability is checked by [`Routes::new`].
    pub fn new(kinds: Vec<NodeKind>, links: Vec<LinkSpec>) -> Result<Self, TopologyError> {
        let nodes = kinds.len();
        let mut adjacency: Vec<Vec<(NodeId, usize)>> = vec![Vec::new(); nodes];
        let mut seen = std::collections::HashSet::new();
        for (i, l) in links.iter().enumerate() {
            check_link(nodes, &mut seen, *l)?;
            if l.rate_bps == 0 {
                return Err(TopologyError::ZeroRate { a: l.a, b: l.b });
            }
            if !(0.0..=1.0).contains(&l.error_rate) {
                return Err(TopologyError::BadErrorRate {
                    a: l.a,
                    b: l.b,
                    rate: l.error_rate,
                });
            }
            adjacency[l.a.index()].push((l.b, i));
            adjacency[l.b.index()].push((l.a, i));
        }
        Ok(Self {
            kinds,
            links,
            adjacency,
        })
    }

    /// How many nodes, hosts and switches together.
    pub fn node_count(&self) -> usize {
        self.kinds.len()
    }

    /// What node `id` is, if it exists.
    pub fn kind(&self, id: NodeId) -> Option<NodeKind> {
        self.kinds.get(id.index()).copied()
    }

    /// The hosts, in id order.
    pub fn hosts(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes_of(NodeKind::Host)
    }

    /// The switches, in id order.
    pub fn switches(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes_of(NodeKind::Switch)
    }

    /// The links, in the order given.
    pub fn links(&self) -> &[LinkSpec] {
        &self.links
    }

    /// The neighbours of `id` with the index of the link to each, in link order (empty if `id`
    /// does not exist).
    pub fn neighbors(&self, id: NodeId) -> &[(NodeId, usize)] {
        self.adjacency.get(id.index()).map_or(&[], Vec::as_slice)
    }

    /// The link between `a` and `b`, if there is one.
    pub fn link_between(&self, a: NodeId, b: NodeId) -> Option<&LinkSpec> {
        let &(_, i) = self.neighbors(a).iter().find(|&&(n, _)| n == b)?;
        self.links.get(i)
    }

    fn nodes_of(&self, kind: NodeKind) -> impl Iterator<Item = NodeId> + '_ {
        (0u32..)
            .zip(&self.kinds)
            .filter(move |&(_, k)| *k == kind)
            .map(|(i, _)| NodeId(i))
    }
}

/// The checks of one more link that need only the node count and the links before it: its
/// endpoints exist, it is no self-link and no duplicate (either way round). [`Topology::new`]
/// runs them, and the HPCC parser too, so that it can name the line at fault.
pub(super) fn check_link(
    nodes: usize,
    seen: &mut std::collections::HashSet<(NodeId, NodeId)>,
    l: LinkSpec,
) -> Result<(), TopologyError> {
    for node in [l.a, l.b] {
        if node.index() >= nodes {
            return Err(TopologyError::NoSuchNode {
                a: l.a,
                b: l.b,
                node,
                nodes,
            });
        }
    }
    if l.a == l.b {
        return Err(TopologyError::SelfLink(l.a));
    }
    if !seen.insert((l.a.min(l.b), l.a.max(l.b))) {
        return Err(TopologyError::DuplicateLink { a: l.a, b: l.b });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(a: u32, b: u32) -> LinkSpec {
        LinkSpec {
            a: NodeId(a),
            b: NodeId(b),
            rate_bps: 100_000_000_000,
            delay: Duration::from_micros(1),
            error_rate: 0.0,
        }
    }

    #[test]
    fn hpcc_addresses_match_third_cc() {
        assert_eq!(NodeId(0).hpcc_ipv4(), 0x0b00_0001);
        assert_eq!(NodeId(1).hpcc_ipv4(), 0x0b00_0101);
        // id 300 = 1 * 256 + 44: third.cc adds 0x10000 and 44 * 0x100.
        assert_eq!(NodeId(300).hpcc_ipv4(), 0x0b00_0001 + 0x1_0000 + 44 * 0x100);
        for id in [0, 1, 255, 256, 319, 65535] {
            assert_eq!(NodeId::from_hpcc_ipv4(NodeId(id).hpcc_ipv4()), NodeId(id));
        }
    }

    #[test]
    fn structural_errors_are_refused() {
        let kinds = vec![NodeKind::Host, NodeKind::Switch, NodeKind::Host];
        let cases = [
            (vec![link(0, 3)], "node 3 does not exist"),
            (vec![link(1, 1)], "cannot link to itself"),
            (vec![link(0, 1), link(1, 0)], "listed twice"),
            (
                vec![LinkSpec {
                    rate_bps: 0,
                    ..link(0, 1)
                }],
                "rate 0",
            ),
            (
                vec![LinkSpec {
                    error_rate: 1.5,
                    ..link(0, 1)
                }],
                "not in [0, 1]",
            ),
            (
                vec![LinkSpec {
                    error_rate: f64::NAN,
                    ..link(0, 1)
                }],
                "not in [0, 1]",
            ),
        ];
        for (links, want) in cases {
            let err = Topology::new(kinds.clone(), links).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should say {want:?}");
        }
        let ok = Topology::new(kinds, vec![link(0, 1), link(2, 1)]).unwrap();
        assert_eq!(ok.hosts().collect::<Vec<_>>(), [NodeId(0), NodeId(2)]);
        assert_eq!(ok.switches().collect::<Vec<_>>(), [NodeId(1)]);
        assert_eq!(ok.neighbors(NodeId(1)), [(NodeId(0), 0), (NodeId(2), 1)]);
        assert!(ok.link_between(NodeId(2), NodeId(1)).is_some());
        assert!(ok.link_between(NodeId(0), NodeId(2)).is_none());
    }
}
