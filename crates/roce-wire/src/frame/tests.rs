use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use crate::cnp::CONNECTX_FRAME;
use crate::{BthRepr, Opcode, Psn, Qpn, RoceRepr};

#[test]
fn connectx_cnp_frame() {
    let frame = Frame::parse(LinkType::Ethernet, &CONNECTX_FRAME).unwrap();
    let ip = frame.ip.unwrap();
    assert_eq!(ip.src, IpAddr::V4(Ipv4Addr::new(10, 0, 17, 1)));
    assert_eq!((ip.dscp, ip.ecn, ip.ttl), (48, Ecn::Ect0, 64));
    assert_eq!(ip.identification, Some(0x718c));
    assert!(ip.dont_fragment);
    let roce = frame.roce().unwrap().unwrap();
    assert_eq!(roce.bth().opcode(), Opcode::Cnp);
    assert!(roce.bth().becn());
    assert_eq!(frame.compute_icrc(), Some(0x2a00_fd82));
    assert_eq!(frame.verify_icrc(), Ok(()));
    let line = crate::pretty::FrameLine::new(&frame).to_string();
    assert_eq!(
        line,
        "10.0.17.1:0 > 10.0.18.1:4791 dscp=48 ecn=Ect0 CNP qp=0x000118 psn=0x000000 becn len=0 icrc=ok"
    );
}

#[test]
fn corrupt_icrc_is_reported() {
    let mut bytes = CONNECTX_FRAME;
    bytes[60] ^= 0x01; // a reserved byte of the CNP: covered
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert!(matches!(
        frame.verify_icrc(),
        Err(ParseError::IcrcMismatch { .. })
    ));
    bytes[60] ^= 0x01;
    bytes[15] = 0x03; // TOS: masked, and the IPv4 header checksum is not ours to check
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert_eq!(frame.verify_icrc(), Ok(()));
}

fn build(repr: &FrameRepr, roce: &RoceRepr, payload: &[u8]) -> Vec<u8> {
    let roce_len = roce.buffer_len();
    let mut buf = vec![0; repr.header_len() + roce_len];
    let at = repr.emit_headers(&mut buf, roce_len).unwrap();
    roce.emit(&mut buf[at..], |p| p.copy_from_slice(payload))
        .unwrap();
    icrc::seal(&repr.pseudo_header().unwrap(), &mut buf[at..]);
    buf
}

/// Headers from 127.0.0.1 to 127.0.0.2, port 4791 to 4791, with IPv4 ID `id`.
pub(super) fn repr_v4(id: u16) -> FrameRepr {
    FrameRepr {
        ethernet: Ethernet {
            src: [2, 0, 0, 0, 0, 1],
            dst: [2, 0, 0, 0, 0, 2],
            vlan: None,
            ether_type: 0x0800,
        },
        ip: Ip {
            src: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
            dscp: 0,
            ecn: Ecn::Ect0,
            ttl: 64,
            identification: Some(id),
            dont_fragment: true,
            flow_label: None,
        },
        src_port: 4791,
        dst_port: 4791,
    }
}

/// [`repr_v4`] over IPv6, 2001:db8::1 to 2001:db8::2, flow label 7.
pub(super) fn repr_v6() -> FrameRepr {
    let mut repr = repr_v4(0);
    repr.ethernet.ether_type = 0x86dd;
    repr.ip.src = IpAddr::V6("2001:db8::1".parse::<Ipv6Addr>().unwrap());
    repr.ip.dst = IpAddr::V6("2001:db8::2".parse::<Ipv6Addr>().unwrap());
    repr.ip.identification = None;
    repr.ip.dont_fragment = false;
    repr.ip.flow_label = Some(7);
    repr
}

/// A packet of `opcode` to QP `qp` at `psn` with `len` bytes of payload.
pub(super) fn op(opcode: Opcode, qp: u32, psn: u32, len: usize) -> RoceRepr {
    let mut bth = BthRepr::new(opcode, Qpn::new(qp), Psn::new(psn));
    bth.pad_count = RoceRepr::pad_for(len);
    RoceRepr {
        payload_len: len,
        ..RoceRepr::new(bth)
    }
}

