//! The CM when the wire loses or repeats MADs: each lost message is sent again on its
//! response timeout, each duplicate is answered as ib_cm answers it, and a peer that never
//! answers ends in `Unreachable`, never in a hang.

use roce_wire::mad::cm::Attr;

use super::CmEvent;
use super::tests::{Net, RPING};
use crate::{CmState, Duration, Instant, QpState};

/// The `n`th MAD (counting from 1) `from` sends of `attr` is lost.
fn lose_nth(
    from: char,
    attr: Attr,
    n: std::ops::RangeInclusive<usize>,
) -> Box<dyn FnMut(&super::tests::Sent) -> bool> {
    let mut seen = 0;
    Box::new(move |s| {
        if s.from == from && s.attr == attr {
            seen += 1;
            return n.contains(&seen);
        }
        false
    })
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

//= rxe:cm.c/cm_dup_req_handler
//# a duplicate REQ gets the MRA while the consumer holds the REQ, REJ STALE_CONN in timewait,
//# and nothing in any other state (the REP's own retries answer it)
#[test]
fn a_lost_rep_is_sent_again_on_its_timeout_and_the_repeated_req_gets_no_second_answer() {
    let mut net = Net::new();
    net.lose = lose_nth('b', Attr::Rep, 1..=2);
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let a_conn = net.connect(b"");
    let b_conn = net.request().conn;
    net.accept(b_conn, b"");
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::RepSent));
    // b sends its REP again every 4096 ms (the REQ's local CM response timeout 20); a its REQ
    // every 4608 ms (2 × packet life time 16 + 20). The second REP is lost too, so a's REQ
    // comes again to a b that holds the REP: ib_cm ignores it.
    while net.a.nic.cm_state(a_conn) != Some(CmState::Established) {
        assert!(net.tick(), "a hang");
    }
    let reqs: Vec<Instant> = times(&net, 'a', Attr::Req);
    let reps: Vec<Instant> = times(&net, 'b', Attr::Rep);
    assert_eq!(reqs, [Instant::ZERO, Instant::ZERO + ms(4608)]);
    assert_eq!(
        reps,
        [
            Instant::ZERO,
            Instant::ZERO + ms(4096),
            Instant::ZERO + ms(8192)
        ]
    );
    assert_eq!(net.b.nic.stats().cm_rx_duplicates, 1, "the second REQ");
    assert_eq!(
        net.b.events(),
        vec![CmEvent::Established {
            conn: b_conn,
            private_data: vec![]
        }]
    );
    assert_eq!(net.a.nic.qp_state(net.a.qpn), Ok(QpState::Rts));
    assert_eq!(net.b.nic.stats().cm_retransmits, 2);
    assert_eq!(net.a.nic.stats().cm_retransmits, 1);
}

//= rxe:cm.c/cm_dup_rep_handler
//# a duplicate REP of an established connection gets the RTU again; otherwise nothing
#[test]
fn a_lost_rtu_makes_the_passive_side_send_its_rep_again_which_the_active_side_answers_with_an_rtu()
{
    let mut net = Net::new();
    net.lose = lose_nth('a', Attr::Rtu, 1..=1);
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let a_conn = net.connect(b"");
    let b_conn = net.request().conn;
    net.accept(b_conn, b"");
    assert!(matches!(net.a.events()[..], [CmEvent::Established { .. }]));
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::RepSent));
    assert!(net.tick());
    assert_eq!(net.now, Instant::ZERO + ms(4096));
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::Established));
    assert_eq!(net.sent('a', Attr::Rtu), 2);
    assert_eq!(net.a.nic.stats().cm_rx_duplicates, 1);
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Established));
    assert!(net.a.events().is_empty(), "a duplicate REP raises nothing");
    assert_eq!(net.b.events().len(), 1);
    assert_eq!(net.b.nic.poll_timeout(), None);
}

//= rxe:cm.c/cm_mra_handler
//# an MRA of our REQ (or REP) makes it wait the service timeout plus the ACK timeout before
//# it is sent again
#[test]
fn a_duplicated_req_raises_one_request_and_its_mra_makes_the_active_side_wait_longer() {
    let mut net = Net::new();
    net.duplicate = true;
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let a_conn = net.connect(b"");
    let b_conn = net.request().conn;
    assert_eq!(net.b.nic.cm_conns(), 1, "one connection for both copies");
    assert_eq!(net.b.nic.stats().cm_rx_duplicates, 1);
    assert_eq!(
        net.sent('b', Attr::Mra),
        1,
        "rdma_cm's delayed MRA goes out now"
    );
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::MraReqRcvd));
    // The REQ now waits the MRA's service timeout (24: 65536 ms) and the ACK timeout (17: 512).
    assert_eq!(
        net.a.nic.poll_timeout(),
        Some(Instant::ZERO + ms(65_536 + 512))
    );
    net.accept(b_conn, b"");
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Established));
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::Established));
    assert_eq!(net.sent('a', Attr::Req), 1);
}

