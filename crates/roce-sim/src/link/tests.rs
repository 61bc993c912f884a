use std::net::SocketAddr;

use proptest::prelude::*;
use roce_wire::icrc::{self, PseudoHeader};
use roce_wire::{AethRepr, AtomicAckEthRepr, BthRepr, RoceRepr};

use super::*;

const A: &str = "10.0.0.1:49152";
const B: &str = "10.0.0.2:4791";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn us(micros: u64) -> Instant {
    Instant::from_micros(micros)
}

fn ns(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

/// A packet of `wire_len` bytes on the wire whose payload starts with a BTH.
fn packet(opcode: Opcode, psn: u32, wire_len: usize) -> SimPacket {
    let mut payload = vec![0; wire_len - IPV4_FRAME_OVERHEAD];
    BthRepr::new(opcode, Qpn::new(0x11), Psn::new(psn))
        .emit(&mut bth::Packet::new_unchecked(&mut payload[..]));
    SimPacket::new(addr(A), addr(B), payload)
}

fn send_psn(psn: u32) -> SimPacket {
    packet(Opcode::RcSendOnly, psn, 100)
}

/// A 1000-byte frame: 1 µs on an [`eight_gbps`] link.
fn frame_psn(psn: u32) -> SimPacket {
    packet(Opcode::RcSendOnly, psn, 1000)
}

/// 8 Gb/s, one byte per nanosecond, and the default latency.
fn eight_gbps() -> LinkConfig {
    LinkConfig {
        bandwidth_bps: Some(8_000_000_000),
        ..LinkConfig::default()
    }
}

fn with_ecn(packet: SimPacket, ecn: Ecn) -> SimPacket {
    SimPacket { ecn, ..packet }
}

/// An RC SEND_ONLY with 64 bytes of payload and a valid ICRC for A → B, IPv4 ID 0, DF.
fn sealed(psn: u32) -> SimPacket {
    sealed_send_only(addr(A), addr(B), psn, 0x5a)
}

fn pseudo_header() -> PseudoHeader {
    PseudoHeader::for_datagram(addr(A), addr(B), 0).expect("one family")
}

/// Everything that arrives by `until`, with its arrival time, in delivery order.
fn drain(link: &mut Link, until: Instant) -> Vec<(Instant, SimPacket)> {
    let mut out = Vec::new();
    while let Some(at) = link.next_arrival().filter(|&at| at <= until) {
        let packet = link.deliver(at).expect("due at its arrival time");
        out.push((at, packet));
    }
    out
}

fn psn_of(packet: &SimPacket) -> u32 {
    bth::Packet::new_checked(&packet.payload[..])
        .unwrap()
        .psn()
        .value()
}

/// The PSNs of what arrives by `until`, in delivery order.
fn delivered_psns(link: &mut Link, until: Instant) -> Vec<u32> {
    drain(link, until).iter().map(|(_, p)| psn_of(p)).collect()
}

/// A perfect link with `faults` armed, after each of `packets` was offered to it at time 0.
fn faulted(faults: &[Fault], packets: impl IntoIterator<Item = SimPacket>) -> Link {
    let mut link = Link::new(LinkConfig::default(), 0);
    for &fault in faults {
        link.fail(fault);
    }
    for packet in packets {
        link.send(us(0), packet);
    }
    link
}

fn fates(link: &Link) -> Vec<Fate> {
    link.sent().iter().map(|sent| sent.fate).collect()
}

fn bits_differing(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

// Timing.

#[test]
fn a_perfect_wire_delivers_after_exactly_the_latency() {
    let mut link = Link::new(LinkConfig::default(), 0);
    link.send(us(3), send_psn(0));
    assert_eq!(link.next_arrival(), Some(us(13)));
    assert_eq!(link.deliver(ns(12_999)), None, "not before its time");
    assert_eq!(link.deliver(us(13)), Some(send_psn(0)));
    assert_eq!(link.deliver(us(100)), None);
    assert_eq!(link.next_arrival(), None);
    assert_eq!(link.sent()[0].arrival, Some(us(13)));
    assert_eq!(link.stats().delivered, 1);
}

#[test]
fn frames_serialise_back_to_back_at_the_bandwidth() {
    // 8 Gb/s is one byte per nanosecond: a 1000-byte frame takes 1 µs.
    let mut link = Link::new(eight_gbps(), 0);
    link.send(us(0), frame_psn(0));
    link.send(us(0), frame_psn(1));
    link.send(ns(500), packet(Opcode::RcSendOnly, 2, 500));
    // The wire is idle again by then: starts at once.
    link.send(us(5), frame_psn(3));

    let arrivals: Vec<_> = link.sent().iter().map(|s| s.arrival.unwrap()).collect();
    assert_eq!(arrivals, [ns(11_000), ns(12_000), ns(12_500), ns(16_000)]);
    let delivered: Vec<_> = drain(&mut link, Instant::MAX)
        .iter()
        .map(|(at, p)| (*at, psn_of(p)))
        .collect();
    assert_eq!(
        delivered,
        [
            (ns(11_000), 0),
            (ns(12_000), 1),
            (ns(12_500), 2),
            (ns(16_000), 3)
        ]
    );
}

#[test]
fn serialisation_counts_the_frame_headers_and_rounds_up() {
    // 1 Gb/s: a 100-byte payload is a 142-byte frame, 1136 ns.
    let config = LinkConfig {
        bandwidth_bps: Some(1_000_000_000),
        latency: Duration::ZERO,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0);
    link.send(
        Instant::ZERO,
        SimPacket::new(addr(A), addr(B), vec![0; 100]),
    );
    assert_eq!(link.next_arrival(), Some(ns(1_136)));
    // 3 Gb/s: 8 bits of a 1-byte payload plus headers, 43 × 8 / 3 = 114.67 ns → 115.
    link.config_mut().bandwidth_bps = Some(3_000_000_000);
    link.send(us(10), SimPacket::new(addr(A), addr(B), vec![0; 1]));
    assert_eq!(link.sent()[1].arrival, Some(ns(10_115)));
    // IPv6 frames carry 20 more header bytes.
    let v6 = SimPacket::new(addr("[fd00::1]:1"), addr("[fd00::2]:4791"), vec![0; 100]);
    assert_eq!(v6.wire_len(), 162);
}

// The queue.

#[test]
fn queue_holds_each_frame_until_its_last_bit_has_left() {
    let mut link = Link::new(eight_gbps(), 0);
    for psn in 0..3 {
        link.send(us(0), frame_psn(psn));
    }
    assert_eq!(link.queue_bytes(us(0)), 3000);
    assert_eq!(link.queue_bytes(ns(999)), 3000);
    assert_eq!(link.queue_bytes(ns(1_000)), 2000);
    assert_eq!(link.queue_bytes(ns(2_500)), 1000);
    assert_eq!(link.queue_bytes(ns(3_000)), 0);
    assert_eq!(link.stats().max_queue_bytes, 3000);
}

#[test]
fn an_infinitely_fast_link_never_queues() {
    let mut link = Link::new(LinkConfig::default(), 0);
    for psn in 0..10 {
        link.send(us(0), send_psn(psn));
    }
    assert_eq!(link.queue_bytes(us(0)), 0);
    assert_eq!(link.stats().max_queue_bytes, 100);
}

#[test]
fn drop_tail_drops_the_frame_that_does_not_fit() {
    let config = LinkConfig {
        queue_limit_bytes: Some(3000),
        ..eight_gbps()
    };
    let mut link = Link::new(config, 0);
    for psn in 0..4 {
        link.send(us(0), frame_psn(psn));
    }
    // Exactly at the limit fits; one byte more does not.
    assert_eq!(
        fates(&link),
        [
            Fate::Delivered,
            Fate::Delivered,
            Fate::Delivered,
            Fate::QueueFull
        ]
    );
    link.send(ns(999), SimPacket::new(addr(A), addr(B), vec![0; 1]));
    assert_eq!(link.sent()[4].fate, Fate::QueueFull);
    // Once the first frame has left there is room for one more.
    link.send(ns(1_000), frame_psn(5));
    link.send(ns(1_000), frame_psn(6));
    assert_eq!(link.sent()[5].fate, Fate::Delivered);
    assert_eq!(link.sent()[6].fate, Fate::QueueFull);
    assert_eq!(link.stats().queue_drops, 3);
    assert_eq!(link.stats().max_queue_bytes, 3000);
    let delivered = delivered_psns(&mut link, Instant::MAX);
    assert_eq!(delivered, [0, 1, 2, 5]);
}

// RED ECN marking.

#[test]
fn red_probability_follows_the_dcqcn_congestion_point() {
    let red = EcnMarking {
        k_min_bytes: 1000,
        k_max_bytes: 3000,
        p_max: 0.5,
    };
    assert_eq!(red.probability(0), 0.0);
    assert_eq!(red.probability(1000), 0.0);
    assert_eq!(red.probability(2000), 0.25);
    assert_eq!(red.probability(3000), 0.5);
    assert_eq!(red.probability(3001), 1.0);
    let step = EcnMarking {
        k_min_bytes: 1000,
        k_max_bytes: 1000,
        p_max: 0.5,
    };
    assert_eq!((step.probability(1000), step.probability(1001)), (0.0, 1.0));
}

/// Offers `trials` packets with `ecn`, each finding `fillers` 1000-byte frames ahead of it in
/// the queue; returns how many the link marked.
fn marks_behind(fillers: usize, ecn: Ecn, trials: u64) -> u64 {
    let config = LinkConfig {
        ecn: Some(EcnMarking {
            k_min_bytes: 1000,
            k_max_bytes: 3000,
            p_max: 0.5,
        }),
        ..eight_gbps()
    };
    let mut link = Link::new(config, 7);
    let mut marked = 0;
    for trial in 0..trials {
        // 1 ms apart: the queue has drained between trials.
        let now = Instant::from_millis(trial);
        for _ in 0..fillers {
            link.send(now, packet(Opcode::RcSendMiddle, 0, 1000));
        }
        link.send(now, with_ecn(packet(Opcode::RcSendLast, 1, 1000), ecn));
        let probe = link.sent().last().unwrap();
        marked += u64::from(probe.ce_marked);
    }
    // Not-ECT fillers are never marked, whatever the queue.
    assert_eq!(link.stats().ce_marked, marked);
    for (at, delivered) in drain(&mut link, Instant::MAX) {
        let probe = bth::Packet::new_checked(&delivered.payload[..])
            .unwrap()
            .opcode()
            == Opcode::RcSendLast;
        let ce = delivered.ecn == Ecn::Ce;
        assert!(probe || !ce, "filler marked at {at}");
    }
    marked
}

#[test]
fn nothing_is_marked_at_or_below_k_min() {
    assert_eq!(marks_behind(0, Ecn::Ect0, 1000), 0);
    assert_eq!(marks_behind(1, Ecn::Ect0, 1000), 0);
}

#[test]
fn everything_ecn_capable_is_marked_above_k_max() {
    assert_eq!(marks_behind(4, Ecn::Ect0, 1000), 1000);
    assert_eq!(marks_behind(4, Ecn::Ect1, 1000), 1000);
}

#[test]
fn half_p_max_is_marked_halfway_between_k_min_and_k_max() {
    // 2000 bytes ahead: p = 0.5 × (2000 − 1000) / (3000 − 1000) = 0.25; σ ≈ 27 in 4000.
    let marked = marks_behind(2, Ecn::Ect0, 4000);
    assert!((900..=1100).contains(&marked), "{marked} of 4000 marked");
}

#[test]
fn not_ect_is_never_marked_and_ce_is_not_marked_again() {
    assert_eq!(marks_behind(4, Ecn::NotEct, 1000), 0);
    assert_eq!(marks_behind(4, Ecn::Ce, 1000), 0);
}

// Random loss, duplication, reordering, corruption.

#[test]
fn loss_rate_is_the_configured_one() {
    let config = LinkConfig {
        loss: 0.1,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 42);
    for i in 0..10_000 {
        link.send(ns(i), send_psn(i as u32));
    }
    let lost = link.stats().lost;
    // σ = 30 in 10 000.
    assert!((900..=1100).contains(&lost), "{lost} of 10000 lost");
    assert_eq!(drain(&mut link, Instant::MAX).len() as u64, 10_000 - lost);
    assert_eq!(link.stats().delivered, 10_000 - lost);
    let lost_records = link.sent().iter().filter(|s| s.fate == Fate::Lost).count();
    assert_eq!(lost_records as u64, lost);
    assert!(
        link.sent()
            .iter()
            .all(|s| (s.fate == Fate::Lost) == s.arrival.is_none())
    );
}

/// A run over a link that does everything at random: what it recorded and the PSNs in the
/// order they arrived.
fn noisy_run(seed: u64) -> (Vec<Sent>, Vec<(Instant, u32)>) {
    let config = LinkConfig {
        bandwidth_bps: Some(10_000_000_000),
        queue_limit_bytes: Some(20_000),
        loss: 0.1,
        corrupt: 0.1,
        duplicate: 0.1,
        reorder_jitter: Duration::from_micros(2),
        ecn: Some(EcnMarking {
            k_min_bytes: 2000,
            k_max_bytes: 10_000,
            p_max: 0.2,
        }),
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, seed);
    for i in 0..500 {
        let packet = with_ecn(packet(Opcode::RcSendMiddle, i, 1042), Ecn::Ect0);
        link.send(ns(u64::from(i) * 500), packet);
    }
    let order = drain(&mut link, Instant::MAX)
        .iter()
        .map(|(at, p)| (*at, p.payload.len() as u32 ^ psn_of(p)))
        .collect();
    (link.sent().to_vec(), order)
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let (sent, order) = noisy_run(5);
    assert_eq!(noisy_run(5), (sent.clone(), order.clone()));
    let (other_sent, other_order) = noisy_run(6);
    assert_ne!(sent, other_sent);
    assert_ne!(order, other_order);
    // The run exercised every mechanism.
    for fate in [Fate::Delivered, Fate::Lost, Fate::QueueFull] {
        assert!(sent.iter().any(|s| s.fate == fate), "{fate:?}");
    }
    assert!(sent.iter().any(|s| s.corrupted));
    assert!(sent.iter().any(|s| s.duplicated));
    assert!(sent.iter().any(|s| s.ce_marked));
}

#[test]
fn a_targeted_fault_does_not_reshuffle_the_luck_of_the_others() {
    let config = LinkConfig {
        loss: 0.3,
        reorder_jitter: Duration::from_micros(1),
        ..LinkConfig::default()
    };
    let run = |fault: Option<Fault>| {
        let mut link = Link::new(config, 3);
        if let Some(fault) = fault {
            link.fail(fault);
        }
        for i in 0..100 {
            link.send(us(u64::from(i)), send_psn(i));
        }
        link.sent().to_vec()
    };
    let plain = run(None);
    let faulted = run(Some(Fault::DropNth { n: 5 }));
    assert_eq!(faulted[4].fate, Fate::Fault);
    for (i, (a, b)) in plain.iter().zip(&faulted).enumerate() {
        if i != 4 {
            assert_eq!(a, b, "packet {i}");
        }
    }
}

#[test]
fn jitter_reorders_packets_sent_closer_than_it() {
    let config = LinkConfig {
        reorder_jitter: Duration::from_micros(5),
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0);
    for i in 0..100 {
        link.send(ns(u64::from(i) * 100), send_psn(i));
    }
    for sent in link.sent() {
        let delay = sent.arrival.unwrap() - sent.time;
        assert!(delay >= DEFAULT_LATENCY && delay <= DEFAULT_LATENCY + Duration::from_micros(5));
    }
    let order = delivered_psns(&mut link, Instant::MAX);
    assert_eq!(order.len(), 100);
    assert!(order.windows(2).any(|w| w[0] > w[1]), "{order:?}");
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<_>>());
}

#[test]
fn without_jitter_simultaneous_arrivals_keep_send_order() {
    let mut link = Link::new(LinkConfig::default(), 0);
    for psn in 0..50 {
        link.send(us(0), send_psn(psn));
    }
    assert_eq!(link.in_flight(), 50);
    let order = delivered_psns(&mut link, us(10));
    assert_eq!(order, (0..50).collect::<Vec<_>>());
}

#[test]
fn duplication_delivers_two_identical_copies() {
    let config = LinkConfig {
        duplicate: 1.0,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0);
    link.send(us(0), send_psn(0));
    link.send(us(1), send_psn(1));
    let delivered: Vec<_> = drain(&mut link, Instant::MAX)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        delivered,
        [send_psn(0), send_psn(0), send_psn(1), send_psn(1)]
    );
    assert!(link.sent().iter().all(|s| s.duplicated));
    assert_eq!(link.stats().duplicated, 2);
    assert_eq!(link.stats().delivered, 4);
}

