//! The IB CM end to end in the simulator, as rping uses rdma_cm: b listens on rping's service,
//! a connects, b accepts what comes, data flows on the QPs the CM connected, a disconnects and
//! b answers — over links that lose and duplicate packets, the CM MADs among them.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_core::cm::{PortSpace, ServiceId};
use roce_core::{
    AcceptParams, CmEvent, CmState, ConnId, ConnectParams, Duration, Instant, Psn, QpInit, QpState,
    QpType, Qpn, RecvWr, SendOp, SendWr, Sge, WcStatus,
};
use roce_sim::{A_ADDR, B_ADDR, LinkConfig, Pair, PairConfig};

const RPING: u64 = ServiceId::new(PortSpace::TCP, 7174).0;
const MESSAGES: u64 = 20;

/// A pair whose own QPs stay idle, and a fresh RC QP in RESET on each side for the CM.
fn pair(seed: u64, loss: f64, duplicate: f64) -> (Pair, Qpn, Qpn) {
    let mut pair = Pair::connected(&PairConfig {
        seed,
        link: LinkConfig {
            loss,
            duplicate,
            ..LinkConfig::default()
        },
        ..PairConfig::default()
    });
    let a = (pair.a.pd, pair.a.cq);
    let b = (pair.b.pd, pair.b.cq);
    let a_qpn = pair
        .a
        .nic
        .create_qp(&QpInit::new(QpType::Rc, a.0, a.1, 64))
        .unwrap();
    let b_qpn = pair
        .b
        .nic
        .create_qp(&QpInit::new(QpType::Rc, b.0, b.1, 64))
        .unwrap();
    (pair, a_qpn, b_qpn)
}

/// Steps until `done`, accepting every connect request b gets and collecting the events.
fn run(
    pair: &mut Pair,
    b_qpn: Qpn,
    seconds: u64,
    events: &mut (Vec<CmEvent>, Vec<CmEvent>),
    mut done: impl FnMut(&(Vec<CmEvent>, Vec<CmEvent>)) -> bool,
) -> bool {
    let deadline = pair.now + Duration::from_secs(seconds);
    pair.drive_while(deadline, |p| {
        while let Some(event) = p.a.nic.poll_cm_event() {
            events.0.push(event);
        }
        while let Some(event) = p.b.nic.poll_cm_event() {
            if let CmEvent::ConnectRequest(req) = &event {
                let params = AcceptParams::new(b_qpn, Psn::new(0x50_0000));
                p.b.nic.cm_accept(p.now, req.conn, &params).unwrap();
            }
            events.1.push(event);
        }
        done(events)
    })
}

fn established(events: &[CmEvent]) -> Option<ConnId> {
    events.iter().find_map(|e| match e {
        CmEvent::Established { conn, .. } => Some(*conn),
        _ => None,
    })
}

fn count(events: &[CmEvent], f: impl Fn(&CmEvent) -> bool) -> usize {
    events.iter().filter(|e| f(e)).count()
}

