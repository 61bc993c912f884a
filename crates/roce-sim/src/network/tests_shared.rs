//! A shared buffer keeps an incast lossless where per-port buffers with static thresholds do
//! not: many ingress ports, each under its XOFF, overfill the one egress port they all send to.

use roce_core::{Duration, Instant};

use super::tests::{flow, link};
use crate::network::{Network, NetworkConfig, alpha_shift};
use crate::switch::{Pfc, SharedBuffer, SwitchConfig};
use crate::topology::{NodeId, NodeKind, Topology};

const G: u64 = 1_000_000_000;

/// Hosts 0–7 on switch 9, host 8 on switch 10; the switches joined at 400 G, the hosts at
/// 100 G: eight senders into one 100 G port.
fn incast_topology() -> Topology {
    let mut kinds = vec![NodeKind::Host; 9];
    kinds.extend([NodeKind::Switch; 2]);
    let mut links: Vec<_> = (0..8).map(|h| link(h, 9, 100 * G)).collect();
    links.push(link(9, 10, 400 * G));
    links.push(link(10, 8, 100 * G));
    Topology::new(kinds, links).unwrap()
}

fn pfc() -> Pfc {
    Pfc {
        xoff_bytes: 0,
        xon_bytes: 0,
        pause_quanta: 0xffff,
        priorities: 1 << 3,
    }
}

/// Eight 1 MB flows into host 8 at once; returns the network after the run and the flows'
/// records.
fn incast(switch: SwitchConfig) -> (Network, Vec<crate::FctRecord>) {
    let config = NetworkConfig {
        switch,
        ..NetworkConfig::default()
    };
    let mut net = Network::new(incast_topology(), config).unwrap();
    let start = Instant::from_micros(1);
    let flows: Vec<_> = (0..8).map(|h| flow(h, 8, 1_000_000, start)).collect();
    let records = net.run_flows(&flows, Instant::from_millis(20));
    (net, records)
}

#[test]
fn a_shared_buffer_pauses_an_incast_before_any_port_overflows() {
    let (net, records) = incast(SwitchConfig {
        buffer_bytes: 2 << 20,
        shared: Some(SharedBuffer::hpcc(2 << 20)),
        pfc: Some(pfc()),
        ..SwitchConfig::default()
    });
    assert_eq!(records.len(), 8, "{:?}", net.flow_outcome());
    assert_eq!(net.drops(), 0);
    // Switch 10 paused switch 9 (its 400 G ingress holds the whole incast), and switch 9
    // paused its hosts in turn.
    let (s9, s10) = (NodeId(9), NodeId(10));
    assert!(net.port_stats(s10, s9).unwrap().pauses_sent > 0);
    let paused_hosts = (0..8)
        .filter(|&h| net.port_stats(s9, NodeId(h)).unwrap().pauses_sent > 0)
        .count();
    assert!(paused_hosts > 0, "switch 9 paused no host");
    // 8 MB through one 100 G port take at least 640 µs.
    let last = records.iter().map(|r| r.fct).max().unwrap();
    assert!(last >= Duration::from_micros(640), "{last:?}");
}

#[test]
fn per_port_buffers_with_static_thresholds_drop_the_same_incast() {
    // The control. Switch 10's one ingress holds the incast and pauses switch 9 past its
    // XOFF; at switch 9 each of the eight ingresses stays under its XOFF of 512 KB, yet
    // together they overfill the 1 MB of the port towards switch 10.
    let (net, _) = incast(SwitchConfig {
        buffer_bytes: 1 << 20,
        pfc: Some(Pfc {
            xoff_bytes: 512 << 10,
            xon_bytes: 256 << 10,
            ..pfc()
        }),
        ..SwitchConfig::default()
    });
    assert!(net.drops() > 0);
    assert!(net.port_stats(NodeId(9), NodeId(10)).unwrap().drops > 0);
}

#[test]
fn faster_ports_may_take_more_of_the_free_space() {
    assert_eq!(alpha_shift(3, 100 * G, 100 * G), 3);
    assert_eq!(alpha_shift(3, 25 * G, 100 * G), 3);
    assert_eq!(alpha_shift(3, 200 * G, 100 * G), 2);
    assert_eq!(alpha_shift(3, 400 * G, 100 * G), 1);
    assert_eq!(alpha_shift(1, 1600 * G, 100 * G), 0);
}
