//! Scripted tests of selective repeat (`qp/selective.rs`, `qp/responder/reorder.rs`): the
//! responder's bookkeeping of what arrives past ePSN and its NACKs, the requester's
//! scoreboard and what it sends again.

use super::*;
use crate::qp::responder::reorder::{Hold, Reorder};

fn selective_setup(bdp_packets: u32) -> Setup {
    setup_with(NicConfig {
        addrs: vec![US],
        loss_recovery: LossRecovery::selective_repeat(bdp_packets),
        ..NicConfig::default()
    })
}

/// IRN's NACK: a sequence NAK naming ePSN, the PSN that arrived in the MSN field.
fn nack(epsn: u32, sacked: u32) -> (Psn, Syndrome, u32) {
    (psn(epsn), Syndrome::Nak(NakCode::PsnSeqErr), sacked)
}

#[test]
fn kept_requests_are_taken_in_psn_order_and_those_a_read_covered_are_dropped() {
    let mut r = Reorder::default();
    let epsn = psn(0x00ff_fffe); // across the wrap
    assert_eq!(r.hold(epsn, psn(3), b"c"), Hold::Kept);
    assert_eq!(r.hold(epsn, psn(0x00ff_ffff), b"a"), Hold::Kept);
    assert_eq!(r.hold(epsn, psn(1), b"b"), Hold::Kept);
    assert_eq!(r.hold(epsn, psn(1), b"b"), Hold::Already);
    assert_eq!(r.len(), 3);
    assert_eq!(r.take(epsn), None, "nothing at ePSN");
    assert_eq!(r.take(psn(0x00ff_ffff)).as_deref(), Some(&b"a"[..]));
    // A READ at 0 took PSNs 0 to 2: the request kept at 1 lies inside it and is dropped.
    assert_eq!(r.take(psn(3)).as_deref(), Some(&b"c"[..]));
    assert_eq!(r.len(), 0);
}

#[test]
fn a_write_past_epsn_is_kept_nacked_and_lands_when_the_hole_fills() {
    let mut s = selective_setup(16);
    let data: Vec<u8> = (0..3 * 1024).map(|i| (i % 251) as u8).collect();
    let mut middle = request(Opcode::RcRdmaWriteMiddle, RQ_PSN + 1, false);
    middle.bth.ack_req = false;
    rx(&mut s, at(0), middle, &data[1024..2048]);
    assert_eq!(ack_of(&tx(&mut s, at(0)).0), nack(RQ_PSN, RQ_PSN + 1));
    let last = request(Opcode::RcRdmaWriteLast, RQ_PSN + 2, false);
    rx(&mut s, at(1), last, &data[2048..]);
    assert_eq!(ack_of(&tx(&mut s, at(1)).0), nack(RQ_PSN, RQ_PSN + 2));
    // Kept, not placed: nothing of the WRITE is in memory yet.
    assert_eq!(s.mr.read(1024, 2048).unwrap(), vec![0; 2048]);
    // The same PSN again: kept already, counted as a duplicate, NACKed again.
    rx(&mut s, at(2), last, &data[2048..]);
    assert_eq!(ack_of(&tx(&mut s, at(2)).0), nack(RQ_PSN, RQ_PSN + 2));
    let st = s.nic.stats();
    assert_eq!((st.rx_held_out_of_order, st.tx_sacks), (2, 3));
    assert_eq!((st.rx_duplicate_requests, st.tx_nak_seq_err), (1, 0));
    // The FIRST fills the hole: all three execute, in order, and the last is acknowledged
    // though none of them asked for an ACK.
    let mut first = rdma_request(&s, Opcode::RcRdmaWriteFirst, RQ_PSN, 0, 3 * 1024);
    first.bth.ack_req = false;
    rx(&mut s, at(3), first, &data[..1024]);
    assert_eq!(ack_of(&tx(&mut s, at(3)).0), (psn(RQ_PSN + 2), ACK, 1));
    expect_nothing(&mut s, at(3));
    assert_eq!(s.mr.read(0, data.len()).unwrap(), data);
}

