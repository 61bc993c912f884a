use std::time::Duration;

use roce_core::Ecn;

use super::open::{SOCKET_BUFFER, receive_cap_warning};
use super::*;

/// A transmit from `from` to `to`, not ECN-capable, DSCP 0, TTL 64.
fn transmit(from: SocketAddr, to: SocketAddr) -> Transmit {
    Transmit {
        src: from.ip(),
        src_port: from.port(),
        dst: to,
        ecn: Ecn::NotEct,
        dscp: 0,
        ttl: 64,
        len: 0,
    }
}

/// A buffer below what was asked for is said, with its size and the sysctl that lifts
/// the cap; one at least as large is not (the kernel reads back twice the size set).
#[test]
fn a_receive_buffer_below_the_ask_is_said_with_the_sysctl_that_lifts_it() {
    let want = SOCKET_BUFFER;
    // rmem_max's usual default, 208 KiB, read back doubled.
    let warning = receive_cap_warning(2 * 212_992, want).expect("capped");
    assert!(warning.contains("capped at 208 KiB"), "{warning}");
    assert!(
        warning.contains("sysctl -w net.core.rmem_max=8388608"),
        "{warning}"
    );
    assert_eq!(receive_cap_warning(2 * want, want), None);
    assert!(receive_cap_warning(2 * want - 2, want).is_some());
}

/// The socket asks for no receive timestamps (quinn-udp's set-up turns them on, and one socket
/// asking makes the kernel stamp every packet the host receives).
#[tokio::test]
async fn the_socket_asks_for_no_receive_timestamps() {
    use nix::sys::socket::{getsockopt, sockopt};
    let backend = UdpBackend::bind("127.0.0.1".parse().unwrap(), 0).unwrap();
    for registration in backend.fds.iter() {
        assert!(!getsockopt(registration.source(), sockopt::ReceiveTimestampns).unwrap());
    }
    // The option reads back as set where it is set: the check above can see it.
    let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    nix::sys::socket::setsockopt(&plain, sockopt::ReceiveTimestampns, &true).unwrap();
    assert!(getsockopt(&plain, sockopt::ReceiveTimestampns).unwrap());
}

/// A backend told not to wake its task for datagrams is not ready when one arrives; told to
/// again, it is, and the datagram that came meanwhile is there to receive.
#[tokio::test]
async fn a_datagram_that_came_while_it_woke_nobody_is_seen_once_it_does() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let mut backend = UdpBackend::bind(ip, 0).unwrap();
    let mut rx = backend.receiver().unwrap();
    let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
    let to = backend.local_addr();
    let arrive = || assert_eq!(peer.send_to(b"while asleep", to).unwrap(), 12);
    crate::backend::testing::check_wake_on_datagrams(
        &mut backend,
        &mut *rx,
        arrive,
        b"while asleep",
    )
    .await;
}

/// A receive that drains the socket clears its readiness without a failing system call;
/// a datagram that arrives afterwards still wakes the next receive.
#[tokio::test]
async fn a_datagram_after_a_drained_receive_is_received() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let mut backend = UdpBackend::bind(ip, 0).unwrap();
    let to = backend.local_addr();
    let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
    let mut buf = vec![0; backend.recv_buffer_len()];
    let mut out = Vec::new();
    for round in 0..3u8 {
        peer.send_to(&[round; 20], to).unwrap();
        tokio::time::timeout(Duration::from_secs(5), backend.recv(&mut buf, &mut out))
            .await
            .expect("the datagram was missed")
            .unwrap();
        assert_eq!(out.len(), 1, "round {round}");
        let got = &out[0];
        assert_eq!(&buf[got.offset..got.offset + got.len], &[round; 20]);
        out.clear();
    }
    // Nothing more was sent: the next receive waits.
    let idle = tokio::time::timeout(Duration::from_millis(50), backend.recv(&mut buf, &mut out));
    assert!(idle.await.is_err() && out.is_empty());
}

/// The backend's sender for every thread sends from the backend's own socket (its port,
/// which the ICRCs cover), a batch cut into datagrams by the kernel or one by one.
#[tokio::test]
async fn the_sender_sends_from_the_backends_socket() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let mut backend = UdpBackend::bind(ip, 0).unwrap();
    let from = backend.local_addr();
    let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut sender = backend.sender().expect("a UDP backend hands out a sender");
    let transmit = transmit(from, peer.local_addr().unwrap());
    // Three datagrams of 40 bytes and a last one of 10, in one call, from another thread.
    let mut payload: Vec<u8> = (0..130u8).collect();
    std::thread::spawn(move || sender.send_segments(&transmit, &mut payload, 40))
        .join()
        .unwrap()
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..4 {
        let mut buf = [0u8; 64];
        let (len, src) = peer.recv_from(&mut buf).unwrap();
        assert_eq!(src, from, "not the backend's socket");
        got.push(len);
    }
    // Cut at 40 bytes; the ICRC of all but the first is sealed again for ID 0 when they go
    // one by one, so only the lengths are compared.
    assert_eq!(got, [40, 40, 40, 10]);
}

