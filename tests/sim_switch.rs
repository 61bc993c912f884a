//! The switch: drop-tail, ECN marking at enqueue and at dequeue, ETS, and PFC turning an incast
//! that drops into one that pauses.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_core::{Duration, Instant, Remote, SendOp, SendWr, Sge, WcStatus};
use roce_sim::switch::{Ets, MarkAt, Pfc};
use roce_sim::{EcnMarking, Fabric, PairConfig, SimPacket, Switch, SwitchConfig};
use roce_tests::sim::pattern;
use roce_wire::frame::Ecn;

fn host(i: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, i + 1)), 4791)
}

fn packet(to: u8, dscp: u8, ecn: Ecn, tag: u8) -> SimPacket {
    SimPacket {
        dscp,
        ecn,
        ..SimPacket::new(host(9), host(to), vec![tag; 1000])
    }
}

fn switch(config: SwitchConfig) -> Switch {
    Switch::new(config, 2, vec![(host(0).ip(), 0), (host(1).ip(), 1)], 7)
}

/// Everything the switch delivers on port 1 until it is idle.
fn drain(sw: &mut Switch) -> Vec<SimPacket> {
    let mut out = Vec::new();
    let mut now = Instant::ZERO;
    while let Some(at) = sw.next_event() {
        now = now.max(at);
        sw.advance(now);
        while let Some(p) = sw.deliver(now, 1) {
            out.push(p);
        }
    }
    out
}

#[test]
fn strict_priority_is_served_before_weighted_classes() {
    let ets = Ets {
        strict: [false, false, false, false, false, false, true, false],
        ..Ets::default()
    };
    let mut sw = switch(SwitchConfig {
        ets,
        ..SwitchConfig::default()
    });
    for tag in 0..3 {
        sw.receive(Instant::ZERO, 0, packet(1, 0, Ecn::NotEct, tag));
    }
    sw.receive(Instant::ZERO, 0, packet(1, 48, Ecn::NotEct, 9)); // DSCP 48: priority 6, strict
    let order: Vec<u8> = drain(&mut sw).iter().map(|p| p.payload[0]).collect();
    // The first packet was already on the wire; the strict one overtakes the other two.
    assert_eq!(order, [0, 9, 1, 2]);
}

#[test]
fn a_pause_from_the_host_holds_its_priority_and_lets_others_pass() {
    // 10 Gb/s: a 1042-byte frame takes 834 ns. The host on port 1 pauses priority 3 for 10 µs.
    let mut sw = switch(SwitchConfig::default());
    let pause_end = Instant::ZERO + Duration::from_micros(10);
    sw.pause_egress(Instant::ZERO, 1, 3, pause_end);
    assert_eq!(sw.stats(1).pauses_received, 1);
    sw.receive(Instant::ZERO, 0, packet(1, 26, Ecn::NotEct, 1)); // DSCP 26: priority 3, paused
    sw.receive(Instant::ZERO, 0, packet(1, 0, Ecn::NotEct, 2)); // priority 0 passes
    let mut now = Instant::ZERO;
    let mut arrivals = Vec::new();
    while let Some(at) = sw.next_event() {
        now = now.max(at);
        sw.advance(now);
        while let Some(p) = sw.deliver(now, 1) {
            arrivals.push((p.payload[0], now));
        }
    }
    assert_eq!(arrivals.len(), 2);
    assert_eq!(arrivals[0].0, 2, "the unpaused class goes first");
    assert!(arrivals[0].1 < pause_end);
    assert_eq!(arrivals[1].0, 1);
    assert!(
        arrivals[1].1 > pause_end,
        "the paused class waits out the pause"
    );

    // A resume (zero quanta) lets a paused class go at once.
    let mut sw = switch(SwitchConfig::default());
    sw.pause_egress(Instant::ZERO, 1, 3, pause_end);
    sw.receive(Instant::ZERO, 0, packet(1, 26, Ecn::NotEct, 1));
    let resume = Instant::ZERO + Duration::from_micros(2);
    sw.advance(resume);
    sw.pause_egress(resume, 1, 3, resume);
    let end = sw.next_event().unwrap();
    assert!(
        end < pause_end,
        "sent after the resume, not after the pause: {end}"
    );
}

#[test]
fn weighted_classes_share_by_weight() {
    let mut weights = [1; 8];
    weights[3] = 3;
    let mut sw = switch(SwitchConfig {
        ets: Ets {
            weights,
            ..Ets::default()
        },
        ..SwitchConfig::default()
    });
    for _ in 0..40 {
        sw.receive(Instant::ZERO, 0, packet(1, 0, Ecn::NotEct, 0)); // priority 0
        sw.receive(Instant::ZERO, 0, packet(1, 26, Ecn::NotEct, 3)); // DSCP 26: priority 3
    }
    let first: Vec<u8> = drain(&mut sw)
        .iter()
        .take(40)
        .map(|p| p.payload[0])
        .collect();
    let threes = first.iter().filter(|&&t| t == 3).count();
    assert!(
        (28..=32).contains(&threes),
        "weight 3 against 1 should take ~3/4 of the first 40, took {threes}"
    );
}

