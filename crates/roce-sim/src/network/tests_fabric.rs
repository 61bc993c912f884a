//! Multi-switch behaviour: ECMP spreads flows over the spines, PFC propagates hop by hop.

use roce_core::{Duration, Instant};

use super::{flow, link};
use crate::network::{EcmpPorts, Network, NetworkConfig};
use crate::switch::{Pfc, SwitchConfig};
use crate::topology::{FiveTuple, LeafSpine, NodeId, NodeKind, Routes, Topology};

const G: u64 = 1_000_000_000;

/// Hosts 0–3 under leaf 8, 4–7 under leaf 9, spines 10–13; every link 100 Gb/s, 1 µs.
fn two_leaves_four_spines() -> Topology {
    let spec = LeafSpine {
        leaves: 2,
        spines: 4,
        hosts_per_leaf: 4,
        host_rate_bps: 100 * G,
        fabric_rate_bps: 100 * G,
        delay: Duration::from_micros(1),
    };
    spec.build().unwrap()
}

#[test]
fn ecmp_spreads_flows_between_two_leaves_over_every_spine() {
    let topology = two_leaves_four_spines();
    // Hosts 0–3 under leaf 8, 4–7 under leaf 9; spines 10–13. Every pair across: 16 flows.
    let flows: Vec<_> = (0..4)
        .flat_map(|s| (4..8).map(move |d| flow(s, d, 200_000, Instant::from_micros(1))))
        .collect();
    let mut net = Network::new(topology, NetworkConfig::default()).unwrap();
    let records = net.run_flows(&flows, Instant::from_millis(10));
    assert_eq!(records.len(), 16, "{:?}", net.flow_outcome());
    let mut sports: Vec<u16> = records.iter().map(|r| r.sport).collect();
    sports.sort_unstable();
    sports.dedup();
    assert!(sports.len() > 1, "every flow has source port {sports:?}");
    let (leaf, spines) = (NodeId(8), 10..14);
    let uplinks: Vec<u64> = spines
        .clone()
        .map(|s| net.port_stats(leaf, NodeId(s)).unwrap().sent_bytes)
        .collect();
    assert!(
        uplinks.iter().all(|&b| b > 0),
        "leaf 8's uplinks carried {uplinks:?} bytes"
    );
    // What went up came down to the other leaf: the spines carried all of it.
    let down: u64 = spines
        .map(|s| net.port_stats(NodeId(s), NodeId(9)).unwrap().sent_bytes)
        .sum();
    assert_eq!(down, uplinks.iter().sum::<u64>());
    assert_eq!(net.drops(), 0);
}

