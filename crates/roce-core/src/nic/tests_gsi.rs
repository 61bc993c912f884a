//! QP 1 between two NICs: a management datagram goes out as rxe sends one and comes in past
//! rxe's checks; anything else addressed to QP 1 is dropped, counted, and queues nothing. Past
//! those, a MAD goes where ib_mad sends it: a registered agent, or, with no agent, an answer
//! (a Get or Set) or nowhere.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_wire::{BthRepr, DethRepr, Opcode, PseudoHeader, Psn, Qpn, RocePacket, RoceRepr, icrc};

use crate::gsi::{GSI_QKEY, GSI_QPN, GSI_QUEUE, GsiDatagram, MAD_LEN};
use crate::{Datagram, Ecn, Instant, Nic, NicConfig, SrcPortPolicy, VerbsError};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12));

fn nic(addr: IpAddr) -> Nic {
    Nic::new(NicConfig {
        addrs: vec![addr],
        src_port: SrcPortPolicy::Fixed(4791),
        ..NicConfig::default()
    })
}

/// Performance management, class version 1: a class with no agent unless one registers.
const PERF: (u8, u8) = (0x04, 1);

/// A MAD of class `PERF`, method Get, tagged in its last byte.
fn mad(tag: u8) -> [u8; MAD_LEN] {
    mad_of(PERF.0, PERF.1, 0x01, tag)
}

/// A MAD of `class`, `version` and `method`, a transaction ID and attribute set, tagged in its
/// last byte.
fn mad_of(class: u8, version: u8, method: u8, tag: u8) -> [u8; MAD_LEN] {
    let mut mad = [0u8; MAD_LEN];
    mad[0] = 1; // base version
    mad[1] = class;
    mad[2] = version;
    mad[3] = method;
    mad[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes()); // TID
    mad[16..18].copy_from_slice(&0x0012u16.to_be_bytes()); // attribute ID
    mad[24..32].copy_from_slice(b"hostile!");
    mad[255] = tag;
    mad
}

/// A sealed GSI packet carrying `mad` from A's QP `src_qp` to B's QP 1.
fn gsi_packet(mad: &[u8; MAD_LEN], src_qp: u32) -> Vec<u8> {
    let mut repr = gsi_repr(Opcode::UdSendOnly, GSI_QKEY, MAD_LEN);
    repr.deth = Some(DethRepr {
        qkey: GSI_QKEY,
        src_qp: Qpn::new(src_qp),
    });
    packet(&repr, mad)
}

/// `bytes` from A to B as the network hands them over.
fn deliver(to: &mut Nic, bytes: &[u8]) {
    to.handle_datagram(
        Instant::ZERO,
        Datagram {
            src: SocketAddr::new(A, 4791),
            dst: SocketAddr::new(B, 4791),
            ecn: Ecn::NotEct,
            ip_id: Some(0),
            segment: 0,
            payload: bytes,
        },
    );
}

/// A sealed packet from A to B.
fn packet(repr: &RoceRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut buf, |p| p.copy_from_slice(payload)).unwrap();
    let header =
        PseudoHeader::for_datagram(SocketAddr::new(A, 4791), SocketAddr::new(B, 4791), 0).unwrap();
    icrc::seal(&header, &mut buf);
    buf
}

fn gsi_repr(opcode: Opcode, qkey: u32, payload_len: usize) -> RoceRepr {
    RoceRepr {
        deth: Some(DethRepr {
            qkey,
            src_qp: GSI_QPN,
        }),
        payload_len,
        ..RoceRepr::new(BthRepr::new(opcode, GSI_QPN, Psn::new(0)))
    }
}

