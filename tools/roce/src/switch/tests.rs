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

/// An IPv4 RoCEv2 frame of a request that carries HPCC's INT header, with its UDP checksum and
/// ICRC written.
fn int_frame() -> Vec<u8> {
    use roce_wire::{PseudoHeader, icrc, int};
    let mut payload = vec![0u8; 12 + int::HEADER_LEN + 16 + 64 + 4];
    payload[0] = 0x0a; // RC RDMA WRITE ONLY
    payload[2..4].copy_from_slice(&[0xff, 0xff]);
    payload[int::BTH_FLAG_BYTE] = int::BTH_FLAG;
    int::Repr::default().emit(&mut payload[12..]);
    let (src, dst) = ("198.18.0.1:49152", "198.18.0.2:4791");
    let header = PseudoHeader::for_datagram(src.parse().unwrap(), dst.parse().unwrap(), 0).unwrap();
    icrc::seal(&header, &mut payload);
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 8 + payload.len()) as u16;
    frame.extend_from_slice(&[0x45, 0x00]);
    frame.extend_from_slice(&total.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
    frame.extend_from_slice(&49152u16.to_be_bytes());
    frame.extend_from_slice(&4791u16.to_be_bytes());
    frame.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    frame.extend_from_slice(&[0x12, 0x34]); // not 0 ("none"): written below
    frame.extend_from_slice(&payload);
    assert!(rewrite::fill_l4_checksum(&mut frame));
    frame
}

/// A real frame with an INT header through the model: it leaves with one record, its UDP
/// checksum written again and its ICRC still valid (the ICRC hashes the INT header as ones).
#[test]
fn a_real_frame_with_int_leaves_with_one_record_and_valid_checksums() {
    use roce_wire::frame::{Frame, LinkType};
    use roce_wire::int;
    let mut frame = int_frame();
    let sent = frame.clone();
    let packet = to_model(&mut frame, Ecn::NotEct, 26);
    let mut switch = Switch::new(SwitchConfig::default(), 2, Vec::new(), 1);
    assert!(switch.receive_to(Instant::ZERO, 0, 1, packet));
    let later = Instant::from_micros(50);
    switch.advance(later);
    let out = switch.deliver(later, 1).expect("delivered");
    let out = from_model(frame, &out);
    assert_eq!(out.len(), sent.len());
    let records = int::Packet::new_checked(&out[42 + 12..]).unwrap().nhop();
    assert_eq!(records, 1);
    let mut again = out.clone();
    rewrite::fill_l4_checksum(&mut again);
    assert_eq!(again, out, "the UDP checksum is right");
    assert_ne!(out[40..42], sent[40..42], "and was written again");
    let parsed = Frame::parse(LinkType::Ethernet, &out).unwrap();
    assert_eq!(parsed.verify_icrc(), Ok(()));
}
