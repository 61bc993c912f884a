//! Lone flows against their ideal FCT, forwarding against the routes, determinism, and a small
//! Poisson workload. PFC and ECMP spreading are in `tests_fabric.rs`.

use roce_core::{Duration, Instant};

use super::*;
use crate::topology::{LeafSpine, LinkSpec, fat_tree};
use crate::workload::generate::{Traffic, poisson};
use crate::workload::{Cdf, FlowSpec};
use crate::{FctRecord, SlowdownTable};

const G100: u64 = 100_000_000_000;

pub(super) fn link(a: u32, b: u32, rate_bps: u64) -> LinkSpec {
    LinkSpec {
        a: NodeId(a),
        b: NodeId(b),
        rate_bps,
        delay: Duration::from_micros(1),
        error_rate: 0.0,
    }
}

pub(super) fn flow(src: u32, dst: u32, size_bytes: u64, start: Instant) -> FlowSpec {
    FlowSpec {
        src: NodeId(src),
        dst: NodeId(dst),
        pg: 3,
        dport: 100,
        size_bytes,
        start,
    }
}

/// Time to send one full packet (path MTU, all headers and the RETH) at `rate_bps`.
fn packet_time(net: &Network, rate_bps: u64) -> Duration {
    let mtu = u64::from(net.config().host.mtu.bytes());
    let bytes = mtu + ideal_model(mtu).header_bytes + RETH_BYTES;
    Duration::from_nanos((bytes * 8 * 1_000_000_000).div_ceil(rate_bps))
}

/// Runs one flow alone and checks its FCT is its ideal within one packet time at the
/// bottleneck (plus a nanosecond of rounding per hop).
fn assert_lone_flow_is_ideal(topology: Topology, src: u32, dst: u32, size: u64) {
    let mut net = Network::new(topology, NetworkConfig::default()).unwrap();
    let start = Instant::from_micros(3);
    let records = net.run_flows(&[flow(src, dst, size, start)], Instant::from_millis(20));
    assert_eq!(records.len(), 1, "{:?}", net.flow_outcome());
    let r = records[0];
    let path = net
        .routes()
        .path_info(NodeId(src), NodeId(dst), 1024)
        .unwrap();
    assert_eq!(r.ideal, net.ideal_fct(r.src, r.dst, size).unwrap());
    assert!(r.ideal > path.base_rtt());
    let slack = packet_time(&net, path.bottleneck_bps) + Duration::from_nanos(path.hops as u64);
    let (fct, ideal) = (r.fct.as_nanos(), r.ideal.as_nanos());
    assert!(
        fct.abs_diff(ideal) <= slack.as_nanos(),
        "fct {fct} ns vs ideal {ideal} ns: more than {} ns apart over {} hops",
        slack.as_nanos(),
        path.hops
    );
    assert_eq!(r.start, start);
    assert_eq!(net.drops(), 0);
    // Every data packet and every ACK crossed each link of the path once.
    let sent = net.host_stats(NodeId(src)).unwrap().sent;
    let acks = net.host_stats(NodeId(dst)).unwrap().sent;
    assert_eq!(net.packet_hops(), (sent + acks) * path.hops as u64);
    assert_eq!(net.packets_in_flight(), 0);
    // The run ended within one check of its flow's end, not at `until`.
    let end = start + r.fct;
    assert!(
        net.now() > end && net.now() <= end + CHECK_EVERY,
        "{:?}",
        net.now()
    );
}

#[test]
fn lone_flow_on_one_switch_meets_its_ideal_fct() {
    let kinds = vec![NodeKind::Host, NodeKind::Host, NodeKind::Switch];
    let topology = Topology::new(kinds, vec![link(0, 2, G100), link(1, 2, G100)]).unwrap();
    assert_lone_flow_is_ideal(topology, 0, 1, 1_000_000);
}

#[test]
fn lone_flow_across_a_k4_fat_tree_meets_its_ideal_fct() {
    let topology = fat_tree(4, G100, 4 * G100, Duration::from_micros(1)).unwrap();
    // Host 0 and host 15 are in different pods: six links through a core.
    assert_lone_flow_is_ideal(topology, 0, 15, 300_000);
}

