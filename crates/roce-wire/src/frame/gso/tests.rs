use crate::frame::tests::{op, repr_v4, repr_v6};
use crate::frame::{Frame, FrameRepr, LinkType, Transport};
use crate::{Opcode, ParseError, Qpn, RethRepr, RoceRepr, icrc};

/// A packet of `roce`, sealed for the headers of `repr`.
fn packet(repr: &FrameRepr, roce: &RoceRepr, fill: u8) -> Vec<u8> {
    let mut buf = vec![0; roce.buffer_len()];
    roce.emit(&mut buf, |p| p.fill(fill)).unwrap();
    icrc::seal(&repr.pseudo_header().unwrap(), &mut buf);
    buf
}

/// What a sender gives the kernel in one `UDP_SEGMENT` send: the packets one after the other,
/// packet `i` sealed for IPv4 ID `base + i`, behind one set of headers with the batch's ID.
fn batch(base: u16, repr_of: impl Fn(u16) -> FrameRepr, packets: &[RoceRepr]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (i, roce) in packets.iter().enumerate() {
        let id = base.wrapping_add(i as u16);
        payload.extend(packet(&repr_of(id), roce, i as u8));
    }
    let repr = repr_of(base);
    let mut frame = vec![0; repr.header_len() + payload.len()];
    let at = repr.emit_headers(&mut frame, payload.len()).unwrap();
    frame[at..].copy_from_slice(&payload);
    frame
}

/// A WRITE of 4 KiB at path MTU 1024 as the device batches it: FIRST (with its RETH, 16 bytes
/// longer) alone would not set the size of the MIDDLE packets, so here it is a batch of MIDDLEs
/// and a shorter LAST.
fn write_batch(base: u16) -> Vec<u8> {
    let packets = [
        op(Opcode::RcRdmaWriteMiddle, 0x11, 0xff_fffe, 1024),
        op(Opcode::RcRdmaWriteMiddle, 0x11, 0xff_ffff, 1024),
        op(Opcode::RcRdmaWriteMiddle, 0x11, 0, 1024),
        op(Opcode::RcRdmaWriteLast, 0x11, 1, 500),
    ];
    batch(base, repr_v4, &packets)
}

#[test]
fn a_batch_is_cut_into_the_datagrams_the_kernel_sends() {
    let bytes = write_batch(0xfffe);
    let whole = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert!(matches!(
        whole.verify_icrc(),
        Err(ParseError::IcrcMismatch { .. })
    ));
    let segments = whole.gso_segments().expect("a batch");
    assert_eq!(segments.segment_size(), 12 + 1024 + 4);
    assert_eq!(segments.count(), 4);
    let frames: Vec<_> = segments.iter().collect();
    assert_eq!(frames.len(), 4);
    for (i, frame) in frames.iter().enumerate() {
        assert_eq!(frame.verify_icrc(), Ok(()), "segment {i}");
        // IDs count up from the batch's and wrap at 16 bits.
        let id = 0xfffe_u16.wrapping_add(i as u16);
        assert_eq!(frame.ip.unwrap().identification, Some(id));
        assert_eq!(frame.pseudo_header(), repr_v4(id).pseudo_header());
    }
    let psns: Vec<_> = frames
        .iter()
        .map(|f| f.roce().unwrap().unwrap().bth().psn().value())
        .collect();
    assert_eq!(psns, [0xff_fffe, 0xff_ffff, 0, 1]);
    let last = frames[3].roce().unwrap().unwrap();
    assert_eq!(last.bth().opcode(), Opcode::RcRdmaWriteLast);
    assert_eq!(last.payload().len(), 500);
    // Each segment is the frame the kernel sends: parsing its bytes as built by hand gives the
    // same headers.
    let alone = packet(&repr_v4(1), &op(Opcode::RcRdmaWriteLast, 0x11, 1, 500), 3);
    let Some(Transport::Udp(_, payload)) = frames[3].transport else {
        panic!("not UDP");
    };
    assert_eq!(payload, &alone[..]);
}