#[test]
fn corruption_flips_exactly_one_bit_that_the_icrc_catches() {
    let config = LinkConfig {
        corrupt: 1.0,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 9);
    for psn in 0..2000 {
        link.send(ns(u64::from(psn)), sealed(psn));
    }
    let delivered = drain(&mut link, Instant::MAX);
    assert_eq!(delivered.len(), 2000);
    let mut flipped_bytes = std::collections::HashSet::new();
    for (i, (_, packet)) in delivered.iter().enumerate() {
        let original = sealed(i as u32);
        assert_eq!(bits_differing(&packet.payload, &original.payload), 1);
        let byte = packet
            .payload
            .iter()
            .zip(&original.payload)
            .position(|(x, y)| x != y)
            .unwrap();
        assert_ne!(byte, BTH_FECN_BECN, "a bit the ICRC does not cover");
        flipped_bytes.insert(byte);
        assert!(icrc::verify(&pseudo_header(), &packet.payload).is_err());
    }
    // Anywhere in the packet: headers, payload and ICRC alike.
    assert_eq!(flipped_bytes.len(), original_len() - 1);
    assert_eq!(link.stats().corrupted, 2000);
    assert!(icrc::verify(&pseudo_header(), &sealed(0).payload).is_ok());
}

fn original_len() -> usize {
    sealed(0).payload.len()
}

