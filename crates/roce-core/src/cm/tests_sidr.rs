//! Service ID resolution between two NICs: a UD client learns the service's QP and Q_Key; a
//! service nobody listens for answers "unsupported"; a refused request says so; a lost
//! SIDR_REQ is sent again, and one never answered is unreachable; a duplicate is dropped.

use roce_wire::Qpn;
use roce_wire::mad::cm::Attr;
use roce_wire::mad::cma::{PortSpace, ServiceId};
use roce_wire::mad::sidr_rep::SidrStatus;

use super::tests::{A, B, Net};
use super::{CmEvent, RDMA_UDP_QKEY, SidrParams, SidrRequest};
use crate::{QpInit, QpType};

/// udaddy's service: the UDP port space, port 7174.
const UDADDY: u64 = ServiceId::new(PortSpace::UDP, 7174).0;

fn params(data: &[u8]) -> SidrParams {
    SidrParams {
        local: A,
        peer: B,
        service_id: UDADDY,
        src_port: 40_001,
        private_data: data.to_vec(),
    }
}

/// b's one SIDR request.
fn request(net: &mut Net) -> SidrRequest {
    match net.b.events().as_slice() {
        [CmEvent::SidrRequest(req)] => (**req).clone(),
        other => panic!("b expected one SIDR request, got {other:?}"),
    }
}

#[test]
fn a_ud_client_learns_the_services_qp_and_qkey() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, UDADDY).unwrap();
    let ud = net
        .b
        .nic
        .create_qp(&QpInit::new(QpType::Ud, net.b.pd, net.b.cq, 8))
        .unwrap();
    let conn = net
        .a
        .nic
        .cm_sidr_resolve(net.now, &params(b"hello"))
        .unwrap();
    net.pump();
    let req = request(&mut net);
    assert_eq!((req.peer, req.local, req.peer_port), (A, B, Some(40_001)));
    assert_eq!(&req.private_data[..5], b"hello");
    assert_eq!(req.partition_key, 0xffff);
    // Nothing reached a before the service answered.
    assert!(net.a.events().is_empty());
    net.b
        .nic
        .cm_sidr_accept(net.now, req.conn, ud, RDMA_UDP_QKEY, b"welcome")
        .unwrap();
    net.pump();
    match net.a.events().as_slice() {
        [
            CmEvent::SidrResolved {
                conn: c,
                qpn,
                qkey,
                private_data,
            },
        ] => {
            assert_eq!((*c, *qpn, *qkey), (conn, ud, RDMA_UDP_QKEY));
            assert_eq!(&private_data[..7], b"welcome");
        }
        other => panic!("a: {other:?}"),
    }
    assert_eq!(
        (net.sent('a', Attr::SidrReq), net.sent('b', Attr::SidrRep)),
        (1, 1)
    );
    // Nothing is left to answer or to send again.
    assert!(!net.b.nic.cm_is_sidr_request(req.conn));
    assert_eq!(net.a.nic.poll_timeout(), None);
    assert_eq!(net.a.nic.cm_conns() + net.b.nic.cm_conns(), 0);
}

#[test]
fn a_service_nobody_listens_for_is_unsupported_and_a_refusal_says_rejected() {
    let mut net = Net::new();
    let conn = net.a.nic.cm_sidr_resolve(net.now, &params(&[])).unwrap();
    net.pump();
    assert!(net.b.events().is_empty(), "no request reaches b's consumer");
    match net.a.events().as_slice() {
        [
            CmEvent::SidrRejected {
                conn: c, status, ..
            },
        ] => {
            assert_eq!((*c, *status), (conn, SidrStatus::Unsupported));
        }
        other => panic!("a: {other:?}"),
    }
    assert_eq!(net.b.nic.stats().cm_rx_no_listener, 1);
    // The request is over: nothing is sent again.
    assert_eq!(net.a.nic.poll_timeout(), None);
    assert!(!net.tick());
    assert_eq!(net.sent('a', Attr::SidrReq), 1);

    net.b.nic.cm_listen(net.now, UDADDY).unwrap();
    let conn = net.a.nic.cm_sidr_resolve(net.now, &params(&[])).unwrap();
    net.pump();
    let req = request(&mut net);
    net.b.nic.cm_sidr_reject(net.now, req.conn, b"no").unwrap();
    net.pump();
    match net.a.events().as_slice() {
        [
            CmEvent::SidrRejected {
                conn: c,
                status,
                private_data,
            },
        ] => {
            assert_eq!((*c, *status), (conn, SidrStatus::Reject));
            assert_eq!(&private_data[..2], b"no");
        }
        other => panic!("a: {other:?}"),
    }
    assert_eq!(net.a.nic.poll_timeout(), None, "a's request is over");
    // The request is answered: a second answer is refused and sends nothing.
    let before = net.log.len();
    assert!(
        net.b
            .nic
            .cm_sidr_accept(net.now, req.conn, Qpn::new(5), 1, &[])
            .is_err()
    );
    net.pump();
    assert_eq!(net.log.len(), before);
}

