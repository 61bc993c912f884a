//! Targeted faults between two NICs: each test takes away one packet (or all of them) and
//! checks the recovery the IBTA asks for, packet by packet.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_core::{QpAttr, QpState, SendOp, WcOpcode, WcStatus};
use roce_sim::{Fault, LinkConfig, Pair, PairConfig};
use roce_tests::sim::{
    drive_millis, drop_once, fetch_add, pattern, post, post_from_a, post_recv, remote, wr,
};
use roce_wire::{Opcode, Psn};

const PMTU: u32 = 1024;

fn pair_with(config: PairConfig) -> (Pair, roce_sim::TraceGuard) {
    let log = roce_sim::trace_to_test_output();
    (Pair::connected(&config), log)
}

fn pair() -> (Pair, roce_sim::TraceGuard) {
    pair_with(PairConfig::default())
}

/// a WRITEs `len` bytes of a pattern into b at offset 0; returns the data.
fn write(pair: &mut Pair, wr_id: u64, len: u32) -> Vec<u8> {
    let data = pattern(wr_id, len as usize);
    pair.a.mr.write(0, &data);
    let write = wr(
        &pair.a,
        wr_id,
        SendOp::RdmaWrite(remote(&pair.b, 0)),
        0,
        len,
    );
    post(pair, true, write);
    data
}

/// A WRITE of four packets from a whose packet with PSN `psn` is lost once, 5 ms on.
fn write_losing(psn: u32) -> (Pair, roce_sim::TraceGuard, Vec<u8>) {
    let (mut pair, log) = pair();
    pair.a_to_b.fail(drop_once(psn));
    let data = write(&mut pair, 1, 4 * PMTU);
    pair.drive_until(roce_core::Instant::from_millis(5));
    (pair, log, data)
}

fn assert_write_done(pair: &mut Pair, wr_id: u64, data: &[u8]) {
    let cqe = pair.a.completion().expect("the WRITE completes");
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode),
        (wr_id, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(pair.b.mr.read(0, data.len()).unwrap(), data);
    assert_eq!(pair.a.completion(), None, "exactly one completion");
}

#[test]
fn lost_middle_packet_is_recovered_by_nak_not_timeout() {
    let (mut pair, _log, data) = write_losing(2);
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 3, 2, 3]);
    assert_eq!(pair.a.nic.stats().rx_nak_seq_err, 1);
    assert_eq!(
        pair.b.nic.stats().tx_nak_seq_err,
        1,
        "one NAK, then silence"
    );
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 0);
    assert_write_done(&mut pair, 1, &data);
}

#[test]
fn lost_last_packet_is_recovered_only_by_local_ack_timeout() {
    let (mut pair, _log, data) = write_losing(3);
    // No later packet shows b the gap: nothing but the timer can recover it. Only the last
    // packet asked for an ACK, so nothing was acknowledged and a goes back to the first (as
    // rxe does); b answers the three duplicates with one coalesced ACK and executes nothing twice.
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 3, 0, 1, 2, 3]);
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 1);
    assert_eq!(pair.b.nic.stats().tx_nak_seq_err, 0);
    assert_eq!(pair.b.nic.stats().rx_duplicate_requests, 3);
    assert_write_done(&mut pair, 1, &data);
}

#[test]
fn lost_first_packet_is_naked_at_the_second() {
    let (mut pair, _log, data) = write_losing(0);
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 3, 0, 1, 2, 3]);
    assert_eq!(pair.a.nic.stats().rx_nak_seq_err, 1);
    assert_write_done(&mut pair, 1, &data);
}

#[test]
fn lost_ack_is_recovered_by_timeout_and_the_duplicate_is_acked_not_executed() {
    let (mut pair, _log) = pair();
    post_recv(&mut pair.b, 7, 0, 4096);
    pair.b_to_a.fail(Fault::DropNextAck);
    pair.a.mr.write(0, b"exactly once");
    post_from_a(&mut pair, 1, SendOp::Send, 0, 12);
    pair.drive_until(roce_core::Instant::from_millis(5));
    assert_eq!(pair.a_to_b.sent_psns(), [0, 0]);
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 1);
    assert_eq!(pair.b.nic.stats().rx_duplicate_requests, 1);
    assert_eq!(pair.a.completion().unwrap().status, WcStatus::Success);
    let recvs = pair.b.completions();
    assert_eq!(
        recvs.len(),
        1,
        "the duplicate SEND consumed no second receive"
    );
    assert_eq!(pair.b.mr.read(0, 12).unwrap(), b"exactly once");
}

#[test]
fn lost_read_response_is_recovered_and_the_data_is_whole() {
    let (mut pair, _log) = pair();
    pair.b_to_a.fail(Fault::DropOpcode {
        opcode: Opcode::RcRdmaReadResponseMiddle,
        times: 1,
    });
    let data = pattern(5, 5 * PMTU as usize);
    pair.b.mr.write(0, &data);
    let op = SendOp::RdmaRead(remote(&pair.b, 0));
    post_from_a(&mut pair, 1, op, 0, 5 * PMTU);
    pair.drive_until(roce_core::Instant::from_millis(5));
    let cqe = pair.a.completion().unwrap();
    assert_eq!(
        (cqe.status, cqe.opcode, cqe.byte_len),
        (WcStatus::Success, WcOpcode::RdmaRead, 5 * PMTU)
    );
    assert_eq!(pair.a.mr.read(0, data.len()).unwrap(), data);
    assert_eq!(
        pair.a.nic.stats().implied_naks,
        1,
        "the next response showed the gap"
    );
    // The READ was asked again from the lost response on, not from its start.
    let reads: Vec<u32> = pair
        .a_to_b
        .sent()
        .iter()
        .filter_map(|s| s.psn.map(Psn::value))
        .collect();
    assert_eq!(reads, [0, 1]);
}