#[test]
fn corruption_of_short_and_empty_payloads() {
    let config = LinkConfig {
        corrupt: 1.0,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0);
    link.send(us(0), SimPacket::new(addr(A), addr(B), vec![0; 3]));
    link.send(us(0), SimPacket::new(addr(A), addr(B), vec![]));
    let delivered = drain(&mut link, Instant::MAX);
    assert_eq!(bits_differing(&delivered[0].1.payload, &[0; 3]), 1);
    assert!(delivered[1].1.payload.is_empty());
    assert!(link.sent()[0].corrupted);
    assert!(!link.sent()[1].corrupted, "nothing to flip");
}

#[test]
fn a_payload_that_is_not_roce_is_carried_without_a_psn() {
    let mut link = Link::new(LinkConfig::default(), 0);
    link.send(us(0), send_psn(4));
    link.send(us(0), SimPacket::new(addr(A), addr(B), b"hello".to_vec()));
    link.send(us(0), send_psn(5));
    let second = link.sent()[1];
    assert_eq!(
        (second.opcode, second.dest_qp, second.psn),
        (None, None, None)
    );
    assert_eq!(second.len, 5);
    assert_eq!(link.sent_psns(), [4, 5]);
    assert_eq!(drain(&mut link, Instant::MAX)[1].1.payload, b"hello");
}

