//! HPCC through a network of two switches: the requests' INT header takes one record per hop
//! (`switch/int.rs`, stamped into the pool's slot), the ACKs echo both, and the senders hold
//! the bottleneck queue to a few packets where the same incast without congestion control
//! fills it; in both payload modes.

use roce_core::{Congestion, HpccConfig, Instant};

use super::tests::flow;
use super::tests_shared::incast_topology;
use crate::network::{Network, NetworkConfig, Payload};
use crate::switch::SwitchConfig;
use crate::topology::NodeId;

/// Eight 500 KB flows into host 8 at once, under `congestion`, 4 MB of buffer per port:
/// the flows finished, the bottleneck port's largest queue, the drops and the senders' rate
/// decreases.
fn incast(congestion: Congestion, payload: Payload) -> (usize, usize, u64, u64) {
    let mut config = NetworkConfig {
        switch: SwitchConfig {
            buffer_bytes: 4 << 20,
            ..SwitchConfig::default()
        },
        payload,
        ..NetworkConfig::default()
    };
    config.host.nic.congestion = congestion;
    let mut net = Network::new(incast_topology(), config).unwrap();
    let start = Instant::from_micros(1);
    let flows: Vec<_> = (0..8).map(|h| flow(h, 8, 500_000, start)).collect();
    let records = net.run_flows(&flows, Instant::from_millis(20));
    let bottleneck = net.port_stats(NodeId(10), NodeId(8)).unwrap();
    let decreases = (0..8)
        .map(|h| net.nic(NodeId(h)).unwrap().stats().rate_decreases)
        .sum();
    (
        records.len(),
        bottleneck.max_queue_bytes,
        net.drops(),
        decreases,
    )
}

#[test]
fn hpcc_holds_a_two_hop_incast_below_no_cc_alike_in_both_payload_modes() {
    let hpcc = Congestion::Hpcc(HpccConfig::default());
    let (done, none_queue, _, _) = incast(Congestion::None, Payload::Lengths);
    assert_eq!(done, 8);
    let runs: Vec<_> = [Payload::Bytes, Payload::Lengths]
        .map(|payload| incast(hpcc, payload))
        .into();
    for &(done, queue, drops, decreases) in &runs {
        assert_eq!((done, drops), (8, 0));
        // The records reached the senders, who cut their windows by them.
        assert!(decreases > 0);
        // The first RTT goes at line rate (the first ACK only records the hops), so the first
        // burst still queues (843 KB against 3.2 MB without congestion control).
        assert!(queue < none_queue / 2, "{queue} vs {none_queue}");
    }
    // The records stamped into a lengths-mode slot are those of the whole packet.
    assert_eq!(runs[0], runs[1]);
}

/// HPCC-PINT through the same incast: the switches meter their ports and raise the requests'
/// one value (`switch/int.rs`, into the pool's slot), the ACKs echo it, and the senders hold
/// the queue as HPCC does; both payload modes alike.
#[test]
fn hpcc_pint_holds_the_same_incast_alike_in_both_payload_modes() {
    let pint = Congestion::Hpcc(HpccConfig {
        pint: true,
        ..HpccConfig::default()
    });
    let (_, none_queue, _, _) = incast(Congestion::None, Payload::Lengths);
    let runs: Vec<_> = [Payload::Bytes, Payload::Lengths]
        .map(|payload| incast(pint, payload))
        .into();
    for &(done, queue, drops, decreases) in &runs {
        assert_eq!((done, drops), (8, 0));
        assert!(decreases > 0, "the values reached the senders");
        assert!(queue < none_queue / 2, "{queue} vs {none_queue}");
    }
    assert_eq!(runs[0], runs[1]);
    // INT's 44 bytes a request and PINT's 4 are different runs.
    let hpcc = incast(Congestion::Hpcc(HpccConfig::default()), Payload::Lengths);
    assert_ne!(runs[1], hpcc);
}
