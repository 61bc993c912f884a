//! HPCC's INT at a switch egress (`int.rs`): one record per hop, with the queue the packet
//! leaves behind, the bytes the port sent before it, the time it left and the port's rate; none
//! on packets without the header or on the responder's echo.

use std::net::SocketAddr;

use roce_wire::int::{self, Hop};

use super::*;

const RATE: u64 = 100_000_000_000;

/// A request's UDP payload of `len` bytes whose BTH flags an empty INT header.
fn int_request(len: usize) -> SimPacket {
    let mut payload = vec![0; len];
    payload[0] = 0x0a; // RC RDMA WRITE ONLY
    payload[int::BTH_FLAG_BYTE] = int::BTH_FLAG;
    int::Repr::default().emit(&mut payload[12..]);
    let src: SocketAddr = "198.18.0.1:49152".parse().unwrap();
    let dst: SocketAddr = "198.18.0.2:4791".parse().unwrap();
    SimPacket::new(src, dst, payload)
}

fn records(packet: &SimPacket) -> Vec<Hop> {
    let view = int::Packet::new_checked(&packet.payload[12..]).unwrap();
    int::Repr::parse(&view).unwrap().hops().to_vec()
}

fn switch() -> Switch {
    let mut s = Switch::new(SwitchConfig::default(), 2, Vec::new(), 1);
    s.set_port_rate(1, RATE);
    s
}

/// Three packets arrive at once for one port: the first leaves at once over an empty queue,
/// the others each leave the rest behind; each takes one record, with the port's bytes sent
/// before it and the time it started.
#[test]
fn each_packet_takes_one_record_with_the_queue_it_leaves_behind() {
    let mut s = switch();
    let now = Instant::from_micros(5);
    let packets: Vec<SimPacket> = (0..3).map(|_| int_request(1000)).collect();
    let wire = packets[0].wire_len() as u64;
    for p in packets {
        assert!(s.receive_to(now, 0, 1, p));
    }
    let serialisation = s.ports[1].serialisation_nanos(wire as usize);
    let end = now + Duration::from_nanos(10 * serialisation);
    s.advance(end);
    let out: Vec<SimPacket> =
        std::iter::from_fn(|| s.deliver(end + Duration::from_micros(2), 1)).collect();
    assert_eq!(out.len(), 3);
    for (k, packet) in out.iter().enumerate() {
        let k = k as u64;
        let expected = Hop::new(
            now.as_nanos() + k * serialisation,
            k * wire,
            [0, wire, 0][k as usize],
            RATE,
        );
        assert_eq!(records(packet), vec![expected], "packet {k}");
    }
}

/// Through two switches a packet carries two records, one each.
#[test]
fn two_hops_append_two_records() {
    let (mut a, mut b) = (switch(), switch());
    let now = Instant::ZERO;
    assert!(a.receive_to(now, 0, 1, int_request(200)));
    let t = Instant::from_micros(10);
    a.advance(t);
    let once = a.deliver(t, 1).unwrap();
    assert_eq!(records(&once).len(), 1);
    assert!(b.receive_to(t, 0, 1, once));
    let u = Instant::from_micros(20);
    b.advance(u);
    let twice = b.deliver(u, 1).unwrap();
    let hops = records(&twice);
    assert_eq!(hops.len(), 2);
    assert_eq!(hops[1].time(), t.as_nanos() as u32);
}

/// A packet without the header, or the responder's echo, is left as it came.
#[test]
fn no_record_without_the_header_or_on_an_echo() {
    let mut s = switch();
    let mut plain = int_request(200);
    plain.payload[int::BTH_FLAG_BYTE] = 0;
    let mut echo = int_request(200);
    echo.payload[12] |= 0x80;
    let (plain_in, echo_in) = (plain.clone(), echo.clone());
    let now = Instant::ZERO;
    assert!(s.receive_to(now, 0, 1, plain));
    assert!(s.receive_to(now, 0, 1, echo));
    let t = Instant::from_micros(10);
    s.advance(t);
    assert_eq!(s.deliver(t, 1).unwrap(), plain_in);
    assert_eq!(s.deliver(t, 1).unwrap(), echo_in);
}

/// An event driver's `depart` stamps the record `int_record` reports for the packet it started.
#[test]
fn depart_stamps_what_int_record_reports() {
    let mut s = switch();
    let now = Instant::from_micros(1);
    assert!(s.enqueue(now, 0, 1, int_request(500)));
    assert!(s.enqueue(now, 0, 1, int_request(500)));
    let first = s.depart(now, 1).unwrap();
    let bytes = first.packet.wire_len();
    assert_eq!(
        records(&first.packet),
        vec![s.int_record(now, 1, bytes)],
        "the record of the packet it started"
    );
    assert_eq!(
        records(&first.packet)[0].qlen_bytes(),
        bytes as u64 / 320 * 320
    );
}

