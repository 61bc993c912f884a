//! The program, run twice: by a small classic-BPF interpreter here (every branch, quickly), and
//! by the kernel on a real `SO_REUSEPORT` group on the loopback interface.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

use super::*;

/// A data packet's UDP payload to `qpn`: a BTH and some bytes.
fn data_to(qpn: u32) -> Vec<u8> {
    let mut p = vec![0u8; 12 + 16];
    p[0] = 0x0a; // RC RDMA WRITE ONLY: the opcode does not matter to the steering
    p[5..8].copy_from_slice(&qpn.to_be_bytes()[1..]);
    p
}

/// A CM MAD to QP 1: BTH, DETH, the MAD header with `attribute`, then the message's first
/// words: `first` (a local comm ID or a request ID), `second` (a remote comm ID, or reserved)
/// and the service ID.
fn mad(attribute: u16, first: u32, second: u32, service_id: u64) -> Vec<u8> {
    let mut p = data_to(1);
    p.resize(12 + 8 + 256, 0);
    p[20] = 1; // base version
    p[21] = 0x07; // management class: CM
    p[36..38].copy_from_slice(&attribute.to_be_bytes());
    p[44..48].copy_from_slice(&first.to_be_bytes());
    p[48..52].copy_from_slice(&second.to_be_bytes());
    p[52..60].copy_from_slice(&service_id.to_be_bytes());
    p
}

/// Runs `program` on `packet` as the kernel's classic BPF does, for the instructions it uses. A
/// load past the end ends the program with 0, as the kernel does.
fn run(program: &[sock_filter], packet: &[u8]) -> u32 {
    let (mut a, mut pc) = (0u32, 0usize);
    loop {
        let i = program[pc];
        pc += 1;
        match i.code {
            LD_W_ABS => match packet.get(i.k as usize..i.k as usize + 4) {
                Some(b) => a = u32::from_be_bytes(b.try_into().unwrap()),
                None => return 0,
            },
            LD_H_ABS => match packet.get(i.k as usize..i.k as usize + 2) {
                Some(b) => a = u32::from(u16::from_be_bytes(b.try_into().unwrap())),
                None => return 0,
            },
            ALU_AND_K => a &= i.k,
            ALU_RSH_K => a >>= i.k,
            JMP_JA => pc += i.k as usize,
            JMP_JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
            RET_K => return i.k,
            other => panic!("an instruction the interpreter does not know: {other:#x}"),
        }
    }
}

const LISTENED: u64 = 0x0000_0000_0106_4791;

fn three_members() -> Steering {
    Steering {
        // Slots 5, 2 and 9 at indices 0, 1, 2; slot 2 listens.
        members: vec![(5, 0), (2, 1), (9, 2)],
        listeners: vec![(LISTENED, 1)],
    }
}

#[test]
fn a_data_packet_goes_to_the_member_whose_slot_its_dest_qp_names() {
    let program = three_members().program();
    assert_eq!(run(&program, &data_to(5 << 16 | 0x1234)), 0);
    assert_eq!(run(&program, &data_to(2 << 16 | 0x0011)), 1);
    assert_eq!(run(&program, &data_to(9 << 16 | 0xffff)), 2);
    // A slot no member holds (a process that is gone): the first member.
    assert_eq!(run(&program, &data_to(7 << 16 | 0x0011)), 0);
}

#[test]
fn a_request_goes_to_the_listener_of_its_service_and_the_rest_by_our_id() {
    let program = three_members().program();
    let req = |service| mad(0x0010, 0x0bad_cafe, 0, service);
    assert_eq!(run(&program, &req(LISTENED)), 1);
    assert_eq!(
        run(&program, &req(LISTENED + 1)),
        0,
        "nobody listens: the first member"
    );
    assert_eq!(
        run(&program, &req(LISTENED | 1 << 32)),
        0,
        "the high word counts too"
    );
    let sidr_req = mad(0x0017, 0x0bad_cafe, 0, LISTENED);
    assert_eq!(run(&program, &sidr_req), 1);
    // REP, RTU, REJ, MRA, DREQ, DREP: the remote comm ID is ours, its top byte the slot.
    for attribute in [0x0013, 0x0014, 0x0012, 0x0011, 0x0015, 0x0016] {
        let reply = mad(attribute, 0x0bad_cafe, 9 << 24 | 0x12_3456, 0);
        assert_eq!(run(&program, &reply), 2, "attribute {attribute:#x}");
    }
    // A SIDR REP answers our request ID, in its first word.
    assert_eq!(run(&program, &mad(0x0018, 2 << 24 | 7, 0, 0)), 1);
}