#[test]
fn build_then_parse_ipv4_with_vlan() {
    let mut repr = repr_v4(0x1234);
    repr.ethernet.vlan = Some(Vlan {
        pcp: 3,
        dei: false,
        vid: 100,
    });
    repr.ip.src = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    repr.ip.dst = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    repr.ip.dscp = 26;
    repr.src_port = 0xc121;
    let bytes = build(&repr, &op(Opcode::RcSendOnly, 0x11, 5, 5), b"hello");
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert_eq!(frame.ethernet, Some(repr.ethernet));
    assert_eq!(frame.ip, Some(repr.ip));
    assert_eq!(frame.verify_icrc(), Ok(()));
    assert_eq!(frame.pseudo_header(), repr.pseudo_header());
    assert_eq!(frame.roce().unwrap().unwrap().payload(), b"hello");
}

#[test]
fn build_then_parse_ipv6() {
    let mut repr = repr_v6();
    repr.ip.ecn = Ecn::Ce;
    repr.ip.ttl = 1;
    repr.ip.flow_label = Some(0x12345);
    repr.src_port = 0xc000;
    let bytes = build(&repr, &op(Opcode::RcSendOnly, 0x11, 5, 300), &[7; 300]);
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert_eq!(frame.ip, Some(repr.ip));
    assert_eq!(frame.verify_icrc(), Ok(()));
    // Traffic class, flow label and hop limit are masked: a router may change them.
    let mut changed = bytes.clone();
    changed[14] = 0x6a;
    changed[15] = 0xbc;
    changed[21] = 64;
    let frame = Frame::parse(LinkType::Ethernet, &changed).unwrap();
    assert_eq!(frame.verify_icrc(), Ok(()));
    // The payload length is not.
    changed[19] ^= 1;
    let frame = Frame::parse(LinkType::Ethernet, &changed[..changed.len() - 256]);
    assert!(
        frame.is_err(),
        "a shorter IPv6 payload length than the frame holds is malformed"
    );
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    let line = crate::pretty::FrameLine::new(&frame).to_string();
    assert!(
        line.starts_with("[2001:db8::1]:49152 > [2001:db8::2]:4791 ecn=Ce RC_SEND_ONLY"),
        "{line}"
    );
}

#[test]
fn non_roce_frames_parse_without_roce() {
    // An ARP request.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 198, 18, 0, 1]);
    arp.extend_from_slice(&[0, 0, 0, 0, 0, 0, 198, 18, 0, 2]);
    let frame = Frame::parse(LinkType::Ethernet, &arp).unwrap();
    assert!(frame.ip.is_none() && frame.roce().is_none());
    assert_eq!(frame.ethernet.unwrap().ether_type, 0x0806);
    assert_eq!(crate::pretty::FrameLine::new(&frame).to_string(), "ARP");
}

#[test]
fn truncated_frame_is_malformed() {
    let err = Frame::parse(LinkType::Ethernet, &CONNECTX_FRAME[..30]).unwrap_err();
    assert_eq!(err, ParseError::Malformed { layer: Layer::Ipv4 });
}

#[test]
fn linux_cooked_captures_of_loopback() {
    let ip = &CONNECTX_FRAME[14..];
    // SLL v1: packet type 4 (outgoing), ARPHRD_LOOPBACK (772), address length 6, address, then
    // the protocol.
    let mut v1 = vec![0, 4, 0x03, 0x04, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00];
    v1.extend_from_slice(ip);
    // SLL2: protocol, reserved, interface index 1, ARPHRD_LOOPBACK, packet type, address length,
    // address.
    let mut v2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 1, 0x03, 0x04, 4, 6];
    v2.extend_from_slice(&[0; 8]);
    v2.extend_from_slice(ip);
    for (link, bytes) in [(LinkType::LinuxSll, &v1), (LinkType::LinuxSll2, &v2)] {
        let frame = Frame::parse(link, bytes).unwrap();
        assert_eq!(frame.ethernet, None);
        assert_eq!(
            frame.ip.unwrap().src,
            IpAddr::V4(Ipv4Addr::new(10, 0, 17, 1))
        );
        assert_eq!(frame.verify_icrc(), Ok(()), "{link:?}");
        assert!(matches!(
            Frame::parse(link, &bytes[..15]),
            Err(ParseError::Malformed {
                layer: Layer::Ethernet
            })
        ));
    }
    // A cooked ARP frame is not IP.
    let mut arp = v1.clone();
    arp[14..16].copy_from_slice(&[0x08, 0x06]);
    arp.truncate(16 + 28);
    arp[16..].copy_from_slice(&[
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ]);
    let frame = Frame::parse(LinkType::LinuxSll, &arp).unwrap();
    assert_eq!(frame.ip, None);
}

