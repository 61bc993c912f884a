//! Shortest-path routing with equal-cost multipath, as HPCC sets it up
//! (`simulation/scratch/third.cc`, `CalculateRoute`): a breadth-first search from every
//! destination host over the links, in which only switches are expanded (a packet never passes
//! through a host); node `x` at distance `d + 1` from the host gets every neighbour at distance
//! `d` as a next hop. The next hops are kept in the order the search met them, which is link
//! order; the first is the search's own parent and gives the path [`Routes::path_info`] reports.
//!
//! The ECMP choice ([`ecmp_hash`]) is MurmurHash3 x86_32 (Austin Appleby's public-domain
//! algorithm, smhasher) over the 12 bytes `src_ip, dst_ip, sport | dport << 16`, each a
//! little-endian u32, seeded with the id of the node that chooses — the key and seed HPCC's
//! `SwitchNode::EcmpHash` uses (`switch-node.cc`, seed = node id). The UDP source port is the
//! entropy: RoCEv2 fixes the destination port to 4791, so flows between two hosts differ only
//! there. Folding the node id in as the seed is what stops polarization (the same hash at every
//! tier would send every flow that took uplink `i` at the ToR to uplink `i` at the agg too:
//! `bobzhuyb/ns3-rdma#19`). The next hop is `hash % next_hops.len()`. HPCC orders next hops by
//! `std::map<Ptr<Node>>`, i.e. by pointer, so the same hash may pick a different port there.

use super::{NodeId, NodeKind, Topology, TopologyError};
use roce_core::Duration;

/// The fields of a packet the ECMP hash reads. The protocol is always UDP (RoCEv2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// Source IPv4 address.
    pub src_ip: u32,
    /// Destination IPv4 address.
    pub dst_ip: u32,
    /// UDP source port: the flow's entropy.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
}

impl FiveTuple {
    /// The tuple of a flow between two HPCC-numbered hosts ([`NodeId::hpcc_ipv4`]).
    pub const fn hpcc(src: NodeId, dst: NodeId, sport: u16, dport: u16) -> Self {
        Self {
            src_ip: src.hpcc_ipv4(),
            dst_ip: dst.hpcc_ipv4(),
            sport,
            dport,
        }
    }
}

/// What the ideal (standalone) FCT of a flow needs to know about its path, as third.cc computes
/// it per host pair: the sum of one-way link delays, the sum of per-hop serialization times of
/// one full packet, and the slowest link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathInfo {
    /// Links crossed.
    pub hops: usize,
    /// Sum of the links' one-way delays (`pairDelay`).
    pub delay: Duration,
    /// Sum over the links of `packet_bytes * 8 / rate`, each rounded down to a nanosecond
    /// (`pairTxDelay`, with `packet_payload_size` as the packet).
    pub tx_delay: Duration,
    /// The lowest link rate on the path, bit/s (`pairBw`).
    pub bottleneck_bps: u64,
}

impl PathInfo {
    /// third.cc's base RTT: `2 * delay + tx_delay` (`pairRtt`).
    pub fn base_rtt(&self) -> Duration {
        self.delay * 2 + self.tx_delay
    }
}

/// Next hops from every node towards every host, over a topology in which every host reaches
/// every other.
#[derive(Debug, Clone)]
pub struct Routes {
    topology: Topology,
    /// Node id → index among the hosts (`u32::MAX` for switches).
    host_index: Vec<u32>,
    hosts: usize,
    /// `(dst_host_index * nodes + node)` → start of its next hops in `hops`; one more at the end.
    offsets: Vec<u32>,
    /// (next node, index of the link to it): 8 bytes an entry, ~26 MB for a k = 16 fat-tree.
    hops: Vec<(NodeId, u32)>,
}

impl Routes {
    /// Computes the next hops; refuses a topology where some host cannot reach another.
    pub fn new(topology: Topology) -> Result<Self, TopologyError> {
        let nodes = topology.node_count();
        let mut host_index = vec![u32::MAX; nodes];
        let host_ids: Vec<NodeId> = topology.hosts().collect();
        for (i, h) in (0u32..).zip(&host_ids) {
            host_index[h.index()] = i;
        }
        let mut offsets = Vec::with_capacity(host_ids.len() * nodes + 1);
        let mut hops = Vec::new();
        let mut dist = vec![u32::MAX; nodes];
        let mut per_node: Vec<Vec<(NodeId, u32)>> = vec![Vec::new(); nodes];
        let mut queue = Vec::with_capacity(nodes);
        for &dst in &host_ids {
            dist.fill(u32::MAX);
            per_node.iter_mut().for_each(Vec::clear);
            queue.clear();
            dist[dst.index()] = 0;
            queue.push(dst);
            let mut head = 0;
            while let Some(&now) = queue.get(head) {
                head += 1;
                let d = dist[now.index()];
                for &(next, link) in topology.neighbors(now) {
                    if dist[next.index()] == u32::MAX {
                        dist[next.index()] = d + 1;
                        if topology.kind(next) == Some(NodeKind::Switch) {
                            queue.push(next);
                        }
                    }
                    if dist[next.index()] == d + 1 {
                        let link = u32::try_from(link).map_err(|_| too_big())?;
                        per_node[next.index()].push((now, link));
                    }
                }
            }
            let cut: Vec<NodeId> = host_ids
                .iter()
                .copied()
                .filter(|h| dist[h.index()] == u32::MAX)
                .collect();
            if let Some(&first) = cut.first() {
                // Name the host on the smaller side of the cut: `dst` itself if it reached fewer.
                let reached = host_ids.len() - cut.len();
                let (host, other) = if reached <= cut.len() {
                    (dst, first)
                } else {
                    (first, dst)
                };
                return Err(TopologyError::HostCutOff { host, other });
            }
            for list in &per_node {
                offsets.push(u32::try_from(hops.len()).map_err(|_| too_big())?);
                hops.extend_from_slice(list);
            }
        }
        offsets.push(u32::try_from(hops.len()).map_err(|_| too_big())?);
        Ok(Self {
            topology,
            host_index,
            hosts: host_ids.len(),
            offsets,
            hops,
        })
    }