#[test]
fn the_first_packet_may_be_longer_than_it_looks_and_qps_may_interleave() {
    // WRITE_FIRST with a RETH, then a SEND_ONLY of another QP of the same size: neither PSN nor
    // QP continues, only the ICRCs tell the size.
    let mut first = op(Opcode::RcRdmaWriteFirst, 0x11, 10, 256);
    first.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 0x100,
        dma_len: 4096,
    });
    let other_qp = op(Opcode::RcSendOnly, 0x12, 77, 256 + 16);
    let ack = {
        let mut ack = op(Opcode::RcAcknowledge, 0x13, 5, 0);
        ack.aeth = Some(crate::AethRepr::ack(1));
        ack
    };
    let bytes = batch(0, repr_v4, &[first, other_qp, ack]);
    let whole = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    let segments = whole.gso_segments().expect("a batch");
    assert_eq!(segments.segment_size(), 12 + 16 + 256 + 4);
    let qps: Vec<_> = segments
        .iter()
        .map(|f| {
            assert_eq!(f.verify_icrc(), Ok(()));
            f.roce().unwrap().unwrap().bth().dest_qp().value()
        })
        .collect();
    assert_eq!(qps, [0x11, 0x12, 0x13]);
}

#[test]
fn ipv6_batches_cut_too() {
    let packets = [
        op(Opcode::UdSendOnly, 0x11, 1, 0),
        op(Opcode::UdSendOnly, 0x11, 2, 0),
    ]
    .map(|mut p| {
        p.deth = Some(crate::DethRepr {
            qkey: 0x1111_1111,
            src_qp: Qpn::new(0x22),
        });
        p.payload_len = 100;
        p
    });
    let bytes = batch(0, |_| repr_v6(), &packets);
    let whole = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    let segments = whole.gso_segments().expect("a batch");
    assert_eq!(segments.count(), 2);
    assert!(segments.iter().all(|f| f.verify_icrc().is_ok()));
    assert!(
        segments
            .iter()
            .all(|f| f.ip.unwrap().identification.is_none())
    );
}

#[test]
fn a_good_packet_or_a_corrupt_one_is_not_a_batch() {
    let one = batch(0, repr_v4, &[op(Opcode::RcSendOnly, 0x11, 1, 2048)]);
    let frame = Frame::parse(LinkType::Ethernet, &one).unwrap();
    assert_eq!(frame.verify_icrc(), Ok(()));
    assert!(frame.gso_segments().is_none());

    // One bit flipped in the third segment: no size makes every ICRC good, but the first two
    // are, and that is the batch, with its third packet bad.
    let mut bytes = write_batch(0);
    let third = bytes.len() - 500 - 16 - 1040 / 2;
    bytes[third] ^= 0x10;
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    let segments = frame.gso_segments().expect("a damaged batch");
    assert_eq!(segments.segment_size(), 1040);
    let good: Vec<_> = segments.iter().map(|f| f.verify_icrc().is_ok()).collect();
    assert_eq!(good, [true, true, false, true]);

    // Damaged in its first two segments: not recognised.
    let mut bytes = write_batch(0);
    let first = 14 + 20 + 8;
    bytes[first + 500] ^= 0x10;
    bytes[first + 1040 + 500] ^= 0x10;
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert!(frame.gso_segments().is_none());

    // A lone packet with a bad ICRC is not a batch.
    let mut one = one.clone();
    let at = one.len() - 10;
    one[at] ^= 1;
    let frame = Frame::parse(LinkType::Ethernet, &one).unwrap();
    assert!(frame.verify_icrc().is_err());
    assert!(frame.gso_segments().is_none());

    // Segments sealed with ID 0 each (a sender that forgot the kernel counts): the first
    // verifies, the second does not with the ID it leaves with.
    let packets = [
        op(Opcode::RcSendMiddle, 0x11, 1, 256),
        op(Opcode::RcSendLast, 0x11, 2, 256),
    ];
    let bytes = batch(0, |_| repr_v4(0), &packets);
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    let found = frame.gso_segments().unwrap();
    assert_eq!(found.segment_size(), 12 + 256 + 4);
    assert!(found.get(1).unwrap().verify_icrc().is_err());
    // With the size known, it cuts (unchecked), and the second ICRC is visibly wrong.
    let cut = frame.cut(12 + 256 + 4).unwrap();
    assert_eq!(cut.count(), 2);
    assert_eq!(cut.get(0).unwrap().verify_icrc(), Ok(()));
    assert!(cut.get(1).unwrap().verify_icrc().is_err());
    assert!(cut.get(2).is_none());
}