#[test]
fn rping_connects_sends_and_disconnects_over_lossy_duplicating_links() {
    let mut retransmits = 0;
    for seed in 0..8 {
        let (mut pair, a_qpn, b_qpn) = pair(seed, 0.15, 0.1);
        pair.b.nic.cm_listen(pair.now, RPING).unwrap();
        let mut params = ConnectParams::new(a_qpn, A_ADDR, B_ADDR, RPING, Psn::new(0x10_0000));
        params.src_port = 51_000;
        params.private_data = b"rdma-ping".to_vec();
        let a_conn = pair.a.nic.cm_connect(pair.now, &params).unwrap();
        let mut events = (Vec::new(), Vec::new());
        let up = run(&mut pair, b_qpn, 120, &mut events, |(a, b)| {
            established(a).is_some() && established(b).is_some()
        });
        assert!(up, "seed {seed}: not established: {events:?}");
        // One request for b, whatever the duplicates, with a's data after the cma_hdr.
        let requests: Vec<_> = events
            .1
            .iter()
            .filter_map(|e| match e {
                CmEvent::ConnectRequest(req) => Some(req),
                _ => None,
            })
            .collect();
        assert_eq!(requests.len(), 1, "seed {seed}");
        assert_eq!(&requests[0].private_data[..9], b"rdma-ping");
        assert_eq!(requests[0].peer_port, Some(51_000));
        let b_conn = requests[0].conn;
        assert_eq!(established(&events.0), Some(a_conn));
        assert_eq!(pair.a.nic.qp_state(a_qpn), Ok(QpState::Rts));
        assert_eq!(pair.b.nic.qp_state(b_qpn), Ok(QpState::Rts));

        // Data on the connected QPs: SENDs from a land in order in b's region.
        let (b_addr, b_lkey) = (pair.b.mr.addr(), pair.b.mr.lkey());
        for i in 0..MESSAGES {
            let sge = Sge {
                addr: b_addr + i * 64,
                length: 64,
                lkey: b_lkey,
            };
            pair.b
                .nic
                .post_recv(
                    b_qpn,
                    RecvWr {
                        wr_id: i,
                        sgl: [sge].into(),
                    },
                )
                .unwrap();
            pair.a.mr.write(i as usize * 64, &[i as u8 + 1; 64]);
            let sge = Sge {
                addr: pair.a.mr.addr() + i * 64,
                length: 64,
                lkey: pair.a.mr.lkey(),
            };
            pair.a
                .nic
                .post_send(a_qpn, SendWr::new(i, SendOp::Send, vec![sge]))
                .unwrap();
        }
        let mut received = Vec::new();
        let deadline = pair.now + Duration::from_secs(30);
        let landed = pair.drive_while(deadline, |p| {
            while let Some(cqe) = p.b.completion() {
                received.push(cqe);
            }
            received.iter().filter(|c| c.qpn == b_qpn).count() == MESSAGES as usize
        });
        assert!(
            landed,
            "seed {seed}: {} of {MESSAGES} landed",
            received.len()
        );
        for (i, cqe) in received.iter().enumerate() {
            assert_eq!((cqe.wr_id, cqe.status), (i as u64, WcStatus::Success));
            assert_eq!(pair.b.mr.read(i * 64, 64).unwrap(), vec![i as u8 + 1; 64]);
        }

        // a disconnects; b answers once it hears; both wait out timewait.
        pair.a.nic.cm_disconnect(pair.now, a_conn).unwrap();
        let down = run(&mut pair, b_qpn, 120, &mut events, |(_, b)| {
            count(b, |e| matches!(e, CmEvent::Disconnected { .. })) == 1
        });
        assert!(down, "seed {seed}: b never heard the DREQ");
        assert_eq!(pair.b.nic.cm_state(b_conn), Some(CmState::DreqRcvd));
        pair.b.nic.cm_disconnect(pair.now, b_conn).unwrap();
        let gone = run(&mut pair, b_qpn, 120, &mut events, |(a, b)| {
            count(a, |e| matches!(e, CmEvent::TimewaitExit { .. })) == 1
                && count(b, |e| matches!(e, CmEvent::TimewaitExit { .. })) == 1
        });
        assert!(gone, "seed {seed}: {events:?}");
        assert_eq!(
            count(&events.0, |e| matches!(e, CmEvent::Disconnected { .. })),
            1
        );
        assert_eq!((pair.a.nic.cm_conns(), pair.b.nic.cm_conns()), (0, 0));
        assert_eq!(pair.a.nic.qp_state(a_qpn), Ok(QpState::Err));
        retransmits += pair.a.nic.stats().cm_retransmits + pair.b.nic.stats().cm_retransmits;
    }
    assert!(
        retransmits > 0,
        "the links lost no CM MAD: the test shows nothing"
    );
}

#[test]
fn a_connect_to_a_peer_that_never_answers_ends_unreachable_in_virtual_minutes() {
    let (mut pair, a_qpn, b_qpn) = pair(3, 1.0, 0.0);
    let params = ConnectParams::new(a_qpn, A_ADDR, B_ADDR, RPING, Psn::new(1));
    let a_conn = pair.a.nic.cm_connect(pair.now, &params).unwrap();
    let mut events = (Vec::new(), Vec::new());
    let ended = run(&mut pair, b_qpn, 600, &mut events, |(a, _)| !a.is_empty());
    assert!(ended);
    assert_eq!(events.0, vec![CmEvent::Unreachable { conn: a_conn }]);
    // 16 REQs, 4608 ms apart: the last one's timeout ends it.
    assert_eq!(pair.now, Instant::ZERO + Duration::from_millis(16 * 4608));
    assert_eq!(pair.a.nic.stats().cm_retransmits, 15);
    assert!(events.1.is_empty());
}