#[test]
//= rxe:mad.c/find_mad_agent
fn a_mad_goes_from_qp1_to_the_peers_qp1_as_a_ud_send_with_the_gsi_qkey() {
    let (mut a, mut b) = (nic(A), nic(B));
    b.gsi_register(PERF.0, PERF.1).unwrap();
    let sent = GsiDatagram {
        peer: B,
        local: A,
        peer_qp: GSI_QPN,
        mad: mad(0x5a),
    };
    a.send_gsi(sent.clone()).unwrap();
    assert_eq!(a.gsi_waiting(), 1);
    let mut buf = vec![0; crate::MAX_DATAGRAM];
    let transmit = a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    assert_eq!((transmit.src, transmit.dst), (A, SocketAddr::new(B, 4791)));
    let wire = buf[..transmit.len].to_vec();
    assert_eq!(
        wire.len(),
        12 + 8 + MAD_LEN + 4,
        "BTH, DETH, the MAD, the ICRC"
    );
    let packet = RocePacket::new_checked(&wire[..]).unwrap();
    let bth = packet.bth();
    assert_eq!(
        (bth.opcode(), bth.dest_qp(), bth.pkey()),
        (Opcode::UdSendOnly, GSI_QPN, 0xffff)
    );
    let deth = packet.deth().unwrap();
    assert_eq!((deth.qkey(), deth.src_qp()), (GSI_QKEY, GSI_QPN));
    assert_eq!(a.poll_transmit(Instant::ZERO, &mut buf), None, "sent once");
    assert_eq!(a.stats().tx_gsi_mads, 1);

    deliver(&mut b, &wire);
    let got = b.poll_gsi().expect("B's QP 1 took it");
    assert_eq!(
        got,
        GsiDatagram {
            peer: A,
            local: B,
            peer_qp: GSI_QPN,
            mad: mad(0x5a),
        }
    );
    assert_eq!((b.stats().rx_gsi_mads, b.stats().rx_accepted), (1, 1));
    assert_eq!(b.poll_gsi(), None);
    assert_eq!(
        b.poll_transmit(Instant::ZERO, &mut buf),
        None,
        "the agent answers, not QP 1"
    );
}

#[test]
fn what_qp1_does_not_take_is_dropped_and_counted_and_queues_nothing() {
    let mut b = nic(B);
    let full = vec![0xab; MAD_LEN];
    // A MAD with another Q_Key, an RC SEND, a MAD one byte short, a packet to QP 0.
    deliver(
        &mut b,
        &packet(&gsi_repr(Opcode::UdSendOnly, 0x1234, MAD_LEN), &full),
    );
    let rc = RoceRepr {
        payload_len: MAD_LEN,
        ..RoceRepr::new(BthRepr::new(Opcode::RcSendOnly, GSI_QPN, Psn::new(0)))
    };
    deliver(&mut b, &packet(&rc, &full));
    deliver(
        &mut b,
        &packet(
            &gsi_repr(Opcode::UdSendOnly, GSI_QKEY, MAD_LEN - 4),
            &full[4..],
        ),
    );
    let mut smi = gsi_repr(Opcode::UdSendOnly, GSI_QKEY, MAD_LEN);
    smi.bth.dest_qp = Qpn::new(0);
    deliver(&mut b, &packet(&smi, &full));

    let s = b.stats();
    assert_eq!(
        (
            s.rx_qkey_mismatch,
            s.rx_wrong_transport,
            s.rx_bad_length,
            s.rx_special_qp
        ),
        (1, 1, 1, 1)
    );
    assert_eq!((s.rx_accepted, s.rx_gsi_mads), (0, 0));
    assert_eq!(b.poll_gsi(), None, "nothing reached the connection manager");
}

#[test]
fn a_full_inbox_drops_the_newest_mad() {
    let mut b = nic(B);
    b.gsi_register(PERF.0, PERF.1).unwrap();
    let bytes = packet(&gsi_repr(Opcode::UdSendOnly, GSI_QKEY, MAD_LEN), &mad(1));
    for _ in 0..=GSI_QUEUE {
        deliver(&mut b, &bytes);
    }
    assert_eq!(
        (b.stats().rx_gsi_mads, b.stats().rx_gsi_queue_full),
        (GSI_QUEUE as u64, 1)
    );
    assert_eq!(std::iter::from_fn(|| b.poll_gsi()).count(), GSI_QUEUE);
}