// Targeted faults.

#[test]
fn drop_psn_once_drops_only_the_first_packet_with_that_psn() {
    let drop = Fault::DropPsn {
        psn: Psn::new(2),
        times: 1,
    };
    // Go-back-N from PSN 2.
    let mut link = faulted(&[drop], [0, 1, 2, 3, 2, 3].map(send_psn));
    assert_eq!(link.sent_psns(), [0, 1, 2, 3, 2, 3], "the dropped one too");
    assert_eq!(
        fates(&link),
        [
            Fate::Delivered,
            Fate::Delivered,
            Fate::Fault,
            Fate::Delivered,
            Fate::Delivered,
            Fate::Delivered
        ]
    );
    let delivered = delivered_psns(&mut link, Instant::MAX);
    assert_eq!(delivered, [0, 1, 3, 2, 3]);
    assert_eq!(link.stats().fault_drops, 1);
    assert!(link.faults().is_empty());
}

#[test]
fn drop_psn_twice_drops_the_retransmission_too() {
    let drop = Fault::DropPsn {
        psn: Psn::new(2),
        times: 2,
    };
    let link = faulted(&[drop], [2, 3, 2, 2].map(send_psn));
    assert_eq!(
        fates(&link),
        [Fate::Fault, Fate::Delivered, Fate::Fault, Fate::Delivered]
    );
}