#[test]
fn forwarding_tables_agree_with_routes_ecmp() {
    let topology = fat_tree(4, G100, G100, Duration::from_micros(1)).unwrap();
    let routes = Routes::new(topology).unwrap();
    let wiring = Wiring::new(&routes);
    let topology = routes.topology();
    let hosts: Vec<NodeId> = topology.hosts().collect();
    let mut choices = std::collections::BTreeSet::new();
    for s in topology.switches() {
        for &dst in &hosts {
            for sport in [49152, 50000, 61234, 65535] {
                let (src, d) = (hosts[0], dst);
                let tuple = crate::topology::FiveTuple::hpcc(src, d, sport, 4791);
                let from = std::net::SocketAddr::new(Ipv4Addr::from(src.hpcc_ipv4()).into(), sport);
                let to = std::net::SocketAddr::new(Ipv4Addr::from(d.hpcc_ipv4()).into(), 4791);
                let port = wiring.forward(s.0, from, to).unwrap();
                let next = routes.ecmp_next_hop(s, d, &tuple).unwrap();
                assert_eq!(topology.neighbors(s)[usize::from(port)].0, next);
                choices.insert((s, d, port));
            }
        }
    }
    // Not everything went out of one port per destination: the hash spreads.
    assert!(choices.len() > topology.switches().count() * hosts.len());
    let stranger = std::net::SocketAddr::new(Ipv4Addr::new(198, 18, 0, 1).into(), 4791);
    assert_eq!(wiring.forward(16, stranger, stranger), None);
}

fn leaf_spine(hosts_per_leaf: u32, spines: u32) -> Topology {
    LeafSpine {
        leaves: 2,
        spines,
        hosts_per_leaf,
        host_rate_bps: G100,
        fabric_rate_bps: G100,
        delay: Duration::from_micros(1),
    }
    .build()
    .unwrap()
}

fn hadoop_flows(topology: &Topology, load: f64, window: Duration, seed: u64) -> Vec<FlowSpec> {
    let traffic = Traffic {
        hosts: topology.hosts().collect(),
        host_rate_bps: G100,
        start: Instant::ZERO,
        duration: window,
        pg: 3,
        dport: 100,
        seed,
    };
    poisson(&traffic, load, &Cdf::fb_hadoop()).unwrap()
}

fn run(topology: &Topology, flows: &[FlowSpec], until: Instant) -> (Vec<FctRecord>, Network) {
    let mut net = Network::new(topology.clone(), NetworkConfig::default()).unwrap();
    let records = net.run_flows(flows, until);
    (records, net)
}

