//! [`SwitchOf::forward`] is [`SwitchOf::enqueue`] then [`SwitchOf::depart`] of the same port,
//! as an event driver calls them for an arriving packet: the same departures, marks, PFC frames
//! and counters, whether the packet takes the shortcut past the queue or not.

use std::net::SocketAddr;

use roce_wire::frame::Ecn;

use super::*;
use crate::EcnMarking;

const PORTS: usize = 4;

/// The switches the traffic runs through: a port buffer that drops, PFC on a per-port buffer
/// with ECN marked at enqueue, and a shared buffer with dynamic thresholds, ECN marked at
/// dequeue and ETS with a strict class and unequal weights.
fn configs() -> Vec<(&'static str, SwitchConfig)> {
    let ecn = EcnMarking {
        k_min_bytes: 2_000,
        k_max_bytes: 12_000,
        p_max: 0.5,
    };
    let base = SwitchConfig {
        bandwidth_bps: 10_000_000_000,
        latency: Duration::from_nanos(500),
        ..SwitchConfig::default()
    };
    let pfc = Pfc {
        xoff_bytes: 8_000,
        xon_bytes: 4_000,
        pause_quanta: 200,
        priorities: 1 << 3 | 1 << 5,
    };
    let mut ets = Ets::default();
    ets.strict[7] = true;
    ets.weights[3] = 3;
    vec![
        (
            "port buffer, drops",
            SwitchConfig {
                buffer_bytes: 5_000,
                ..base.clone()
            },
        ),
        (
            "PFC, ECN at enqueue",
            SwitchConfig {
                buffer_bytes: 1 << 20,
                pfc: Some(pfc),
                ecn: Some(ecn),
                mark_at: MarkAt::Enqueue,
                ..base.clone()
            },
        ),
        (
            "shared buffer, ECN at dequeue, ETS",
            SwitchConfig {
                shared: Some(SharedBuffer {
                    bytes: 120_000,
                    ..SharedBuffer::hpcc(0)
                }),
                pfc: Some(pfc),
                ecn: Some(ecn),
                mark_at: MarkAt::Dequeue,
                ets,
                ..base
            },
        ),
    ]
}

/// A packet of `class` numbered `id` (in its payload), `wire` bytes on the wire at least.
fn packet(id: u32, class: u8, wire: usize, ect: bool) -> SimPacket {
    let addr: SocketAddr = "198.18.0.1:4791".parse().unwrap();
    let overhead = SimPacket::new(addr, addr, Vec::new()).wire_len();
    let mut payload = id.to_le_bytes().to_vec();
    payload.resize(wire.saturating_sub(overhead).max(4), 0);
    let mut p = SimPacket::new(addr, addr, payload);
    p.dscp = class * 8;
    p.ecn = if ect { Ecn::Ect0 } else { Ecn::NotEct };
    p
}

/// Every port's counters, bytes queued, busy time, and the PFC frames it has sent, taken.
fn observe(s: &mut Switch) -> Vec<(PortStats, usize, Instant, Vec<PauseFrame>)> {
    (0..PORTS)
        .map(|p| {
            let frames = s.take_pause_frames(p).collect();
            (
                s.stats(p).clone(),
                s.queue_bytes(p),
                s.busy_until(p),
                frames,
            )
        })
        .collect()
}