#[test]
fn drop_nth_drops_the_nth_offered_packet_counting_from_one() {
    let faults = [Fault::DropNth { n: 3 }, Fault::DropNth { n: 1 }];
    let mut link = faulted(&faults, (0..5).map(send_psn));
    link.fail(Fault::DropNth { n: 2 }); // already gone by: never fires
    link.send(us(0), send_psn(5));
    assert_eq!(
        fates(&link),
        [
            Fate::Fault,
            Fate::Delivered,
            Fate::Fault,
            Fate::Delivered,
            Fate::Delivered,
            Fate::Delivered
        ]
    );
    assert_eq!(link.faults(), [Fault::DropNth { n: 2 }]);
}

#[test]
fn drop_next_ack_drops_one_acknowledgement_and_no_request() {
    let opcodes = [
        Opcode::RcSendOnly,
        Opcode::RcRdmaReadRequest,
        Opcode::RcAcknowledge,
        Opcode::RcAcknowledge,
    ];
    let packets = (0..)
        .zip(opcodes)
        .map(|(psn, opcode)| packet(opcode, psn, 100));
    let link = faulted(&[Fault::DropNextAck], packets);
    assert_eq!(
        fates(&link),
        [
            Fate::Delivered,
            Fate::Delivered,
            Fate::Fault,
            Fate::Delivered
        ]
    );

    // A READ response and an ATOMIC ACKNOWLEDGE acknowledge too.
    for ack in [Opcode::RcRdmaReadResponseFirst, Opcode::RcAtomicAcknowledge] {
        let packets = [packet(Opcode::RcSendOnly, 0, 100), real_ack(ack)];
        let link = faulted(&[Fault::DropNextAck], packets);
        assert_eq!(fates(&link), [Fate::Delivered, Fate::Fault], "{ack}");
    }
}

