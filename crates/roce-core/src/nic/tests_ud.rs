//! What a UD receive hands the program, between two NICs wired back to back, over IPv4 and
//! over IPv6: the 40-byte GRH area as rxe writes it (the IPv6 header whole, or 20 zero bytes
//! and the IPv4 header) and a completion that says which of the two it is, which is what UCX's
//! ud_verbs needs to find the destination address in the area.

use std::net::{IpAddr, SocketAddr};

use crate::*;

/// A UD datagram of `data` from a NIC at `a` to one at `b`; B's completion and the receive
/// buffer (GRH area and data).
fn ud_datagram(a: IpAddr, b: IpAddr, data: &[u8]) -> (Cqe, Vec<u8>, Qpn) {
    ud_datagram_from(vec![a], b, data)
}

/// [`ud_datagram`] from a NIC with the addresses `a_addrs` (the first is its QP's).
fn ud_datagram_from(a_addrs: Vec<IpAddr>, b: IpAddr, data: &[u8]) -> (Cqe, Vec<u8>, Qpn) {
    let a = a_addrs[0];
    let mut na = Nic::new(NicConfig {
        addrs: a_addrs,
        ..NicConfig::default()
    });
    let mut nb = Nic::new(NicConfig {
        addrs: vec![b],
        ..NicConfig::default()
    });
    let (a_pd, b_pd) = (na.alloc_pd(), nb.alloc_pd());
    let (a_cq, b_cq) = (na.create_cq(8), nb.create_cq(8));
    let a_mr = na.reg_mr(a_pd, 4096, Access::ALL).unwrap();
    let b_mr = nb.reg_mr(b_pd, 4096, Access::ALL).unwrap();
    let ud = |src, dst| Connect {
        qp_type: QpType::Ud,
        qkey: 0x11,
        ..Connect::rc(
            AddressVector::new(src, dst),
            Qpn::new(0),
            Psn::new(0),
            Psn::new(0),
        )
    };
    let sender = na
        .create_qp(&QpInit::new(QpType::Ud, a_pd, a_cq, 4))
        .unwrap();
    na.connect_qp(sender, &ud(a, b)).unwrap();
    let receiver = nb
        .create_qp(&QpInit::new(QpType::Ud, b_pd, b_cq, 4))
        .unwrap();
    nb.connect_qp(receiver, &ud(b, a)).unwrap();
    // The area is filled with 0xee first: every byte of it must be written.
    assert!(b_mr.write(0, &[0xee; 256]));
    nb.post_recv(
        receiver,
        RecvWr {
            wr_id: 9,
            sgl: [Sge {
                addr: b_mr.addr(),
                length: 256,
                lkey: b_mr.lkey(),
            }]
            .into(),
        },
    )
    .unwrap();
    assert!(a_mr.write(0, data));
    let mut wr = SendWr::new(
        1,
        SendOp::Send,
        Sge {
            addr: a_mr.addr(),
            length: data.len() as u32,
            lkey: a_mr.lkey(),
        },
    );
    wr.ud = Some(UdDest {
        ip: b,
        qpn: receiver,
        qkey: 0x11,
    });
    na.post_send(sender, wr).unwrap();
    let mut buf = vec![0; MAX_DATAGRAM];
    let mut sent = 0;
    while let Some(t) = na.poll_transmit(Instant::ZERO, &mut buf) {
        sent += 1;
        nb.handle_datagram(
            Instant::ZERO,
            Datagram {
                src: SocketAddr::new(t.src, t.src_port),
                dst: t.dst,
                ecn: t.ecn,
                ip_id: Some(0),
                segment: 0,
                payload: &buf[..t.len],
            },
        );
    }
    assert_eq!(sent, 1, "one datagram");
    let cqe = nb.poll_completion(b_cq).expect("B's receive completed");
    let area = b_mr.read(0, 40 + data.len()).unwrap();
    (cqe, area, sender)
}

#[test]
fn an_ipv4_ud_receive_has_the_ipv4_header_at_offset_20_and_says_ipv4() {
    //= ibta:annex17/A17.4.5.1
    //# a UD completion says whether the received frame was IPv4 or IPv6
    //= rxe:rxe_resp.c/send_data_in
    //# a UD receive starts with the packet's IPv6 header, or 20 zero bytes and its IPv4 header
    let a: IpAddr = "198.18.0.1".parse().unwrap();
    let b: IpAddr = "198.18.0.2".parse().unwrap();
    let (cqe, area, sender) = ud_datagram(a, b, b"over ipv4");
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode, cqe.byte_len),
        (9, WcStatus::Success, WcOpcode::Recv, 40 + 9)
    );
    assert_eq!(cqe.src_qp, Some(sender));
    assert_eq!(cqe.network_hdr, Some(NetworkHdr::Ipv4));
    assert_eq!(area[..20], [0; 20], "the first 20 bytes are zeroed");
    let ip = &area[20..40];
    assert_eq!(ip[0], 0x45, "version 4, 20-byte header");
    assert_eq!(
        u16::from_be_bytes([ip[2], ip[3]]) as usize,
        20 + 8 + 12 + 8 + 12 + 4,
        "total length: IP, UDP, BTH, DETH, 9 bytes padded to 12, ICRC"
    );
    assert_eq!(ip[9], 17, "UDP");
    assert_eq!(ip[12..16], [198, 18, 0, 1], "source: A");
    assert_eq!(ip[16..20], [198, 18, 0, 2], "destination: B");
    assert_eq!(&area[40..], b"over ipv4");
    // Where UCX's ud_verbs looks with the type an IPv4 completion gives (`wc.sl & 7 == 2`):
    // the last 4 bytes of the area are B's address.
    assert_eq!(area[36..40], [198, 18, 0, 2]);
}