#[test]
fn pfc_pauses_propagate_from_switch_to_switch_to_the_hosts() {
    // h0 (0), h1 (1) → s0 (3) → s1 (4) → h2 (2). The hosts send 2 × 50 G into s0, which the
    // 100 G link to s1 carries; only s1's 25 G link to h2 is a bottleneck. s0's queue can grow
    // only while s1 pauses it, and only then can s0 pause the hosts.
    let topology = two_switches_in_a_line();
    let pfc = Pfc {
        xoff_bytes: 64 << 10,
        xon_bytes: 32 << 10,
        pause_quanta: 0xffff,
        priorities: 1 << 3,
    };
    let config = NetworkConfig {
        switch: SwitchConfig {
            buffer_bytes: 1 << 20,
            pfc: Some(pfc),
            ..SwitchConfig::default()
        },
        ..NetworkConfig::default()
    };
    let mut net = Network::new(topology, config).unwrap();
    let start = Instant::from_micros(1);
    let flows = [flow(0, 2, 2_000_000, start), flow(1, 2, 2_000_000, start)];
    let records = net.run_flows(&flows, Instant::from_millis(10));
    assert_eq!(records.len(), 2, "{:?}", net.flow_outcome());
    let (h0, h1, s0, s1) = (NodeId(0), NodeId(1), NodeId(3), NodeId(4));
    // s1 paused s0 on their link.
    assert!(net.port_stats(s1, s0).unwrap().pauses_sent > 0);
    let s0_up = net.port_stats(s0, s1).unwrap();
    assert!(s0_up.pauses_received > 0);
    // s0's queue towards s1 grew past XOFF, and s0 paused both hosts.
    assert!(s0_up.max_queue_bytes > pfc.xoff_bytes, "{s0_up:?}");
    for h in [h0, h1] {
        assert!(net.port_stats(s0, h).unwrap().pauses_sent > 0);
        assert!(net.host_stats(h).unwrap().pauses_received > 0);
    }
    // Lossless by PFC, not by luck: what an ingress holds stays under XOFF plus the headroom
    // (what the link still delivers during a pause's round trip, and a frame in service at
    // each end), so s0's queue is bounded by its two ingresses and s1's by its one.
    let headroom = |rate_bps: u64| (rate_bps * 2 / 8 / 1_000_000) as usize + 2 * (1024 + 78);
    let s0_bound = 2 * (pfc.xoff_bytes + headroom(50 * G));
    assert!(s0_up.max_queue_bytes <= s0_bound, "{s0_up:?} > {s0_bound}");
    let s1_down = net.port_stats(s1, NodeId(2)).unwrap();
    let s1_bound = pfc.xoff_bytes + headroom(100 * G);
    assert!(
        s1_down.max_queue_bytes <= s1_bound,
        "{s1_down:?} > {s1_bound}"
    );
    assert_eq!(net.drops(), 0);
    // Lossless, and the 25 G link was the pace: 4 MB take at least 1.28 ms.
    let last = records.iter().map(|r| r.fct).max().unwrap();
    assert!(last >= Duration::from_micros(1280), "{last:?}");
}

#[test]
fn without_pfc_the_same_traffic_overflows_s1() {
    // The control of the test above: the buffers are small enough that, unpaused, s1 drops.
    let topology = two_switches_in_a_line();
    let config = NetworkConfig {
        switch: SwitchConfig {
            buffer_bytes: 1 << 20,
            ..SwitchConfig::default()
        },
        ..NetworkConfig::default()
    };
    let mut net = Network::new(topology, config).unwrap();
    let start = Instant::from_micros(1);
    let flows = [flow(0, 2, 2_000_000, start), flow(1, 2, 2_000_000, start)];
    net.run_flows(&flows, Instant::from_millis(10));
    assert!(net.port_stats(NodeId(4), NodeId(2)).unwrap().drops > 0);
    assert_eq!(net.port_stats(NodeId(4), NodeId(3)).unwrap().pauses_sent, 0);
}

#[test]
fn a_switch_port_serialises_and_sizes_its_pauses_at_its_own_rate() {
    use crate::{SimPacket, Switch};
    let pfc = Pfc {
        xoff_bytes: 0,
        xon_bytes: 0,
        pause_quanta: 1000,
        priorities: 1,
    };
    let config = SwitchConfig {
        latency: Duration::ZERO,
        pfc: Some(pfc),
        ..SwitchConfig::default()
    };
    let mut s = Switch::new(config, 2, Vec::new(), 1);
    s.set_port_rate(0, 10 * G);
    s.set_port_rate(1, 40 * G);
    let addr = "198.18.0.1:4791".parse().unwrap();
    // 958 bytes of payload + 42 of headers: 1000 bytes, 200 ns at 40 G.
    let now = Instant::from_micros(5);
    assert!(s.enqueue(now, 0, 1, SimPacket::new(addr, addr, vec![0; 958])));
    // Ingress 0 passed XOFF: 1000 quanta of 512 bits at ingress 0's 10 G are 51.2 µs.
    let frames: Vec<_> = s.take_pause_frames(0).collect();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].until - frames[0].at, Duration::from_nanos(51_200));
    let first = s.depart(now, 1).unwrap();
    assert_eq!((first.packet.payload.len(), first.ingress), (958, 0));
    assert_eq!(first.end, now + Duration::from_nanos(200));
    assert_eq!(s.stats(1).sent_bytes, 1000);
    // Its bytes left as it started (as HPCC's switch releases them): the resume.
    let frames: Vec<_> = s.take_pause_frames(0).collect();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].until, frames[0].at);
    // A second packet waits for the end of the first: nothing leaves before it.
    assert!(s.enqueue(now, 0, 1, SimPacket::new(addr, addr, vec![0; 458])));
    assert!(s.depart(now + Duration::from_nanos(199), 1).is_none());
    assert_eq!((s.stats(1).sent, s.queue_bytes(1)), (1, 500));
    let second = s.depart(first.end, 1).unwrap();
    assert_eq!(second.end, first.end + Duration::from_nanos(100));
    assert_eq!((s.stats(1).sent, s.queue_bytes(1)), (2, 0));
}