#[test]
fn sends_kept_past_a_hole_take_their_receive_wrs_in_order() {
    let mut s = selective_setup(16);
    recv(&mut s, 1, 0, 100);
    recv(&mut s, 2, 100, 100);
    rx_request(&mut s, at(0), Opcode::RcSendOnly, RQ_PSN + 1, b"second");
    assert_eq!(ack_of(&tx(&mut s, at(0)).0), nack(RQ_PSN, RQ_PSN + 1));
    assert!(
        s.nic.poll_completion(s.cq).is_none(),
        "no receive WR taken yet"
    );
    rx_request(&mut s, at(1), Opcode::RcSendOnly, RQ_PSN, b"first");
    assert_eq!(ack_of(&tx(&mut s, at(1)).0), (psn(RQ_PSN + 1), ACK, 2));
    let (a, b) = (completion(&mut s), completion(&mut s));
    assert_eq!((a.wr_id, a.byte_len, b.wr_id, b.byte_len), (1, 5, 2, 6));
    assert_eq!(s.mr.read(0, 5).unwrap(), b"first");
    assert_eq!(s.mr.read(100, 6).unwrap(), b"second");
}

#[test]
fn a_request_beyond_twice_the_bdp_is_dropped_and_counted() {
    let mut s = selective_setup(4);
    recv(&mut s, 1, 0, 100);
    rx_request(&mut s, at(0), Opcode::RcSendOnly, RQ_PSN + 9, b"far");
    expect_nothing(&mut s, at(0));
    assert_eq!(s.nic.stats().rx_beyond_reorder_window, 1);
    rx_request(&mut s, at(1), Opcode::RcSendOnly, RQ_PSN + 8, b"near");
    assert_eq!(ack_of(&tx(&mut s, at(1)).0), nack(RQ_PSN, RQ_PSN + 8));
}

#[test]
fn a_nack_sends_again_only_what_is_missing_before_the_psn_it_names() {
    let mut s = selective_setup(16);
    post(
        &mut s,
        1,
        SendOp::RdmaWrite(Remote { addr: 0, rkey: 1 }),
        0,
        5 * 1024,
    );
    for i in 0..5 {
        assert_eq!(tx(&mut s, at(0)).0.bth.psn, psn(SQ_PSN + i));
    }
    // 501 and 503 were lost: 502 arrived, then 504.
    let resp = |s: &mut Setup, t, epsn, sacked| {
        let r = response(
            Opcode::RcAcknowledge,
            epsn,
            Syndrome::Nak(NakCode::PsnSeqErr),
            sacked,
        );
        rx(s, at(t), r, b"");
    };
    resp(&mut s, 10, SQ_PSN + 1, SQ_PSN + 2);
    let (again, _) = tx(&mut s, at(10));
    assert_eq!((again.bth.psn, again.bth.ack_req), (psn(SQ_PSN + 1), true));
    assert_eq!(again.bth.opcode, Opcode::RcRdmaWriteMiddle);
    expect_nothing(&mut s, at(10));
    resp(&mut s, 11, SQ_PSN + 1, SQ_PSN + 4);
    assert_eq!(tx(&mut s, at(11)).0.bth.psn, psn(SQ_PSN + 3), "502 is held");
    expect_nothing(&mut s, at(11));
    // The same NACK again sends nothing more; one naming a PSN never sent is dropped.
    resp(&mut s, 12, SQ_PSN + 1, SQ_PSN + 4);
    resp(&mut s, 12, SQ_PSN + 1, SQ_PSN + 7);
    expect_nothing(&mut s, at(12));
    let st = s.nic.stats();
    assert_eq!((st.rx_sacks, st.rx_bad_sacks), (3, 1));
    assert_eq!((st.retransmitted_packets, st.rx_nak_seq_err), (2, 0));
    // The cumulative ACK retires the WRITE.
    rx(
        &mut s,
        at(20),
        response(Opcode::RcAcknowledge, SQ_PSN + 4, ACK, 1),
        b"",
    );
    assert_eq!(completion(&mut s).status, WcStatus::Success);
    assert_eq!(s.nic.poll_timeout(), None);
}