/// A send carries the transmit's DSCP and ECN in the IPv4 TOS, a batch's in every datagram
/// the kernel cuts from it.
#[tokio::test]
async fn the_sender_marks_each_datagram_with_the_transmits_dscp_and_ecn() {
    use nix::sys::socket::{
        ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, setsockopt, sockopt,
    };
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let mut backend = UdpBackend::bind(ip, 0).unwrap();
    let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    setsockopt(&peer, sockopt::IpRecvTos, &true).unwrap();
    let mut sender = backend.sender().unwrap();
    let transmit = Transmit {
        ecn: Ecn::Ect0,
        dscp: 26,
        ..transmit(backend.local_addr(), peer.local_addr().unwrap())
    };
    // One datagram, then a batch of two.
    sender.send_segments(&transmit, &mut [7u8; 30], 30).unwrap();
    sender.send_segments(&transmit, &mut [8u8; 60], 30).unwrap();
    let mut tos = Vec::new();
    for _ in 0..3 {
        let mut buf = [0u8; 64];
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!(u8);
        let msg = recvmsg::<SockaddrStorage>(
            std::os::fd::AsRawFd::as_raw_fd(&peer),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        )
        .unwrap();
        for cmsg in msg.cmsgs().unwrap() {
            if let ControlMessageOwned::Ipv4Tos(t) = cmsg {
                tos.push((msg.bytes, t));
            }
        }
    }
    let marked = (26 << 2) | 0b10;
    assert_eq!(tos, [(30, marked), (30, marked), (30, marked)]);
}

/// The backend's receiver for every thread takes what waits without waiting, and says
/// when it drained the socket, also when nothing was there.
#[tokio::test]
async fn the_receiver_takes_what_waits_without_waiting() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let mut backend = UdpBackend::bind(ip, 0).unwrap();
    let to = backend.local_addr();
    let mut receiver = backend
        .receiver()
        .expect("a UDP backend hands out a receiver");
    let mut buf = vec![0; receiver.buffer_len()];
    let mut out = Vec::new();
    assert!(
        receiver.try_recv(&mut buf, &mut out).unwrap(),
        "nothing: drained"
    );
    assert!(out.is_empty());
    let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
    peer.send_to(&[1; 20], to).unwrap();
    peer.send_to(&[2; 30], to).unwrap();
    // Loopback delivers within `send_to`; a slow machine gets a few tries.
    for _ in 0..100 {
        assert!(
            receiver.try_recv(&mut buf, &mut out).unwrap(),
            "fewer than a batch"
        );
        if out.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let got: Vec<_> = out.iter().map(|r| (r.src, buf[r.offset], r.len)).collect();
    let from = peer.local_addr().unwrap();
    assert_eq!(got, [(from, 1, 20), (from, 2, 30)]);
}

/// An IPv4 backend on 127.0.0.1 with a second socket on ::1 (standing in for a link-local
/// address: the same bind, without a scope), on the same ephemeral port; `None` where the
/// host has no IPv6 loopback.
fn two_sockets() -> Option<UdpBackend> {
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        crate::backend::testing::skipped("no IPv6 loopback address on this host");
        return None;
    }
    let mut backend = UdpBackend::bind("127.0.0.1".parse().unwrap(), 0).unwrap();
    backend.bind_link_local(Ipv6Addr::LOCALHOST, 0).unwrap();
    let port = backend.local_addr().port();
    assert_eq!(
        backend.link_local_addr(),
        Some(SocketAddr::from((Ipv6Addr::LOCALHOST, port)))
    );
    Some(backend)
}

