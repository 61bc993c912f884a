//! QP 1 between two NICs: a management datagram goes out as rxe sends one and comes in past
//! rxe's checks; anything else addressed to QP 1 is dropped, counted, and queues nothing.

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

fn mad(tag: u8) -> [u8; MAD_LEN] {
    let mut mad = [0u8; MAD_LEN];
    mad[0] = 1; // base version
    mad[1] = 0x07; // the CM's class
    mad[255] = tag;
    mad
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
fn a_mad_goes_from_qp1_to_the_peers_qp1_as_a_ud_send_with_the_gsi_qkey() {
    let (mut a, mut b) = (nic(A), nic(B));
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