/// A well-formed acknowledgement packet with `opcode`.
fn real_ack(opcode: Opcode) -> SimPacket {
    let mut repr = RoceRepr::new(BthRepr::new(opcode, Qpn::new(0x11), Psn::new(9)));
    repr.aeth = Some(AethRepr::ack(1));
    if opcode == Opcode::RcAtomicAcknowledge {
        repr.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: 7 });
    } else {
        repr.payload_len = 256;
    }
    let mut payload = vec![0; repr.buffer_len()];
    repr.emit(&mut payload, |_| {}).unwrap();
    icrc::seal(&pseudo_header(), &mut payload);
    SimPacket::new(addr(A), addr(B), payload)
}

#[test]
fn drop_opcode_drops_that_opcode_times_times() {
    let drop = Fault::DropOpcode {
        opcode: Opcode::RcAcknowledge,
        times: 2,
    };
    let opcodes = [
        Opcode::RcAcknowledge,
        Opcode::RcSendOnly,
        Opcode::RcAcknowledge,
        Opcode::RcAcknowledge,
    ];
    let link = faulted(&[drop], opcodes.map(|opcode| packet(opcode, 0, 100)));
    assert_eq!(
        fates(&link),
        [Fate::Fault, Fate::Delivered, Fate::Fault, Fate::Delivered]
    );
}

#[test]
fn mark_ce_marks_the_next_ecn_capable_packet_with_that_psn_once() {
    let mut link = Link::new(LinkConfig::default(), 0);
    link.fail(Fault::MarkCe { psn: Psn::new(1) });
    link.send(us(0), with_ecn(send_psn(0), Ecn::Ect0));
    link.send(us(0), send_psn(1)); // Not-ECT: left alone
    link.send(us(0), with_ecn(send_psn(1), Ecn::Ect0));
    link.send(us(0), with_ecn(send_psn(1), Ecn::Ect0));
    let ecn: Vec<_> = drain(&mut link, Instant::MAX)
        .iter()
        .map(|(_, p)| p.ecn)
        .collect();
    assert_eq!(ecn, [Ecn::Ect0, Ecn::NotEct, Ecn::Ce, Ecn::Ect0]);
    let marked: Vec<_> = link.sent().iter().map(|s| s.ce_marked).collect();
    assert_eq!(marked, [false, false, true, false]);
    assert_eq!(link.stats().ce_marked, 1);
}

