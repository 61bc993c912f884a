//! N NICs in virtual time, every pair of them joined by two [`Link`]s (a full mesh): the
//! topology for tests with more than two nodes. Each node is a [`Side`] with its NIC, PD, CQ and
//! region; [`Net::connect`] adds a connected QP pair between two nodes. (A switch with shared
//! queues, ECN marking and PFC comes with congestion control.)

use std::net::{IpAddr, Ipv4Addr};

use roce_core::{Instant, MAX_DATAGRAM, Qpn};

use crate::event_loop::{self, Network};
use crate::pair::{PairConfig, Side, connect_nodes, side};
use crate::{Link, SimPacket, set_sim_time};

/// N nodes over a full mesh of links.
#[derive(Debug)]
pub struct Net {
    /// The nodes; node `i` is at 198.18.0.(i + 1).
    pub nodes: Vec<Side>,
    /// `links[i * n + j]` carries what node i sends to node j (unused for i == j).
    links: Vec<Link>,
    /// Simulated time.
    pub now: Instant,
    config: PairConfig,
    buf: Vec<u8>,
}

impl Net {
    /// `n` nodes (at most 250), each with a NIC, a PD, a CQ, a region and one QP of
    /// `config.qp_type` that is not connected; links as `config.link`, seeded from
    /// `config.seed` per direction.
    pub fn new(n: usize, config: &PairConfig) -> Self {
        assert!((1..=250).contains(&n), "1 to 250 nodes");
        let nodes = (0..n).map(|i| side(config, Self::addr(i))).collect();
        let links = (0..n * n)
            .map(|k| Link::new(config.link, config.seed.wrapping_add(k as u64)))
            .collect();
        Self {
            nodes,
            links,
            now: Instant::ZERO,
            config: config.clone(),
            buf: vec![0; MAX_DATAGRAM],
        }
    }

    /// The address of node `i`.
    pub fn addr(i: usize) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, (i + 1) as u8))
    }

    /// Creates a QP on node `i` and one on node `j` and connects them to each other; returns
    /// their numbers. Completions go to each node's CQ.
    pub fn connect(&mut self, i: usize, j: usize) -> (Qpn, Qpn) {
        connect_nodes(&self.config, &mut self.nodes, i, j, 0)
    }

    /// The link that carries what node `i` sends to node `j`.
    pub fn link(&mut self, i: usize, j: usize) -> &mut Link {
        let n = self.nodes.len();
        &mut self.links[i * n + j]
    }

    /// Delivers what is due, fires due timers, moves transmits onto the links, then jumps `now`
    /// to the next event. Returns false when nothing is scheduled.
    pub fn step(&mut self) -> bool {
        self.exchange();
        let timers = self.nodes.iter().filter_map(|node| node.nic.poll_timeout());
        let arrivals = self.links.iter().filter_map(Link::next_arrival);
        match timers.chain(arrivals).min() {
            Some(at) => {
                self.now = self.now.max(at);
                set_sim_time(self.now);
                true
            }
            None => false,
        }
    }

    /// Steps until `done(self)` holds or `deadline` passes; returns whether it held.
    pub fn drive_while(&mut self, deadline: Instant, done: impl FnMut(&mut Self) -> bool) -> bool {
        event_loop::drive_while(self, deadline, done)
    }

    fn exchange(&mut self) {
        let mut mesh = Mesh {
            links: &mut self.links,
            n: self.nodes.len(),
        };
        event_loop::exchange(self.now, &mut self.nodes, &mut mesh, &mut self.buf);
    }
}

/// A full mesh of links: `links[i * n + j]` carries what node i sends to node j.
struct Mesh<'a> {
    links: &'a mut [Link],
    n: usize,
}

impl Network for Mesh<'_> {
    fn deliver(&mut self, now: Instant, to: usize) -> Option<SimPacket> {
        (0..self.n).find_map(|from| self.links.get_mut(from * self.n + to)?.deliver(now))
    }

    fn send(&mut self, now: Instant, from: usize, packet: SimPacket) {
        // Routing: node j owns 198.18.0.(j + 1); anything else is lost.
        let to = match packet.dst.ip() {
            IpAddr::V4(v4) => usize::from(v4.octets()[3]).wrapping_sub(1),
            IpAddr::V6(_) => usize::MAX,
        };
        if to < self.n && to != from {
            self.links[from * self.n + to].send(now, packet);
        }
    }
}

event_loop::impl_event_loop!(Net);
