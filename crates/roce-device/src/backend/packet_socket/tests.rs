use std::os::fd::AsRawFd;
use std::time::Duration;

use nix::sys::socket::MsgFlags;
use roce_wire::frame::{Frame, LinkType};

use super::receiver::{SlotError, slot_frame};
use super::*;
use crate::backend::testing::Netns;

/// An IPv4/UDP super-frame with `payload` behind its headers, ID `id`, DSCP/ECN 0x6a.
fn super_frame(payload: &[u8], id: u16) -> Vec<u8> {
    let mut frame = vec![0u8; 14];
    frame[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let total = (20 + 8 + payload.len()) as u16;
    frame.extend_from_slice(&[0x45, 0x6a]);
    frame.extend_from_slice(&total.to_be_bytes());
    frame.extend_from_slice(&id.to_be_bytes());
    frame.extend_from_slice(&[0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
    frame.extend_from_slice(&[0xc0, 0x01, 0x12, 0xb7]);
    frame.extend_from_slice(&(total - 20).to_be_bytes());
    frame.extend_from_slice(&[0x55, 0x55]);
    frame.extend_from_slice(payload);
    frame
}

fn gso(size: u16) -> VirtioNetHdr {
    VirtioNetHdr {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
        hdr_len: 42,
        gso_size: size,
        csum_start: 34,
        csum_offset: 6,
    }
}

#[test]
fn a_batch_is_cut_into_datagrams_with_their_own_headers() {
    let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
    let frame = super_frame(&payload, 7);
    let batch = cut_batch(&frame, &gso(1000)).unwrap();
    assert_eq!(batch.count(), 3);
    let mut out = Vec::new();
    for (index, len) in [(0, 1000usize), (1, 1000), (2, 500)] {
        assert_eq!(batch.payload(index), &payload[index * 1000..][..len]);
        assert_eq!(batch.ip_id(index), Some(7 + index as u16));
        assert!(batch.write(index, &mut out));
        assert_eq!(out.len(), 42 + len);
        assert_eq!(&out[..14], &frame[..14], "Ethernet header kept");
        let ip = &out[14..34];
        assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), 28 + len);
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 7 + index as u16);
        assert_eq!(ip[1], 0x6a, "DSCP and ECN kept");
        assert_eq!(ip[6], 0x40, "DF kept");
        let header = etherparse::Ipv4HeaderSlice::from_slice(ip)
            .unwrap()
            .to_header();
        assert_eq!(header.calc_header_checksum(), header.header_checksum);
        let udp = &out[34..42];
        assert_eq!(&udp[..4], &[0xc0, 0x01, 0x12, 0xb7], "ports kept");
        assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), 8 + len);
        assert_eq!(&udp[6..8], &[0, 0], "no UDP checksum");
        assert_eq!(&out[42..], batch.payload(index));
        // etherparse agrees with the rebuilt headers.
        let parsed = Frame::parse(LinkType::Ethernet, &out).unwrap();
        assert_eq!(parsed.ip.unwrap().identification, Some(7 + index as u16));
    }
}

/// A UDP/IPv6 batch, as an IPv6 UDP socket sends one over a veth: cut as the wire would carry
/// it, each datagram with its own lengths and no IPv4 identification.
#[test]
fn an_ipv6_batch_is_cut_into_its_datagrams() {
    let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let udp_len = (8 + payload.len()) as u16;
    frame.extend_from_slice(&[0x60, 0, 0, 0]);
    frame.extend_from_slice(&udp_len.to_be_bytes());
    frame.extend_from_slice(&[17, 64]);
    for last in [1u8, 2] {
        let mut a = [0u8; 16];
        a[..2].copy_from_slice(&[0xfd, 0]);
        a[15] = last;
        frame.extend_from_slice(&a);
    }
    frame.extend_from_slice(&[0xc0, 0x01, 0x12, 0xb7]);
    frame.extend_from_slice(&udp_len.to_be_bytes());
    frame.extend_from_slice(&[0, 0]);
    frame.extend_from_slice(&payload);
    let batch = cut_batch(&frame, &gso(1000)).unwrap();
    assert_eq!(batch.count(), 3);
    let mut out = Vec::new();
    for index in 0..3 {
        assert_eq!(
            batch.payload(index),
            &payload[index * 1000..(index * 1000 + 1000).min(2500)]
        );
        assert_eq!(batch.ip_id(index), None);
        assert!(batch.write(index, &mut out));
        let parsed = Frame::parse(LinkType::Ethernet, &out).unwrap();
        let Some(roce_wire::frame::Transport::Udp(udp, data)) = parsed.transport else {
            panic!("datagram {index} is not UDP");
        };
        assert_eq!((udp.dst_port, data), (4791, batch.payload(index)));
    }
}