#[test]
fn a_mad_from_an_address_not_ours_is_refused_before_it_is_queued() {
    let mut a = nic(A);
    let foreign = GsiDatagram {
        peer: B,
        local: B,
        peer_qp: GSI_QPN,
        mad: mad(0),
    };
    assert!(matches!(
        a.send_gsi(foreign),
        Err(VerbsError::InvalidWorkRequest { .. })
    ));
    assert_eq!(a.gsi_waiting(), 0);
    let mut buf = vec![0; crate::MAX_DATAGRAM];
    assert_eq!(a.poll_transmit(Instant::ZERO, &mut buf), None);
}

/// What B sends next, if anything.
fn sends(b: &mut Nic) -> Option<Vec<u8>> {
    let mut buf = vec![0; crate::MAX_DATAGRAM];
    let t = b.poll_transmit(Instant::ZERO, &mut buf)?;
    buf.truncate(t.len);
    Some(buf)
}

#[test]
//= rxe:mad.c/validate_mad
fn subnet_management_mads_and_other_base_versions_are_dropped_at_ingress_and_queue_nothing() {
    let mut b = nic(B);
    let before = b.stats().clone();
    assert_eq!(b.shared.gsi.inbox_len(), 0);
    let n = 4 * GSI_QUEUE;
    for i in 0..n {
        // SubnGet(NodeInfo) LID-routed and directed-route, as ib_mad never takes on QP 1.
        let class = if i % 2 == 0 { 0x01 } else { 0x81 };
        deliver(&mut b, &gsi_packet(&mad_of(class, 1, 0x01, i as u8), 1));
    }
    let mut v2 = mad(0);
    v2[0] = 2;
    deliver(&mut b, &gsi_packet(&v2, 1));
    let s = b.stats();
    assert_eq!(
        (s.rx_gsi_smp_class, s.rx_gsi_bad_base_version),
        (n as u64, 1)
    );
    assert_eq!(
        (s.rx_accepted, s.rx_gsi_mads, s.rx_gsi_queue_full),
        (before.rx_accepted, 0, 0)
    );
    assert_eq!(s.rx_dropped(), n as u64 + 1);
    assert_eq!(b.shared.gsi.inbox_len(), 0, "the inbox did not grow");
    assert_eq!(b.poll_gsi(), None);
    assert_eq!(sends(&mut b), None, "nothing answered");
    assert_eq!(b.gsi_waiting(), 0);
}

#[test]
//= rxe:mad.c/generate_unmatched_resp
fn an_unmatched_get_or_set_is_answered_get_resp_unsupported_as_ib_mad_answers_it() {
    let mut b = nic(B);
    // A Get of a class nobody serves, from QP 5 (a redirected agent), and a Set; a CM
    // ClassPortInfo Get (ib_cm registers method Send only).
    let get = mad_of(PERF.0, PERF.1, 0x01, 0xaa);
    let set = mad_of(0x05, 1, 0x02, 0xbb);
    let mut cm_cpi = mad_of(0x07, 2, 0x01, 0xcc);
    cm_cpi[16..18].copy_from_slice(&0x0001u16.to_be_bytes());
    for (request, src_qp) in [(get, 5), (set, 1), (cm_cpi, 1)] {
        assert_eq!(sends(&mut b), None, "nothing sent before the request");
        deliver(&mut b, &gsi_packet(&request, src_qp));
        let wire = sends(&mut b).expect("answered");
        let packet = RocePacket::new_checked(&wire[..]).unwrap();
        let bth = packet.bth();
        assert_eq!(
            (bth.opcode(), bth.dest_qp(), bth.pkey()),
            (Opcode::UdSendOnly, Qpn::new(src_qp), 0xffff),
            "to the QP it came from"
        );
        let deth = packet.deth().unwrap();
        assert_eq!((deth.qkey(), deth.src_qp()), (GSI_QKEY, GSI_QPN));
        let reply = packet.payload();
        assert_eq!(reply.len(), MAD_LEN);
        assert_eq!(reply[3], 0x81, "GetResp");
        assert_eq!(
            reply[4..6],
            [0x00, 0x0c],
            "status: unsupported method/attribute"
        );
        let mut rest = request;
        rest[3..6].copy_from_slice(&reply[3..6]);
        assert_eq!(reply, &rest[..], "the rest of the MAD as it came");
        assert_eq!(sends(&mut b), None, "answered once");
    }
    let s = b.stats();
    assert_eq!((s.gsi_unsupported_replies, s.tx_gsi_mads), (3, 3));
    assert_eq!((s.rx_accepted, s.rx_gsi_mads, s.cm_rx_mads), (3, 0, 0));
    assert_eq!(b.poll_gsi(), None);
}

