use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::cm::{Attr, CmMad, Message};
use super::cma::{self, PortSpace, ServiceId};
use super::rej::RejectReason;
use super::{DATA_LEN, MAD_LEN, examples, gsi, mra, rej, rep, req};
use crate::{Layer, Opcode, ParseError, PseudoHeader, Psn, Qpn, RocePacket, RoceRepr, icrc};

fn bytes_of(mad: &CmMad) -> [u8; MAD_LEN] {
    let mut buf = [0xa5; MAD_LEN];
    mad.emit(&mut buf).unwrap();
    buf
}

#[test]
fn rdma_ip_cm_service_ids_of_rping_and_perftest() {
    //= ibta:annex11/A11.2
    let rping = ServiceId::new(PortSpace::TCP, 7174);
    assert_eq!(rping.0, 0x0000_0000_0106_1c06);
    assert!(rping.is_ip_cm());
    assert_eq!((rping.port_space(), rping.port()), (PortSpace::TCP, 7174));
    assert_eq!(
        ServiceId::new(PortSpace::TCP, 18515).0,
        0x0000_0000_0106_4853
    );
    assert_eq!(rping.to_string(), "0x0000000001061c06 (RDMA TCP port 7174)");
    assert!(!ServiceId(0x1000_0000_0106_1c06).is_ip_cm());
    assert_eq!(ServiceId(0x42).to_string(), "0x0000000000000042");
}

#[test]
fn mad_header_is_written_where_ib_mad_h_puts_it() {
    //= ibta:vol1/13.4.2
    let mad = CmMad::new(0x0102_0304_0506_0708, examples::all()[3].message);
    let buf = bytes_of(&mad);
    assert_eq!(
        buf[..24],
        [
            1, 0x07, 2, 0x03, // base version, class CM, class version 2, Send
            0, 0, 0, 0, // status, class specific
            1, 2, 3, 4, 5, 6, 7, 8, // TID
            0x00, 0x14, 0, 0, // RTU, reserved
            0, 0, 0, 0, // attribute modifier
        ]
    );
}

#[test]
fn req_bit_fields_sit_at_table_106s_offsets() {
    //= ibta:vol1/12.6.5
    let buf = bytes_of(&CmMad::new(1, Message::Req(examples::req())));
    let d = &buf[24..];
    assert_eq!(d[0..4], [0x1a, 0x2b, 0x3c, 0x4d]); // local comm ID
    assert_eq!(d[4..8], [0, 0x00, 0x02, 0xc9]); // reserved, vendor ID
    assert_eq!(d[8..16], [0, 0, 0, 0, 0x01, 0x06, 0x1c, 0x06]); // service ID
    assert_eq!(d[32..36], [0, 0, 0x11, 1]); // QPN, responder resources
    assert_eq!(d[43], (20 << 3) | (1 << 1) | 1); // remote timeout, UC, E2E flow control
    assert_eq!(d[44..48], [0x76, 0x54, 0x32, (22 << 3) | 7]); // PSN, local timeout, retry
    assert_eq!(
        d[48..52],
        [0xff, 0xff, (3 << 4) | 0x08 | 6, (15 << 4) | 0x08 | 5]
    );
    assert_eq!(d[52..56], [0xff, 0xff, 0xff, 0xff]); // permissive LIDs
    assert_eq!(d[56 + 10..56 + 16], [0xff, 0xff, 198, 18, 0, 1]); // local GID ::ffff:
    // Flow label 0x12345 in the top 20 bits, packet rate 0x2a in the low 6.
    assert_eq!(d[88..92], [0x12, 0x34, 0x50, 0x2a]);
    assert_eq!(d[92..96], [0x68, 64, (5 << 4) | 0x08, 19 << 3]);
    assert_eq!(d[139], (19 << 3) | 0x04); // alternate ACK timeout, SAP supported
    // The cma_hdr: version 0, IPv4, source port, 12 zero bytes and the address, twice.
    assert_eq!(d[140..144], [0, 0x40, 0xb8, 0x13]);
    assert_eq!(
        d[144..160],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 198, 18, 0, 1]
    );
    assert_eq!(
        d[160..176],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 198, 18, 0, 12]
    );
}