/// A request's UDP payload of `len` bytes whose BTH flags a PINT header at `value`.
fn pint_request(len: usize, value: u16) -> SimPacket {
    let mut payload = vec![0; len];
    payload[0] = 0x0a; // RC RDMA WRITE ONLY
    payload[int::BTH_FLAG_BYTE] = int::PINT_BTH_FLAG;
    int::Repr::pint(false, value).emit(&mut payload[12..]);
    let src: SocketAddr = "198.18.0.1:49152".parse().unwrap();
    let dst: SocketAddr = "198.18.0.2:4791".parse().unwrap();
    SimPacket::new(src, dst, payload)
}

fn pint_value(packet: &SimPacket) -> u16 {
    int::header(&packet.payload).unwrap().pint.unwrap()
}

const T_NS: u64 = 13_000;
const BASE: f64 = 1.01;

fn pint_switch() -> Switch {
    let config = SwitchConfig {
        pint: Some(PintMeter::new(T_NS, BASE)),
        ..SwitchConfig::default()
    };
    let mut s = Switch::new(config, 2, Vec::new(), 1);
    s.set_port_rate(1, RATE);
    s
}

/// HPCC-PINT: a burst through one port. Each PINT packet takes the port's U as it leaves (the
/// meter fed every packet before it, PINT's or not: a plain packet in the burst counts too),
/// never a value below the one it came with; an echo and a packet without the header leave as
/// they came. Without meters PINT packets pass untouched.
#[test]
fn pint_packets_take_the_ports_utilisation_as_they_leave() {
    let mut s = pint_switch();
    let mut meter = roce_wire::pint::Meter::default();
    let now = Instant::from_micros(5);
    let mut plain = int_request(1000);
    plain.payload[int::BTH_FLAG_BYTE] = 0;
    let mut echo = pint_request(1000, 3);
    echo.payload[12] |= 0x80;
    let burst = [
        pint_request(1000, 0),
        plain.clone(),
        pint_request(1000, 0),
        pint_request(1000, 60_000), // a value from a hotter hop upstream stays
        echo.clone(),
    ];
    let wire = burst[0].wire_len();
    for p in burst.iter().cloned() {
        assert!(s.receive_to(now, 0, 1, p));
    }
    let serialisation = s.ports[1].serialisation_nanos(wire);
    let end = now + Duration::from_nanos(10 * serialisation);
    s.advance(end);
    let out: Vec<SimPacket> =
        std::iter::from_fn(|| s.deliver(end + Duration::from_micros(2), 1)).collect();
    assert_eq!(out.len(), 5);
    // The meter's story, packet by packet: what each left behind (the first left at once,
    // before the rest arrived), and when it left.
    let mut expected = Vec::new();
    for k in 0..5u64 {
        let at = now.as_nanos() + k * serialisation;
        let behind = if k == 0 { 0 } else { (4 - k) * wire as u64 };
        // U moves with PINT's packets (1 is plain, 4 an echo); every packet is the last.
        if ![1, 4].contains(&k) {
            meter.update(at, behind, RATE, T_NS);
        }
        meter.departed(at, wire as u64);
        expected.push(meter.utilisation());
    }
    let lo = |u: f64| roce_wire::pint::encode(u, BASE, u16::MAX);
    let hi = |u: f64| roce_wire::pint::encode(u, BASE, 0);
    for k in [0usize, 2] {
        let v = pint_value(&out[k]);
        assert!(
            (lo(expected[k])..=hi(expected[k])).contains(&v),
            "packet {k}: {v} for U {}",
            expected[k]
        );
    }
    assert_eq!(pint_value(&out[3]), 60_000);
    assert_eq!(out[1], plain);
    assert_eq!(out[4], echo);
    assert_eq!(s.ports[1].pint.utilisation(), expected[3]);

    // The same burst through a switch without meters.
    let mut bare = switch();
    for p in burst.iter().cloned() {
        assert!(bare.receive_to(now, 0, 1, p));
    }
    bare.advance(end);
    let out: Vec<SimPacket> =
        std::iter::from_fn(|| bare.deliver(end + Duration::from_micros(2), 1)).collect();
    assert_eq!(out, burst.to_vec());
}

/// An event driver's `depart` reports the value it gave the PINT packet it started
/// (`pint_value`), the one a packet carrying its bytes takes.
#[test]
fn depart_reports_the_pint_value_it_gave() {
    let mut s = pint_switch();
    let now = Instant::from_micros(1);
    for _ in 0..40 {
        assert!(s.enqueue(now, 0, 1, pint_request(500, 0)));
    }
    let first = s.depart(now, 1).unwrap();
    assert_eq!(pint_value(&first.packet), s.pint_value(1));
    assert!(s.pint_value(1) > 0, "39 packets queued behind it");
}
