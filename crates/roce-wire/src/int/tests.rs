//! The INT header's codec: round trip, the hop record's bits, stamping, truncation and a bad hop
//! count as typed errors.

use super::*;

fn hop(i: u64) -> Hop {
    Hop::new(1_000 * i + 7, 4096 * i, 800 * i, 100_000_000_000)
}

#[test]
fn round_trip_keeps_every_record() {
    let mut repr = Repr {
        echo: true,
        nhop: 3,
        ..Repr::default()
    };
    for i in 0..3 {
        repr.hops[i] = hop(i as u64 + 1);
    }
    let mut buf = [0xaa; HEADER_LEN];
    repr.emit(&mut buf);
    let parsed = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
    assert_eq!(parsed, repr);
    assert_eq!(parsed.hops().len(), 3);
    // Unused records go out as zeros.
    assert!(buf[4 + 3 * HOP_LEN..].iter().all(|&b| b == 0));
}

#[test]
fn a_hop_record_is_ns3s_64_bit_word() {
    // 100 Gb/s: code 2, m = 4; 9 000 ns; 5 120 bytes = 10 units of 512; 3 200 bytes = 10 of 320.
    let h = Hop::new(9_000, 5_120, 3_200, 100_000_000_000);
    assert_eq!(
        (h.rate(), h.time(), h.bytes(), h.qlen()),
        (2, 9_000, 10, 10)
    );
    let mut repr = Repr {
        nhop: 1,
        ..Repr::default()
    };
    repr.hops[0] = h;
    let mut buf = [0; HEADER_LEN];
    repr.emit(&mut buf);
    let word = (2u64 << 61) | (9_000 << 37) | (10 << 17) | 10;
    assert_eq!(buf[..4], [1, 0, 0, 0]);
    assert_eq!(buf[4..12], word.to_be_bytes());
    assert_eq!(h.qlen_bytes(), 3_200);
    assert_eq!(h.line_rate_bps(), 100_000_000_000);
}

#[test]
fn deltas_cross_the_wrap_of_time_and_bytes() {
    let rate = 25_000_000_000; // m = 1
    let before = Hop::new((1 << 24) - 100, (1 << 20) * 128 - 256, 0, rate);
    let after = Hop::new((1 << 24) + 400, (1 << 20) * 128 + 512, 0, rate);
    assert_eq!(after.time_delta(&before), 500);
    assert_eq!(after.bytes_delta(&before), 768);
}

#[test]
fn a_queue_beyond_17_bits_saturates() {
    let h = Hop::new(0, 0, u64::MAX / 2, 25_000_000_000);
    assert_eq!(h.qlen(), (1 << 17) - 1);
}

#[test]
fn rates_off_the_table_take_the_nearest_code() {
    assert_eq!(rate_code(100_000_000_000), 2);
    assert_eq!(rate_code(10_000_000_000), 5);
    assert_eq!(rate_code(90_000_000_000), 2);
    assert_eq!(rate_code(1_000_000_000), 6);
    assert_eq!(rate_code(120_000_000), 7);
    assert_eq!(rate_code(0), 7);
}

#[test]
fn push_hop_appends_until_full_and_never_to_an_echo() {
    let mut buf = [0; HEADER_LEN];
    Repr::default().emit(&mut buf);
    let mut packet = Packet::new_checked(&mut buf[..]).unwrap();
    for i in 0..MAX_HOPS {
        assert!(packet.push_hop(hop(i as u64)));
        assert_eq!(packet.nhop(), i + 1);
        assert_eq!(packet.hop(i), hop(i as u64));
    }
    assert!(
        !packet.push_hop(hop(9)),
        "a full header takes no sixth record"
    );
    let mut echo = [0; HEADER_LEN];
    Repr {
        echo: true,
        ..Repr::default()
    }
    .emit(&mut echo);
    assert!(!Packet::new_unchecked(&mut echo[..]).push_hop(hop(1)));
    assert_eq!(echo[0], ECHO);
}

#[test]
fn truncation_and_a_bad_hop_count_are_typed_errors() {
    let buf = [0; HEADER_LEN];
    for len in 0..HEADER_LEN {
        assert_eq!(
            Packet::new_checked(&buf[..len]).unwrap_err(),
            ParseError::Truncated {
                layer: Layer::Int,
                need: HEADER_LEN,
                got: len
            }
        );
    }
    let mut bad = [0; HEADER_LEN];
    bad[0] = 6;
    assert_eq!(
        Packet::new_checked(&bad[..]).unwrap_err(),
        ParseError::BadIntHopCount(6)
    );
    // Every byte value of the first word parses or is refused; none panics.
    for b in 0..=255u8 {
        bad[0] = b;
        let _ = Repr::parse(&Packet::new_unchecked(&bad[..]));
    }
}

#[test]
fn the_flag_is_bth_byte_8_bit_6() {
    let mut bth = [0u8; 12];
    assert!(!flagged(&bth));
    bth[BTH_FLAG_BYTE] = 0x80; // AckReq alone
    assert!(!flagged(&bth));
    bth[BTH_FLAG_BYTE] |= BTH_FLAG;
    assert!(flagged(&bth));
    assert!(!flagged(&bth[..11]));
}

#[test]
fn stamp_takes_a_whole_flagged_request_header_only() {
    let mut packet = [0u8; 12 + HEADER_LEN];
    assert!(!stamp(&mut packet, hop(1)), "not flagged");
    packet[BTH_FLAG_BYTE] = BTH_FLAG;
    assert!(stampable(&packet));
    assert!(stamp(&mut packet, hop(1)));
    assert_eq!(Packet::new_checked(&packet[12..]).unwrap().hop(0), hop(1));
    assert!(
        !stamp(&mut packet[..12 + HEADER_LEN - 1], hop(2)),
        "cut short"
    );
    packet[12] |= ECHO;
    assert!(!stamp(&mut packet, hop(2)), "an echo");
    packet[12] = 7;
    assert!(!stamp(&mut packet, hop(2)), "a bad hop count");
}

