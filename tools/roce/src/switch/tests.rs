use super::*;

#[test]
fn options_parse_and_refuse() {
    assert_eq!(parse_rate("200m"), Ok(200_000_000));
    assert_eq!(parse_rate("1G"), Ok(1_000_000_000));
    assert!(parse_rate("fast").is_err());
    assert!(parse_rate("0").is_err());
    let ecn = parse_ecn("5000,50000,0.1").expect("valid");
    assert_eq!((ecn.k_min_bytes, ecn.k_max_bytes), (5000, 50000));
    assert!(parse_ecn("5000,500,0.1").is_err());
    assert!(parse_ecn("5000,50000,2").is_err());
    assert!(parse_pfc("40000,60000").is_err());
    assert_eq!(parse_pfc("60000,40000").map(|p| p.priorities), Ok(8));
}

/// A RoCEv2 frame of a request that carries HPCC's INT header, with its UDP checksum and ICRC
/// written: IPv4 or IPv6, with or without an 802.1Q tag (VLAN 100, priority 3).
fn int_frame(v6: bool, tagged: bool) -> Vec<u8> {
    use etherparse::PacketBuilder;
    use roce_wire::{PseudoHeader, icrc, int};
    let mut payload = vec![0u8; 12 + int::HEADER_LEN + 16 + 64 + 4];
    payload[0] = 0x0a; // RC RDMA WRITE ONLY
    payload[2..4].copy_from_slice(&[0xff, 0xff]);
    payload[int::BTH_FLAG_BYTE] = int::BTH_FLAG;
    int::Repr::default().emit(&mut payload[12..]);
    let (src, dst): (SocketAddr, SocketAddr) = if v6 {
        (
            "[fd00::1]:49152".parse().unwrap(),
            "[fd00::2]:4791".parse().unwrap(),
        )
    } else {
        (
            "198.18.0.1:49152".parse().unwrap(),
            "198.18.0.2:4791".parse().unwrap(),
        )
    };
    let header = PseudoHeader::for_datagram(src, dst, 0).unwrap();
    icrc::seal(&header, &mut payload);
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut frame = Vec::new();
    let written = match (src, dst) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => eth
            .ipv4(s.ip().octets(), d.ip().octets(), 64)
            .udp(s.port(), d.port())
            .write(&mut frame, &payload),
        (SocketAddr::V6(s), SocketAddr::V6(d)) => eth
            .ipv6(s.ip().octets(), d.ip().octets(), 64)
            .udp(s.port(), d.port())
            .write(&mut frame, &payload),
        _ => unreachable!("one family"),
    };
    written.expect("a frame");
    if tagged {
        // VLAN 100 at priority 3, between the MAC addresses and the EtherType.
        frame.splice(12..12, [0x81, 0x00, 0x60, 0x64]);
    }
    frame
}

/// A real frame with an INT header through the model, over IPv4 and IPv6, tagged or not: it
/// leaves with one record, its UDP checksum written again and its ICRC still valid (the ICRC
/// hashes the INT header as ones), and the model counted its bytes on the wire (an 802.1Q tag
/// apart).
#[test]
fn a_real_frame_with_int_leaves_with_one_record_and_valid_checksums() {
    use roce_wire::frame::{Frame, LinkType};
    use roce_wire::int;
    for (v6, tagged) in [(false, false), (false, true), (true, false), (true, true)] {
        let what = format!("v6 {v6} tagged {tagged}");
        let mut frame = int_frame(v6, tagged);
        let sent = frame.clone();
        let bth = 14 + 4 * usize::from(tagged) + if v6 { 48 } else { 28 };
        let packet = to_model(&mut frame, Ecn::NotEct, 26);
        assert_eq!(
            packet.wire_len(),
            sent.len() - 4 * usize::from(tagged),
            "{what}"
        );
        let mut switch = Switch::new(SwitchConfig::default(), 2, Vec::new(), 1);
        assert!(switch.receive_to(Instant::ZERO, 0, 1, packet));
        let later = Instant::from_micros(50);
        switch.advance(later);
        let out = switch.deliver(later, 1).expect("delivered");
        let out = from_model(frame, &out);
        assert_eq!(out.len(), sent.len(), "{what}");
        let records = int::Packet::new_checked(&out[bth + 12..]).unwrap().nhop();
        assert_eq!(records, 1, "{what}");
        let mut again = out.clone();
        assert!(rewrite::fill_l4_checksum(&mut again), "{what}");
        assert_eq!(again, out, "the UDP checksum is right: {what}");
        assert_ne!(
            out[bth - 2..bth],
            sent[bth - 2..bth],
            "and was written again: {what}"
        );
        let parsed = Frame::parse(LinkType::Ethernet, &out).unwrap();
        assert_eq!(parsed.verify_icrc(), Ok(()), "{what}");
    }
}

/// `roce switch`'s options as a command line gives them.
fn args(line: &[&str]) -> Args {
    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        args: Args,
    }
    use clap::Parser as _;
    let argv = ["switch", "--port", "a", "--port", "b"].iter().chain(line);
    Command::try_parse_from(argv).expect("valid options").args
}

/// An untagged IPv4 frame of `len` bytes with DSCP 0, or the same tagged with PCP `pcp`.
fn frame_with(pcp: Option<u8>, len: usize) -> Vec<u8> {
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if let Some(pcp) = pcp {
        frame.extend_from_slice(&[0x81, 0x00, pcp << 5, 100]);
    }
    frame.extend_from_slice(&[0x08, 0x00]);
    let total = (len - frame.len()) as u16;
    frame.extend_from_slice(&[0x45, 0x00]);
    frame.extend_from_slice(&total.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
    frame.resize(len, 0);
    frame
}

/// Two untagged frames and then one tagged with PCP 5, through a port whose class 5 is strict:
/// by the PCP (`--trust pcp`) the tagged frame is class 5 and overtakes the second untagged
/// one (the first is already on the wire); by the DSCP (0 in all three, the default) it is
/// class 0 and keeps its place.
#[test]
fn the_pcp_sorts_frames_into_classes_when_the_switch_trusts_it() {
    for (trust, order) in [("pcp", [0, 2, 1]), ("dscp", [0, 1, 2])] {
        let args = args(&["--strict", "5", "--trust", trust]);
        let mut switch = Switch::new(switch_config(&args), 2, Vec::new(), 1);
        let frames = [
            frame_with(None, 1000),
            frame_with(None, 1000),
            frame_with(Some(5), 1004),
        ];
        for (id, mut frame) in frames.into_iter().enumerate() {
            let (ecn, dscp) = rewrite::ip_marking(&frame).expect("an IPv4 frame");
            let key = class_key(args.trust, &frame, dscp);
            let mut packet = to_model(&mut frame, ecn, key);
            packet.tag = id as u32;
            assert!(switch.receive_to(Instant::ZERO, 0, 1, packet));
        }
        let mut left = Vec::new();
        let mut now = Instant::ZERO;
        while left.len() < 3 {
            now += Duration::from_micros(10);
            switch.advance(now);
            while let Some(packet) = switch.deliver(now, 1) {
                left.push(packet.tag as usize);
            }
        }
        assert_eq!(left, order, "--trust {trust}");
    }
}