#[test]
fn ids_wrap_and_exact_multiples_have_no_empty_tail() {
    let frame = super_frame(&[1u8; 3000], 0xffff);
    let batch = cut_batch(&frame, &gso(1000)).unwrap();
    assert_eq!(batch.count(), 3);
    assert_eq!(batch.ip_id(1), Some(0));
    assert_eq!(batch.payload(2).len(), 1000);
}

#[test]
fn what_cannot_be_cut_is_refused_without_panic() {
    let frame = super_frame(&[0u8; 100], 0);
    let mut tcp = frame.clone();
    tcp[23] = 6;
    assert_eq!(
        cut_batch(&tcp, &gso(10)).unwrap_err(),
        CutError::Unsupported
    );
    let tcp_gso = VirtioNetHdr {
        gso_type: 1,
        ..gso(10)
    };
    assert_eq!(
        cut_batch(&frame, &tcp_gso).unwrap_err(),
        CutError::Unsupported
    );
    assert_eq!(cut_batch(&frame, &gso(0)).unwrap_err(), CutError::Malformed);
    // An IPv4 header in a frame that says IPv6.
    let mut ipv6 = frame.clone();
    ipv6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    assert_eq!(cut_batch(&ipv6, &gso(10)).unwrap_err(), CutError::Malformed);
    let mut long = frame.clone();
    long[16..18].copy_from_slice(&2000u16.to_be_bytes());
    assert_eq!(cut_batch(&long, &gso(10)).unwrap_err(), CutError::Malformed);
    for len in 0..frame.len() {
        let _ = cut_batch(&frame[..len], &gso(10));
    }
    for ihl in 0..16u8 {
        let mut bad = frame.clone();
        bad[14] = 0x40 | ihl;
        if let Ok(batch) = cut_batch(&bad, &gso(10)) {
            let mut out = Vec::new();
            for index in 0..batch.count() {
                batch.write(index, &mut out);
            }
            assert!(!batch.write(batch.count(), &mut out) && out.is_empty());
        }
    }
}

#[test]
fn vnet_header_round_trips_and_slots_are_read_safely() {
    let header = gso(4096);
    assert_eq!(VirtioNetHdr::parse(&header.to_bytes()), Some(header));
    assert!(header.is_gso() && header.needs_csum());
    assert!(!VirtioNetHdr::default().is_gso());
    // A slot: tpacket2_hdr (status, len, snaplen, mac at 76), virtio_net_hdr at 66.
    let mut slot = vec![0u8; 2048];
    slot[4..8].copy_from_slice(&60u32.to_ne_bytes());
    slot[8..12].copy_from_slice(&60u32.to_ne_bytes());
    slot[12..14].copy_from_slice(&76u16.to_ne_bytes());
    slot[66..76].copy_from_slice(&header.to_bytes());
    let frame = slot_frame(&slot).unwrap();
    assert_eq!((frame.vnet, frame.data.len()), (header, 60));
    slot[8..12].copy_from_slice(&59u32.to_ne_bytes());
    assert_eq!(slot_frame(&slot).unwrap_err(), SlotError::Truncated);
    slot[4..8].copy_from_slice(&4000u32.to_ne_bytes());
    slot[8..12].copy_from_slice(&4000u32.to_ne_bytes());
    assert_eq!(slot_frame(&slot).unwrap_err(), SlotError::Malformed);
    slot[12..14].copy_from_slice(&4u16.to_ne_bytes());
    assert_eq!(slot_frame(&slot).unwrap_err(), SlotError::Malformed);
}

#[test]
fn ring_geometry_and_macs() {
    for mtu in [1500, 9000, 65_535] {
        let request = ring_request(mtu + 18);
        let (block, frame) = (request.tp_block_size, request.tp_frame_size);
        assert!(frame as usize >= mtu + 18 + SLOT_HEADROOM);
        assert_eq!(block % 4096, 0);
        assert_eq!(block % frame, 0);
        assert_eq!(request.tp_frame_nr, request.tp_block_nr * (block / frame));
    }
    assert_eq!(parse_mac("02:00:0a:ff:00:01"), Some([2, 0, 10, 255, 0, 1]));
    assert_eq!(parse_mac("02:00:0a"), None);
}

/// A broadcast IPv4/UDP frame to port 4791, tagged by its IPv4 ID.
fn tagged(tag: u16) -> Vec<u8> {
    let mut frame = super_frame(&[0xab; 64], tag);
    frame[0..6].fill(0xff);
    frame
}