#[test]
fn an_ipv6_ud_receive_has_the_ipv6_header_whole_and_says_ipv6() {
    //= ibta:annex17/A17.4.5.1
    //# a UD completion says whether the received frame was IPv4 or IPv6
    //= rxe:rxe_resp.c/send_data_in
    //# a UD receive starts with the packet's IPv6 header, or 20 zero bytes and its IPv4 header
    let a: IpAddr = "2001:db8::1".parse().unwrap();
    let b: IpAddr = "2001:db8::2".parse().unwrap();
    let (cqe, area, sender) = ud_datagram(a, b, b"over ipv6");
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.byte_len),
        (9, WcStatus::Success, 40 + 9)
    );
    assert_eq!(cqe.src_qp, Some(sender));
    assert_eq!(cqe.network_hdr, Some(NetworkHdr::Ipv6));
    assert_eq!(area[0] >> 4, 6, "version 6");
    assert_eq!(
        u16::from_be_bytes([area[4], area[5]]) as usize,
        8 + 12 + 8 + 12 + 4,
        "payload length: UDP, BTH, DETH, 9 bytes padded to 12, ICRC"
    );
    assert_eq!(area[6], 17, "next header: UDP");
    let IpAddr::V6(a6) = a else { unreachable!() };
    let IpAddr::V6(b6) = b else { unreachable!() };
    assert_eq!(area[8..24], a6.octets(), "source: A");
    assert_eq!(area[24..40], b6.octets(), "destination: B");
    assert_eq!(&area[40..], b"over ipv6");
}

/// A NIC with a global and a link-local IPv6 address (GID 1 and GID 0) sends a UD datagram
/// to a link-local address from its link-local one, and to a global one from its global one:
/// the receiver answers the source it reads in the GRH area.
#[test]
fn a_ud_send_leaves_from_the_address_of_the_destinations_scope() {
    let global: IpAddr = "fd00:198:18:6::1".parse().unwrap();
    let ll: IpAddr = "fe80::c6ff:fe12:601".parse().unwrap();
    for (dst, want) in [("fe80::c6ff:fe12:602", ll), ("fd00:198:18:6::2", global)] {
        let (cqe, area, _) = ud_datagram_from(vec![global, ll], dst.parse().unwrap(), b"x");
        assert_eq!(cqe.status, WcStatus::Success, "to {dst}");
        let IpAddr::V6(want) = want else {
            unreachable!()
        };
        assert_eq!(
            area[8..24],
            want.octets(),
            "the source of a datagram to {dst}"
        );
    }
}

#[test]
fn completions_other_than_ud_receives_carry_no_network_header_type() {
    let a: IpAddr = "198.18.0.1".parse().unwrap();
    let b: IpAddr = "198.18.0.2".parse().unwrap();
    let mut na = Nic::new(NicConfig {
        addrs: vec![a],
        ..NicConfig::default()
    });
    let pd = na.alloc_pd();
    let cq = na.create_cq(8);
    let mr = na.reg_mr(pd, 4096, Access::ALL).unwrap();
    let qp = na.create_qp(&QpInit::new(QpType::Ud, pd, cq, 4)).unwrap();
    na.connect_qp(
        qp,
        &Connect {
            qp_type: QpType::Ud,
            qkey: 0x11,
            ..Connect::rc(
                AddressVector::new(a, b),
                Qpn::new(0),
                Psn::new(0),
                Psn::new(0),
            )
        },
    )
    .unwrap();
    let mut wr = SendWr::new(
        3,
        SendOp::Send,
        Sge {
            addr: mr.addr(),
            length: 8,
            lkey: mr.lkey(),
        },
    );
    wr.ud = Some(UdDest {
        ip: b,
        qpn: Qpn::new(0x99),
        qkey: 0x11,
    });
    na.post_send(qp, wr).unwrap();
    let mut buf = vec![0; MAX_DATAGRAM];
    while na.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
    let sent = na.poll_completion(cq).expect("the send completed");
    assert_eq!((sent.wr_id, sent.status), (3, WcStatus::Success));
    assert_eq!(sent.network_hdr, None);
    assert_eq!(sent.src_qp, None);
}
