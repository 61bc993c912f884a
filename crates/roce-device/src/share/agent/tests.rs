//! The agent in this process (a thread), its members too: sockets handed out in one group, the
//! steering kept right as members come and go, and the agent's end after the last.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::Duration;

use super::run;
use crate::share::member::{Joined, join};

const LINGER: Duration = Duration::from_millis(300);

/// A data packet's UDP payload to `qpn`.
fn data_to(qpn: u32) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    p[5..8].copy_from_slice(&qpn.to_be_bytes()[1..]);
    p
}

/// A CM REQ for `service_id` (BTH, DETH, MAD header, then the REQ's first words).
fn req(service_id: u64) -> Vec<u8> {
    let mut p = data_to(1);
    p.resize(12 + 8 + 256, 0);
    p[36..38].copy_from_slice(&0x0010u16.to_be_bytes());
    p[52..60].copy_from_slice(&service_id.to_be_bytes());
    p
}

/// Whether `payload`, sent to the address, arrives at `member`'s socket (within 200 ms).
fn arrives_at(member: &Joined, payload: &[u8], to: SocketAddr) -> bool {
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    member
        .first
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    sender.send_to(payload, to).unwrap();
    let mut buf = [0u8; 512];
    matches!(member.first.recv_from(&mut buf), Ok((len, _)) if buf[..len] == *payload)
}

/// Whether the agent of `ip` has taken its name (/proc/net/unix lists it).
fn agent_listens(ip: std::net::IpAddr) -> bool {
    let name = format!("@{}", crate::share::agent_name(ip));
    std::fs::read_to_string("/proc/net/unix").is_ok_and(|t| t.lines().any(|l| l.ends_with(&name)))
}

#[test]
fn members_get_slots_and_sockets_and_the_steering_follows_them_as_they_leave() {
    let ip = "127.0.14.71".parse().unwrap();
    let to = SocketAddr::new(ip, 4791);
    let agent = std::thread::spawn(move || run(ip, LINGER));
    // The member side waits for the agent's name to be taken (it would start a program in
    // vain meanwhile: one that does not exist).
    let nowhere = Path::new("/nonexistent/roce");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !agent_listens(ip) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The agent answers a join only after it has dealt with what came before it on every
    // member's connection (a leave, a listen): a join and its leave are the test's barrier.
    let barrier = || drop(join(ip, nowhere).unwrap());
    let first = join(ip, nowhere).unwrap();
    let mut second = join(ip, nowhere).unwrap();
    let third = join(ip, nowhere).unwrap();
    let slots = [&first, &second, &third].map(|m| m.member.slot());
    assert_eq!(slots, [0, 1, 2], "slots in turn");
    let qpn = |slot: u8| u32::from(slot) << 16 | 0x42;
    assert!(arrives_at(&second, &data_to(qpn(1)), to));
    assert!(arrives_at(&third, &data_to(qpn(2)), to));
    // The first leaves: the kernel moves the third socket into its place, the agent the third
    // member, and each slot's datagrams still reach their member.
    drop(first);
    barrier();
    assert!(arrives_at(&second, &data_to(qpn(1)), to));
    assert!(arrives_at(&third, &data_to(qpn(2)), to));
    // A REQ goes to the member that listens for its service; a slot nobody has, to the first.
    second.member.listen(vec![0x0106_0000_4791]).unwrap();
    barrier();
    assert!(arrives_at(&second, &req(0x0106_0000_4791), to));
    assert!(
        arrives_at(&third, &data_to(qpn(0)), to),
        "slot 0 left: the first member"
    );
    // A new member gets the next slot in turn (after the two barriers' 3 and 4), not the one
    // freed.
    let fourth = join(ip, nowhere).unwrap();
    assert_eq!(fourth.member.slot(), 5);
    drop((second, third, fourth));
    agent.join().unwrap().unwrap();
}