#[test]
fn a_datagram_too_short_for_a_bth_goes_to_index_0() {
    assert_eq!(run(&three_members().program(), &[0u8; 7]), 0);
}

#[test]
fn the_program_fits_the_kernel_with_every_slot_and_listeners_beyond_room_are_left_out() {
    let full = Steering {
        members: (0..=255).map(|s| (s, u16::from(s))).collect(),
        listeners: (0..1000).map(|i| (LISTENED + i, 3)).collect(),
    };
    let program = full.program();
    assert!(program.len() <= MAX_INSTRUCTIONS, "{}", program.len());
    assert_eq!(run(&program, &data_to(200 << 16 | 2)), 200);
    assert_eq!(run(&program, &mad(0x0010, 1, 0, LISTENED)), 3);
}

/// The kernel agrees: a group of three sockets on one loopback port, the program attached by
/// one of them, datagrams sent to the port arrive at the sockets the program names.
#[test]
fn the_kernel_delivers_each_datagram_to_the_socket_the_program_names() {
    let (group, addr, sender) = three_members_on_loopback(2);
    let cases = [
        (data_to(9 << 16 | 0x42), 2),
        (data_to(5 << 16 | 0x42), 0),
        (mad(0x0010, 1, 0, LISTENED), 1),
        (mad(0x0014, 1, 2 << 24 | 5, 0), 1),
        (data_to(2 << 16 | 0x42), 1),
    ];
    for (payload, index) in &cases {
        sender.send_to(payload, addr).unwrap();
        let mut buf = [0u8; 512];
        let (len, _) = group[*index].recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..len], payload.as_slice(), "at index {index}");
        for (other, socket) in group.iter().enumerate().filter(|(i, _)| i != index) {
            assert!(socket.recv_from(&mut buf).is_err(), "also at index {other}");
        }
    }
}

/// What the batches are cut by: the slot the program gives a data packet, by its DestQP alone;
/// a MAD, steered by what it names, and what is too short for a BTH have none.
#[test]
fn a_packet_s_slot_is_the_one_the_program_steers_it_to() {
    let steering = three_members();
    let program = steering.program();
    for (slot, index) in [(5u8, 0u32), (2, 1), (9, 2)] {
        let packet = data_to(u32::from(slot) << 16 | 0x42);
        assert_eq!(slot_of(&packet), Some(slot));
        assert_eq!(run(&program, &packet), index);
    }
    assert_eq!(slot_of(&mad(0x0010, 1, 0, LISTENED)), None);
    assert_eq!(slot_of(&[0u8; 7]), None);
}

/// Why the batches are cut: the kernel steers a segmentation-offload batch whole, by its first
/// packet. Two packets sent in one `UDP_SEGMENT` send, the first to slot 5's QP and the second
/// to slot 9's, both arrive at slot 5's socket.
#[test]
fn the_kernel_steers_a_batch_whole_by_its_first_packet() {
    use nix::sys::socket::{setsockopt, sockopt};
    let (group, addr, sender) = three_members_on_loopback(0);
    let (to_5, to_9) = (data_to(5 << 16 | 0x42), data_to(9 << 16 | 0x42));
    setsockopt(&sender, sockopt::UdpGsoSegment, &(to_5.len() as i32)).unwrap();
    sender
        .send_to(&[to_5.as_slice(), to_9.as_slice()].concat(), addr)
        .unwrap();
    let mut buf = [0u8; 512];
    for expected in [&to_5, &to_9] {
        let (len, _) = group[0].recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..len], expected.as_slice());
    }
    assert!(
        group[2].recv_from(&mut buf).is_err(),
        "slot 9's socket got its packet"
    );
}

/// [`three_members`]' group on a loopback port, its program attached through the socket at
/// `attach_by`, and a socket to send to it from: the group, its address, the sender.
fn three_members_on_loopback(attach_by: usize) -> ([UdpSocket; 3], SocketAddr, UdpSocket) {
    let first = reuseport_socket("127.0.0.1:0".parse().unwrap());
    let addr = first.local_addr().unwrap();
    let group = [first, reuseport_socket(addr), reuseport_socket(addr)];
    three_members().attach(&group[attach_by].as_fd()).unwrap();
    (group, addr, UdpSocket::bind("127.0.0.1:0").unwrap())
}

/// A UDP socket with `SO_REUSEPORT` bound to `addr`, reading with a short timeout.
fn reuseport_socket(addr: SocketAddr) -> UdpSocket {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    socket.set_reuse_port(true).unwrap();
    socket.bind(&addr.into()).unwrap();
    let socket: UdpSocket = socket.into();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    socket
}