#[test]
fn cut_refuses_what_is_not_udp_or_leaves_a_runt() {
    let bytes = write_batch(0);
    let frame = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    assert!(frame.cut(0).is_none());
    // 1040 * 4 + ... : a size that leaves 4 bytes at the end.
    let payload_len = 3 * 1040 + 12 + 500 + 4;
    assert!(frame.cut(payload_len - 4).is_none());
    let arp = [0u8; 42];
    let mut arp = arp;
    arp[12] = 0x08;
    arp[13] = 0x06;
    if let Ok(frame) = Frame::parse(LinkType::Ethernet, &arp) {
        assert!(frame.cut(16).is_none());
        assert!(frame.gso_segments().is_none());
    }
}

#[test]
fn a_flipped_bit_anywhere_never_yields_a_wrong_size() {
    let bytes = write_batch(0);
    let (mut clean, mut damaged) = (0, 0);
    for at in (0..bytes.len()).step_by(37) {
        let mut changed = bytes.clone();
        changed[at] ^= 0x04;
        let Ok(frame) = Frame::parse(LinkType::Ethernet, &changed) else {
            continue;
        };
        if let Some(segments) = frame.gso_segments() {
            assert_eq!(segments.segment_size(), 1040, "bit at {at}");
            let bad = segments.iter().filter(|f| f.verify_icrc().is_err()).count();
            assert!(bad <= 1, "bit at {at}: {bad} bad segments");
            if bad == 0 {
                clean += 1;
            } else {
                damaged += 1;
            }
        }
    }
    // Bits the ICRC does not cover (MACs, TTL, checksums) leave a batch a good batch; a bit in
    // a payload leaves it a batch with one bad packet.
    assert!(clean > 0 && damaged > 0, "{clean} {damaged}");
}

#[test]
fn each_datagram_is_written_as_the_frame_the_kernel_sends() {
    let bytes = write_batch(0xfffe);
    let whole = Frame::parse(LinkType::Ethernet, &bytes).unwrap();
    let segments = whole.cut(1040).unwrap();
    let mut out = Vec::new();
    for index in 0..segments.count() {
        assert!(segments.write(index, &mut out));
        let frame = Frame::parse(LinkType::Ethernet, &out).unwrap();
        assert_eq!(frame.verify_icrc(), Ok(()), "segment {index}");
        let id = 0xfffe_u16.wrapping_add(index as u16);
        assert_eq!(segments.ip_id(index), Some(id));
        assert_eq!(frame.ip.unwrap().identification, Some(id));
        assert_eq!(frame.ethernet, whole.ethernet);
        let Some(Transport::Udp(udp, payload)) = frame.transport else {
            panic!("not UDP");
        };
        assert_eq!(udp.checksum, 0, "no UDP checksum");
        assert_eq!(payload, segments.payload(index));
        // The IPv4 header checksum is right.
        let ip = &out[14..34];
        let header = etherparse::Ipv4HeaderSlice::from_slice(ip)
            .unwrap()
            .to_header();
        assert_eq!(header.calc_header_checksum(), header.header_checksum);
    }
    assert!(!segments.write(segments.count(), &mut out));
    assert!(out.is_empty());
    assert!(segments.payload(segments.count()).is_empty());
    // `split` cuts what `cut` refuses: a size that leaves a 4-byte runt.
    let payload_len = 3 * 1040 + 12 + 500 + 4;
    assert!(whole.cut(payload_len - 4).is_none());
    let split = whole.split(payload_len - 4).unwrap();
    assert_eq!(split.count(), 2);
    assert_eq!(split.payload(1).len(), 4);
    assert!(whole.split(0).is_none());
}