#[test]
fn offload_headers_carry_the_pseudo_header_sum() {
    let mut repr = FrameRepr::for_datagram(
        "198.18.0.1:49153".parse().unwrap(),
        "198.18.0.2:4791".parse().unwrap(),
        Ecn::Ect0,
        0,
        64,
    );
    let mut buf = [0u8; 64];
    // 198.18.0.1 → 198.18.0.2, 12 bytes: c612+0001+c612+0002+0011+000c = 0x18c44 → 0x8c45.
    let len = repr.emit_offload_headers(&mut buf, 4).unwrap();
    assert_eq!(len, IPV4_FRAME_OVERHEAD);
    assert_eq!(&buf[len - 2..len], &[0x8c, 0x45]);
    // Everything else is what emit_headers writes.
    let mut plain = [0u8; 64];
    repr.emit_headers(&mut plain, 4).unwrap();
    assert_eq!(&buf[..len - 2], &plain[..len - 2]);
    assert_eq!(&plain[len - 2..len], &[0, 0]);
    // IPv6: the addresses, a 32-bit length and the next header.
    repr.ip.src = IpAddr::V6("::1".parse().unwrap());
    repr.ip.dst = IpAddr::V6("::2".parse().unwrap());
    repr.ip.identification = None;
    let len = repr.emit_offload_headers(&mut buf, 4).unwrap();
    assert_eq!(len, IPV6_FRAME_OVERHEAD);
    // 0001 + 0002 + 000c + 0011 = 0x0020.
    assert_eq!(&buf[len - 2..len], &[0x00, 0x20]);
    // Mixed families are refused.
    repr.ip.dst = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    assert_eq!(
        repr.emit_offload_headers(&mut buf, 4),
        Err(ParseError::Malformed { layer: Layer::Ipv4 })
    );
}

/// [`build`] of a packet that carries HPCC's INT header `int` between its BTH and the rest.
fn build_with_int(
    repr: &FrameRepr,
    roce: &RoceRepr,
    payload: &[u8],
    int: &crate::int::Repr,
) -> Vec<u8> {
    use crate::{bth, int as int_header};
    let mut packet = vec![0; roce.buffer_len()];
    roce.emit(&mut packet, |p| p.copy_from_slice(payload))
        .unwrap();
    let mut with = packet[..bth::HEADER_LEN].to_vec();
    with[int_header::BTH_FLAG_BYTE] |= int_header::BTH_FLAG;
    with.resize(bth::HEADER_LEN + int_header::HEADER_LEN, 0);
    int.emit(&mut with[bth::HEADER_LEN..]);
    with.extend_from_slice(&packet[bth::HEADER_LEN..]);
    let mut buf = vec![0; repr.header_len() + with.len()];
    let at = repr.emit_headers(&mut buf, with.len()).unwrap();
    buf[at..].copy_from_slice(&with);
    icrc::seal(&repr.pseudo_header().unwrap(), &mut buf[at..]);
    buf
}

/// A packet with HPCC's INT header reads as the packet without it (its RETH where a RETH is),
/// then the header's records; its ICRC, which masks the header, checks out.
#[test]
fn a_packet_with_int_shows_its_own_headers_then_the_records() {
    use crate::int::{Hop, Repr};
    let mut int = Repr {
        nhop: 2,
        ..Repr::default()
    };
    int.hops[0] = Hop::new(1_000, 5_000, 1_280, 100_000_000_000);
    int.hops[1] = Hop::new(2_000, 9_000, 0, 400_000_000_000);
    let mut write = op(Opcode::RcRdmaWriteFirst, 0x11, 5, 1024);
    write.reth = Some(crate::RethRepr {
        va: 0x1000,
        rkey: 0x22,
        dma_len: 4096,
    });
    let bytes = build_with_int(&repr_v4(0), &write, &[7; 1024], &int);
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert_eq!(frame.verify_icrc(), Ok(()));
    assert_eq!(
        crate::pretty::FrameLine::new(&frame).to_string(),
        "127.0.0.1:4791 > 127.0.0.2:4791 ecn=Ect0 RC_RDMA_WRITE_FIRST qp=0x000011 psn=0x000005 \
         reth(va=0x1000 rkey=0x22 len=4096) len=1024 int(hops=2 q=1280B/100G q=0B/400G) icrc=ok"
    );
    // Taken apart as a receiver does: the header, and the packet as it was before it went in.
    let mut rest = Vec::new();
    let header = crate::int::strip(frame.roce_payload().unwrap(), &mut rest).unwrap();
    assert_eq!(header, int);
    let mut plain = vec![0; write.buffer_len()];
    write.emit(&mut plain, |p| p.fill(7)).unwrap();
    assert_eq!(rest[..rest.len() - 4], plain[..plain.len() - 4]);
}