#[test]
fn rep_rej_and_mra_bit_fields_sit_at_their_tables_offsets() {
    //= ibta:vol1/12.6.8
    //= ibta:vol1/12.6.7
    //= ibta:vol1/12.6.6
    let all = examples::all();
    let rep = bytes_of(&all[2]);
    let d = &rep[24..];
    assert_eq!(d[12..16], [0, 0, 0x12, 0x00]); // QPN, vendor ID high byte
    assert_eq!(d[20..24], [0x12, 0x34, 0x56, 0xc9]); // PSN, vendor ID low byte
    assert_eq!(d[24..28], [3, 4, (15 << 3) | (2 << 1) | 1, (5 << 5) | 0x10]);
    let rej = bytes_of(&all[6]);
    assert_eq!(rej[24 + 8..24 + 12], [0, 16 << 1, 0, 8]);
    let mra = bytes_of(&all[1]);
    assert_eq!(mra[24 + 8..24 + 10], [0, 24 << 3]);
}

#[test]
fn every_example_round_trips_through_bytes() {
    for mad in examples::all() {
        let buf = bytes_of(&mad);
        assert_eq!(
            CmMad::parse(&buf).unwrap(),
            mad,
            "{}",
            mad.message.attr().name()
        );
    }
}

#[test]
fn one_line_per_message() {
    let lines: Vec<String> = examples::all().iter().map(ToString::to_string).collect();
    assert_eq!(
        lines[0],
        "CM REQ tid=0x11a2b3c4d lcid=0x1a2b3c4d sid=0x0000000001061c06 (RDMA TCP port 7174) \
         qpn=0x000011 psn=0x765432 mtu=1024 UC rr=1 depth=2 retry=7 rnr=6 timeout=22/20 \
         guid=0x02005efffe120001 srq cma(198.18.0.1:47123 > 198.18.0.12:7174)"
    );
    assert_eq!(
        lines[6],
        "CM REJ tid=0x11a2b3c50 lcid=0x5e6f7081 rcid=0x1a2b3c4d rejected=REQ \
         reason=8 (invalid service ID) ari_len=16"
    );
    assert!(lines[1].starts_with("CM MRA ") && lines[1].ends_with("mraed=REQ timeout=24"));
    assert!(lines[2].starts_with("CM REP ") && lines[2].ends_with(" srq attr_mod=0x1"));
    assert!(lines[3].starts_with("CM RTU "));
    assert!(lines[4].ends_with("rcid=0x5e6f7081 qpn=0x000012"));
    assert!(lines[5].starts_with("CM DREP "));
}

#[test]
fn reject_reasons_have_the_kernels_numbers() {
    assert_eq!(RejectReason::from(8), RejectReason::InvalidServiceId);
    assert_eq!(RejectReason::from(10), RejectReason::StaleConn);
    assert_eq!(RejectReason::from(28), RejectReason::ConsumerDefined);
    assert_eq!(u16::from(RejectReason::VendorOptionNotSupported), 35);
    assert_eq!(RejectReason::from(34), RejectReason::Other(34));
    for raw in 0..=u16::MAX {
        assert_eq!(u16::from(RejectReason::from(raw)), raw);
    }
    assert_eq!(RejectReason::InvalidGid.to_string(), "12 (invalid GID)");
    assert_eq!(RejectReason::Other(999).to_string(), "999");
}

