use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;

/// A CNP captured on a ConnectX-4 Lx, from scapy's `test/contrib/roce.uts`: hardware's ICRC.
mod connectx_cnp {
    pub(super) const IP: [u8; 20] = [
        0x45, 0xc2, 0x00, 0x3c, // version/IHL, TOS 0xc2 (DSCP 48, ECT(0)), total length 60
        0x71, 0x8c, 0x40, 0x00, // ID 0x718c, DF
        0x40, 0x11, 0x91, 0x61, // TTL 64, UDP, checksum
        0x0a, 0x00, 0x11, 0x01, // 10.0.17.1
        0x0a, 0x00, 0x12, 0x01, // 10.0.18.1
    ];
    pub(super) const UDP: [u8; 8] = [
        0x00, 0x00, 0x12, 0xb7, // source port 0 (!), destination 4791
        0x00, 0x28, 0x00, 0x00, // length 40, checksum 0
    ];
    /// BTH, 16 reserved bytes, ICRC 0x2a00fd82 sent as `82 fd 00 2a`.
    pub(super) const ROCE: [u8; 32] = [
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, // BTH
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0x82, 0xfd, 0x00, 0x2a, // ICRC
    ];
    pub(super) const ICRC: u32 = 0x2a00_fd82;
}

/// scapy's "RoCE layer" test: a UC SEND_ONLY with MigReq and a pad of 2, over IPv4.
mod uc_send_only {
    pub(super) const IP: [u8; 20] = [
        0x45, 0x01, 0x00, 0x40, // TOS 0x01, total length 64
        0x04, 0x78, 0x40, 0x00, // ID 1144, DF
        0x40, 0x11, 0xb4, 0xd5, // TTL 64, UDP, checksum
        192, 168, 0, 7, 192, 168, 0, 7,
    ];
    pub(super) const UDP: [u8; 8] = [0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2];
    pub(super) const ROCE: [u8; 36] = [
        0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17,
        0x10, // BTH, QP 211, PSN 13571856
        b'F', b'0', 0x81, 0x8b, 0xe2, 0x89, b'5', 0xd9, 0x0e, 0x9a, 0x95, b'P', b'T', 0x01, 0xbe,
        0x88, b'^', b'P', 0x00, 0x00, // 18 bytes of payload and 2 of pad
        0x78, 0xf3, 0x53, 0xf3, // ICRC
    ];
    pub(super) const ICRC: u32 = 0xf353_f378;
}

fn cnp_pseudo_header() -> PseudoHeader {
    PseudoHeader {
        ip: IpFields::V4 {
            src: Ipv4Addr::new(10, 0, 17, 1),
            dst: Ipv4Addr::new(10, 0, 18, 1),
            identification: 0x718c,
            dont_fragment: true,
        },
        src_port: 0,
        dst_port: 4791,
    }
}

#[test]
fn connectx_cnp_vector_from_fields() {
    assert_eq!(
        compute(&cnp_pseudo_header(), &connectx_cnp::ROCE),
        connectx_cnp::ICRC
    );
    assert_eq!(verify(&cnp_pseudo_header(), &connectx_cnp::ROCE), Ok(()));
}

#[test]
fn connectx_cnp_vector_from_headers() {
    let icrc = compute_raw(&connectx_cnp::IP, &connectx_cnp::UDP, &connectx_cnp::ROCE);
    assert_eq!(icrc, Some(connectx_cnp::ICRC));
}

#[test]
fn uc_send_only_vector() {
    let header = PseudoHeader {
        ip: IpFields::V4 {
            src: Ipv4Addr::new(192, 168, 0, 7),
            dst: Ipv4Addr::new(192, 168, 0, 7),
            identification: 1144,
            dont_fragment: true,
        },
        src_port: 49152,
        dst_port: 4791,
    };
    assert_eq!(compute(&header, &uc_send_only::ROCE), uc_send_only::ICRC);
    let raw = compute_raw(&uc_send_only::IP, &uc_send_only::UDP, &uc_send_only::ROCE);
    assert_eq!(raw, Some(uc_send_only::ICRC));
}

#[test]
fn seal_writes_little_endian() {
    let mut packet = connectx_cnp::ROCE;
    packet[28..].fill(0);
    seal(&cnp_pseudo_header(), &mut packet);
    assert_eq!(packet, connectx_cnp::ROCE);
}

