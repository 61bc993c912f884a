use etherparse::checksum::Sum16BitWords;

use super::*;

#[test]
fn ce_mark_keeps_the_ipv4_checksum_valid() {
    // An IPv4/UDP frame with ECT(0) and a correct header checksum.
    let mut frame = vec![0u8; 60];
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    frame[14..34].copy_from_slice(&[
        0x45, 0x6a, 0x00, 0x2e, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 198, 18, 0, 1, 198,
        18, 0, 2,
    ]);
    assert!(mark_ce(&mut frame));
    let (ecn, dscp) = ip_marking(&frame).expect("IPv4");
    assert_eq!((ecn, dscp), (Ecn::Ce, 26));
    // A valid header sums, with its checksum, to 0xffff in one's complement.
    let sum = Sum16BitWords::new().add_slice(&frame[14..34]);
    assert_eq!(sum.ones_complement(), 0);
    assert_ne!(&frame[24..26], &[0, 0]);
}

#[test]
fn ce_mark_and_marking_of_ipv6_and_tagged_frames() {
    // IPv6, traffic class 0x6a (DSCP 26, ECT(0)), then UDP.
    let mut frame = vec![0u8; 14 + 40 + 8];
    frame[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    frame[14..18].copy_from_slice(&[0x66, 0xa0, 0, 0]);
    frame[18..20].copy_from_slice(&8u16.to_be_bytes());
    frame[20] = 17;
    frame[21] = 64;
    frame[54 + 4..54 + 6].copy_from_slice(&8u16.to_be_bytes());
    assert_eq!(ip_marking(&frame), Some((Ecn::Ect0, 26)));
    assert!(mark_ce(&mut frame));
    assert_eq!(ip_marking(&frame), Some((Ecn::Ce, 26)));
    assert_eq!(&frame[14..16], &[0x66, 0xb0], "only the ECN bits changed");
    // An 802.1Q-tagged IPv4 frame is read and marked behind its tag.
    let mut tagged = vec![0u8; 14 + 4 + 20 + 8];
    tagged[12..18].copy_from_slice(&[0x81, 0x00, 0x60, 0x64, 0x08, 0x00]);
    tagged[18..38].copy_from_slice(&[
        0x45, 0x6a, 0x00, 0x1c, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ]);
    tagged[38 + 4..38 + 6].copy_from_slice(&8u16.to_be_bytes());
    assert_eq!(ip_marking(&tagged), Some((Ecn::Ect0, 26)));
    assert!(mark_ce(&mut tagged));
    assert_eq!(tagged[19], 0x6b);
    let sum = Sum16BitWords::new().add_slice(&tagged[18..38]);
    assert_eq!(sum.ones_complement(), 0, "header checksum valid");
    // An ARP frame has no marking and is not marked.
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let before = arp.clone();
    assert_eq!(ip_marking(&arp), None);
    assert!(!mark_ce(&mut arp));
    assert_eq!(arp, before);
}

#[test]
fn l4_checksum_is_filled_in() {
    // A UDP/IPv4 datagram whose checksum field holds something else (a veth hands over the
    // pseudo-header sum alone).
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    frame.extend_from_slice(&[
        0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ]);
    frame.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0, 12, 0x12, 0x34, 1, 2, 3, 4]);
    assert!(fill_l4_checksum(&mut frame));
    let sum = Sum16BitWords::new()
        .add_slice(&frame[26..34])
        .add_slice(&frame[34..46])
        .add_2bytes([0, 17])
        .add_2bytes([0, 12]);
    assert_eq!(
        sum.ones_complement(),
        0,
        "the datagram with its checksum and pseudo header sums to all ones"
    );
    // Worked by hand: the sum of the pseudo header and the datagram with a zero checksum
    // is 0x630f, so the checksum is 0x9cf0.
    assert_eq!(&frame[40..42], &[0x9c, 0xf0]);
    // A UDP/IPv4 checksum of 0 means none, and stays 0.
    frame[40..42].fill(0);
    assert!(!fill_l4_checksum(&mut frame));
    assert_eq!(&frame[40..42], &[0, 0]);
    // A fragment is left alone.
    frame[40..42].copy_from_slice(&[0x12, 0x34]);
    frame[20] = 0x20; // More Fragments
    let before = frame.clone();
    assert!(!fill_l4_checksum(&mut frame));
    assert_eq!(frame, before);
}

