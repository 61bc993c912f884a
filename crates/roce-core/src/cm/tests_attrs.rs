//! What the REQ and the REP say becomes the QPs' attributes: each side answers as many READs
//! as the other issues (capped by what it offers), retries as the REQ asks, and uses the path
//! MTU the port allows and the ACK timeout of the path.

use roce_wire::Psn;

use super::tests::{A, B, Net, RPING};
use super::{AcceptParams, ConnectParams};
use crate::{Access, Mtu};

//= rxe:cm.c/cm_init_qp_rtr_attr
//# RTR: the peer's QPN, our own starting PSN as rq_psn, the path MTU, responder resources as max_dest_rd_atomic, min_rnr_timer 0
//= rxe:cm.c/cm_init_qp_rts_attr
//# RTS: the peer's starting PSN as sq_psn, the ACK timeout, retry and RNR retry counts, initiator depth as max_rd_atomic
#[test]
fn the_req_and_rep_fields_become_both_qps_attributes() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let mut params = ConnectParams::new(net.a.qpn, A, B, RPING, Psn::new(0x33));
    params.responder_resources = 4;
    params.initiator_depth = 2;
    params.retry_count = 5;
    params.rnr_retry_count = 6;
    params.mtu = Mtu::Mtu4096;
    net.a.nic.cm_connect(net.now, &params).unwrap();
    net.pump();
    let req = net.request();
    // The port's MTU is 1024: the REQ asks for no more.
    assert_eq!(req.mtu, Mtu::Mtu1024);
    assert_eq!((req.responder_resources, req.initiator_depth), (4, 2));
    let mut accept = AcceptParams::new(net.b.qpn, Psn::new(0x44));
    accept.responder_resources = 1;
    accept.initiator_depth = 3;
    accept.rnr_retry_count = 4;
    net.b.nic.cm_accept(net.now, req.conn, &accept).unwrap();
    net.pump();

    let b = net.b.nic.qp(net.b.qpn);
    assert_eq!(b.dest_qpn, net.a.qpn);
    assert_eq!(b.mtu, Mtu::Mtu1024);
    // b answers at most the REQ's initiator depth (2) and what it offers (1); it issues at
    // most the REQ's responder resources (4) and what it offers (3).
    assert_eq!((b.max_dest_rd_atomic, b.max_rd_atomic), (1, 3));
    // Its retries are the REQ's; the ACK timeout is the REQ's path (17: 0.5 s).
    assert_eq!(
        (b.retry_cnt, b.rnr_retry, b.timeout, b.min_rnr_timer),
        (5, 6, 17, 0)
    );
    assert_eq!(
        b.access,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
    );

    let a = net.a.nic.qp(net.a.qpn);
    assert_eq!(a.dest_qpn, net.b.qpn);
    assert_eq!(a.mtu, Mtu::Mtu1024);
    // a answers at most the REP's initiator depth (3) and its own 4; it issues at most the
    // REP's responder resources (1) and its own 2. Its RNR retries are the REP's.
    assert_eq!((a.max_dest_rd_atomic, a.max_rd_atomic), (3, 1));
    assert_eq!(
        (a.retry_cnt, a.rnr_retry, a.timeout, a.min_rnr_timer),
        (5, 4, 17, 0)
    );
    let av = a.av.unwrap();
    assert_eq!((av.src, av.dst, av.hop_limit), (A, B, 64));
}

#[test]
fn a_connection_without_responder_resources_grants_remote_writes_only() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let mut params = ConnectParams::new(net.a.qpn, A, B, RPING, Psn::new(1));
    params.responder_resources = 0;
    params.initiator_depth = 0;
    net.a.nic.cm_connect(net.now, &params).unwrap();
    net.pump();
    let req = net.request();
    let mut accept = AcceptParams::new(net.b.qpn, Psn::new(2));
    accept.responder_resources = 0;
    net.b.nic.cm_accept(net.now, req.conn, &accept).unwrap();
    net.pump();
    let writes = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    assert_eq!(net.a.nic.qp(net.a.qpn).access, writes);
    assert_eq!(net.b.nic.qp(net.b.qpn).access, writes);
    assert_eq!(net.b.nic.qp(net.b.qpn).max_dest_rd_atomic, 0);
}
