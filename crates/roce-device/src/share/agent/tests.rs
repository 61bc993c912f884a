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
    // The first leaves: its seat stays (no socket moves), and each slot's datagrams still
    // reach their member.
    drop(first);
    barrier();
    assert!(arrives_at(&second, &data_to(qpn(1)), to));
    assert!(arrives_at(&third, &data_to(qpn(2)), to));
    // A REQ goes to the member that listens for its service.
    second.member.listen(vec![0x0106_0000_4791]).unwrap();
    barrier();
    assert!(arrives_at(&second, &req(0x0106_0000_4791), to));
    // A new member gets the next slot in turn (after the two barriers' 3 and 4), not the one
    // freed, and the seat left vacant (the barriers' too, once left): it is now the first
    // member, which gets what names nobody (slot 0 left).
    let fourth = join(ip, nowhere).unwrap();
    assert_eq!(fourth.member.slot(), 5);
    assert!(arrives_at(&fourth, &data_to(qpn(5)), to));
    assert!(
        arrives_at(&fourth, &data_to(qpn(0)), to),
        "slot 0 left: the first member"
    );
    assert!(arrives_at(&second, &data_to(qpn(1)), to));
    assert!(arrives_at(&third, &data_to(qpn(2)), to));
    drop((second, third, fourth));
    agent.join().unwrap().unwrap();
}

/// The agent's seats as members come and go, without its loop: a member that leaves keeps its
/// seat (the kernel would move the group's last socket into the place of a closed one, and the
/// program attached until the agent's next one would steer the moved member's datagrams to an
/// index past the group's end); the next member takes it; the last seat closes, and the vacant
/// ones before it with it.
#[test]
fn a_member_that_leaves_moves_no_other_and_its_seat_is_taken_again() {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    use std::os::fd::OwnedFd;

    use super::{Agent, Layout, Seat};
    let ip = "127.0.14.72".parse().unwrap();
    let mut agent = Agent::new(Layout::Address(ip));
    // Each member's end of its connection, kept open: the agent sends the slot there.
    let mut ends: Vec<OwnedFd> = Vec::new();
    let mut join = |agent: &mut Agent| {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        agent.join(ours);
        ends.push(theirs);
    };
    for _ in 0..3 {
        join(&mut agent);
    }
    let seats = |agent: &Agent| -> Vec<Option<u8>> {
        agent
            .seats
            .iter()
            .map(|seat| match seat {
                Seat::Taken(member) => Some(member.slot),
                Seat::Vacant(_) => None,
            })
            .collect()
    };
    assert_eq!(seats(&agent), [Some(0), Some(1), Some(2)]);
    let before = agent.steering().members;
    agent.leave(0);
    assert_eq!(seats(&agent), [None, Some(1), Some(2)], "no member moved");
    let after = agent.steering().members;
    assert_eq!(after, before[1..], "the others keep their indices");
    join(&mut agent);
    assert_eq!(
        seats(&agent),
        [Some(3), Some(1), Some(2)],
        "the vacant seat taken"
    );
    agent.leave(1);
    agent.leave(2);
    assert_eq!(
        seats(&agent),
        [Some(3)],
        "the last seat closed, the vacant one before it too"
    );
    agent.leave(0);
    assert!(agent.seats.is_empty());
}
