//! How the nodes' ports connect, and each switch's forwarding table.
//!
//! A node's ports are its links in [`Topology::neighbors`] order; a global port id is the node's
//! base plus the local port. Forwarding is precomputed from [`Routes`]: for every (switch,
//! destination host) the local ports of its equal-cost next hops, in the order
//! [`Routes::next_hops`] gives them (each distinct set stored once), so that picking
//! `ecmp_hash(node, tuple) % len` of them is exactly [`Routes::ecmp_next_hop`] — a few array
//! lookups and one hash per packet-hop.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use roce_core::Duration;

use crate::topology::{FiveTuple, NodeId, NodeKind, Routes, Topology, ecmp_hash};

/// The far end of a port and the cable to it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Peer {
    /// The node at the other end.
    pub(super) node: u32,
    /// Its port for this link.
    pub(super) port: u16,
    /// Line rate, bit/s.
    pub(super) rate_bps: u64,
    /// One-way propagation delay.
    pub(super) delay: Duration,
}

/// Ports, peers and forwarding tables.
#[derive(Debug)]
pub(super) struct Wiring {
    /// Per node: its first global port id; one more entry at the end.
    base: Vec<u32>,
    /// Per global port.
    peers: Vec<Peer>,
    /// Node id → host index (`u32::MAX` for switches).
    host_index: Vec<u32>,
    hosts: usize,
    /// Node id → its row in `table` (`u32::MAX` for hosts, which need none).
    switch_row: Vec<u32>,
    /// `(row * hosts + dst host index)` → its set of candidate ports, an index into `sets`.
    table: Vec<u32>,
    /// Distinct sets of candidate ports: (start, end) in `candidates`, and the set's
    /// [`Remainder`] by its length. A switch sends most
    /// destinations to the same few sets (all its uplinks, say), so the table stays small
    /// enough to stay in cache.
    sets: Vec<(u32, u32, Remainder)>,
    candidates: Vec<u16>,
    /// [`EcmpPorts::Hpcc`](super::EcmpPorts::Hpcc): the ports to hash, by the tuple of a
    /// running flow's packets.
    hpcc_ports: Option<HashMap<FiveTuple, (u16, u16)>>,
}

impl Wiring {
    /// The wiring of `routes`' topology.
    pub(super) fn new(routes: &Routes) -> Self {
        let topology: &Topology = routes.topology();
        let nodes = topology.node_count();
        let mut base = Vec::with_capacity(nodes + 1);
        let mut peers = Vec::new();
        for n in 0..nodes {
            base.push(u32::try_from(peers.len()).expect("fewer than 2^32 ports"));
            let id = NodeId(n as u32);
            for &(m, link) in topology.neighbors(id) {
                let spec = topology.links()[link];
                let port = topology
                    .neighbors(m)
                    .iter()
                    .position(|&(back, _)| back == id)
                    .expect("links are listed at both ends");
                peers.push(Peer {
                    node: m.0,
                    port: port_number(port),
                    rate_bps: spec.rate_bps,
                    delay: spec.delay,
                });
            }
        }
        base.push(u32::try_from(peers.len()).expect("fewer than 2^32 ports"));
        let mut host_index = vec![u32::MAX; nodes];
        let host_ids: Vec<NodeId> = topology.hosts().collect();
        for (i, h) in (0u32..).zip(&host_ids) {
            host_index[h.index()] = i;
        }
        let mut switch_row = vec![u32::MAX; nodes];
        let mut table = Vec::new();
        let mut sets = Vec::new();
        let mut candidates = Vec::new();
        let mut known: HashMap<Vec<u16>, u32> = HashMap::new();
        for (n, row) in switch_row.iter_mut().enumerate() {
            let id = NodeId(n as u32);
            if topology.kind(id) != Some(NodeKind::Switch) {
                continue; // hosts have one port: they need no table
            }
            *row = u32::try_from(table.len() / host_ids.len().max(1))
                .expect("fewer than 2^32 switches");
            let neighbors = topology.neighbors(id);
            for &dst in &host_ids {
                let ports: Vec<u16> = routes
                    .next_hops(id, dst)
                    .map(|next| {
                        let port = neighbors
                            .iter()
                            .position(|&(m, _)| m == next)
                            .expect("a next hop is a neighbour");
                        port_number(port)
                    })
                    .collect();
                let set = *known.entry(ports).or_insert_with_key(|ports| {
                    let start = u32::try_from(candidates.len()).expect("fewer than 2^32 entries");
                    candidates.extend_from_slice(ports);
                    let end = u32::try_from(candidates.len()).expect("fewer than 2^32 entries");
                    sets.push((start, end, Remainder::by(end - start)));
                    u32::try_from(sets.len() - 1).expect("fewer than 2^32 sets")
                });
                table.push(set);
            }
        }
        Self {
            base,
            peers,
            host_index,
            hosts: host_ids.len(),
            switch_row,
            table,
            sets,
            candidates,
            hpcc_ports: None,
        }
    }

    /// The global id of `node`'s `port`.
    pub(super) fn global(&self, node: u32, port: u16) -> usize {
        self.base[node as usize] as usize + usize::from(port)
    }

    /// How many ports `node` has.
    pub(super) fn port_count(&self, node: u32) -> usize {
        (self.base[node as usize + 1] - self.base[node as usize]) as usize
    }

    /// The far end of `node`'s `port`.
    pub(super) fn peer(&self, node: u32, port: u16) -> Peer {
        self.peers[self.global(node, port)]
    }

    /// Ports over all nodes.
    pub(super) fn total_ports(&self) -> usize {
        self.peers.len()
    }

    /// The host index of node `node`, if it is a host.
    pub(super) fn host_index(&self, node: u32) -> Option<usize> {
        let i = *self.host_index.get(node as usize)?;
        (i != u32::MAX).then_some(i as usize)
    }

