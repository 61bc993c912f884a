//! N NICs in virtual time, every pair of them joined by two [`Link`]s (a full mesh): the
//! topology for tests with more than two nodes. Each node is a [`Side`] with its NIC, PD, CQ and
//! region; [`Net::connect`] adds a connected QP pair between two nodes. (A switch with shared
//! queues, ECN marking and PFC comes with congestion control.)

use std::net::{IpAddr, Ipv4Addr};

use roce_core::{Instant, MAX_DATAGRAM, QpInit, Qpn};

use crate::event_loop::{self, EventLoop};
use crate::pair::{PairConfig, Side, connect, datagram, packet, side};
use crate::{Link, set_sim_time};

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
        let qpn_i = self.new_qp(i);
        let qpn_j = self.new_qp(j);
        let (addr_i, addr_j) = (self.nodes[i].addr, self.nodes[j].addr);
        let (psn_i, psn_j) = (self.config.a_psn, self.config.b_psn);
        connect(
            &self.config,
            &mut self.nodes[i].nic,
            qpn_i,
            addr_i,
            (addr_j, qpn_j),
            psn_j,
            psn_i,
            0,
        );
        connect(
            &self.config,
            &mut self.nodes[j].nic,
            qpn_j,
            addr_j,
            (addr_i, qpn_i),
            psn_i,
            psn_j,
            0,
        );
        (qpn_i, qpn_j)
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

    fn new_qp(&mut self, i: usize) -> Qpn {
        let node = &mut self.nodes[i];
        let init = QpInit {
            pd: node.pd,
            qp_type: self.config.qp_type,
            send_cq: node.cq,
            recv_cq: node.cq,
            max_send_wr: self.config.queue_depth,
            max_recv_wr: self.config.queue_depth,
        };
        node.nic.create_qp(&init).expect("a valid QP")
    }

    fn exchange(&mut self) {
        let now = self.now;
        let n = self.nodes.len();
        set_sim_time(now);
        loop {
            let mut progress = false;
            for (k, link) in self.links.iter_mut().enumerate() {
                while let Some(p) = link.deliver(now) {
                    self.nodes[k % n].nic.handle_datagram(now, datagram(&p));
                    progress = true;
                }
            }
            for (i, node) in self.nodes.iter_mut().enumerate() {
                if node.nic.poll_timeout().is_some_and(|at| at <= now) {
                    node.nic.handle_timeout(now);
                    progress = true;
                }
                while let Some(transmit) = node.nic.poll_transmit(now, &mut self.buf) {
                    // Routing: node j owns 198.18.0.(j + 1); anything else is lost.
                    let j = match transmit.dst.ip() {
                        IpAddr::V4(v4) => usize::from(v4.octets()[3]).wrapping_sub(1),
                        IpAddr::V6(_) => usize::MAX,
                    };
                    if j < n && j != i {
                        self.links[i * n + j].send(now, packet(&transmit, &self.buf));
                    }
                    progress = true;
                }
            }
            if !progress {
                return;
            }
        }
    }
}

impl EventLoop for Net {
    fn clock(&self) -> Instant {
        self.now
    }
    fn next_event(&mut self) -> bool {
        self.step()
    }
    fn settle(&mut self) {
        self.exchange();
    }
}