#[test]
fn bdp_fc_caps_the_psns_in_flight_in_place_of_the_window() {
    let mut s = selective_setup(3);
    post(
        &mut s,
        1,
        SendOp::RdmaWrite(Remote { addr: 0, rkey: 1 }),
        0,
        6 * 1024,
    );
    for i in 0..3 {
        assert_eq!(tx(&mut s, at(0)).0.bth.psn, psn(SQ_PSN + i));
    }
    expect_nothing(&mut s, at(0));
    rx(
        &mut s,
        at(5),
        response(Opcode::RcAcknowledge, SQ_PSN, ACK, 0),
        b"",
    );
    assert_eq!(tx(&mut s, at(5)).0.bth.psn, psn(SQ_PSN + 3));
    expect_nothing(&mut s, at(5));
}

#[test]
fn a_psn_sacked_after_it_was_found_lost_is_not_sent_again() {
    let mut s = selective_setup(16);
    post(
        &mut s,
        1,
        SendOp::RdmaWrite(Remote { addr: 0, rkey: 1 }),
        0,
        4 * 1024,
    );
    for _ in 0..4 {
        tx(&mut s, at(0));
    }
    let nak = Syndrome::Nak(NakCode::PsnSeqErr);
    // 503 arrived first: 501 and 502 look lost; then 502 arrives, late.
    rx(
        &mut s,
        at(10),
        response(Opcode::RcAcknowledge, SQ_PSN + 1, nak, SQ_PSN + 3),
        b"",
    );
    rx(
        &mut s,
        at(10),
        response(Opcode::RcAcknowledge, SQ_PSN + 1, nak, SQ_PSN + 2),
        b"",
    );
    assert_eq!(tx(&mut s, at(10)).0.bth.psn, psn(SQ_PSN + 1));
    expect_nothing(&mut s, at(10));
}

#[test]
fn the_psns_of_a_reads_responses_are_never_taken_for_lost_requests() {
    let mut s = selective_setup(16);
    let remote = Remote { addr: 0, rkey: 1 };
    post(&mut s, 1, SendOp::RdmaWrite(remote), 0, 1024);
    post(&mut s, 2, SendOp::RdmaRead(remote), 4096, 3 * 1024);
    post(&mut s, 3, SendOp::RdmaWrite(remote), 0, 1024);
    let sent: Vec<Psn> = (0..3).map(|_| tx(&mut s, at(0)).0.bth.psn).collect();
    assert_eq!(
        sent,
        [psn(500), psn(501), psn(504)],
        "the READ takes 501 to 503"
    );
    // The WRITE at 500 is lost; the READ request (501) and the WRITE at 504 are kept.
    let nak = Syndrome::Nak(NakCode::PsnSeqErr);
    rx(
        &mut s,
        at(10),
        response(Opcode::RcAcknowledge, 500, nak, 501),
        b"",
    );
    rx(
        &mut s,
        at(10),
        response(Opcode::RcAcknowledge, 500, nak, 504),
        b"",
    );
    assert_eq!(tx(&mut s, at(10)).0.bth.psn, psn(500));
    expect_nothing(&mut s, at(10));
}

#[test]
fn a_window_smaller_than_rxes_ack_cadence_asks_for_acks_four_times_per_window() {
    let mut s = selective_setup(8);
    post(
        &mut s,
        1,
        SendOp::RdmaWrite(Remote { addr: 0, rkey: 1 }),
        0,
        5 * 1024,
    );
    let asks: Vec<bool> = (0..5).map(|_| tx(&mut s, at(0)).0.bth.ack_req).collect();
    assert_eq!(asks, [false, true, false, true, true]);
}