    /// The port switch `node` sends a packet from `src` to `dst` out of (ECMP over the
    /// equal-cost next hops towards `dst`'s host); `None` when `dst` is no host of the network.
    #[cfg(test)]
    pub(super) fn forward(&self, node: u32, src: SocketAddr, dst: SocketAddr) -> Option<u16> {
        self.forward_tuple(node, &tuple_of(src, dst)?)
    }

    /// Hashes the ports HPCC's ns-3 gives each flow ([`Wiring::hpcc_flow`]) from now on.
    pub(super) fn hash_hpcc_ports(&mut self) {
        self.hpcc_ports = Some(HashMap::new());
    }

    /// With [`Wiring::hash_hpcc_ports`]: the packets of tuple `out` hash the ports `(sport,
    /// dport)`, and those of `back` the two swapped (the flow's packets back: ACKs, CNPs).
    /// The whole tuple is the key: two flows of one host may share a source port (the QPs'
    /// entropy ports are a 14-bit hash), two flows between the same two hosts seldom do.
    pub(super) fn hpcc_flow(
        &mut self,
        (out, back): (FiveTuple, FiveTuple),
        sport: u16,
        dport: u16,
    ) {
        if let Some(ports) = &mut self.hpcc_ports {
            ports.insert(out, (sport, dport));
            ports.insert(back, (dport, sport));
        }
    }

    /// Forgets a flow that ended ([`Wiring::hpcc_flow`]): its QPs' numbers, and so its ports,
    /// go to later flows.
    pub(super) fn hpcc_flow_ended(&mut self, (out, back): (FiveTuple, FiveTuple)) {
        if let Some(ports) = &mut self.hpcc_ports {
            ports.remove(&out);
            ports.remove(&back);
        }
    }

    /// `tuple` with the ports [`Wiring::hpcc_flow`] gave its flow, if it gave some.
    #[cold]
    #[inline(never)]
    fn hpcc_tuple(ports: &HashMap<FiveTuple, (u16, u16)>, tuple: &FiveTuple) -> FiveTuple {
        match ports.get(tuple) {
            Some(&(sport, dport)) => FiveTuple {
                sport,
                dport,
                ..*tuple
            },
            None => *tuple,
        }
    }

    /// The port `node` forwards a packet with IPv4 5-tuple `tuple` out of ([`tuple_of`]).
    #[inline(always)]
    pub(super) fn forward_tuple(&self, node: u32, tuple: &FiveTuple) -> Option<u16> {
        let dst_id = NodeId::from_hpcc_ipv4(tuple.dst_ip);
        // from_hpcc_ipv4 ignores the low byte and the top one: check the address round-trips.
        if dst_id.hpcc_ipv4() != tuple.dst_ip {
            return None;
        }
        let h = self.host_index(dst_id.0)?;
        let row = *self.switch_row.get(node as usize)?;
        if row == u32::MAX {
            return None;
        }
        let set = self.table[row as usize * self.hosts + h];
        let (start, end, remainder) = self.sets[set as usize];
        let ports = &self.candidates[start as usize..end as usize];
        match ports {
            [] => None,
            // One next hop (towards a host below): whatever the hash, it is this one.
            &[port] => Some(port),
            _ => {
                let hash = match &self.hpcc_ports {
                    None => ecmp_hash(node, tuple),
                    Some(hpcc) => ecmp_hash(node, &Self::hpcc_tuple(hpcc, tuple)),
                };
                ports.get(remainder.of(hash) as usize).copied()
            }
        }
    }
}

/// `x % d` for a fixed `d` without a division, exact for every 32-bit `x` (D. Lemire, O. Kaser
/// and N. Kurz, "Faster remainder by direct computation", 2019): the low 64 bits of
/// `x * (⌊(2^64 − 1) / d⌋ + 1)`, times `d`, shifted right by 64. The ECMP choice takes it once
/// per packet-hop.
#[derive(Debug, Clone, Copy)]
pub(super) struct Remainder {
    d: u32,
    m: u64,
}

impl Remainder {
    /// The remainder by `d` (0 counts as 1).
    pub(super) fn by(d: u32) -> Self {
        let d = d.max(1);
        Self {
            d,
            m: (u64::MAX / u64::from(d)).wrapping_add(1),
        }
    }

    /// `x % d`.
    #[inline]
    pub(super) fn of(self, x: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(x));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

/// The 5-tuple switches hash, of an IPv4 packet (`None` for IPv6: no route).
pub(super) fn tuple_of(src: SocketAddr, dst: SocketAddr) -> Option<FiveTuple> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (src.ip(), dst.ip()) else {
        return None;
    };
    Some(FiveTuple {
        src_ip: u32::from(s),
        dst_ip: u32::from(d),
        sport: src.port(),
        dport: dst.port(),
    })
}

fn port_number(port: usize) -> u16 {
    u16::try_from(port).expect("fewer than 2^16 ports per node")
}

#[cfg(test)]
mod tests {
    use super::Remainder;

    /// The remainder without a division is `%` itself: every divisor up to 1 000 (a switch's
    /// next hops) against the edges of the 32-bit range and a spread of values between.
    #[test]
    fn the_remainder_without_division_is_exact() {
        let mut x = 0x9e37_79b9u32;
        let mut values = vec![0, 1, 2, u32::MAX, u32::MAX - 1, 1 << 31, (1 << 31) - 1];
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            values.push(x);
        }
        for d in 1..=1_000u32 {
            let r = Remainder::by(d);
            for &v in &values {
                assert_eq!(r.of(v), v % d, "{v} % {d}");
            }
        }
        assert_eq!(Remainder::by(0).of(7), 0, "0 counts as 1");
    }
}