/// An observer that breaks (a Ctrl-C) stops the run there: the records are those of the flows
/// finished by then, the rest are counted unfinished, and the time is where it stopped.
#[test]
fn an_observer_that_breaks_stops_the_flows_where_they_are() {
    let topology = leaf_spine(4, 2);
    let flows = hadoop_flows(&topology, 0.3, Duration::from_micros(300), 7);
    let until = Instant::from_millis(30);
    let (all, _) = run(&topology, &flows, until);
    let mut net = Network::new(topology.clone(), NetworkConfig::default()).unwrap();
    let stop = Instant::from_micros(200);
    let some = net.run_flows_observed(&flows, until, |p| {
        if p.now >= stop {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    });
    assert!(
        net.now() >= stop && net.now() < stop + CHECK_EVERY,
        "{}",
        net.now()
    );
    assert!(some.len() < all.len(), "{} of {}", some.len(), all.len());
    let outcome = net.flow_outcome();
    assert_eq!(outcome.finished, some.len() as u64);
    assert!(outcome.unfinished > 0);
    // What finished before the stop finished as in the whole run.
    for record in &some {
        assert!(all.contains(record), "{record:?}");
    }
}

#[test]
fn the_same_flows_give_the_same_records() {
    let topology = leaf_spine(4, 2);
    let flows = hadoop_flows(&topology, 0.3, Duration::from_micros(300), 7);
    assert!(flows.len() > 10, "{} flows", flows.len());
    let (a, net_a) = run(&topology, &flows, Instant::from_millis(30));
    let (b, net_b) = run(&topology, &flows, Instant::from_millis(30));
    assert_eq!(a.len(), flows.len());
    assert_eq!(a, b);
    assert_eq!(net_a.packet_hops(), net_b.packet_hops());
}

#[test]
fn a_poisson_workload_completes_with_physical_fcts() {
    let topology = leaf_spine(4, 2);
    let flows = hadoop_flows(&topology, 0.3, Duration::from_millis(2), 1);
    assert!(flows.len() > 50, "{} flows", flows.len());
    let (records, net) = run(&topology, &flows, Instant::from_millis(100));
    let outcome = net.flow_outcome();
    assert_eq!(outcome.started, flows.len() as u64);
    assert_eq!(outcome.finished, flows.len() as u64, "{outcome:?}");
    assert_eq!(records.len(), flows.len());
    for r in &records {
        let path = net.routes().path_info(r.src, r.dst, 1024).unwrap();
        // No flow beats light and its own bytes through the bottleneck.
        let floor =
            path.delay * 2 + Duration::from_nanos(r.size * 8 * 1_000_000_000 / path.bottleneck_bps);
        assert!(r.fct >= floor, "{r:?} faster than {floor:?}");
        let slowdown = r.slowdown();
        assert!(slowdown.is_finite() && slowdown >= 1.0, "{r:?}");
    }
    // Some flows queued behind others: not every slowdown is the clamp's 1.
    assert!(records.iter().any(|r| r.fct > r.ideal * 2));
    let table = SlowdownTable::new(&records, 10).unwrap();
    assert_eq!(table.flows, records.len());
}

fn lengths() -> NetworkConfig {
    NetworkConfig {
        payload: Payload::Lengths,
        ..NetworkConfig::default()
    }
}

/// A lone flow of several WRITEs (the last one short) takes exactly as long with lengths only as
/// with bytes, and the receiver's region took exactly its bytes.
#[test]
fn a_lone_flow_in_lengths_mode_has_the_fct_of_bytes_mode() {
    let topology = leaf_spine(2, 2);
    let size = 3 * REGION_LEN as u64 + 1000;
    let flows = [flow(0, 3, size, Instant::from_micros(2))];
    let until = Instant::from_millis(20);
    let mut bytes = Network::new(topology.clone(), NetworkConfig::default()).unwrap();
    let mut lens = Network::new(topology, lengths()).unwrap();
    let a = bytes.run_flows(&flows, until);
    let b = lens.run_flows(&flows, until);
    assert_eq!(a.len(), 1, "{:?}", bytes.flow_outcome());
    assert_eq!(a, b);
    assert_eq!(bytes.packet_hops(), lens.packet_hops());
    assert_eq!(lens.bytes_written(NodeId(3)), Some(size));
    assert_eq!(lens.bytes_written(NodeId(0)), Some(0));
    assert_eq!(bytes.bytes_written(NodeId(3)), None);
    // Bytes mode checks ICRCs, lengths mode skips them.
    let rx = |net: &Network| net.nic(NodeId(3)).unwrap().stats().rx_icrc_skipped;
    assert_eq!(rx(&bytes), 0);
    assert!(rx(&lens) > size / 1024);
    assert_eq!(lens.packets_in_flight(), 0);
}

/// A flow of READs moves the same bytes as its WRITEs, the same way: the receiver asks, the
/// sender's QP sends the data, the receiver's region takes every byte, and the flow ends when
/// the last response is in. The receiver sends one request per READ and no ACK; the sender
/// sends as many data packets as for the WRITEs. Its FCT is the WRITEs' within one round
/// trip: the READs wait for their requests' one way where the WRITEs wait for their last ACK.
#[test]
fn a_read_flow_moves_its_bytes_from_its_sender_and_ends_at_its_last_response() {
    let topology = leaf_spine(2, 2);
    let size = 3 * REGION_LEN as u64 + 1000;
    let flows = [flow(0, 3, size, Instant::from_micros(2))];
    let until = Instant::from_millis(20);
    let mut write = Network::new(topology.clone(), lengths()).unwrap();
    let mut read = Network::new(
        topology,
        NetworkConfig {
            verb: FlowVerb::Read,
            ..lengths()
        },
    )
    .unwrap();
    let w = write.run_flows(&flows, until);
    let r = read.run_flows(&flows, until);
    assert_eq!((w.len(), r.len()), (1, 1), "{:?}", read.flow_outcome());
    assert_eq!(read.bytes_written(NodeId(3)), Some(size));
    assert_eq!(read.bytes_written(NodeId(0)), Some(0));
    // Four READs (the region's size each, the last 1 000 bytes): four requests, no ACK.
    let (sender, receiver) = (
        read.host_stats(NodeId(0)).unwrap(),
        read.host_stats(NodeId(3)).unwrap(),
    );
    assert_eq!(receiver.sent, 4);
    assert_eq!(sender.sent, write.host_stats(NodeId(0)).unwrap().sent);
    let rtt = read
        .routes()
        .path_info(NodeId(0), NodeId(3), 1024)
        .unwrap()
        .base_rtt();
    let (wf, rf) = (w[0].fct, r[0].fct);
    assert!(
        rf.as_nanos().abs_diff(wf.as_nanos()) <= rtt.as_nanos(),
        "READ {rf:?} against WRITE {wf:?}, a round trip {rtt:?}"
    );
    assert_eq!(
        (r[0].src, r[0].dst, r[0].size),
        (NodeId(0), NodeId(3), size)
    );
    assert_eq!(read.packets_in_flight(), 0);
}

/// The note on READ flows speaks for the algorithms that cannot hear them, and only then.
#[test]
fn the_read_note_names_the_algorithms_deaf_to_reads() {
    use roce_core::{Congestion, DcqcnConfig, DctcpConfig, HpccConfig, TimelyConfig};
    let with = |verb, congestion| {
        let mut config = NetworkConfig {
            verb,
            ..NetworkConfig::default()
        };
        config.host.nic.congestion = congestion;
        read_note(&config)
    };
    let pint = HpccConfig {
        pint: true,
        ..HpccConfig::default()
    };
    for (congestion, name) in [
        (Congestion::Hpcc(HpccConfig::default()), "HPCC:"),
        (Congestion::Hpcc(pint), "HPCC-PINT:"),
        (Congestion::Timely(TimelyConfig::default()), "TIMELY:"),
        (Congestion::Dctcp(DctcpConfig::default()), "DCTCP:"),
    ] {
        let note = with(FlowVerb::Read, congestion).expect("a note");
        assert!(
            note.starts_with(&format!("READ flows under {name}")),
            "{note}"
        );
        assert_eq!(with(FlowVerb::Write, congestion), None);
    }
    assert_eq!(with(FlowVerb::Read, Congestion::None), None);
    let dcqcn = Congestion::Dcqcn(DcqcnConfig::default());
    assert_eq!(with(FlowVerb::Read, dcqcn), None);
}

/// A Poisson workload gives the same records in both modes, and the regions took every byte of
/// the flows to them.
#[test]
fn a_workload_in_lengths_mode_gives_the_records_of_bytes_mode() {
    let topology = leaf_spine(4, 2);
    let flows = hadoop_flows(&topology, 0.3, Duration::from_micros(300), 3);
    assert!(flows.len() > 10, "{} flows", flows.len());
    let until = Instant::from_millis(30);
    let (a, _) = run(&topology, &flows, until);
    let mut lens = Network::new(topology.clone(), lengths()).unwrap();
    let b = lens.run_flows(&flows, until);
    assert_eq!(a.len(), flows.len());
    assert_eq!(a, b);
    for h in topology.hosts() {
        let to_h: u64 = flows
            .iter()
            .filter(|f| f.dst == h)
            .map(|f| f.size_bytes)
            .sum();
        assert_eq!(lens.bytes_written(h), Some(to_h), "host {h:?}");
    }
}

#[path = "tests_fabric.rs"]
mod fabric;

/// `Network::check` refuses what `Network::new` refuses, with the same error, and passes what
/// it builds.
#[test]
fn check_refuses_what_new_refuses() {
    let cases = [
        // Host 0 on two switches.
        "4 2 4\n2 3\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n0 3 100Gbps 1us 0\n2 3 100Gbps 1us 0\n",
        // Host 1 on nothing.
        "3 1 1\n2\n0 2 100Gbps 1us 0\n",
        // Good.
        "3 1 2\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n",
    ];
    let mut refused = 0;
    for text in cases {
        let topology = Topology::from_hpcc("t.txt", text).unwrap();
        let checked = Network::check(&topology).map_err(|e| e.to_string());
        let built = Network::new(topology, NetworkConfig::default())
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(checked, built, "{text}");
        refused += usize::from(checked.is_err());
    }
    assert_eq!(refused, 2);
}
