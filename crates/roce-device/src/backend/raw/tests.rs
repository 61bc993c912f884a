use std::net::{Ipv4Addr, SocketAddr};

use roce_wire::frame::{Frame, FrameRepr, LinkType, Transport};

use super::filter::{is_udp_fragment_to, wanted};
use super::*;
use crate::backend::packet_socket::RxFrame;

const US: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// An Ethernet + IPv4 frame, UDP to us: `flags_offset` is the IPv4 flags and fragment
/// offset field, `udp` says whether a UDP header to port 4791 follows (a first fragment or
/// a whole datagram) or payload bytes do (a later fragment).
fn frame(dst: Ipv4Addr, flags_offset: u16, udp: bool) -> Vec<u8> {
    let mut f = vec![0; 14 + 20 + 8 + 16];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[20..22].copy_from_slice(&flags_offset.to_be_bytes());
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&dst.octets());
    if udp {
        f[34..36].copy_from_slice(&4791u16.to_be_bytes());
        f[36..38].copy_from_slice(&4791u16.to_be_bytes());
    } else {
        f[34..].fill(0x5a);
    }
    f
}

#[test]
fn every_fragment_of_a_udp_datagram_to_us_is_told_apart_and_nothing_else() {
    const DF: u16 = 0x4000;
    const MF: u16 = 0x2000;
    // The first fragment: MF, offset 0, the UDP header to 4791.
    assert!(is_udp_fragment_to(&frame(US, MF, true), IpAddr::V4(US)));
    // A middle and the last fragment: no UDP header, an offset (in 8-byte units).
    assert!(is_udp_fragment_to(
        &frame(US, MF | 185, false),
        IpAddr::V4(US)
    ));
    assert!(is_udp_fragment_to(&frame(US, 370, false), IpAddr::V4(US)));
    // Whole datagrams, with and without DF, and fragments for someone else.
    assert!(!is_udp_fragment_to(&frame(US, DF, true), IpAddr::V4(US)));
    assert!(!is_udp_fragment_to(&frame(US, 0, true), IpAddr::V4(US)));
    assert!(!is_udp_fragment_to(
        &frame(Ipv4Addr::new(198, 18, 0, 3), MF, true),
        IpAddr::V4(US)
    ));
    // A whole RoCEv2 datagram is wanted; a later fragment would not even look like one.
    assert!(wanted(&frame(US, DF, true)));
    assert!(!wanted(&frame(US, 370, false)));
}

/// The UDP payloads to port 4791 of the frames `rx` takes within `limit`, until `n`.
fn roce_payloads(rx: &mut Receiver, n: usize, limit: std::time::Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let start = std::time::Instant::now();
    while got.len() < n && start.elapsed() < limit {
        rx.wait(std::time::Duration::from_millis(50)).unwrap();
        rx.poll_frames(64, |frame| {
            if let Ok(Frame {
                transport: Some(Transport::Udp(udp, payload)),
                ..
            }) = Frame::parse(LinkType::Ethernet, frame.data)
                && udp.dst_port == roce_wire::ROCE_V2_UDP_PORT
            {
                got.push(payload.to_vec());
            }
            true
        });
    }
    got
}

/// A RoCEv2 datagram of 40 bytes of `fill` from `peer` (its MAC `peer_mac`) to `us` (`our_mac`),
/// as a whole Ethernet frame.
fn frame_from_peer(
    (peer, peer_mac): (Ipv4Addr, [u8; 6]),
    (us, our_mac): (Ipv4Addr, [u8; 6]),
    fill: u8,
) -> Vec<u8> {
    let mut repr = FrameRepr::for_datagram(
        SocketAddr::new(IpAddr::V4(peer), 4791),
        SocketAddr::new(IpAddr::V4(us), 4791),
        roce_wire::frame::Ecn::NotEct,
        0,
        64,
    );
    repr.ethernet.src = peer_mac;
    repr.ethernet.dst = our_mac;
    let mut bytes = vec![0u8; 128];
    let at = repr.emit_headers(&mut bytes, 40).unwrap();
    bytes[at..at + 40].fill(fill);
    bytes.truncate(at + 40);
    bytes
}