/// h0 (0), h1 (1) → s0 (3) → s1 (4) → h2 (2): the hosts at 50 G, s0–s1 at 100 G, s1–h2 at 25 G.
fn two_switches_in_a_line() -> Topology {
    let kinds = vec![
        NodeKind::Host,
        NodeKind::Host,
        NodeKind::Host,
        NodeKind::Switch,
        NodeKind::Switch,
    ];
    let links = vec![
        link(0, 3, 50 * G),
        link(1, 3, 50 * G),
        link(3, 4, 100 * G),
        link(4, 2, 25 * G),
    ];
    Topology::new(kinds, links).unwrap()
}

#[test]
fn hpcc_ecmp_ports_send_each_flow_where_ns3_would_hash_it() {
    // Two leaves, four spines; three flows from host 0 to host 4, one after the other. With
    // `EcmpPorts::Hpcc` leaf 8 hashes the ports HPCC's third.cc gives them — 10 000, 10 001,
    // 10 002 against the file's dport 100 — and leaf 9 the ACKs' swapped ones, so each flow's
    // packets cross the spines `Routes` picks for those tuples, and no other.
    let topology = two_leaves_four_spines();
    let routes = Routes::new(topology.clone()).unwrap();
    let (h0, h4, leaf8, leaf9) = (NodeId(0), NodeId(4), NodeId(8), NodeId(9));
    let flows: Vec<_> = (0..3)
        .map(|i| flow(0, 4, 20_000, Instant::from_micros(1 + 100 * i)))
        .collect();
    let config = NetworkConfig {
        ecmp_ports: EcmpPorts::Hpcc,
        ..NetworkConfig::default()
    };
    let mut net = Network::new(topology, config).unwrap();
    assert_eq!(net.run_flows(&flows, Instant::from_millis(10)).len(), 3);
    let up: Vec<NodeId> = (0..3)
        .map(|k| {
            let tuple = FiveTuple::hpcc(h0, h4, 10_000 + k, 100);
            routes.ecmp_next_hop(leaf8, h4, &tuple).unwrap()
        })
        .collect();
    let back: Vec<NodeId> = (0..3)
        .map(|k| {
            let tuple = FiveTuple::hpcc(h4, h0, 100, 10_000 + k);
            routes.ecmp_next_hop(leaf9, h0, &tuple).unwrap()
        })
        .collect();
    for s in (10..14).map(NodeId) {
        let sent_up = net.port_stats(leaf8, s).unwrap().sent_bytes;
        assert_eq!(
            sent_up > 0,
            up.contains(&s),
            "leaf 8 -> {s:?}: {sent_up} bytes; {up:?}"
        );
        let sent_back = net.port_stats(leaf9, s).unwrap().sent_bytes;
        assert_eq!(
            sent_back > 0,
            back.contains(&s),
            "leaf 9 -> {s:?}: {sent_back} bytes; {back:?}"
        );
    }
}