#[test]
fn malformed_ip_headers_pass_unharmed() {
    for ihl in [0u8, 2, 4, 15] {
        let mut frame = vec![0u8; 40];
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        frame[14] = 0x40 | ihl;
        frame[15] = 0x02;
        let before = frame.clone();
        mark_ce(&mut frame);
        fill_l4_checksum(&mut frame);
        assert_eq!(frame, before, "IHL {ihl}");
    }
    for len in 0..60 {
        let mut frame = vec![0x45u8; len];
        mark_ce(&mut frame);
        fill_l4_checksum(&mut frame);
        let _ = ip_marking(&frame);
    }
}

/// A UDP datagram to `port` carrying `payload`, as an Ethernet frame: IPv4 or IPv6, with or
/// without an 802.1Q tag.
fn udp_frame(v6: bool, tagged: bool, port: u16, payload: &[u8]) -> Vec<u8> {
    use etherparse::PacketBuilder;
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut frame = Vec::new();
    let written = if v6 {
        eth.ipv6([0xfd; 16], [0xfe; 16], 64)
            .udp(49152, port)
            .write(&mut frame, payload)
    } else {
        eth.ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(49152, port)
            .write(&mut frame, payload)
    };
    written.expect("a frame");
    if tagged {
        // An 802.1Q tag (PCP 3, VLAN 100) between the MAC addresses and the EtherType.
        frame.splice(12..12, [0x81, 0x00, 0x60, 0x64]);
    }
    frame
}

#[test]
fn a_roce_payload_is_found_behind_any_ip_header_and_tag() {
    let payload = [0xabu8; 40];
    for (v6, tagged, at) in [
        (false, false, 42),
        (false, true, 46),
        (true, false, 62),
        (true, true, 66),
    ] {
        let frame = udp_frame(v6, tagged, 4791, &payload);
        assert_eq!(
            roce_payload_at(&frame),
            Some((at, v6)),
            "v6 {v6} tagged {tagged}"
        );
        assert_eq!(&frame[at..], &payload);
        // Another port is not RoCEv2.
        assert_eq!(
            roce_payload_at(&udp_frame(v6, tagged, 4792, &payload)),
            None
        );
    }
    // An IPv4 header with options: the payload is past them.
    let mut frame = udp_frame(false, false, 4791, &payload);
    frame.splice(34..34, [1u8, 1, 1, 0]); // NOP NOP NOP EOL
    frame[14] = 0x46;
    let total = u16::from_be_bytes([frame[16], frame[17]]) + 4;
    frame[16..18].copy_from_slice(&total.to_be_bytes());
    assert_eq!(roce_payload_at(&frame), Some((46, false)));
    // A fragment, a frame cut inside its UDP header, and ARP are not.
    let mut fragment = udp_frame(false, false, 4791, &payload);
    fragment[20] = 0x20; // more fragments
    assert_eq!(roce_payload_at(&fragment), None);
    let cut = &udp_frame(false, false, 4791, &payload)[..38];
    assert_eq!(roce_payload_at(cut), None);
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(roce_payload_at(&arp), None);
}

#[test]
fn the_pcp_is_read_from_an_outer_tag_only() {
    let mut frame = vec![0u8; 60];
    frame[12..16].copy_from_slice(&[0x81, 0x00, 0xa0, 0x64]); // PCP 5, VLAN 100
    assert_eq!(vlan_pcp(&frame), Some(5));
    frame[12..14].copy_from_slice(&[0x88, 0xa8]); // 802.1ad's service tag
    assert_eq!(vlan_pcp(&frame), Some(5));
    frame[12..14].copy_from_slice(&[0x08, 0x00]); // IPv4, untagged
    assert_eq!(vlan_pcp(&frame), None);
    assert_eq!(vlan_pcp(&frame[..14]), None, "cut before the TCI");
}