/// What the engine hands over for a datagram of `len` bytes from `us` to `peer`.
fn transmit_to(us: Ipv4Addr, peer: Ipv4Addr, len: usize) -> Transmit {
    Transmit {
        src: IpAddr::V4(us),
        src_port: 0xc000,
        dst: SocketAddr::new(IpAddr::V4(peer), 4791),
        ecn: roce_wire::frame::Ecn::NotEct,
        dscp: 0,
        ttl: 64,
        len,
    }
}

#[test]
fn what_waits_for_a_peers_arp_reply_leaves_before_what_follows_once_its_mac_is_learnt() {
    let Some(ns) = crate::backend::testing::Netns::new("arp") else {
        return;
    };
    ns.run(|| {
        let (us, peer) = (Ipv4Addr::new(198, 18, 9, 4), Ipv4Addr::new(198, 18, 9, 1));
        let peer_mac = [2, 0, 0, 0, 0, 0x21];
        // The peer's side of the link, where our frames arrive.
        let mut wire = packet_socket::open_in_namespace("x0").unwrap().rx;
        let PacketSocket { tx, mac, .. } = packet_socket::open_in_namespace("x1").unwrap();
        let mut link = Link {
            tx,
            mac,
            ip: IpAddr::V4(us),
            neighbours: BTreeMap::new(),
            waiting: BTreeMap::new(),
            gso: true,
            headers: [0; 64],
            counters: BackendCounters::shared(),
        };
        let transmit = |len| transmit_to(us, peer, len);
        // The first packet to the peer waits for its ARP reply...
        let first = [0xaa; 40];
        link.wait_for_neighbour(&transmit(40), &first, 40).unwrap();
        // ...and before any comes, a packet from the peer teaches us its MAC.
        let bytes = frame_from_peer((peer, peer_mac), (us, mac), 0);
        let (mut buf, mut at, mut out) = (vec![0u8; 4096], 0, Vec::new());
        let frame = RxFrame {
            vnet: packet_socket::VirtioNetHdr::default(),
            data: &bytes,
        };
        assert!(link.take(frame, &mut buf, &mut at, &mut out));
        assert_eq!(
            (out.len(), link.neighbours.get(&IpAddr::V4(peer))),
            (1, Some(&peer_mac))
        );
        // A forged datagram from the peer's address, from another MAC, is taken (the
        // engine judges it) but does not move the peer.
        let mut forged = bytes.clone();
        forged[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x66]);
        let frame = RxFrame {
            vnet: packet_socket::VirtioNetHdr::default(),
            data: &forged,
        };
        assert!(link.take(frame, &mut buf, &mut at, &mut out));
        assert_eq!(
            (out.len(), link.neighbours.get(&IpAddr::V4(peer))),
            (2, Some(&peer_mac))
        );
        // The next packet goes straight out, as `send` sends it to a known neighbour.
        let second = [0xbb; 40];
        let (repr, _) = link.repr(&transmit(40), 0).unwrap();
        link.emit(&repr, &second).unwrap();
        let seen = roce_payloads(&mut wire, 2, std::time::Duration::from_secs(5));
        assert_eq!(seen, [first.to_vec(), second.to_vec()], "in the order sent");
        assert!(
            link.waiting
                .get(&IpAddr::V4(peer))
                .is_none_or(Vec::is_empty)
        );
    });
}

#[test]
fn counters_are_counted_by_name_and_fragments_are_drops() {
    let counters = BackendCounters::shared();
    counters.bump(Counter::Ipv4Fragment);
    counters.bump(Counter::Ipv4Fragment);
    counters.bump(Counter::BatchCut);
    let stats = counters.snapshot();
    assert_eq!(stats.rx_ipv4_fragments, 2);
    assert_eq!(stats.rx_dropped(), 2, "a cut batch is no drop");
    assert!(stats.counters().contains(&("rx_ipv4_fragments", 2)));
}