/// Random traffic (arrivals of random classes, lengths and ports, hosts pausing and resuming
/// classes, ports woken as they come free) driven once through `forward` and once through
/// `enqueue` then `depart`; after every step both switches agree on everything they show.
#[test]
fn forward_is_enqueue_then_depart() {
    for (name, config) in configs() {
        let mut fast = Switch::new(config.clone(), PORTS, Vec::new(), 7);
        let mut slow = Switch::new(config, PORTS, Vec::new(), 7);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut now = Instant::ZERO;
        let (mut shortcuts, mut queued, mut dropped, mut departed) = (0, 0, 0, 0);
        for id in 0..30_000u32 {
            now += Duration::from_nanos(next() % 700);
            match next() % 16 {
                0 => {
                    // A host pauses (or resumes) a class of its port's egress.
                    let (port, class) = ((next() % 4) as usize, [3u8, 5, 7][(next() % 3) as usize]);
                    let until = now + Duration::from_nanos(next() % 3_000 * (next() % 2));
                    let a = fast.set_egress_pause(now, port, class, until);
                    let b = slow.set_egress_pause(now, port, class, until);
                    assert_eq!(a, b);
                }
                1..=4 => {
                    // Ports that are free start their next packet.
                    for port in 0..PORTS {
                        let a = fast.depart(now, port);
                        assert_eq!(a, slow.depart(now, port), "{name}: depart {port}");
                        departed += usize::from(a.is_some());
                    }
                }
                _ => {
                    // Port 3 is the hot one, where queues build.
                    let ingress = (next() % 4) as usize;
                    let egress = if next() % 2 == 0 {
                        3
                    } else {
                        (next() % 4) as usize
                    };
                    let class = [0u8, 3, 3, 3, 5, 7][(next() % 6) as usize];
                    let wire = 64 + (next() % 1500) as usize;
                    let p = packet(id, class, wire, next() % 4 != 0);
                    let through = fast.forward(now, ingress, egress, p.clone());
                    let was_queued = slow.enqueue(now, ingress, egress, p.clone());
                    // The driver sends the arrival's PFC frames before the port starts.
                    let frames_then = slow.take_pause_frames(ingress).collect::<Vec<_>>();
                    let started = slow.depart(now, egress);
                    match through {
                        Forwarded::Departed(d) => {
                            assert!(was_queued && frames_then.is_empty(), "{name}");
                            assert_eq!(Some(d), started, "{name}: packet {id}");
                            shortcuts += 1;
                        }
                        Forwarded::Queued | Forwarded::Dropped(_) => {
                            if matches!(through, Forwarded::Dropped(_)) {
                                assert!(!was_queued, "{name}: packet {id}");
                                dropped += 1;
                            } else {
                                assert!(was_queued, "{name}: packet {id}");
                                queued += 1;
                            }
                            let frames_fast = fast.take_pause_frames(ingress).collect::<Vec<_>>();
                            assert_eq!(frames_fast, frames_then, "{name}: packet {id}");
                            assert_eq!(fast.depart(now, egress), started, "{name}: packet {id}");
                        }
                    }
                }
            }
            assert_eq!(
                observe(&mut fast),
                observe(&mut slow),
                "{name}: after packet {id}"
            );
        }
        // The traffic took every way through the switch.
        assert!(shortcuts > 1_000, "{name}: {shortcuts} shortcuts");
        assert!(queued > 1_000, "{name}: {queued} queued");
        assert!(departed > 1_000, "{name}: {departed} departed later");
        if name.contains("drops") {
            assert!(dropped > 20, "{name}: {dropped} dropped");
        }
        let marked: u64 = (0..PORTS).map(|p| slow.stats(p).ce_marked).sum();
        let paused: u64 = (0..PORTS).map(|p| slow.stats(p).pauses_sent).sum();
        if name.contains("ECN") {
            assert!(marked > 100, "{name}: {marked} marked");
            assert!(paused > 10, "{name}: {paused} PAUSEs");
        }
    }
}

/// With `ecn_rate_bps`, a port marks at the thresholds scaled by its rate: a 400 Gb/s port's
/// are four times those of the 100 Gb/s the marking is for (HPCC's ns-3 KMIN_MAP/KMAX_MAP).
/// Without it, every port marks at the same.
#[test]
fn ecn_thresholds_scale_with_the_port_rate() {
    const G100: u64 = 100_000_000_000;
    let scaled = SwitchConfig {
        ecn: Some(EcnMarking {
            k_min_bytes: 10_000,
            k_max_bytes: 10_000,
            p_max: 1.0,
        }),
        ecn_rate_bps: Some(G100),
        ..SwitchConfig::default()
    };
    let one = SwitchConfig {
        ecn_rate_bps: None,
        ..scaled.clone()
    };
    let marked = |config: &SwitchConfig, rate: u64, queue: usize| {
        let mut p = packet(1, 3, 1000, true);
        let mut stats = PortStats::default();
        mark(config, &mut 1, &mut p, (queue, rate), &mut stats);
        stats.ce_marked
    };
    assert_eq!(marked(&scaled, G100, 20_000), 1);
    assert_eq!(
        marked(&scaled, 4 * G100, 20_000),
        0,
        "under 40 000 at 400 Gb/s"
    );
    assert_eq!(marked(&scaled, 4 * G100, 50_000), 1);
    assert_eq!(marked(&one, 4 * G100, 20_000), 1);
}