#[test]
fn strip_in_place_leaves_the_bytes_strip_writes() {
    let mut packet: Vec<u8> = (0..12 + HEADER_LEN + 40).map(|i| i as u8).collect();
    packet[BTH_FLAG_BYTE] |= BTH_FLAG;
    packet[12] = 2; // two records, no echo
    let mut copy = Vec::new();
    let header = strip(&packet, &mut copy).unwrap();
    assert_eq!(crate::int::header(&packet), Ok(header));
    let mut in_place = packet.clone();
    assert_eq!(strip_in_place(&mut in_place).unwrap(), &copy[..]);
    assert!(!flagged(&copy));
    // Too short for a header: nothing moves.
    let mut short = packet[..12 + HEADER_LEN - 1].to_vec();
    assert_eq!(strip_in_place(&mut short), None);
    assert_eq!(short, packet[..12 + HEADER_LEN - 1]);
}

#[test]
fn pint_is_bth_byte_8_bit_5_and_four_bytes_long() {
    let mut packet = [0u8; 12 + PINT_HEADER_LEN + 16];
    packet[BTH_FLAG_BYTE] = 0x80 | PINT_BTH_FLAG;
    assert!(flagged(&packet));
    assert_eq!(header_len(&packet), PINT_HEADER_LEN);
    assert!(!stampable(&packet), "no INT record goes into a PINT header");
    assert!(!stamp(&mut packet, hop(1)));
    assert_eq!(packet[12..16], [0; 4]);
    let repr = Repr::pint(true, 0x1234);
    repr.emit(&mut packet[12..]);
    assert_eq!(packet[12..16], [0x80, 0, 0x12, 0x34]);
    assert_eq!(header(&packet), Ok(repr));
    assert_eq!((repr.buffer_len(), repr.bth_flag()), (4, PINT_BTH_FLAG));
    // Both flags: malformed. Cut short: truncated.
    packet[BTH_FLAG_BYTE] |= BTH_FLAG;
    assert_eq!(header(&packet), Err(ParseError::BadIntFlags));
    packet[BTH_FLAG_BYTE] &= !BTH_FLAG;
    assert!(matches!(
        header(&packet[..15]),
        Err(ParseError::Truncated {
            need: 4,
            got: 3,
            ..
        })
    ));
}

#[test]
fn a_switch_raises_a_requests_pint_value_and_never_lowers_it() {
    let mut packet = [0u8; 12 + PINT_HEADER_LEN];
    assert!(!raise_pint(&mut packet, 5), "not flagged");
    packet[BTH_FLAG_BYTE] = PINT_BTH_FLAG;
    assert!(raise_pint(&mut packet, 500));
    assert!(!raise_pint(&mut packet, 499), "the path's largest stays");
    assert_eq!(header(&packet).unwrap().pint, Some(500));
    assert!(raise_pint(&mut packet, 501));
    assert_eq!(header(&packet).unwrap().pint, Some(501));
    packet[12] |= ECHO;
    assert!(!raise_pint(&mut packet, 900), "an echo");
    packet[12] &= !ECHO;
    assert!(!raise_pint(&mut packet[..15], 900), "cut short");
    packet[BTH_FLAG_BYTE] |= BTH_FLAG;
    assert!(!raise_pint(&mut packet, 900), "both flags");
    assert_eq!(u16::from_be_bytes([packet[14], packet[15]]), 501);
}

#[test]
fn a_pint_header_comes_off_as_an_int_one_does() {
    let mut packet: Vec<u8> = (0..12 + PINT_HEADER_LEN + 40).map(|i| i as u8).collect();
    packet[BTH_FLAG_BYTE] = (packet[BTH_FLAG_BYTE] & !BTH_FLAG) | PINT_BTH_FLAG;
    let mut copy = Vec::new();
    let header = strip(&packet, &mut copy).unwrap();
    assert_eq!(header.pint, Some(u16::from_be_bytes([14, 15])));
    assert_eq!(copy.len(), packet.len() - PINT_HEADER_LEN);
    assert_eq!(copy[12..], packet[16..]);
    let mut in_place = packet.clone();
    assert_eq!(strip_in_place(&mut in_place).unwrap(), &copy[..]);
    assert!(!flagged(&copy));
}

/// The record's units divided by shifts (and 5) against the division by 128·m and 80·m that
/// ns-3 writes, for every rate code, across the fields' widths and beyond; a record made from
/// the code is the one made from the rate.
#[test]
fn quantising_by_shifts_is_ns3s_division() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for (code, &rate) in LINE_RATES.iter().enumerate() {
        let m = (rate / LINE_RATES[0]).max(1);
        for i in 0..20_000u64 {
            // Small values, every residue near the units, and large ones.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (tx, q) = if i < 10_000 {
                (i, i * 3)
            } else {
                (x >> (i % 40), x >> (i % 64))
            };
            let h = Hop::new(x, tx, q, rate);
            assert_eq!(usize::from(h.rate()), code);
            assert_eq!(Hop::with_rate_code(x, tx, q, code as u8), h);
            assert_eq!(u64::from(h.bytes()), (tx / (BYTE_UNIT * m)) % (1 << 20));
            assert_eq!(
                u64::from(h.qlen()),
                (q / (QLEN_UNIT * m)).min((1 << 17) - 1)
            );
            assert_eq!(h.byte_unit(), BYTE_UNIT * m);
            assert_eq!(h.qlen_unit(), QLEN_UNIT * m);
        }
    }
}