/// Runs `f` in a network namespace of the test's own (`tag`; skipped, saying why, where none
/// can be made), with a tokio runtime for the backend.
fn in_namespace(tag: &str, f: impl FnOnce(&tokio::runtime::Runtime) + Send + 'static) {
    let Some(ns) = crate::backend::testing::Netns::new(tag) else {
        return;
    };
    ns.run(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        f(&runtime);
    });
}

/// In a test's namespace: a raw backend at `us` on `x1`, and the peer's end of the link, `x0`
/// (its sending half, and its ring, where our frames arrive). `RawBackend::open` takes a
/// socket opened as the namespace's thread can (sysfs shows the host's interfaces, not the
/// namespace's).
fn backend_and_peer(us: Ipv4Addr) -> (RawBackend, packet_socket::Sender, Receiver) {
    let socket = packet_socket::open_in_namespace("x1").unwrap();
    let backend = RawBackend::with_socket(socket, IpAddr::V4(us)).unwrap();
    let PacketSocket { tx, rx, .. } = packet_socket::open_in_namespace("x0").unwrap();
    (backend, tx, rx)
}

#[test]
fn a_raw_backend_hands_its_ring_and_its_link_to_other_threads() {
    in_namespace("direct", |runtime| {
        let _entered = runtime.enter();
        let (us, peer) = (Ipv4Addr::new(198, 18, 9, 6), Ipv4Addr::new(198, 18, 9, 5));
        let peer_mac = [2, 0, 0, 0, 0, 0x31];
        let (mut backend, peer_tx, mut wire) = backend_and_peer(us);

        // The device takes the ring once; the backend keeps none after.
        let mut rx = backend
            .receiver()
            .expect("the raw backend hands out its ring");
        assert!(
            backend.receiver().is_none(),
            "a second receiver of one ring"
        );
        let (mut buf, mut out) = (vec![0u8; rx.buffer_len()], Vec::new());
        // An empty ring: drained at once, nothing taken.
        assert!(rx.try_recv(&mut buf, &mut out).unwrap());
        assert!(out.is_empty());

        // A datagram from the peer arrives through the receiver, on this thread.
        let bytes = frame_from_peer((peer, peer_mac), (us, backend.mac()), 0xcc);
        peer_tx.send(&[&bytes]).unwrap();
        let start = std::time::Instant::now();
        while out.is_empty() && start.elapsed() < std::time::Duration::from_secs(5) {
            rx.try_recv(&mut buf, &mut out).unwrap();
        }
        assert_eq!(out.len(), 1, "the peer's datagram, read from the ring");
        let got = &out[0];
        assert_eq!(&buf[got.offset..got.offset + got.len], &[0xcc; 40]);

        // The sender, on any thread, reaches the peer whose MAC the receiver learnt.
        let mut sender = backend
            .sender()
            .expect("the raw backend hands out a sender");
        let transmit = transmit_to(us, peer, 40);
        let mut payload = [0xdd; 40];
        std::thread::scope(|s| {
            s.spawn(|| sender.send_segments(&transmit, &mut payload, 40).unwrap());
        });
        let seen = roce_payloads(&mut wire, 1, std::time::Duration::from_secs(5));
        assert_eq!(seen, [vec![0xdd; 40]]);
    });
}

/// A raw backend told not to wake its task for frames is not ready when one arrives; told to
/// again, it is, and the frame that came meanwhile is in the ring to read.
#[test]
fn a_frame_that_came_while_it_woke_nobody_is_seen_once_it_does() {
    in_namespace("wake", |runtime| {
        let (us, peer) = (Ipv4Addr::new(198, 18, 9, 8), Ipv4Addr::new(198, 18, 9, 7));
        let peer_mac = [2, 0, 0, 0, 0, 0x41];
        runtime.block_on(async {
            let socket = packet_socket::open_in_namespace("x1").unwrap();
            let mut backend = RawBackend::with_socket(socket, IpAddr::V4(us)).unwrap();
            let peer_tx = packet_socket::open_in_namespace("x0").unwrap().tx;
            let mut rx = backend.receiver().unwrap();
            let bytes = frame_from_peer((peer, peer_mac), (us, backend.mac()), 0xee);
            let arrive = || peer_tx.send(&[&bytes]).unwrap();
            crate::backend::testing::check_wake_on_datagrams(
                &mut backend,
                &mut *rx,
                arrive,
                &[0xee; 40],
            )
            .await;
        });
    });
}

