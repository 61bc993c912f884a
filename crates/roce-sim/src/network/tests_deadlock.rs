//! PFC deadlocks: a ring whose flows each cross two of its links deadlocks, and is reported
//! with the switches in the loop; the same ring with one-hop flows does not.

use roce_core::{Duration, Instant};

use super::tests::{flow, link};
use crate::network::{Network, NetworkConfig, PausedQueue};
use crate::switch::{Pfc, SwitchConfig};
use crate::topology::{NodeId, NodeKind, Topology};

const G: u64 = 1_000_000_000;
/// Switches in the ring; host i (node i) hangs off switch RING + i.
const RING: u32 = 5;

/// Five switches in a ring, a host on each; lossless (PFC on priority 3), no ECN.
fn ring() -> Network {
    let mut kinds = vec![NodeKind::Host; RING as usize];
    kinds.extend(vec![NodeKind::Switch; RING as usize]);
    let mut links: Vec<_> = (0..RING).map(|i| link(i, RING + i, 100 * G)).collect();
    links.extend((0..RING).map(|i| link(RING + i, RING + (i + 1) % RING, 100 * G)));
    let topology = Topology::new(kinds, links).unwrap();
    let config = NetworkConfig {
        switch: SwitchConfig {
            buffer_bytes: 4 << 20,
            pfc: Some(Pfc {
                xoff_bytes: 64 << 10,
                xon_bytes: 32 << 10,
                pause_quanta: 0xffff,
                priorities: 1 << 3,
            }),
            ..SwitchConfig::default()
        },
        ..NetworkConfig::default()
    };
    Network::new(topology, config).unwrap()
}

#[test]
fn flows_that_chain_around_a_ring_deadlock_it_and_the_loop_is_named() {
    // Host i sends to host i + 2: the one shortest path runs clockwise over two ring links,
    // so each ring link carries two flows at twice its rate, and the bytes a switch holds from
    // its counter-clockwise neighbour wait for its clockwise one: a cyclic buffer dependency.
    let mut net = ring();
    let start = Instant::from_micros(1);
    let flows: Vec<_> = (0..RING)
        .map(|i| flow(i, (i + 2) % RING, 20_000_000, start))
        .collect();
    let until = Instant::from_millis(20);
    let records = net.run_flows(&flows, until);
    let deadlock = net.deadlock().expect("the ring deadlocked").clone();
    // The loop is the five clockwise ring links, on the RoCE priority.
    let expected: Vec<PausedQueue> = (0..RING)
        .map(|i| PausedQueue {
            switch: NodeId(RING + i),
            towards: NodeId(RING + (i + 1) % RING),
            priority: 3,
        })
        .collect();
    assert_eq!(deadlock.cycle, expected, "{deadlock}");
    assert!(deadlock.since < deadlock.confirmed && deadlock.confirmed < until);
    // The run stopped there: nothing finished, nothing was dropped (PFC is lossless).
    assert!(records.is_empty(), "{records:?}");
    assert_eq!(net.flow_outcome().unfinished, u64::from(RING));
    assert_eq!(net.drops(), 0);
    assert!(net.now() < until);
    // The same loop read from the state where the run stopped.
    assert_eq!(net.blocked_cycle(), Some(expected));
}

#[test]
fn one_hop_flows_on_the_same_ring_finish_without_a_deadlock() {
    // Host i sends to host i + 1: each flow crosses one ring link, nothing chains.
    let mut net = ring();
    let start = Instant::from_micros(1);
    let flows: Vec<_> = (0..RING)
        .map(|i| flow(i, (i + 1) % RING, 2_000_000, start))
        .collect();
    let records = net.run_flows(&flows, Instant::from_millis(20));
    assert_eq!(records.len(), RING as usize, "{:?}", net.flow_outcome());
    assert_eq!(net.deadlock(), None);
    assert!(records.iter().all(|r| r.fct > Duration::from_micros(100)));
}