#[test]
fn a_req_that_is_never_answered_is_sent_sixteen_times_then_unreachable() {
    let mut net = Net::new();
    net.lose = Box::new(|s| s.from == 'a');
    let a_conn = net.connect(b"");
    let mut ticks = 0;
    while net.tick() {
        ticks += 1;
        assert!(ticks < 100, "a hang");
    }
    assert_eq!(net.a.events(), vec![CmEvent::Unreachable { conn: a_conn }]);
    assert_eq!(net.sent('a', Attr::Req), 16, "the REQ and 15 retries");
    assert_eq!(net.now, Instant::ZERO + ms(16 * 4608));
    assert_eq!(net.a.nic.cm_conns(), 0);
    assert_eq!(net.a.nic.poll_timeout(), None);
    assert!(net.b.events().is_empty());
}

#[test]
fn a_rep_never_answered_makes_the_passive_side_unreachable() {
    let mut net = Net::new();
    net.lose = Box::new(|s| s.from == 'a' && s.attr == Attr::Rtu);
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    net.connect(b"");
    let b_conn = net.request().conn;
    net.accept(b_conn, b"");
    while net.tick() {}
    assert_eq!(net.sent('b', Attr::Rep), 16);
    assert_eq!(net.b.events(), vec![CmEvent::Unreachable { conn: b_conn }]);
    assert_eq!(net.b.nic.cm_conns(), 0);
}

#[test]
fn a_dreq_never_answered_ends_in_timewait_all_the_same() {
    let mut net = Net::new();
    let (a_conn, _) = net.establish();
    net.lose = Box::new(|s| s.from == 'a' && s.attr == Attr::Dreq);
    net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
    net.pump();
    while net.a.nic.cm_state(a_conn) == Some(CmState::DreqSent) {
        assert!(net.tick(), "a hang");
    }
    assert_eq!(net.sent('a', Attr::Dreq), 16);
    assert_eq!(net.a.events(), vec![CmEvent::Disconnected { conn: a_conn }]);
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Timewait));
    while net.tick() {}
    assert_eq!(net.a.events(), vec![CmEvent::TimewaitExit { conn: a_conn }]);
}

#[test]
fn a_dreq_sent_again_after_the_peers_timewait_still_gets_a_drep() {
    let mut net = Net::new();
    let (a_conn, b_conn) = net.establish();
    net.lose = lose_nth('b', Attr::Drep, 1..=1);
    net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
    net.pump();
    net.b.nic.cm_disconnect(net.now, b_conn).unwrap();
    net.pump();
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::Timewait));
    // b's timewait (512 ms) ends before a's DREQ is sent again (4608 ms): a's retry finds
    // no connection, and b answers it all the same.
    while net.a.nic.cm_state(a_conn) == Some(CmState::DreqSent) {
        assert!(net.tick(), "a hang");
    }
    assert_eq!(net.sent('b', Attr::Drep), 2);
    assert_eq!(net.b.nic.stats().cm_rx_unmatched, 1);
    assert_eq!(net.a.events(), vec![CmEvent::Disconnected { conn: a_conn }]);
}

//= rxe:cm.c/cm_dup_req_handler
//# a duplicate REQ gets the MRA while the consumer holds the REQ, REJ STALE_CONN in timewait,
//# and nothing in any other state (the REP's own retries answer it)
#[test]
fn a_req_that_comes_again_in_timewait_is_rejected_stale() {
    let mut net = Net::new();
    let (a_conn, b_conn) = net.establish();
    let req = net.log[0];
    assert_eq!(req.attr, Attr::Req);
    net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
    net.pump();
    net.b.nic.cm_disconnect(net.now, b_conn).unwrap();
    net.pump();
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::Timewait));
    assert_eq!(net.b.events(), vec![CmEvent::Disconnected { conn: b_conn }]);
    // The first REQ, held up in the network, arrives now.
    net.mad_from_a(req.mad);
    net.pump();
    assert_eq!(net.sent('b', Attr::Rej), 1);
    let rej = net.log.last().unwrap();
    let parsed = roce_wire::CmMad::parse(&rej.mad).unwrap();
    match parsed.message {
        roce_wire::CmMessage::Rej(m) => {
            assert_eq!(m.reason, roce_wire::mad::rej::RejectReason::StaleConn);
            assert_eq!((m.local_comm_id, m.remote_comm_id), (b_conn.0, a_conn.0));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(net.b.nic.stats().cm_rx_duplicates, 1);
    assert!(net.b.events().is_empty(), "nothing for the application");
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::Timewait));
    // a, in timewait itself, takes the REJ for nothing.
    assert_eq!(net.a.nic.stats().cm_rx_unexpected, 1);
    assert_eq!(net.a.events(), vec![CmEvent::Disconnected { conn: a_conn }]);
}

fn times(net: &Net, from: char, attr: Attr) -> Vec<Instant> {
    net.log
        .iter()
        .filter(|s| s.from == from && s.attr == attr)
        .map(|s| s.at)
        .collect()
}