#[test]
fn rto_low_arms_with_few_packets_in_flight_and_gives_way_past_three() {
    let mut s = selective_setup(64);
    let remote = Remote { addr: 0, rkey: 1 };
    post(&mut s, 1, SendOp::RdmaWrite(remote), 0, 1024);
    tx(&mut s, at(0));
    assert_eq!(s.nic.poll_timeout(), Some(at(100)), "IRN's RTO_low");
    // A READ of 8 responses: from 1 PSN in flight to 9 at once.
    post(&mut s, 2, SendOp::RdmaRead(remote), 4096, 8 * 1024);
    tx(&mut s, at(10));
    let timeout = s.nic.poll_timeout().unwrap();
    assert!(timeout > at(1000), "the ACK timeout, from now: {timeout:?}");
}

#[test]
fn rto_low_doubles_with_each_timeout_until_an_ack_moves_una() {
    // A WRITE behind a deep queue: its ACK takes longer than RTO_low several times over.
    let mut s = selective_setup(64);
    let remote = Remote { addr: 0, rkey: 1 };
    post(&mut s, 1, SendOp::RdmaWrite(remote), 0, 1024);
    assert_eq!(tx(&mut s, at(0)).0.bth.psn, psn(SQ_PSN));
    assert_eq!(s.nic.poll_timeout(), Some(at(100)), "IRN's RTO_low");
    s.nic.handle_timeout(at(100));
    assert_eq!(tx(&mut s, at(100)).0.bth.psn, psn(SQ_PSN), "sent again");
    assert_eq!(s.nic.poll_timeout(), Some(at(300)), "then 200 µs");
    s.nic.handle_timeout(at(300));
    assert_eq!(tx(&mut s, at(300)).0.bth.psn, psn(SQ_PSN), "sent again");
    assert_eq!(s.nic.poll_timeout(), Some(at(700)), "then 400 µs");
    // Two timeouts of retry_cnt 2 spent, and the WR has not failed: a fixed RTO_low would
    // have failed it at 300 µs.
    assert_eq!(s.nic.qp_state(s.qpn), Ok(QpState::Rts));
    assert_eq!(s.nic.stats().retransmit_timeouts, 2);
    // The ACK comes, late: the WRITE completes, and the next one waits RTO_low again.
    rx(
        &mut s,
        at(650),
        response(Opcode::RcAcknowledge, SQ_PSN, ACK, 1),
        &[],
    );
    assert_eq!(completion(&mut s).status, WcStatus::Success);
    post(&mut s, 2, SendOp::RdmaWrite(remote), 0, 1024);
    assert_eq!(tx(&mut s, at(1000)).0.bth.psn, psn(SQ_PSN + 1));
    assert_eq!(s.nic.poll_timeout(), Some(at(1100)), "RTO_low again");
}

#[test]
fn a_doubled_rto_low_stops_at_the_ack_timeout() {
    // RTO_low 40 ms against the ACK timeout's 67.108864 ms (timeout 14).
    let mut s = setup_with(NicConfig {
        addrs: vec![US],
        loss_recovery: LossRecovery::SelectiveRepeat {
            bdp_packets: 64,
            rto_low: Duration::from_millis(40),
        },
        ..NicConfig::default()
    });
    let remote = Remote { addr: 0, rkey: 1 };
    post(&mut s, 1, SendOp::RdmaWrite(remote), 0, 1024);
    tx(&mut s, at(0));
    // retry_cnt 2 in this setup: the third timeout fails the WR.
    let mut now = at(0);
    let mut waits = Vec::new();
    for _ in 0..3 {
        let next = s.nic.poll_timeout().expect("armed");
        waits.push(next.saturating_duration_since(now).as_nanos());
        now = next;
        s.nic.handle_timeout(now);
        if waits.len() < 3 {
            assert_eq!(tx(&mut s, now).0.bth.psn, psn(SQ_PSN), "sent again");
            expect_nothing(&mut s, now);
        }
    }
    assert_eq!(waits, [40_000_000, 67_108_864, 67_108_864]);
    assert_eq!(completion(&mut s).status, WcStatus::RetryExcErr);
}