#[test]
fn ecn_marks_by_the_queue_found_or_left() {
    let ecn = Some(EcnMarking {
        k_min_bytes: 0,
        k_max_bytes: 1,
        p_max: 1.0,
    });
    for (mark_at, expected) in [
        (MarkAt::Enqueue, [false, false, true]),
        (MarkAt::Dequeue, [false, true, false]),
    ] {
        let mut sw = switch(SwitchConfig {
            ecn,
            mark_at,
            ..SwitchConfig::default()
        });
        for tag in 0..3 {
            sw.receive(Instant::ZERO, 0, packet(1, 0, Ecn::Ect0, tag));
        }
        let marks: Vec<bool> = drain(&mut sw).iter().map(|p| p.ecn == Ecn::Ce).collect();
        // The first goes on the wire at once (a packet being sent is no longer queued). At
        // enqueue, the second finds an empty queue and the third finds the second; at dequeue,
        // the second leaves the third behind and the third leaves nothing.
        assert_eq!(marks, expected, "{mark_at:?}");
    }
    // Not-ECT is never marked.
    let mut sw = switch(SwitchConfig {
        ecn,
        ..SwitchConfig::default()
    });
    for tag in 0..3 {
        sw.receive(Instant::ZERO, 0, packet(1, 0, Ecn::NotEct, tag));
    }
    assert!(drain(&mut sw).iter().all(|p| p.ecn == Ecn::NotEct));
    assert_eq!(sw.stats(1).ce_marked, 0);
}

/// Hosts 0 and 1 each WRITE 512 KiB into host 2 at once, through a 10 Gb/s switch with a
/// 64 KiB buffer per port.
fn incast(pfc: Option<Pfc>) -> Fabric {
    let config = PairConfig {
        timeout: 8,
        ..PairConfig::default()
    };
    let switch = SwitchConfig {
        bandwidth_bps: 10_000_000_000,
        latency: Duration::from_micros(1),
        buffer_bytes: 64 * 1024,
        pfc,
        ..SwitchConfig::default()
    };
    let mut fabric = Fabric::new(3, &config, switch);
    let len = 512 * 1024u32;
    for from in 0..2 {
        let (qpn, _) = fabric.connect(from, 2);
        let data = pattern(from as u64, len as usize);
        let node = &mut fabric.nodes[from];
        node.mr.write(0, &data);
        let remote = {
            let target = &fabric.nodes[2].mr;
            Remote {
                addr: target.addr() + u64::from(len) * from as u64,
                rkey: target.rkey(),
            }
        };
        let node = &mut fabric.nodes[from];
        let sge = Sge {
            addr: node.mr.addr(),
            length: len,
            lkey: node.mr.lkey(),
        };
        node.nic
            .post_send(
                qpn,
                SendWr::new(from as u64, SendOp::RdmaWrite(remote), vec![sge]),
            )
            .unwrap();
    }
    let done = fabric.drive_while(Instant::from_millis(200), |f| {
        (0..2).all(|i| f.nodes[i].nic.completions_waiting(f.nodes[i].cq) == 1)
    });
    assert!(done, "the writes did not complete");
    for from in 0..2 {
        assert_eq!(
            fabric.nodes[from].completion().unwrap().status,
            WcStatus::Success
        );
        let landed = fabric.nodes[2]
            .mr
            .read((len as usize) * from, len as usize)
            .unwrap();
        assert!(
            landed == pattern(from as u64, len as usize),
            "host {from}'s bytes differ"
        );
    }
    fabric
}

#[test]
fn incast_without_pfc_drops_at_the_switch_and_go_back_n_recovers() {
    let fabric = incast(None);
    let stats = fabric.switch.stats(2);
    assert!(
        stats.drops > 0,
        "a 2:1 incast into 64 KiB should overflow: {stats:?}"
    );
    let retransmitted: u64 = (0..2)
        .map(|i| fabric.nodes[i].nic.stats().retransmitted_packets)
        .sum();
    assert!(retransmitted > 0);
    assert_eq!(stats.pauses_sent, 0);
}

#[test]
fn pfc_makes_the_same_incast_lossless() {
    let pfc = Pfc {
        xoff_bytes: 16 * 1024,
        xon_bytes: 8 * 1024,
        pause_quanta: 0xffff,
        priorities: 0xff,
    };
    let fabric = incast(Some(pfc));
    assert_eq!(
        fabric.switch.stats(2).drops,
        0,
        "{:?}",
        fabric.switch.stats(2)
    );
    let pauses: u64 = (0..2).map(|i| fabric.switch.stats(i).pauses_sent).sum();
    assert!(pauses > 0, "the senders were never paused");
    assert!((0..2).all(|i| fabric.pauses_received(i) > 0));
    let retransmitted: u64 = (0..2)
        .map(|i| fabric.nodes[i].nic.stats().retransmitted_packets)
        .sum();
    assert_eq!(
        retransmitted, 0,
        "nothing was lost, so nothing was sent again"
    );
    assert!(fabric.switch.stats(2).max_queue_bytes <= 64 * 1024);
}

#[test]
fn a_packet_hop_is_one_packet_across_one_link() {
    let mut fabric = incast(None);
    // The last ACKs land; then the switch holds nothing and nothing is on a cable.
    let later = fabric.now + Duration::from_millis(1);
    fabric.drive_while(later, |_| false);
    let sent: u64 = (0..3).map(|i| fabric.nodes[i].nic.stats().tx_packets).sum();
    let received: u64 = (0..3).map(|i| fabric.nodes[i].nic.stats().rx_packets).sum();
    let drops: u64 = (0..3).map(|i| fabric.switch.stats(i).drops).sum();
    assert!(drops > 0, "the incast should drop some");
    assert_eq!(
        received + drops,
        sent,
        "every packet sent was received or dropped"
    );
    // A packet received crossed two links (to the switch, then on); a dropped one, one.
    assert_eq!(fabric.packet_hops(), sent + received);
}