#[test]
fn cma_hdr_ipv4_is_twelve_zero_bytes_and_the_address_ipv6_is_verbatim() {
    //= ibta:annex11/A11
    let v6 = cma::Repr {
        port: 1,
        src: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
        dst: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
    };
    let mut buf = [0xee; cma::HEADER_LEN];
    v6.emit(&mut cma::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(buf[..4], [0, 0x60, 0, 1]);
    assert_eq!(buf[4..6], [0xfd, 0]);
    assert_eq!(
        cma::Repr::parse(&cma::Packet::new_checked(&buf[..]).unwrap()),
        Ok(v6)
    );
    // Mixed families are written as IPv6 with the IPv4 one mapped.
    let mixed = cma::Repr {
        src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        ..v6
    };
    mixed.emit(&mut cma::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(
        buf[4..20],
        Ipv4Addr::new(198, 18, 0, 1).to_ipv6_mapped().octets()
    );
}

#[test]
fn a_cma_hdr_of_another_version_or_family_is_refused() {
    let mut buf = [0; cma::HEADER_LEN];
    buf[1] = 0x40;
    assert!(cma::Repr::parse(&cma::Packet::new_checked(&buf[..]).unwrap()).is_ok());
    buf[0] = 0x10;
    assert_eq!(
        cma::Repr::parse(&cma::Packet::new_checked(&buf[..]).unwrap()),
        Err(ParseError::BadCmaHeader {
            version: 0x10,
            ip_version: 4
        })
    );
    buf[0] = 0;
    buf[1] = 0x50;
    assert_eq!(
        cma::Repr::parse(&cma::Packet::new_checked(&buf[..]).unwrap()),
        Err(ParseError::BadCmaHeader {
            version: 0,
            ip_version: 5
        })
    );
    assert_eq!(
        cma::Packet::new_checked(&buf[..35]).unwrap_err(),
        ParseError::Truncated {
            layer: Layer::CmaHdr,
            need: 36,
            got: 35
        }
    );
}

#[test]
fn views_refuse_short_buffers_by_name() {
    let buf = [0u8; DATA_LEN - 1];
    let short = |layer| ParseError::Truncated {
        layer,
        need: DATA_LEN,
        got: DATA_LEN - 1,
    };
    assert_eq!(
        req::Packet::new_checked(&buf[..]).unwrap_err(),
        short(Layer::Cm("REQ"))
    );
    assert_eq!(
        rep::Packet::new_checked(&buf[..]).unwrap_err(),
        short(Layer::Cm("REP"))
    );
    assert_eq!(
        rej::Packet::new_checked(&buf[..]).unwrap_err(),
        short(Layer::Cm("REJ"))
    );
    assert_eq!(
        mra::Packet::new_checked(&buf[..]).unwrap_err(),
        short(Layer::Cm("MRA"))
    );
    assert_eq!(
        super::Packet::new_checked(&buf[..23]).unwrap_err(),
        ParseError::Truncated {
            layer: Layer::Mad,
            need: 24,
            got: 23
        }
    );
    assert_eq!(Layer::Cm("REQ").to_string(), "CM REQ");
}

#[test]
fn mads_that_are_not_cm_are_refused_by_name() {
    let good = bytes_of(&examples::all()[0]);
    assert!(CmMad::parse(&good).is_ok());
    let with = |at: usize, value: u8| {
        let mut buf = good;
        buf[at] = value;
        CmMad::parse(&buf)
    };
    assert_eq!(with(0, 2), Err(ParseError::BadMadBaseVersion(2)));
    assert_eq!(
        with(1, 0x81),
        Err(ParseError::NotCm {
            mgmt_class: 0x81,
            class_version: 2
        })
    );
    assert_eq!(
        with(2, 1),
        Err(ParseError::NotCm {
            mgmt_class: 7,
            class_version: 1
        })
    );
    assert_eq!(
        with(17, 0x19),
        Err(ParseError::UnsupportedCmAttribute(0x19))
    );
    assert_eq!(
        CmMad::parse(&good[..255]),
        Err(ParseError::Truncated {
            layer: Layer::Mad,
            need: 256,
            got: 255
        })
    );
    // Another method still parses, and the line says so.
    let post = CmMad::parse(&{
        let mut buf = good;
        buf[3] = 0x83;
        buf
    })
    .unwrap();
    assert!(post.to_string().ends_with(" method=0x83"), "{post}");
    assert_eq!(Attr::from_id(0x0013), Attr::Rep);
    assert_eq!(Attr::Apr.id(), 0x001a);
}

#[test]
fn emit_refuses_a_buffer_of_the_wrong_length() {
    let mad = examples::all()[0];
    let mut buf = [0x5a; MAD_LEN + 1];
    assert!(mad.emit(&mut buf).is_err());
    assert!(
        buf.iter().all(|&b| b == 0x5a),
        "nothing written before the refusal"
    );
}

#[test]
fn a_gsi_packet_is_a_ud_send_only_to_qp1_sealed_with_its_icrc() {
    //= rxe:rxe_recv.c/check_keys
    let header = PseudoHeader::for_datagram(
        "198.18.0.1:49152".parse().unwrap(),
        "198.18.0.12:4791".parse().unwrap(),
        7,
    )
    .unwrap();
    let mad = examples::all()[0];
    let mut buf = vec![0; gsi::PACKET_LEN];
    gsi::emit_cm(Psn::new(0x42), &mad, &header, &mut buf).unwrap();
    assert_eq!(buf.len(), 280);
    let packet = RocePacket::new_checked(&buf[..]).unwrap();
    let repr = RoceRepr::parse(&packet).unwrap();
    assert_eq!(repr.bth.opcode, Opcode::UdSendOnly);
    assert_eq!((repr.bth.dest_qp, repr.bth.pkey), (Qpn::new(1), 0xffff));
    let deth = repr.deth.unwrap();
    assert_eq!((deth.qkey, deth.src_qp), (0x8001_0000, Qpn::new(1)));
    assert_eq!(icrc::verify(&header, &buf), Ok(()));
    let carried = gsi::mad_of(&packet).unwrap();
    assert_eq!(CmMad::parse(carried).unwrap(), mad);
    // A UD SEND to another QP is not a GSI packet.
    let mut other = gsi::roce_repr(Psn::new(0));
    other.bth.dest_qp = Qpn::new(2);
    let mut buf = vec![0; other.buffer_len()];
    other.emit(&mut buf, |p| p.fill(0)).unwrap();
    assert_eq!(
        gsi::mad_of(&RocePacket::new_checked(&buf[..]).unwrap()),
        None
    );
}

proptest! {
    #[test]
    fn arbitrary_mads_never_panic_and_round_trip(
        data in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        crate::fuzzing::parse_cm_mad(&data);
        for view in 0..4 {
            let _ = match view {
                0 => req::Packet::new_checked(&data[..]).and_then(|p| req::Repr::parse(&p)).map(|_| ()),
                1 => rep::Packet::new_checked(&data[..]).and_then(|p| rep::Repr::parse(&p)).map(|_| ()),
                2 => cma::Packet::new_checked(&data[..]).and_then(|p| cma::Repr::parse(&p)).map(|_| ()),
                _ => super::Packet::new_checked(&data[..]).and_then(|p| super::Repr::parse(&p)).map(|_| ()),
            };
        }
    }

    #[test]
    fn cm_header_with_arbitrary_body_never_panics_and_round_trips(
        attr in 0x0010u16..=0x0019,
        body in proptest::collection::vec(any::<u8>(), DATA_LEN),
    ) {
        let mut data = vec![1, 0x07, 2, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        data.extend_from_slice(&attr.to_be_bytes());
        data.extend_from_slice(&[0; 6]);
        data.extend_from_slice(&body);
        let parsed = CmMad::parse(&data);
        prop_assert_eq!(parsed.is_ok(), attr <= 0x0018);
        crate::fuzzing::parse_cm_mad(&data);
    }
}

#[test]
fn a_frame_line_shows_the_cm_mad_after_the_transport_part() {
    use crate::frame::{Frame, LinkType};
    use crate::pretty::FrameLine;
    let src = "198.18.0.1:49152".parse().unwrap();
    let dst = "198.18.0.12:4791".parse().unwrap();
    let mads = examples::all();
    let bytes = gsi::frame(src, dst, Psn::new(5), &mads[0]).unwrap();
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    let line = FrameLine::new(&frame).to_string();
    assert_eq!(
        line,
        format!(
            "198.18.0.1:49152 > 198.18.0.12:4791 UD_SEND_ONLY qp=0x000001 psn=0x000005 \
             deth(qkey=0x80010000 src_qp=0x000001) len=256 {} icrc=ok",
            mads[0]
        )
    );
    // A MAD of another class is named by its numbers; a broken CM MAD says why.
    let mut other = bytes.clone();
    let mad_at = other.len() - 4 - MAD_LEN;
    other[mad_at + 1] = 0x04;
    let line =
        FrameLine::without_icrc(&Frame::parse(LinkType::Ethernet, &other).unwrap()).to_string();
    assert!(
        line.contains(" len=256 MAD class=0x04 version=2 attr=0x0010 icrc="),
        "{line}"
    );
    other[mad_at + 1] = 0x07;
    other[mad_at + 17] = 0x19;
    let line =
        FrameLine::without_icrc(&Frame::parse(LinkType::Ethernet, &other).unwrap()).to_string();
    assert!(
        line.contains(" CM malformed: CM attribute 0x0019 not supported"),
        "{line}"
    );
    // Not to QP 1: no MAD.
    let mut rc = gsi::roce_repr(Psn::new(0));
    rc.bth.dest_qp = Qpn::new(3);
    assert!(!crate::pretty::Roce(&rc).to_string().contains("CM"));
}