#[test]
fn a_lost_sidr_req_is_sent_again_and_one_never_answered_is_unreachable() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, UDADDY).unwrap();
    // The first SIDR_REQ is lost: the second one is answered.
    let mut lost = 0;
    net.lose = Box::new(move |s| {
        if s.attr == Attr::SidrReq && lost == 0 {
            lost += 1;
            true
        } else {
            false
        }
    });
    net.a.nic.cm_sidr_resolve(net.now, &params(&[])).unwrap();
    net.pump();
    assert!(net.b.events().is_empty());
    assert!(net.tick(), "a resend is due");
    let req = request(&mut net);
    assert_eq!(net.sent('a', Attr::SidrReq), 2);
    assert_eq!(
        net.now,
        crate::Instant::from_millis(4096),
        "sent again after 4096 ms"
    );
    net.b.nic.cm_sidr_reject(net.now, req.conn, &[]).unwrap();
    net.pump();
    assert_eq!(net.a.events().len(), 1);

    // No answer ever: sent 16 times, then unreachable.
    net.lose = Box::new(|s| s.attr == Attr::SidrReq);
    let conn = net.a.nic.cm_sidr_resolve(net.now, &params(&[])).unwrap();
    net.pump();
    while net.tick() {}
    assert_eq!(net.sent('a', Attr::SidrReq), 2 + 16);
    assert_eq!(net.a.events(), vec![CmEvent::Unreachable { conn }]);
}

#[test]
fn a_duplicated_sidr_req_reaches_the_consumer_once() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, UDADDY).unwrap();
    net.duplicate = true;
    net.a.nic.cm_sidr_resolve(net.now, &params(&[])).unwrap();
    net.pump();
    request(&mut net);
    assert_eq!(net.b.nic.stats().cm_rx_duplicates, 1);
}

#[test]
fn a_sidr_req_with_a_bad_cma_header_is_rejected_and_reaches_no_consumer() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, UDADDY).unwrap();
    let mut example = roce_wire::mad::examples::all()
        .into_iter()
        .find(|m| m.message.attr() == Attr::SidrReq)
        .unwrap();
    if let roce_wire::CmMessage::SidrReq(req) = &mut example.message {
        req.service_id = UDADDY;
        req.private_data[0] = 0x30; // cma_hdr version 3: not rdma_cm's
    }
    let mut mad = [0u8; roce_wire::mad::MAD_LEN];
    example.emit(&mut mad).unwrap();
    net.mad_from_a(mad);
    net.pump();
    assert!(net.b.events().is_empty(), "no request reaches b's consumer");
    assert_eq!(net.b.nic.stats().cm_rx_bad_private_data, 1);
    match net.a.events().as_slice() {
        [] => {}
        other => panic!("a made no request of its own: {other:?}"),
    }
    let answers: Vec<_> = net.log.iter().filter(|s| s.from == 'b').collect();
    assert_eq!(answers.len(), 1, "one SIDR_REP");
    let rep = roce_wire::CmMad::parse(&answers[0].mad).unwrap();
    match rep.message {
        roce_wire::CmMessage::SidrRep(r) => assert_eq!(r.status, SidrStatus::Reject),
        other => panic!("{other:?}"),
    }
}
