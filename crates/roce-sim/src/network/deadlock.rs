//! PFC deadlock detection: a cycle of paused queues, each waiting on the next.
//!
//! PFC makes a switch pause its upstream neighbour when the bytes it holds from that neighbour
//! pass XOFF. Those bytes wait in the switch's egress queues; if every queue they wait in is
//! itself paused by the next switch, and that one's by the next, around a loop, no queue of the
//! loop can ever send again: a cyclic buffer dependency, the PFC deadlock of Hu et al.,
//! "Deadlocks in Datacenter Networks: Why Do They Form, and How to Avoid Them" (HotNets 2016),
//! and Guo et al., "RDMA over Commodity Ethernet at Scale" (SIGCOMM 2016), §4.
//!
//! The wait-for graph: a vertex is a switch's egress queue (port, priority) that holds packets
//! and is paused by the node at the other end of its link. It waits on the queues of that node
//! where the packets that node holds *from this link* sit, when those are blocked too: an edge
//! from `(s, p, c)` to `(s', p', c)` where `s'` is `p`'s peer and `s'`'s egress `p'` holds
//! packets of class `c` that came in on the link from `s` and is itself blocked. A cycle of
//! the graph is a deadlock candidate.
//!
//! A candidate can still dissolve (other traffic drains below XON through a queue outside the
//! cycle), so [`Monitor`] confirms it: the same cycle found at two checks one interval apart,
//! with no byte sent from any of its queues in between, is reported as a [`Deadlock`], with the
//! switches and ports in it, and the run stops: nothing in the loop can move again.

use roce_core::{Duration, Instant};

use super::Network;
use crate::topology::NodeId;

/// One queue of a deadlock's cycle: `switch`'s egress towards `towards`, for `priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PausedQueue {
    /// The switch.
    pub switch: NodeId,
    /// The neighbour its egress port leads to, which paused it.
    pub towards: NodeId,
    /// The priority (PFC class).
    pub priority: u8,
}

/// A confirmed PFC deadlock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadlock {
    /// When the cycle was first seen.
    pub since: Instant,
    /// When it was confirmed (seen again, with nothing sent from its queues in between).
    pub confirmed: Instant,
    /// The queues of the cycle, each waiting on the next and the last on the first.
    pub cycle: Vec<PausedQueue>,
}

impl std::fmt::Display for Deadlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PFC deadlock since {} ns (confirmed at {} ns):",
            self.since.as_nanos(),
            self.confirmed.as_nanos()
        )?;
        for q in &self.cycle {
            write!(
                f,
                " switch {} → {} (priority {}) ⇒",
                q.switch.0, q.towards.0, q.priority
            )?;
        }
        match self.cycle.first() {
            Some(q) => write!(f, " switch {}", q.switch.0),
            None => Ok(()),
        }
    }
}

/// How often a run looks for a deadlock, in simulated time.
pub const CHECK_EVERY: Duration = Duration::from_micros(100);

/// A vertex of the wait-for graph: (switch node, local port, priority).
type Vertex = (u32, u16, u8);

impl Network {
    /// A cycle of blocked queues now, if there is one (a deadlock candidate; see the module
    /// documentation). The cycle starts at its smallest queue, so that the same loop is always
    /// reported the same way.
    pub fn blocked_cycle(&self) -> Option<Vec<PausedQueue>> {
        let now = self.now;
        let mut vertices: Vec<Vertex> = Vec::new();
        for (n, s) in self.switches.iter().enumerate() {
            let Some(s) = s else { continue };
            for p in 0..s.port_count() {
                for c in 0..8u8 {
                    if s.egress_blocked(now, p, c) {
                        vertices.push((n as u32, p as u16, c));
                    }
                }
            }
        }
        if vertices.is_empty() {
            return None;
        }
        let index = |v: &Vertex| vertices.binary_search(v).ok();
        let edges: Vec<Vec<usize>> = vertices
            .iter()
            .map(|&(n, p, c)| {
                let peer = self.wiring.peer(n, p);
                let Some(next) = self.switches[peer.node as usize].as_ref() else {
                    return Vec::new(); // a host paused it: a host waits on nothing here
                };
                next.egress_holding(usize::from(peer.port), c)
                    .filter_map(|q| index(&(peer.node, q as u16, c)))
                    .collect()
            })
            .collect();
        let cycle = find_cycle(&edges)?;
        let mut queues: Vec<PausedQueue> = cycle
            .iter()
            .map(|&i| {
                let (n, p, c) = vertices[i];
                PausedQueue {
                    switch: NodeId(n),
                    towards: NodeId(self.wiring.peer(n, p).node),
                    priority: c,
                }
            })
            .collect();
        let first = (0..queues.len()).min_by_key(|&i| queues[i]).unwrap_or(0);
        queues.rotate_left(first);
        Some(queues)
    }

