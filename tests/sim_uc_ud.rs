//! UC and UD between two NICs. UC: messages arrive whole or not at all, a gap in PSNs drops the
//! message it cuts and nothing is ever acknowledged or sent again (IBTA vol. 1 §9.8.3). UD: one
//! packet per message, into a receive WR after a 40-byte GRH area, with the sender's QPN, and
//! only with the right Q_Key (§9.8.4, §10.2.5).

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_core::{Mtu, NicConfig, QpType, SendOp, VerbsError, WcOpcode, WcStatus};
use roce_sim::{Pair, PairConfig, TraceGuard};
use roce_tests::sim::{
    drive_millis, drop_once, pattern, post, post_from_a, post_recv, remote, success, wr,
};
use roce_wire::Opcode;

fn pair(qp_type: QpType) -> (Pair, TraceGuard) {
    let log = roce_sim::trace_to_test_output();
    let config = PairConfig {
        qp_type,
        ..PairConfig::default()
    };
    (Pair::connected(&config), log)
}

/// Nothing crossed from b to a: no ACK, no NAK, no response of any kind.
fn assert_nothing_came_back(pair: &Pair) {
    assert_eq!(pair.b_to_a.stats().offered, 0, "{:?}", pair.b_to_a.sent());
    assert_eq!(pair.b.nic.stats().tx_packets, 0);
}

// ---- UC ----------------------------------------------------------------------------------------

#[test]
fn uc_send_write_and_write_with_immediate_arrive() {
    let (mut pair, _log) = pair(QpType::Uc);
    let send_data = pattern(1, 3000);
    let write_data = pattern(2, 5000);
    pair.a.mr.write(0, &send_data);
    pair.a.mr.write(10_000, &write_data);
    post_recv(&mut pair.b, 100, 0, 4096);
    post_recv(&mut pair.b, 101, 0, 0);
    post_from_a(&mut pair, 1, SendOp::Send, 0, 3000);
    let op = SendOp::RdmaWrite(remote(&pair.b, 20_000));
    post_from_a(&mut pair, 2, op, 10_000, 5000);
    let with_imm = SendOp::RdmaWriteWithImm(remote(&pair.b, 40_000), 0xabcd);
    post_from_a(&mut pair, 3, with_imm, 10_000, 100);
    drive_millis(&mut pair, 10);

    // The sender completes each WR once its last packet is out.
    success(pair.a.completion(), 1, WcOpcode::Send);
    success(pair.a.completion(), 2, WcOpcode::RdmaWrite);
    success(pair.a.completion(), 3, WcOpcode::RdmaWrite);
    let recv = success(pair.b.completion(), 100, WcOpcode::Recv);
    assert_eq!(recv.byte_len, 3000);
    let imm = success(pair.b.completion(), 101, WcOpcode::RecvRdmaWithImm);
    assert_eq!((imm.imm_data, imm.byte_len), (Some(0xabcd), 100));
    assert_eq!(pair.b.completion(), None);
    assert_eq!(pair.b.mr.read(0, 3000).unwrap(), send_data);
    assert_eq!(pair.b.mr.read(20_000, 5000).unwrap(), write_data);
    assert_eq!(pair.b.mr.read(40_000, 100).unwrap(), write_data[..100]);
    // 3 + 5 + 1 packets, UC opcodes, no AckReq, and nothing back.
    let sent = pair.a_to_b.sent();
    assert_eq!(sent.len(), 9);
    assert_eq!(sent[0].opcode, Some(Opcode::UcSendFirst));
    assert_eq!(sent[8].opcode, Some(Opcode::UcRdmaWriteOnlyWithImmediate));
    assert_eq!(pair.a_to_b.sent_psns(), (0..9).collect::<Vec<_>>());
    assert_nothing_came_back(&pair);
    assert_eq!(pair.b.nic.stats().rx_uc_dropped_messages, 0);
}

#[test]
fn uc_lost_middle_packet_drops_that_message_silently_and_the_next_arrives() {
    let (mut pair, _log) = pair(QpType::Uc);
    pair.a_to_b.fail(drop_once(1));
    let first = pattern(1, 3000);
    let second = pattern(2, 100);
    pair.a.mr.write(0, &first);
    pair.a.mr.write(4096, &second);
    post_recv(&mut pair.b, 100, 0, 4096);
    post_recv(&mut pair.b, 101, 8192, 4096);
    post_from_a(&mut pair, 1, SendOp::Send, 0, 3000);
    post_from_a(&mut pair, 2, SendOp::Send, 4096, 100);
    drive_millis(&mut pair, 10);

    // The sender cannot know: both complete.
    success(pair.a.completion(), 1, WcOpcode::Send);
    success(pair.a.completion(), 2, WcOpcode::Send);
    // The cut message consumed no receive WR: the next message lands in the first one.
    let recv = success(pair.b.completion(), 100, WcOpcode::Recv);
    assert_eq!(recv.byte_len, 100);
    assert_eq!(pair.b.mr.read(0, 100).unwrap(), second);
    assert_eq!(pair.b.completion(), None);
    assert_eq!(pair.b.nic.stats().rx_uc_dropped_messages, 1);
    // Never sent again, never acknowledged.
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 3]);
    assert_eq!(pair.a.nic.stats().retransmitted_packets, 0);
    assert_nothing_came_back(&pair);
}