/// With two sockets, the backend's own receive and the receiver it hands out both take
/// datagrams from either socket, each with the address it came to, at its own place in the
/// buffer; a socket with nothing waiting does not hold up the other.
#[tokio::test]
async fn both_sockets_are_received_from() {
    let Some(mut backend) = two_sockets() else {
        return;
    };
    let v4 = backend.local_addr();
    let v6 = backend.link_local_addr().unwrap();
    let peer4 = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let peer6 = std::net::UdpSocket::bind("[::1]:0").unwrap();
    let mut buf = vec![0; backend.recv_buffer_len()];
    let mut out = Vec::new();
    // The backend's own receive: the IPv6 socket alone has something, then the IPv4 one.
    for (peer, to, byte) in [(&peer6, v6, 6u8), (&peer4, v4, 4)] {
        peer.send_to(&[byte; 20], to).unwrap();
        tokio::time::timeout(Duration::from_secs(5), backend.recv(&mut buf, &mut out))
            .await
            .expect("the datagram was missed")
            .unwrap();
        assert_eq!(out.len(), 1, "to {to}");
        let got = out.pop().unwrap();
        assert_eq!((got.src, got.dst), (peer.local_addr().unwrap(), to));
        assert_eq!(&buf[got.offset..got.offset + got.len], &[byte; 20]);
    }
    // The receiver: one datagram to each socket, both taken, neither overwriting the other.
    let mut receiver = backend.receiver().unwrap();
    assert_eq!(receiver.buffer_len(), backend.recv_buffer_len());
    peer4.send_to(&[44; 30], v4).unwrap();
    peer6.send_to(&[66; 40], v6).unwrap();
    for _ in 0..100 {
        assert!(receiver.try_recv(&mut buf, &mut out).unwrap(), "drained");
        if out.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut got: Vec<_> = out
        .iter()
        .map(|r| (r.dst, buf[r.offset], buf[r.offset + r.len - 1], r.len))
        .collect();
    got.sort();
    assert_eq!(got, [(v4, 44, 44, 30), (v6, 66, 66, 40)]);
}

/// With two sockets, a transmit leaves through the socket of its source's family.
#[tokio::test]
async fn a_transmit_leaves_through_the_socket_of_its_source_family() {
    let Some(mut backend) = two_sockets() else {
        return;
    };
    let mut sender = backend.sender().unwrap();
    for from in [backend.link_local_addr().unwrap(), backend.local_addr()] {
        let peer = std::net::UdpSocket::bind(SocketAddr::new(from.ip(), 0)).unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let transmit = transmit(from, peer.local_addr().unwrap());
        sender.send_segments(&transmit, &mut [7; 24], 24).unwrap();
        backend.send(&transmit, &[8; 12]).await.unwrap();
        for len in [24, 12] {
            let mut buf = [0u8; 64];
            let (got, src) = peer.recv_from(&mut buf).unwrap();
            assert_eq!((got, src), (len, from));
        }
    }
}

/// A link-local socket whose address and port another socket holds is refused with
/// `EADDRINUSE`, and the backend stays as it was: one socket, which still receives.
#[tokio::test]
async fn a_link_local_socket_in_use_leaves_the_backend_as_it_was() {
    let Ok(taken) = std::net::UdpSocket::bind("[::1]:0") else {
        crate::backend::testing::skipped("no IPv6 loopback address on this host");
        return;
    };
    let port = taken.local_addr().unwrap().port();
    let Ok(mut backend) = UdpBackend::bind("127.0.0.1".parse().unwrap(), port) else {
        crate::backend::testing::skipped("the IPv6 loopback's port is taken on 127.0.0.1");
        return;
    };
    let err = backend.bind_link_local(Ipv6Addr::LOCALHOST, 0).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AddrInUse, "{err}");
    assert_eq!(backend.link_local_addr(), None);
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.send_to(&[1; 10], backend.local_addr()).unwrap();
    let mut buf = vec![0; backend.recv_buffer_len()];
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), backend.recv(&mut buf, &mut out))
        .await
        .expect("the datagram was missed")
        .unwrap();
    assert_eq!(out.len(), 1);
}

/// A batch with lent payloads leaves as its buffer with each loan's bytes at the loan's place,
/// gathered by the kernel; with more pieces than one send gathers, copied in first.
#[tokio::test]
async fn a_gathered_send_carries_each_loans_bytes_at_its_place() {
    use std::sync::Arc;

    use roce_core::{OwnedMemory, RegionMemory};

    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let mut backend = UdpBackend::bind(ip, 0).unwrap();
    let peer = std::net::UdpSocket::bind((ip, 0)).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut sender = backend.sender().unwrap();
    assert!(sender.gathers());
    let transmit = transmit(backend.local_addr(), peer.local_addr().unwrap());
    let memory: Arc<dyn RegionMemory> = Arc::new(OwnedMemory::zeroed(4096));
    let region: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    memory.write_at(0, &region);
    // Three loans into one datagram of 200 bytes, then 300 loans of a byte each into one of
    // 600 (601 pieces: over what one send gathers).
    let few = [(10, 100, 40), (60, 2000, 30), (150, 7, 50)];
    let many: Vec<(usize, usize, usize)> = (0..300).map(|i| (2 * i + 1, 3 * i, 1)).collect();
    for (len, loans) in [(200, &few[..]), (600, &many[..])] {
        let (loans, mut payload, expected) =
            crate::backend::testing::lent_batch(&memory, &region, len, loans);
        sender
            .send_gathered(&transmit, &mut payload, len, &loans)
            .unwrap();
        let mut buf = [0u8; 1024];
        let (got, _) = peer.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..got], &expected[..], "{} loans", loans.len());
    }
}