    /// The deadlock the last [`Network::run_flows`] stopped at, if it did.
    pub fn deadlock(&self) -> Option<&Deadlock> {
        self.deadlock.as_ref()
    }

    /// Bytes sent so far from each queue's port (the progress a deadlock rules out).
    fn sent_from(&self, cycle: &[PausedQueue]) -> Vec<u64> {
        cycle
            .iter()
            .map(|q| {
                self.port_stats(q.switch, q.towards)
                    .map_or(0, |stats| stats.sent_bytes)
            })
            .collect()
    }
}

/// Confirms deadlock candidates across checks.
#[derive(Debug, Default)]
pub(super) struct Monitor {
    /// The candidate of the last check: when it was first seen, its queues, their ports' bytes
    /// sent then.
    candidate: Option<(Instant, Vec<PausedQueue>, Vec<u64>)>,
}

impl Monitor {
    /// Looks at `net` now; returns the deadlock once a candidate is confirmed.
    pub(super) fn check(&mut self, net: &Network) -> Option<Deadlock> {
        let Some(cycle) = net.blocked_cycle() else {
            self.candidate = None;
            return None;
        };
        let sent = net.sent_from(&cycle);
        match self.candidate.take() {
            Some((since, before, sent_before)) if before == cycle && sent_before == sent => {
                Some(Deadlock {
                    since,
                    confirmed: net.now,
                    cycle,
                })
            }
            _ => {
                self.candidate = Some((net.now, cycle, sent));
                None
            }
        }
    }
}

/// A cycle of the directed graph `edges` (vertex → its successors), as vertices in order, if
/// there is one: depth-first search with an explicit stack (no recursion on big fabrics).
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; edges.len()];
    for root in 0..edges.len() {
        if mark[root] != Mark::New {
            continue;
        }
        // The path from the root, each vertex with the next successor to try.
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        mark[root] = Mark::OnPath;
        while let Some(&mut (v, ref mut next)) = path.last_mut() {
            if let Some(&w) = edges[v].get(*next) {
                *next += 1;
                match mark[w] {
                    Mark::OnPath => {
                        let start = path.iter().position(|&(u, _)| u == w)?;
                        return Some(path[start..].iter().map(|&(u, _)| u).collect());
                    }
                    Mark::New => {
                        mark[w] = Mark::OnPath;
                        path.push((w, 0));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[v] = Mark::Done;
                path.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::find_cycle;

    #[test]
    fn a_cycle_is_found_with_its_vertices_in_order() {
        // 0 → 1 → 2 → 3 → 1, and 4 alone.
        let edges = vec![vec![1], vec![2], vec![3], vec![1], vec![]];
        assert_eq!(find_cycle(&edges), Some(vec![1, 2, 3]));
    }

    #[test]
    fn a_graph_without_cycles_has_none() {
        // A diamond: 0 → 1, 0 → 2, 1 → 3, 2 → 3.
        let edges = vec![vec![1, 2], vec![3], vec![3], vec![]];
        assert_eq!(find_cycle(&edges), None);
        assert_eq!(find_cycle(&[]), None);
    }

    #[test]
    fn a_self_loop_is_a_cycle() {
        let edges = vec![vec![], vec![1]];
        assert_eq!(find_cycle(&edges), Some(vec![1]));
    }
}