    /// The topology routed.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The equal-cost next hops from `node` towards host `dst`, in the order the search met them
    /// (empty at `dst` itself, or if `dst` is not a host or either does not exist).
    pub fn next_hops(
        &self,
        node: NodeId,
        dst: NodeId,
    ) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        self.entry(node, dst).iter().map(|&(n, _)| n)
    }

    /// The next hop `node` picks for `flow` towards `dst`: [`ecmp_hash`] seeded with `node`'s
    /// id, modulo the number of next hops. `None` where [`Routes::next_hops`] is empty.
    pub fn ecmp_next_hop(&self, node: NodeId, dst: NodeId, flow: &FiveTuple) -> Option<NodeId> {
        let hops = self.entry(node, dst);
        if hops.is_empty() {
            return None;
        }
        let i = ecmp_hash(node.0, flow) as usize % hops.len();
        Some(hops[i].0)
    }

    /// The nodes a flow's packets visit from `src` to `dst`, both included, with every node
    /// (hosts too, which matters only for multi-homed hosts) making its ECMP choice.
    pub fn ecmp_path(&self, src: NodeId, dst: NodeId, flow: &FiveTuple) -> Option<Vec<NodeId>> {
        let mut path = vec![src];
        let mut at = src;
        while at != dst {
            at = self.ecmp_next_hop(at, dst, flow)?;
            path.push(at);
        }
        Some(path)
    }

    /// Delay, serialization time of one `packet_bytes` packet and bottleneck along the first
    /// shortest path from `src` to `dst` (the search's parents), as third.cc computes them.
    pub fn path_info(&self, src: NodeId, dst: NodeId, packet_bytes: u64) -> Option<PathInfo> {
        let mut info = PathInfo {
            hops: 0,
            delay: Duration::ZERO,
            tx_delay: Duration::ZERO,
            bottleneck_bps: u64::MAX,
        };
        let mut at = src;
        while at != dst {
            let &(next, link) = self.entry(at, dst).first()?;
            let l = self.topology.links().get(link as usize)?;
            info.hops += 1;
            info.delay += l.delay;
            let tx = u128::from(packet_bytes) * 8 * 1_000_000_000 / u128::from(l.rate_bps);
            info.tx_delay += Duration::from_nanos(u64::try_from(tx).unwrap_or(u64::MAX));
            info.bottleneck_bps = info.bottleneck_bps.min(l.rate_bps);
            at = next;
        }
        (info.hops > 0).then_some(info)
    }

    fn entry(&self, node: NodeId, dst: NodeId) -> &[(NodeId, u32)] {
        let nodes = self.topology.node_count();
        let Some(&h) = self.host_index.get(dst.index()) else {
            return &[];
        };
        if h == u32::MAX || node.index() >= nodes || (h as usize) >= self.hosts {
            return &[];
        }
        let i = h as usize * nodes + node.index();
        let (start, end) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        &self.hops[start..end]
    }
}

/// MurmurHash3 x86_32 of `src_ip, dst_ip, sport | dport << 16` (little-endian u32s), seeded with
/// `seed` (the choosing node's id): see the module documentation.
pub fn ecmp_hash(seed: u32, flow: &FiveTuple) -> u32 {
    let mut key = [0u8; 12];
    key[0..4].copy_from_slice(&flow.src_ip.to_le_bytes());
    key[4..8].copy_from_slice(&flow.dst_ip.to_le_bytes());
    let ports = u32::from(flow.sport) | (u32::from(flow.dport) << 16);
    key[8..12].copy_from_slice(&ports.to_le_bytes());
    murmur3_32(&key, seed)
}

/// MurmurHash3 x86_32 (public domain, Austin Appleby).
fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let scramble = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        h ^= scramble(k);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let k = tail
            .iter()
            .rev()
            .fold(0u32, |k, &b| (k << 8) | u32::from(b));
        h ^= scramble(k);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

fn too_big() -> TopologyError {
    TopologyError::BadParameters("routing table beyond 2^32 entries".to_owned())
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