/// The tags of the [`tagged`] frames `rx` takes within `limit`, until `last` (what else the
/// kernel sends on a new link, IPv6 neighbour discovery say, is passed over).
fn tags_until(rx: &mut Receiver, last: u16, limit: Duration) -> Vec<u16> {
    let mut tags = Vec::new();
    let start = std::time::Instant::now();
    while !tags.contains(&last) && start.elapsed() < limit {
        rx.wait(Duration::from_millis(50)).unwrap();
        rx.poll_frames(64, |frame| {
            let d = frame.data;
            if d.get(12..14) == Some(&[0x08, 0x00]) && d.get(36..38) == Some(&[0x12, 0xb7]) {
                tags.push(u16::from_be_bytes([d[18], d[19]]));
            }
            true
        });
    }
    tags
}

/// Runs `body` in a thread inside a namespace of its own with the veth x0–x1 (sockets belong
/// to the namespace of the thread that makes them), with a sender on x0 and x1's index; does
/// nothing (the test skips, saying so) where no namespace can be made.
fn on_the_veth(tag: &str, body: impl FnOnce(&Sender, u32) + Send + 'static) {
    let Some(ns) = Netns::new(tag) else {
        return;
    };
    let name = ns.0.clone();
    std::thread::spawn(move || {
        crate::backend::sys::enter_netns(&name).unwrap();
        let index = |dev: &str| nix::net::if_::if_nametoindex(dev).unwrap();
        let tx = PacketFd::new().unwrap();
        tx.set_packet_int(libc::PACKET_VNET_HDR, 1).unwrap();
        tx.bind(index("x0")).unwrap();
        body(&Sender { fd: Arc::new(tx) }, index("x1"));
    })
    .join()
    .unwrap();
    drop(ns);
}

#[test]
fn frames_on_the_interface_before_the_socket_is_bound_never_reach_it() {
    on_the_veth("prebind", |tx, x1| {
        // Frames cross the veth to x1 while the receiving socket is made, and again once its
        // ring is set up but before it is bound there: a peer's (or an earlier NIC's) frames
        // as a NIC opens.
        let fd = PacketFd::new().unwrap();
        for tag in 1..=50 {
            tx.send(&[&tagged(tag)]).unwrap();
        }
        let ring = set_up(&fd, 1500 + 18).unwrap();
        for tag in 51..=100 {
            tx.send(&[&tagged(tag)]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        fd.bind(x1).unwrap();
        let fd = Arc::new(fd);
        let mut rx = Receiver::new(fd.clone(), ring);
        // Bound: what crosses now arrives.
        tx.send(&[&tagged(1000)]).unwrap();
        let seen = tags_until(&mut rx, 1000, Duration::from_secs(5));
        assert_eq!(seen, [1000], "only what came after the bind, in the ring");
        // Nor in the socket's own queue, which a slot marked TP_STATUS_COPY is read from: a
        // frame queued there before the bind would be taken for a later long frame.
        let mut buf = [0u8; 2048];
        assert_eq!(
            nix::sys::socket::recv(fd.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT),
            Err(nix::errno::Errno::EAGAIN),
            "nothing queued on the socket"
        );
    });
}

#[test]
fn frames_the_kernel_drops_for_a_full_ring_are_counted() {
    on_the_veth("ringfull", |tx, x1| {
        let fd = PacketFd::new().unwrap();
        let ring = configure(&fd, x1, false, 1500 + 18).unwrap();
        let slots = ring.frame_nr();
        let mut rx = Receiver::new(Arc::new(fd), ring);
        // Nothing reads the ring while a slot's worth and 500 more frames arrive.
        let sent = slots + 500;
        for tag in 0..sent {
            tx.send(&[&tagged(tag as u16)]).unwrap();
            // Paced, so that none is lost before the ring (the backlog holds 1000).
            if tag % 200 == 199 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        assert_eq!(rx.take_ring_drops(false), 0, "nothing read yet");
        let mut seen = tags_until(&mut rx, (slots - 1) as u16, Duration::from_secs(5)).len();
        // The frame after the drops comes marked; taking it reads the kernel's count.
        tx.send(&[&tagged(60_000)]).unwrap();
        seen += tags_until(&mut rx, 60_000, Duration::from_secs(5)).len();
        let dropped = rx.take_ring_drops(false) as usize;
        assert!(
            dropped >= 500,
            "{dropped} dropped, {seen} seen of {sent} + 1, {slots} slots"
        );
        // Every frame was taken or counted (what else the link sent may add to the drops).
        assert!(
            seen + dropped > sent,
            "{dropped} dropped, {seen} seen of {sent} + 1"
        );
        assert_eq!(rx.take_ring_drops(true), 0, "each drop counted once");
    });
}
