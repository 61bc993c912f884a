//! Shared receive queues end to end, as `ibv_srq_pingpong` uses them: several RC QPs on one NIC
//! take their receive WRs from one SRQ, which the application refills as completions come in,
//! over links that lose, duplicate and reorder packets.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::{BTreeMap, VecDeque};

use roce_core::{
    AsyncEvent, Duration, Instant, QpInit, QpType, Qpn, RecvWr, SendOp, SendWr, Sge, SrqHandle,
    SrqInit, SrqModify, WcOpcode, WcStatus,
};
use roce_sim::pattern;
use roce_sim::{LinkConfig, Pair, PairConfig};
use roce_tests::sim::drive_millis;

/// Each receive WR lands in its own 4 KiB slot of b's region; each message leaves from its
/// own slot of a's.
const SLOT: u64 = 4096;
const QPS: usize = 4;
const MESSAGES: u64 = 200;
const SRQ_DEPTH: u64 = 16;

/// B posts receive WR `wr_id` to the SRQ, into slot `wr_id % 256`.
fn post_srq(pair: &mut Pair, srq: SrqHandle, wr_id: u64) {
    let sge = Sge {
        addr: pair.b.mr.addr() + (wr_id % 256) * SLOT,
        length: SLOT as u32,
        lkey: pair.b.mr.lkey(),
    };
    pair.b
        .nic
        .post_srq_recv(
            srq,
            RecvWr {
                wr_id,
                sgl: [sge].into(),
            },
        )
        .unwrap();
}

fn length(message: u64) -> usize {
    // One to three packets at path MTU 1024.
    1 + (message as usize * 337) % 3000
}

#[test]
fn four_qps_share_an_srq_over_a_lossy_link_and_every_message_lands_once_in_its_own_wqe() {
    let _log = roce_sim::trace_to_test_output();
    let config = PairConfig {
        link: LinkConfig {
            loss: 0.03,
            duplicate: 0.03,
            reorder_jitter: Duration::from_micros(5),
            ..LinkConfig::default()
        },
        seed: 7,
        ..PairConfig::default()
    };
    let mut pair = Pair::connected(&config);
    let srq = pair
        .b
        .nic
        .create_srq(
            pair.b.pd,
            SrqInit {
                max_wr: SRQ_DEPTH as usize,
                max_sge: 1,
                limit: 4,
            },
        )
        .unwrap();
    let mut a_qps = Vec::new();
    let mut b_qps = Vec::new();
    for _ in 0..QPS {
        let a_qp = pair
            .a
            .nic
            .create_qp(&QpInit::new(QpType::Rc, pair.a.pd, pair.a.cq, 256))
            .unwrap();
        let b_qp = pair
            .b
            .nic
            .create_qp_with_srq(&QpInit::new(QpType::Rc, pair.b.pd, pair.b.cq, 256), srq)
            .unwrap();
        let (a_addr, b_addr) = (pair.a.addr, pair.b.addr);
        let (a_psn, b_psn) = (config.a_psn, config.b_psn);
        roce_sim::connect(
            &config,
            &mut pair.a.nic,
            a_qp,
            a_addr,
            (b_addr, b_qp),
            b_psn,
            a_psn,
            0,
        );
        roce_sim::connect(
            &config,
            &mut pair.b.nic,
            b_qp,
            b_addr,
            (a_addr, a_qp),
            a_psn,
            b_psn,
            0,
        );
        a_qps.push(a_qp);
        b_qps.push(b_qp);
    }
    for wr_id in 0..SRQ_DEPTH {
        post_srq(&mut pair, srq, wr_id);
    }
    // A sends every message at once, round robin over its QPs: more than the SRQ holds, so
    // B's QPs answer RNR NAKs whenever it runs dry, until the application refills it.
    let mut expected: BTreeMap<Qpn, VecDeque<u64>> = BTreeMap::new();
    for message in 0..MESSAGES {
        let i = message as usize % QPS;
        let offset = message * SLOT;
        let data = pattern(message, length(message));
        assert!(pair.a.mr.write(offset as usize, &data));
        let sge = Sge {
            addr: pair.a.mr.addr() + offset,
            length: data.len() as u32,
            lkey: pair.a.mr.lkey(),
        };
        let wr = SendWr::new(message, SendOp::Send, vec![sge]);
        pair.a.nic.post_send(a_qps[i], wr).unwrap();
        expected.entry(b_qps[i]).or_default().push_back(message);
    }
    let mut received = 0;
    let mut next_wr_id = SRQ_DEPTH;
    let mut limit_events = 0;
    let mut owed = 0;
    let mut dry_since: Option<Instant> = None;
    let deadline = pair.now + Duration::from_millis(5_000);
    let done = pair.drive_while(deadline, |pair| {
        while let Some(cqe) = pair.b.completion() {
            assert_eq!(
                (cqe.status, cqe.opcode),
                (WcStatus::Success, WcOpcode::Recv)
            );
            let message = expected
                .get_mut(&cqe.qpn)
                .and_then(VecDeque::pop_front)
                .expect("a completion on one of the SRQ's QPs, for a message sent on it");
            let len = length(message);
            assert_eq!(cqe.byte_len as usize, len, "message {message}");
            let slot = (cqe.wr_id % 256) * SLOT;
            assert_eq!(
                pair.b.mr.read(slot as usize, len).unwrap(),
                pattern(message, len),
                "message {message} in WQE {}",
                cqe.wr_id
            );
            received += 1;
            owed += 1;
        }
        // The application is slow: it refills the SRQ 20 µs after it found it empty, and
        // meanwhile B's QPs answer RNR NAKs.
        if pair.b.nic.srq_wqes_waiting(srq) == Ok(0) {
            dry_since.get_or_insert(pair.now);
        }
        let slow = dry_since.is_some_and(|since| pair.now >= since + Duration::from_micros(20));
        if slow || received == MESSAGES {
            dry_since = None;
            for _ in 0..owed {
                post_srq(pair, srq, next_wr_id);
                next_wr_id += 1;
            }
            owed = 0;
        }
        while let Some(event) = pair.b.nic.poll_event() {
            assert_eq!(event, AsyncEvent::SrqLimitReached(srq));
            limit_events += 1;
            let arm = SrqModify {
                limit: Some(4),
                ..SrqModify::default()
            };
            pair.b.nic.modify_srq(srq, &arm).unwrap();
        }
        received == MESSAGES
    });
    assert!(done, "{received} of {MESSAGES} messages by the deadline");
    assert!(expected.values().all(VecDeque::is_empty));
    // Exactly one WQE per message: duplicates took none, and every one taken was refilled.
    assert_eq!(next_wr_id, SRQ_DEPTH + MESSAGES);
    assert_eq!(pair.b.nic.srq_wqes_waiting(srq), Ok(SRQ_DEPTH as usize));
    // The last ACKs may still be on their way to A.
    drive_millis(&mut pair, 100);
    assert_eq!(pair.b.completion(), None, "nothing received twice");
    let sent = pair.a.completions();
    assert_eq!(sent.len() as u64, MESSAGES);
    assert!(sent.iter().all(|c| c.status == WcStatus::Success));
    let (a, b) = (pair.a.nic.stats(), pair.b.nic.stats());
    assert!(a.retransmitted_packets > 0, "the link lost packets");
    assert!(b.rx_duplicate_requests > 0, "the link duplicated packets");
    assert!(b.tx_rnr_naks > 0, "the SRQ ran dry at least once");
    assert!(limit_events > 0, "the armed limit fired");
}