proptest! {
    #[test]
    fn in_place_and_borrowed_agree_for_any_length(
        body in proptest::collection::vec(any::<u8>(), 0..300), v6 in any::<bool>(),
    ) {
        let header = if v6 {
            PseudoHeader {
                ip: IpFields::V6 { src: "2001:db8::1".parse().unwrap(), dst: "::1".parse().unwrap() },
                src_port: 0xc000,
                dst_port: 4791,
            }
        } else {
            cnp_pseudo_header()
        };
        let mut buf = vec![0x55; HEADROOM];
        buf.extend_from_slice(&body);
        prop_assert_eq!(compute_in_place(&header, &mut buf, HEADROOM), Some(compute(&header, &body)));
        prop_assert_eq!(&buf[HEADROOM..], &body[..]);
    }
}

#[test]
fn in_place_matches_borrowed_and_restores_the_packet() {
    let mut buf = vec![0xaa; HEADROOM];
    buf.extend_from_slice(&connectx_cnp::ROCE);
    let at = HEADROOM;
    assert_eq!(
        compute_in_place(&cnp_pseudo_header(), &mut buf, at),
        Some(connectx_cnp::ICRC)
    );
    assert_eq!(
        &buf[at..],
        &connectx_cnp::ROCE,
        "the BTH byte 4 mask is undone"
    );
    buf[at + 28..].fill(0);
    assert_eq!(seal_in_place(&cnp_pseudo_header(), &mut buf, at), Some(()));
    assert_eq!(&buf[at..], &connectx_cnp::ROCE);
    // Too little headroom: nothing is computed.
    let mut short = vec![0; 27];
    short.extend_from_slice(&connectx_cnp::ROCE);
    assert_eq!(compute_in_place(&cnp_pseudo_header(), &mut short, 27), None);
}

#[test]
fn mismatch_names_both_values() {
    let mut packet = connectx_cnp::ROCE;
    packet[28] ^= 1;
    let err = verify(&cnp_pseudo_header(), &packet).unwrap_err();
    let expected = ParseError::IcrcMismatch {
        expected: 0x2a00_fd82,
        found: 0x2a00_fd83,
    };
    assert_eq!(err, expected);
}

#[test]
fn lrh_prefix_is_rxe_seed() {
    // rxe starts from the raw CRC state 0xdebb20e3, which is the inverse of the CRC of 8 × 0xff.
    assert_eq!(!CRC_OF_ONES[8], 0xdebb_20e3);
    for k in 0..=8 {
        assert_eq!(CRC_OF_ONES[k], crc32fast::hash(&[0xff; 8][..k]), "{k}");
    }
    // How many LRH bytes are hashed literally, and the CRC of the others to resume from.
    let split = |len| {
        let literal = lrh_split(len);
        (literal, after_ones(LRH_LEN - literal).finalize())
    };
    assert_eq!(split(40), (8, 0));
    assert_eq!(split(60), (4, CRC_OF_ONES[4]));
    assert_eq!(split(35), (0, CRC_OF_ONES[8]));
}

#[test]
fn short_input_does_not_panic() {
    for len in 0..16 {
        let _ = compute(&cnp_pseudo_header(), &connectx_cnp::ROCE[..len]);
        let _ = verify(&cnp_pseudo_header(), &connectx_cnp::ROCE[..len]);
        let _ = compute_raw(
            &connectx_cnp::IP[..len],
            &connectx_cnp::UDP,
            &connectx_cnp::ROCE,
        );
    }
}