#[test]
fn uc_lost_first_packet_drops_that_message_and_counts_it_once() {
    let (mut pair, _log) = pair(QpType::Uc);
    pair.a_to_b.fail(drop_once(0));
    let second = pattern(2, 1500);
    pair.a.mr.write(8192, &second);
    post_recv(&mut pair.b, 100, 0, 8192);
    // PSNs 0..=4, of which the FIRST is lost; then 5 and 6.
    post_from_a(&mut pair, 1, SendOp::Send, 0, 5 * 1024);
    post_from_a(&mut pair, 2, SendOp::Send, 8192, 1500);
    drive_millis(&mut pair, 10);

    let recv = success(pair.b.completion(), 100, WcOpcode::Recv);
    assert_eq!(recv.byte_len, 1500);
    assert_eq!(pair.b.mr.read(0, 1500).unwrap(), second);
    assert_eq!(pair.b.nic.stats().rx_uc_dropped_messages, 1);
    assert_nothing_came_back(&pair);
}

#[test]
fn uc_write_with_a_lost_last_packet_is_dropped_and_the_next_write_lands() {
    let (mut pair, _log) = pair(QpType::Uc);
    pair.a_to_b.fail(drop_once(1));
    let data = pattern(3, 2048);
    pair.a.mr.write(0, &data);
    post_recv(&mut pair.b, 100, 0, 0);
    // A two-packet WRITE with immediate whose LAST (which carries the immediate) is lost.
    let op = SendOp::RdmaWriteWithImm(remote(&pair.b, 0), 1);
    post_from_a(&mut pair, 1, op, 0, 2048);
    let op = SendOp::RdmaWriteWithImm(remote(&pair.b, 4096), 2);
    post_from_a(&mut pair, 2, op, 0, 2048);
    drive_millis(&mut pair, 10);

    let imm = success(pair.b.completion(), 100, WcOpcode::RecvRdmaWithImm);
    assert_eq!(imm.imm_data, Some(2));
    assert_eq!(pair.b.mr.read(4096, 2048).unwrap(), data);
    assert_eq!(pair.b.completion(), None);
    assert_eq!(pair.b.nic.stats().rx_uc_dropped_messages, 1);
    assert_nothing_came_back(&pair);
}

// ---- UD ----------------------------------------------------------------------------------------

/// a sends `len` bytes of a pattern to b's UD QP as WR `wr_id`; returns the data.
fn ud_send(pair: &mut Pair, wr_id: u64, op: SendOp, len: u32) -> Vec<u8> {
    let data = pattern(wr_id, len as usize);
    pair.a.mr.write(0, &data);
    let mut send = wr(&pair.a, wr_id, op, 0, len);
    send.ud = Some(pair.b.ud_dest());
    post(pair, true, send);
    data
}

#[test]
fn ud_send_only_with_and_without_immediate_arrives_after_the_grh_area() {
    let (mut pair, _log) = pair(QpType::Ud);
    post_recv(&mut pair.b, 100, 0, 2048);
    post_recv(&mut pair.b, 101, 4096, 2048);
    let plain = ud_send(&mut pair, 1, SendOp::Send, 1000);
    drive_millis(&mut pair, 1);
    let with_imm = ud_send(&mut pair, 2, SendOp::SendWithImm(0x5151), 1024);
    drive_millis(&mut pair, 1);

    success(pair.a.completion(), 1, WcOpcode::Send);
    success(pair.a.completion(), 2, WcOpcode::Send);
    let first = success(pair.b.completion(), 100, WcOpcode::Recv);
    assert_eq!(
        (first.byte_len, first.src_qp, first.imm_data),
        (40 + 1000, Some(pair.a.qpn), None)
    );
    assert_eq!(pair.b.mr.read(40, 1000).unwrap(), plain);
    let second = success(pair.b.completion(), 101, WcOpcode::Recv);
    assert_eq!(
        (second.byte_len, second.src_qp, second.imm_data),
        (40 + 1024, Some(pair.a.qpn), Some(0x5151))
    );
    assert_eq!(pair.b.mr.read(4096 + 40, 1024).unwrap(), with_imm);
    let opcodes: Vec<_> = pair.a_to_b.sent().iter().map(|s| s.opcode).collect();
    assert_eq!(
        opcodes,
        [
            Some(Opcode::UdSendOnly),
            Some(Opcode::UdSendOnlyWithImmediate)
        ]
    );
    assert_nothing_came_back(&pair);
}