/// The RoCEv2 UDP payloads `rx` takes within `limit`, joined, until they hold `len` bytes (a
/// super-frame for the kernel to cut arrives whole over a veth that offloads it, or cut).
fn roce_bytes(rx: &mut Receiver, len: usize, limit: std::time::Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let start = std::time::Instant::now();
    while got.len() < len && start.elapsed() < limit {
        for payload in roce_payloads(rx, 1, limit.saturating_sub(start.elapsed())) {
            got.extend_from_slice(&payload);
        }
    }
    got
}

/// A batch with lent payloads leaves the raw backend as its buffer with each loan's bytes at
/// the loan's place, gathered by the kernel's copy: as one frame, and as a frame for the
/// kernel to cut. With more pieces than one frame gathers, or to a neighbour whose MAC is not
/// yet known, the loans are copied in first: the frame that waits for the neighbour carries
/// the bytes the region held when it was sent, not those written there later.
#[test]
fn a_gathered_frame_carries_each_loans_bytes_at_its_place() {
    use roce_core::{OwnedMemory, RegionMemory};

    in_namespace("gather", |runtime| {
        let _entered = runtime.enter();
        let (us, peer) = (Ipv4Addr::new(198, 18, 9, 10), Ipv4Addr::new(198, 18, 9, 9));
        let peer_mac = [2, 0, 0, 0, 0, 0x51];
        let (mut backend, peer_tx, mut wire) = backend_and_peer(us);
        let mut rx = backend.receiver().unwrap();
        let mut sender = backend.sender().unwrap();
        assert!(sender.gathers(), "the raw backend lends, as the UDP one");

        let memory: Arc<dyn RegionMemory> = Arc::new(OwnedMemory::zeroed(4096));
        let region: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        memory.write_at(0, &region);
        // A batch of `len` bytes cut into datagrams of `segment`, its loans (at, offset, n),
        // sent; returns what the wire must carry.
        let mut send = |len: usize, segment: usize, loans: &[(usize, usize, usize)]| {
            let (loans, mut payload, expected) =
                crate::backend::testing::lent_batch(&memory, &region, len, loans);
            sender
                .send_gathered(&transmit_to(us, peer, len), &mut payload, segment, &loans)
                .unwrap();
            expected
        };
        let few = [(10, 100, 40), (60, 2000, 30), (150, 7, 50)];
        let limit = std::time::Duration::from_secs(5);

        // To a peer whose MAC is not known yet: copied, and waiting for it.
        let waited = send(200, 200, &few);
        memory.write_at(0, &[0u8; 4096]);
        let bytes = frame_from_peer((peer, peer_mac), (us, backend.mac()), 0xcc);
        peer_tx.send(&[&bytes]).unwrap();
        let (mut buf, mut out) = (vec![0u8; rx.buffer_len()], Vec::new());
        let start = std::time::Instant::now();
        while out.is_empty() && start.elapsed() < limit {
            rx.try_recv(&mut buf, &mut out).unwrap();
        }
        assert_eq!(
            out.len(),
            1,
            "the peer's datagram, which teaches us its MAC"
        );
        assert_eq!(
            roce_bytes(&mut wire, 200, limit),
            waited,
            "the frame that waited"
        );
        memory.write_at(0, &region);

        // One frame; a batch of three datagrams for the kernel to cut; and 300 loans of a
        // byte each in one frame of 600 (601 pieces: over what one frame gathers).
        let many: Vec<(usize, usize, usize)> = (0..300).map(|i| (2 * i + 1, 3 * i, 1)).collect();
        let batch = [(10, 100, 40), (230, 3000, 150), (450, 9, 150)];
        for (len, segment, loans) in [(200, 200, &few[..]), (600, 200, &batch), (600, 600, &many)] {
            let expected = send(len, segment, loans);
            assert_eq!(
                roce_bytes(&mut wire, len, limit),
                expected,
                "{} loans in {len} bytes cut at {segment}",
                loans.len()
            );
        }
    });
}