#[test]
fn a_mad_no_agent_takes_that_is_not_a_get_or_set_is_dropped_and_the_inbox_does_not_grow() {
    let mut b = nic(B);
    let n = 4 * GSI_QUEUE;
    // Send, Report, GetResp, TrapRepress of classes nobody serves; a CM class version 1 REQ.
    let methods = [0x03, 0x06, 0x81, 0x07];
    for i in 0..n {
        deliver(
            &mut b,
            &gsi_packet(&mad_of(PERF.0, PERF.1, methods[i % 4], i as u8), 1),
        );
    }
    deliver(&mut b, &gsi_packet(&mad_of(0x07, 1, 0x03, 0), 1));
    // A CM MAD other than ClassPortInfo whose method is not Send: validate_mad's.
    deliver(&mut b, &gsi_packet(&mad_of(0x07, 2, 0x01, 0), 1));
    let s = b.stats();
    assert_eq!((s.rx_gsi_no_agent, s.rx_gsi_cm_method), (n as u64 + 1, 1));
    assert_eq!((s.rx_accepted, s.rx_gsi_mads, s.cm_rx_mads), (0, 0, 0));
    assert_eq!(b.shared.gsi.inbox_len(), 0, "the inbox did not grow");
    assert_eq!(b.poll_gsi(), None);
    assert_eq!(sends(&mut b), None);
}

#[test]
fn a_flood_of_unmatched_gets_queues_at_most_half_a_send_queue_of_answers() {
    let mut b = nic(B);
    let n = 4 * GSI_QUEUE;
    for i in 0..n {
        deliver(&mut b, &gsi_packet(&mad(i as u8), 1));
    }
    let s = b.stats();
    let answered = GSI_QUEUE / 2;
    assert_eq!(
        (s.gsi_unsupported_replies, s.rx_gsi_queue_full),
        (answered as u64, (n - answered) as u64)
    );
    assert_eq!(b.gsi_waiting(), answered);
    assert_eq!(b.shared.gsi.inbox_len(), 0);
    // The rest of the queue is still there for what the CM and the agents send.
    let ours = GsiDatagram {
        peer: A,
        local: B,
        peer_qp: GSI_QPN,
        mad: mad_of(0x07, 2, 0x03, 0x77),
    };
    for _ in answered..GSI_QUEUE {
        b.send_gsi(ours.clone()).unwrap();
    }
    assert_eq!(std::iter::from_fn(|| sends(&mut b)).count(), GSI_QUEUE);
}

#[test]
//= rxe:mad.c/ib_register_mad_agent
fn an_agent_is_refused_for_what_ib_mad_refuses_on_qp1_and_for_the_engines_cm() {
    let mut b = nic(B);
    for (class, version) in [
        (0x01, 1),
        (0x81, 1),
        (0x00, 1),
        (0x50, 1),
        (0x04, 8),
        (0x30, 1),
        (0x07, 2),
    ] {
        assert!(
            matches!(
                b.gsi_register(class, version),
                Err(VerbsError::InvalidWorkRequest { .. })
            ),
            "class {class:#x} version {version}"
        );
    }
    b.gsi_register(0x07, 1).unwrap();
    assert!(b.gsi_register(0x07, 1).is_err(), "one agent a class");
    // A SubnGet still finds no agent: it is dropped, not queued.
    deliver(&mut b, &gsi_packet(&mad_of(0x01, 1, 0x01, 0), 1));
    assert_eq!(
        (b.stats().rx_gsi_smp_class, b.shared.gsi.inbox_len()),
        (1, 0)
    );
}