/// A literal transcription of IBA Annex A17.4.3 (and of [`crate::int`]'s mask): copy the headers, set every variant field to
/// ones, prepend 8 bytes of ones for the LRH, CRC-32 the lot. The real code never copies.
fn spec_icrc(ip: &[u8], udp: &[u8], roce: &[u8]) -> u32 {
    let mut bytes = vec![0xff; 8];
    let mut ip = ip.to_vec();
    if ip[0] >> 4 == 4 {
        ip[1] = 0xff; // type of service
        ip[8] = 0xff; // time to live
        ip[10] = 0xff; // header checksum
        ip[11] = 0xff;
    } else {
        ip[0] |= 0x0f; // traffic class
        ip[1] = 0xff;
        ip[2] = 0xff; // flow label
        ip[3] = 0xff;
        ip[7] = 0xff; // hop limit
    }
    bytes.extend_from_slice(&ip);
    bytes.extend_from_slice(&udp[..6]);
    bytes.extend_from_slice(&[0xff, 0xff]); // UDP checksum
    let mut transport = roce[..roce.len() - 4].to_vec();
    transport[4] = 0xff; // FECN, BECN, Resv6a
    // roce-emu's extension: an INT header flagged in the BTH is a variant field too, and so is
    // a PINT header flagged alone.
    let flags = transport[8] & 0x60;
    if flags == 0x20 && transport.len() >= 16 {
        transport[12..16].fill(0xff);
    } else if flags != 0 && transport.len() >= 56 {
        transport[12..56].fill(0xff);
    }
    bytes.extend_from_slice(&transport);
    crc32fast::hash(&bytes)
}

/// The bit positions the ICRC does not cover, in the IPv4 header, UDP header and RoCE packet.
fn masked_v4(layer: usize, byte: usize) -> bool {
    match layer {
        0 => matches!(byte, 1 | 8 | 10 | 11),
        1 => matches!(byte, 6 | 7),
        _ => byte == 4,
    }
}

proptest! {
    #[test]
    fn differential_against_the_spec_transcription(
        ip_id in any::<u16>(), tos in any::<u8>(), ttl in any::<u8>(),
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
        sport in any::<u16>(), body in proptest::collection::vec(any::<u8>(), 12..200),
    ) {
        let roce_len = body.len() + 4;
        let total = (20 + 8 + roce_len) as u16;
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let mut udp = [0u8; 8];
        udp[0..2].copy_from_slice(&sport.to_be_bytes());
        udp[2..4].copy_from_slice(&4791u16.to_be_bytes());
        udp[4..6].copy_from_slice(&((8 + roce_len) as u16).to_be_bytes());
        let mut roce = body.clone();
        roce.extend_from_slice(&[0; 4]);

        let expected = spec_icrc(&ip, &udp, &roce);
        prop_assert_eq!(compute_raw(&ip, &udp, &roce), Some(expected));
        let header = PseudoHeader {
            ip: IpFields::V4 {
                src: src.into(), dst: dst.into(), identification: ip_id, dont_fragment: true,
            },
            src_port: sport,
            dst_port: 4791,
        };
        prop_assert_eq!(compute(&header, &roce), expected);
    }

    #[test]
    fn covered_bits_break_the_icrc_and_masked_bits_do_not(
        layer in 0usize..3, byte in any::<prop::sample::Index>(), bit in 0u8..8,
    ) {
        let mut ip = uc_send_only::IP;
        let mut udp = uc_send_only::UDP;
        let mut roce = uc_send_only::ROCE;
        let (bytes, len): (&mut [u8], usize) = match layer {
            0 => (&mut ip, 20),
            1 => (&mut udp, 8),
            _ => (&mut roce, 32), // not the ICRC itself
        };
        let at = byte.index(len);
        bytes[at] ^= 1 << bit;
        let icrc = compute_raw(&ip, &udp, &roce);
        if masked_v4(layer, at) {
            prop_assert_eq!(icrc, Some(uc_send_only::ICRC));
        } else {
            prop_assert_ne!(icrc, Some(uc_send_only::ICRC));
        }
    }
}

/// A packet whose BTH flags the header `header` (as `flag` says), sealed, then rewritten by a
/// switch (`stamp`): the ICRC is as it was (the header is hashed as ones), in place too and the
/// mask undone; the byte right after the header is covered, and so is the flag.
fn assert_masked(flag: u8, header: int::Repr, stamp: impl FnOnce(&mut [u8])) {
    let len = header.buffer_len();
    let mut packet = vec![0u8; bth::HEADER_LEN + len + 16 + ICRC_LEN];
    packet[0] = 0x0a; // RC RDMA WRITE ONLY
    packet[int::BTH_FLAG_BYTE] = 0x80 | flag;
    header.emit(&mut packet[bth::HEADER_LEN..]);
    seal(&cnp_pseudo_header(), &mut packet);
    let sealed = packet.clone();
    stamp(&mut packet);
    assert_ne!(packet, sealed);
    assert_eq!(verify(&cnp_pseudo_header(), &packet), Ok(()));
    let mut buf = vec![0; HEADROOM];
    buf.extend_from_slice(&packet);
    assert_eq!(
        compute_in_place(&cnp_pseudo_header(), &mut buf, HEADROOM),
        Some(compute(&cnp_pseudo_header(), &packet))
    );
    assert_eq!(&buf[HEADROOM..], &packet[..], "the mask is undone");
    let mut reth = packet.clone();
    reth[bth::HEADER_LEN + len] ^= 1;
    assert!(verify(&cnp_pseudo_header(), &reth).is_err());
    packet[int::BTH_FLAG_BYTE] &= !flag;
    assert!(verify(&cnp_pseudo_header(), &packet).is_err());
}