#[test]
fn ud_with_the_wrong_qkey_is_dropped_and_counted() {
    let (mut pair, _log) = pair(QpType::Ud);
    post_recv(&mut pair.b, 100, 0, 2048);
    let mut send = wr(&pair.a, 1, SendOp::Send, 0, 10);
    send.ud = Some(roce_core::UdDest {
        qkey: 0x2222,
        ..pair.b.ud_dest()
    });
    post(&mut pair, true, send);
    drive_millis(&mut pair, 1);

    success(pair.a.completion(), 1, WcOpcode::Send);
    assert_eq!(pair.b.completion(), None);
    assert_eq!(pair.b.nic.stats().rx_qkey_mismatch, 1);
    assert_eq!(pair.b.nic.stats().rx_dropped(), 1);

    // A Q_Key with the high bit set sends the QP's own, which is b's too: it arrives.
    let mut send = wr(&pair.a, 2, SendOp::Send, 0, 10);
    send.ud = Some(roce_core::UdDest {
        qkey: 0x8000_0000,
        ..pair.b.ud_dest()
    });
    post(&mut pair, true, send);
    drive_millis(&mut pair, 1);
    success(pair.b.completion(), 100, WcOpcode::Recv);
}

#[test]
fn ud_without_a_receive_wr_is_counted_and_the_next_one_arrives() {
    let (mut pair, _log) = pair(QpType::Ud);
    ud_send(&mut pair, 1, SendOp::Send, 10);
    drive_millis(&mut pair, 1);
    assert_eq!(pair.b.nic.stats().rx_no_recv_wr, 1);
    assert_eq!(pair.b.completion(), None);

    post_recv(&mut pair.b, 100, 0, 2048);
    ud_send(&mut pair, 2, SendOp::Send, 10);
    drive_millis(&mut pair, 1);
    assert_eq!(pair.b.completion().unwrap().byte_len, 50);
    assert_eq!(pair.b.nic.stats().rx_no_recv_wr, 1);
    assert_nothing_came_back(&pair);
}

#[test]
fn ud_message_over_the_path_mtu_is_refused_at_post_send() {
    // A UD QP's path MTU is the port's active MTU (rxe `get_mtu`): here 2048.
    let _log = roce_sim::trace_to_test_output();
    let config = PairConfig {
        qp_type: QpType::Ud,
        nic: NicConfig {
            max_mtu: Mtu::Mtu2048,
            ..NicConfig::default()
        },
        ..PairConfig::default()
    };
    let mut pair = Pair::connected(&config);
    post_recv(&mut pair.b, 100, 0, 4096);
    let fits = ud_send(&mut pair, 1, SendOp::Send, 2048);
    drive_millis(&mut pair, 1);
    assert_eq!(pair.b.completion().unwrap().byte_len, 40 + 2048);
    assert_eq!(pair.b.mr.read(40, 2048).unwrap(), fits);

    let mut too_long = wr(&pair.a, 2, SendOp::Send, 0, 2049);
    too_long.ud = Some(pair.b.ud_dest());
    let qpn = pair.a.qpn;
    assert_eq!(
        pair.a.nic.post_send(qpn, too_long),
        Err(VerbsError::InvalidWorkRequest {
            qpn,
            reason: "a UD message must fit in one packet (path MTU)"
        })
    );
    drive_millis(&mut pair, 1);
    assert_eq!(
        pair.a_to_b.stats().offered,
        1,
        "the refused WR sent nothing"
    );
    assert_eq!(pair.a.completion().map(|c| c.wr_id), Some(1));
    assert_eq!(pair.a.completion(), None);
}

#[test]
fn ud_message_longer_than_its_receive_is_a_length_error_and_lands_nothing() {
    let (mut pair, _log) = pair(QpType::Ud);
    // 40 bytes of GRH area and 1000 of payload do not fit 1024 bytes of receive buffer.
    pair.b.mr.write(0, &[0xcc; 1024]);
    post_recv(&mut pair.b, 100, 0, 1024);
    ud_send(&mut pair, 1, SendOp::Send, 1000);
    drive_millis(&mut pair, 1);
    let cqe = pair.b.completion().expect("the receive completes");
    assert_eq!((cqe.wr_id, cqe.status), (100, WcStatus::LocLenErr));
    assert_eq!(
        pair.b.mr.read(0, 1024).unwrap(),
        [0xcc; 1024],
        "nothing landed"
    );
}