#[test]
fn duplicated_atomic_request_is_executed_once() {
    let link = LinkConfig {
        duplicate: 1.0,
        ..LinkConfig::default()
    };
    let (mut pair, _log) = pair_with(PairConfig {
        link,
        ..PairConfig::default()
    });
    pair.b.mr.write(0, &1000u64.to_le_bytes());
    let add = fetch_add(&pair.a, 1, &pair.b, 0, 1, 0);
    post(&mut pair, true, add);
    pair.drive_until(roce_core::Instant::from_millis(5));
    assert_eq!(pair.a.completion().unwrap().status, WcStatus::Success);
    assert_eq!(pair.a.mr.read(0, 8).unwrap(), 1000u64.to_le_bytes());
    assert_eq!(
        pair.b.mr.read(0, 8).unwrap(),
        1001u64.to_le_bytes(),
        "added once"
    );
    assert_eq!(pair.b.nic.stats().rx_duplicate_requests, 1);
}

#[test]
fn rnr_then_success_once_a_receive_is_posted() {
    let (mut pair, _log) = pair();
    post_from_a(&mut pair, 1, SendOp::Send, 0, 100);
    pair.drive_until(roce_core::Instant::from_micros(500));
    assert!(pair.b.nic.stats().tx_rnr_naks >= 1);
    assert_eq!(pair.a.completion(), None);
    post_recv(&mut pair.b, 9, 0, 100);
    pair.drive_until(roce_core::Instant::from_millis(5));
    assert_eq!(pair.a.completion().unwrap().status, WcStatus::Success);
    assert_eq!(pair.b.completion().unwrap().wr_id, 9);
    assert_eq!(
        pair.a.nic.stats().retransmit_timeouts,
        0,
        "RNR waits are not timeouts"
    );
}

#[test]
fn rnr_retry_exhaustion_fails_the_wr() {
    let (mut pair, _log) = pair_with(PairConfig {
        rnr_retry: 2,
        ..PairConfig::default()
    });
    post_from_a(&mut pair, 1, SendOp::Send, 0, 100);
    pair.drive_until(roce_core::Instant::from_millis(5));
    assert_eq!(
        pair.a.completion().unwrap().status,
        WcStatus::RnrRetryExcErr
    );
    assert_eq!(
        pair.a.nic.stats().rx_rnr_naks,
        3,
        "the first try and two retries"
    );
    assert_eq!(pair.a.qp_state(), QpState::Err);
}

#[test]
fn retry_exhaustion_fails_the_oldest_wr_and_flushes_the_rest() {
    let link = LinkConfig {
        loss: 1.0,
        ..LinkConfig::default()
    };
    let (mut pair, _log) = pair_with(PairConfig {
        link,
        retry_cnt: 3,
        ..PairConfig::default()
    });
    let op = SendOp::RdmaWrite(remote(&pair.b, 0));
    post_from_a(&mut pair, 1, op, 0, 10);
    let op = SendOp::RdmaWrite(remote(&pair.b, 0));
    post_from_a(&mut pair, 2, op, 0, 10);
    pair.drive_until(roce_core::Instant::from_millis(100));
    let completions = pair.a.completions();
    let got: Vec<(u64, WcStatus)> = completions.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, [(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]);
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 4);
    assert_eq!(
        pair.a_to_b.sent_psns(),
        [0, 1, 0, 1, 0, 1, 0, 1],
        "the first try and 3 retries"
    );
    assert_eq!(pair.a.qp_state(), QpState::Err);
    assert_eq!(pair.a.nic.poll_timeout(), None);
}

#[test]
fn bad_rkey_is_a_remote_access_error() {
    let (mut pair, _log) = pair();
    let mut target = remote(&pair.b, 0);
    target.rkey ^= 0x100;
    post_from_a(&mut pair, 1, SendOp::RdmaWrite(target), 0, 10);
    pair.drive_until(roce_core::Instant::from_millis(5));
    assert_eq!(pair.a.completion().unwrap().status, WcStatus::RemAccessErr);
    assert_eq!(pair.a.qp_state(), QpState::Err);
    assert_eq!(pair.b.qp_state(), QpState::Err);
}

#[test]
fn out_of_bounds_va_is_a_remote_access_error() {
    let (mut pair, _log) = pair();
    let len = pair.b.mr.len() as u64;
    let op = SendOp::RdmaRead(remote(&pair.b, len - 4));
    post_from_a(&mut pair, 1, op, 0, 8);
    pair.drive_until(roce_core::Instant::from_millis(5));
    assert_eq!(pair.a.completion().unwrap().status, WcStatus::RemAccessErr);
}

#[test]
fn moving_a_qp_to_error_flushes_every_wr() {
    let (mut pair, _log) = pair();
    for i in 0..3 {
        post_recv(&mut pair.a, 100 + i, 0, 10);
        post_from_a(&mut pair, i, SendOp::Send, 0, 10);
    }
    let to_error = QpAttr {
        qp_state: Some(QpState::Err),
        ..QpAttr::default()
    };
    pair.a.nic.modify_qp(pair.a.qpn, &to_error).unwrap();
    let flushed: Vec<(u64, WcStatus)> = pair
        .a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(
        flushed,
        [0, 1, 2, 100, 101, 102].map(|id| (id, WcStatus::WrFlushErr)),
        "send WRs, then receive WRs"
    );
    drive_millis(&mut pair, 5);
    assert!(pair.a_to_b.sent().is_empty(), "nothing was sent");
}