/// A switch's INT record leaves the ICRC as it was, while the flag that says the header is
/// there, and the RETH after it, are covered.
#[test]
fn an_int_stamp_keeps_the_icrc_and_the_int_flag_is_covered() {
    assert_masked(int::BTH_FLAG, int::Repr::default(), |packet| {
        let mut view = int::Packet::new_checked(&mut packet[bth::HEADER_LEN..]).unwrap();
        assert!(view.push_hop(int::Hop::new(5, 6, 7, 100_000_000_000)));
    });
}

/// PINT's 4-byte header is masked as INT's is: a switch raising its value leaves the ICRC as
/// it was, the bytes past it are covered, and so is its flag.
#[test]
fn a_pint_raise_keeps_the_icrc_and_the_pint_flag_is_covered() {
    assert_masked(int::PINT_BTH_FLAG, int::Repr::pint(false, 0), |packet| {
        assert!(int::raise_pint(packet, 700));
    });
}

proptest! {
    /// A payload handed over in pieces seals the packet as the same bytes in place would,
    /// whatever stood in the packet where the pieces go.
    #[test]
    fn a_payload_in_pieces_seals_as_the_whole_packet(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
        stale in any::<u8>(),
    ) {
        let header_len = bth::HEADER_LEN + 16; // BTH and RETH
        let mut whole = vec![0u8; header_len + payload.len() + ICRC_LEN];
        whole[0] = 0x0a; // RC RDMA WRITE ONLY
        whole[header_len..header_len + payload.len()].copy_from_slice(&payload);
        seal(&cnp_pseudo_header(), &mut whole);

        let mut gathered = whole.clone();
        let hole = header_len..header_len + payload.len();
        gathered[hole.clone()].fill(stale);
        gathered[hole.end..].fill(0);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(payload.len() + 1)).collect();
        cuts.sort_unstable();
        let sealed = seal_around(&cnp_pseudo_header(), &mut gathered, hole.clone(), |f| {
            let mut from = 0;
            for cut in cuts.iter().copied().chain([payload.len()]) {
                f(&payload[from..cut]);
                from = cut;
            }
        });
        prop_assert!(sealed);
        prop_assert_eq!(&gathered[hole.end..], &whole[hole.end..]);
        prop_assert!(gathered[hole].iter().all(|&b| b == stale), "the hole is never written");
    }
}

/// A hole over the BTH (whose byte 4 is hashed as ones) or past the ICRC's slot is refused,
/// and the packet is left as it was.
#[test]
fn a_hole_outside_the_payload_is_refused_and_writes_nothing() {
    let mut packet = vec![0u8; bth::HEADER_LEN + 8 + ICRC_LEN];
    packet[0] = 0x04; // RC SEND ONLY
    let before = packet.clone();
    let len = packet.len();
    #[allow(clippy::reversed_empty_ranges)] // a hole that ends before it starts: refused
    let backwards = 15..14;
    for hole in [
        0..4,
        4..bth::HEADER_LEN + 2,
        bth::HEADER_LEN..len,
        backwards,
    ] {
        let refused = !seal_around(&cnp_pseudo_header(), &mut packet, hole.clone(), |f| {
            f(&[1, 2, 3]);
        });
        assert!(refused, "{hole:?}");
        assert_eq!(packet, before, "{hole:?}");
    }
    let mut short = [0u8; 3];
    assert!(!seal_around(&cnp_pseudo_header(), &mut short, 0..0, |_| {}));
    assert_eq!(short, [0; 3]);
}
