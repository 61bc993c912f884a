//! A shared buffer keeps an incast lossless where per-port buffers with static thresholds do
//! not: many ingress ports, each under its XOFF, overfill the one egress port they all send to.

use roce_core::{Duration, Instant};

use super::tests::{flow, link};
use crate::network::{Network, NetworkConfig, alpha_shift};
use crate::switch::{Pfc, SharedBuffer, SwitchConfig};
use crate::topology::{NodeId, NodeKind, Topology};

const G: u64 = 1_000_000_000;

/// Hosts 0–7 on switch 9, host 8 on switch 10; the switches joined at 400 G, the hosts at
/// 100 G: eight senders into one 100 G port, two switch hops.
pub(super) fn incast_topology() -> Topology {
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

/// 2 MB shared per switch, HPCC's thresholds, PFC on priority 3.
fn shared_2mb() -> SwitchConfig {
    SwitchConfig {
        buffer_bytes: 2 << 20,
        shared: Some(SharedBuffer::hpcc(2 << 20)),
        pfc: Some(pfc()),
        ..SwitchConfig::default()
    }
}

/// Eight 1 MB flows into host 8 at once; returns the network after the run and the flows'
/// records.
fn incast(switch: SwitchConfig) -> (Network, Vec<crate::FctRecord>) {
    incast_with(NetworkConfig {
        switch,
        queue_sample_every: Some(Duration::from_micros(1)),
        ..NetworkConfig::default()
    })
}

fn incast_with(config: NetworkConfig) -> (Network, Vec<crate::FctRecord>) {
    let mut net = Network::new(incast_topology(), config).unwrap();
    let start = Instant::from_micros(1);
    let flows: Vec<_> = (0..8).map(|h| flow(h, 8, 1_000_000, start)).collect();
    let records = net.run_flows(&flows, Instant::from_millis(20));
    (net, records)
}

#[test]
fn a_shared_buffer_pauses_an_incast_before_any_port_overflows() {
    let (net, records) = incast(shared_2mb());
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
fn queue_samples_show_the_incast_at_its_bottleneck_and_nowhere_else() {
    let (net, records) = incast(shared_2mb());
    let q = net.queue_lengths();
    // One sample a microsecond, of each of the 11 switch ports, until the run ended.
    let run_us = net.now().as_nanos() / 1000;
    assert!(
        q.samples.abs_diff(run_us) <= 1,
        "{} samples in {run_us} us",
        q.samples
    );
    assert_eq!(q.ports.len(), 9 + 2);
    let samples = |switch: u32, towards: u32| {
        let port = net.port_towards(NodeId(switch), NodeId(towards)).unwrap() as u16;
        let (_, _, bins) = q
            .ports
            .iter()
            .find(|(s, p, _)| (*s, *p) == (switch, port))
            .unwrap();
        assert_eq!(bins.iter().sum::<u64>(), q.samples);
        bins.clone()
    };
    // Switch 10's port to host 8 is the bottleneck: a queue most of the time the incast ran.
    let bottleneck = samples(10, 8);
    let busy: u64 = bottleneck[1..].iter().sum();
    let incast_us = records.iter().map(|r| r.fct).max().unwrap().as_nanos() as u64 / 1000;
    assert!(
        busy > incast_us / 2,
        "{busy} of {incast_us} samples above 1 KB"
    );
    // Nothing ever waits to go back to the senders (ACKs only).
    assert_eq!(samples(9, 0)[1..].iter().sum::<u64>(), 0);
    assert!(q.quantile_kb(1.0).unwrap() >= q.quantile_kb(0.5).unwrap());
    assert!(q.quantile_kb(1.0).unwrap() as usize >= bottleneck.len() - 1);
}

#[test]
fn per_port_buffers_with_static_thresholds_drop_the_same_incast() {
    // The control. Switch 10's one ingress holds the incast and pauses switch 9 past its
    // XOFF; at switch 9 each of the eight ingresses stays under its XOFF of 512 KB, yet
    // together they overfill the 1 MB of the port towards switch 10.
    let (net, _) = incast(per_port_static());
    assert!(net.drops() > 0);
    assert!(net.port_stats(NodeId(9), NodeId(10)).unwrap().drops > 0);
}

/// The control's static thresholds, which drop the incast.
fn per_port_static() -> SwitchConfig {
    SwitchConfig {
        buffer_bytes: 1 << 20,
        pfc: Some(Pfc {
            xoff_bytes: 512 << 10,
            xon_bytes: 256 << 10,
            ..pfc()
        }),
        ..SwitchConfig::default()
    }
}

#[test]
fn a_write_whose_retries_run_out_fails_its_flow_and_says_why() {
    // The control's drops with no retry left: a WRITE that lost a packet is NAKed (or times
    // out) once and ends in RetryExcErr.
    let mut config = NetworkConfig {
        switch: per_port_static(),
        ..NetworkConfig::default()
    };
    config.host.retry_cnt = 0;
    let (net, records) = incast_with(config);
    assert!(net.drops() > 0);
    let outcome = net.flow_outcome();
    assert!(outcome.failed > 0, "{outcome:?}");
    assert_eq!(outcome.retry_exceeded, outcome.failed, "{outcome:?}");
    assert_eq!(records.len() as u64 + outcome.failed, 8, "{outcome:?}");
    let retries: u64 = (0..8)
        .map(|h| {
            let stats = net.nic(NodeId(h)).unwrap().stats();
            stats.retransmit_timeouts + stats.rx_nak_seq_err
        })
        .sum();
    assert!(retries >= outcome.failed, "{retries} retries, {outcome:?}");
}

#[test]
fn faster_ports_may_take_more_of_the_free_space() {
    assert_eq!(alpha_shift(3, 100 * G, 100 * G), 3);
    assert_eq!(alpha_shift(3, 25 * G, 100 * G), 3);
    assert_eq!(alpha_shift(3, 200 * G, 100 * G), 2);
    assert_eq!(alpha_shift(3, 400 * G, 100 * G), 1);
    assert_eq!(alpha_shift(1, 1600 * G, 100 * G), 0);
}