#[test]
fn corrupt_flips_one_bit_of_the_next_packet_with_that_psn() {
    let mut link = faulted(
        &[Fault::Corrupt { psn: Psn::new(1) }],
        [0, 1, 1].map(sealed),
    );
    let delivered = drain(&mut link, Instant::MAX);
    let broken: Vec<_> = delivered
        .iter()
        .map(|(_, p)| icrc::verify(&pseudo_header(), &p.payload).is_err())
        .collect();
    assert_eq!(broken, [false, true, false]);
    assert_eq!(
        bits_differing(&delivered[1].1.payload, &sealed(1).payload),
        1
    );
    assert!(link.sent()[1].corrupted);
}

#[test]
fn a_packet_dropped_by_a_fault_keeps_the_mark_for_its_retransmission() {
    let faults = [
        Fault::DropPsn {
            psn: Psn::new(1),
            times: 1,
        },
        Fault::MarkCe { psn: Psn::new(1) },
    ];
    let link = faulted(
        &faults,
        [1, 1].map(|psn| with_ecn(send_psn(psn), Ecn::Ect0)),
    );
    assert_eq!(fates(&link), [Fate::Fault, Fate::Delivered]);
    assert!(link.sent()[1].ce_marked);
}

// The filter.

#[test]
fn the_filter_sees_what_faults_left_and_decides() {
    let mut link = Link::new(LinkConfig::default(), 0);
    link.fail(Fault::DropNth { n: 1 });
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = seen.clone();
    link.set_filter(move |packet| {
        let psn = psn_of(packet);
        log.borrow_mut().push(psn);
        match psn {
            2 => Verdict::Drop,
            3 => Verdict::MarkCe,
            _ => Verdict::Pass,
        }
    });
    for psn in 0..5 {
        link.send(us(0), with_ecn(send_psn(psn), Ecn::Ect1));
    }
    assert_eq!(*seen.borrow(), [1, 2, 3, 4]);
    assert_eq!(
        fates(&link),
        [
            Fate::Fault,
            Fate::Delivered,
            Fate::Filtered,
            Fate::Delivered,
            Fate::Delivered
        ]
    );
    assert!(link.sent()[3].ce_marked);
    assert_eq!(link.stats().filtered, 1);

    link.clear_filter();
    link.send(us(0), send_psn(2));
    assert_eq!(link.sent()[5].fate, Fate::Delivered);
}

// Any bytes.

proptest! {
    #[test]
    fn any_payloads_under_any_faults_are_carried_and_accounted_for(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 1..40),
        loss in 0.0..1.0f64,
        corrupt in 0.0..1.0f64,
        duplicate in 0.0..1.0f64,
        ecn in 0u8..4,
        seed in any::<u64>(),
    ) {
        let config = LinkConfig {
            bandwidth_bps: Some(1_000_000_000),
            queue_limit_bytes: Some(1000),
            loss,
            corrupt,
            duplicate,
            reorder_jitter: Duration::from_micros(1),
            ecn: Some(EcnMarking { k_min_bytes: 100, k_max_bytes: 500, p_max: 0.5 }),
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, seed);
        link.fail(Fault::DropPsn { psn: Psn::new(0), times: 1 });
        link.fail(Fault::DropNextAck);
        link.fail(Fault::Corrupt { psn: Psn::new(1) });
        link.fail(Fault::MarkCe { psn: Psn::new(2) });
        for (i, payload) in payloads.iter().enumerate() {
            let packet = SimPacket {
                ecn: Ecn::from_bits(ecn),
                ..SimPacket::new(addr(A), addr(B), payload.clone())
            };
            link.send(ns(i as u64 * 100), packet);
        }
        let delivered = drain(&mut link, Instant::MAX);
        let stats = *link.stats();
        prop_assert_eq!(stats.offered, payloads.len() as u64);
        let on_time = link.sent().iter().filter(|s| s.fate == Fate::Delivered).count() as u64;
        prop_assert_eq!(
            on_time + stats.lost + stats.queue_drops + stats.fault_drops + stats.filtered,
            stats.offered
        );
        prop_assert_eq!(delivered.len() as u64, on_time + stats.duplicated);
        prop_assert_eq!(stats.delivered, delivered.len() as u64);
        prop_assert!(delivered.windows(2).all(|w| w[0].0 <= w[1].0));
        for (sent, payload) in link.sent().iter().zip(&payloads) {
            prop_assert_eq!(sent.len, payload.len());
            prop_assert_eq!(sent.psn.is_some(), payload.len() >= bth::HEADER_LEN);
        }
    }
}
