//! A consumer that moves its QP itself (librdmacm's id without a QP, as UCX's rdmacm
//! connection manager uses it): the REQ and REP only announce QP numbers, the REP raises
//! CONNECT_RESPONSE and the RTU waits for `cm_establish`; `cm_qp_attr` gives the attributes the
//! CM would have given; no QP is touched.

use roce_wire::Psn;
use roce_wire::mad::cm::Attr;

use super::tests::{A, B, Net, RPING};
use super::{AcceptParams, CmEvent, CmState, ConnectParams};
use crate::{QpState, QpType};

/// a connects to b's rping service announcing its RC QP, b accepts announcing its own: both
/// with `consumer_qp`, so the CM must move neither (each stays in RESET).
fn connect_and_accept(net: &mut Net) -> (super::ConnId, super::ConnId) {
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let mut params = ConnectParams::new(net.a.qpn, A, B, RPING, Psn::new(0x11));
    params.consumer_qp = true;
    let a_conn = net.a.nic.cm_connect(net.now, &params).unwrap();
    net.pump();
    let req = net.request();
    assert_eq!(req.peer_qpn, net.a.qpn);
    let mut accept = AcceptParams::new(net.b.qpn, Psn::new(0x22));
    accept.consumer_qp = true;
    net.b.nic.cm_accept(net.now, req.conn, &accept).unwrap();
    net.pump();
    (a_conn, req.conn)
}

#[test]
fn the_rep_is_a_connect_response_and_the_rtu_waits_for_establish() {
    let mut net = Net::new();
    let (a_conn, b_conn) = connect_and_accept(&mut net);
    assert!(matches!(
        net.a.events()[..],
        [CmEvent::ConnectResponse { conn, .. }] if conn == a_conn
    ));
    assert_eq!(net.sent('a', Attr::Rtu), 0, "no RTU before establish");
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::RepRcvd));
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::RepSent));
    // The CM moved neither side's QP (each host's own RC QP stays in RESET).
    assert_eq!(net.a.nic.qp_state(net.a.qpn).unwrap(), QpState::Reset);
    assert_eq!(net.b.nic.qp_state(net.b.qpn).unwrap(), QpState::Reset);

    net.a.nic.cm_establish(net.now, a_conn).unwrap();
    net.pump();
    assert_eq!(net.sent('a', Attr::Rtu), 1);
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Established));
    assert_eq!(net.a.nic.qp_state(net.a.qpn).unwrap(), QpState::Reset);
    assert_eq!(net.b.nic.qp_state(net.b.qpn).unwrap(), QpState::Reset);
    assert!(net.a.events().is_empty(), "establish raises no event");
    assert_eq!(
        net.b.events(),
        vec![CmEvent::Established {
            conn: b_conn,
            private_data: Vec::new()
        }]
    );
    // A second establish is refused, and sends nothing.
    assert!(net.a.nic.cm_establish(net.now, a_conn).is_err());
    net.pump();
    assert_eq!(net.sent('a', Attr::Rtu), 1);
}

#[test]
fn the_qp_attributes_are_the_negotiated_ones() {
    let mut net = Net::new();
    let (a_conn, b_conn) = connect_and_accept(&mut net);
    let rtr = net.a.nic.cm_qp_attr(a_conn, QpState::Rtr).unwrap();
    assert_eq!(rtr.qp_state, Some(QpState::Rtr));
    assert_eq!(rtr.dest_qpn, Some(net.b.qpn));
    assert_eq!(rtr.rq_psn, Some(Psn::new(0x11)));
    let av = rtr.av.expect("an address vector");
    assert_eq!((av.src, av.dst), (A, B));
    let rts = net.a.nic.cm_qp_attr(a_conn, QpState::Rts).unwrap();
    assert_eq!(rts.sq_psn, Some(Psn::new(0x22)));
    // The passive side's, from the REQ and its accept.
    let rtr = net.b.nic.cm_qp_attr(b_conn, QpState::Rtr).unwrap();
    assert_eq!(rtr.dest_qpn, Some(net.a.qpn));
    let av = rtr.av.expect("an address vector");
    assert_eq!((av.src, av.dst), (B, A));
    // No attributes for a state the CM does not give.
    assert!(net.a.nic.cm_qp_attr(a_conn, QpState::Sqd).is_err());
}

#[test]
fn an_active_side_that_gives_up_before_establish_rejects_the_rep() {
    let mut net = Net::new();
    let (a_conn, b_conn) = connect_and_accept(&mut net);
    let _ = net.a.events();
    net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
    net.pump();
    assert_eq!(net.sent('a', Attr::Rej), 1);
    assert_eq!(net.a.nic.cm_state(a_conn), None);
    assert!(matches!(
        net.b.events()[..],
        [CmEvent::Rejected { conn, .. }] if conn == b_conn
    ));
}

#[test]
fn a_consumer_qp_may_not_be_a_special_qp_and_nothing_leaves() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let mut params = ConnectParams::new(roce_wire::Qpn::new(1), A, B, RPING, Psn::new(0x11));
    params.consumer_qp = true;
    assert!(net.a.nic.cm_connect(net.now, &params).is_err());
    net.pump();
    assert_eq!(net.sent('a', Attr::Req), 0);
    assert_eq!(net.a.nic.cm_conns(), 0);
    // Without consumer_qp, the CM still holds a connection to an RC QP of its own.
    let ud = net
        .a
        .nic
        .create_qp(&crate::QpInit::new(QpType::Ud, net.a.pd, net.a.cq, 4))
        .unwrap();
    let plain = ConnectParams::new(ud, A, B, RPING, Psn::new(0x11));
    assert!(net.a.nic.cm_connect(net.now, &plain).is_err());
    net.pump();
    assert_eq!(net.sent('a', Attr::Req), 0);
}
