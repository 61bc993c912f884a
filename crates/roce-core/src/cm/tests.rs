//! The CM between two NICs, message by message: connect, accept, establish and send; reject;
//! an unknown service; duplicates and stale connections; disconnect both ways and timewait;
//! malformed MADs. `tests_loss.rs` tells the stories of lost and repeated messages.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_wire::mad::cm::{Attr, CmMad};
use roce_wire::mad::cma::{PortSpace, ServiceId};
use roce_wire::mad::rej::RejectReason;
use roce_wire::{Psn, Qpn, RocePacket};

use super::{AcceptParams, CmEvent, CmState, ConnId, ConnectParams, ConnectRequest};
use crate::gsi::{GSI_QPN, GsiDatagram, MAD_LEN};
use crate::{
    Datagram, Ecn, Instant, MemoryRegion, Nic, NicConfig, PdHandle, QpInit, QpState, QpType,
    RecvWr, SendOp, SendWr, Sge, SrcPortPolicy, WcStatus,
};

pub(super) const A: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
pub(super) const B: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
/// rping's service: the TCP port space, port 7174.
pub(super) const RPING: u64 = ServiceId::new(PortSpace::TCP, 7174).0;

/// One NIC with a PD, a CQ, a region and one RC QP in RESET.
pub(super) struct Host {
    pub(super) nic: Nic,
    pub(super) pd: PdHandle,
    pub(super) cq: crate::CqHandle,
    pub(super) mr: MemoryRegion,
    pub(super) qpn: Qpn,
}

impl Host {
    pub(super) fn new(addr: IpAddr) -> Self {
        Self::new_with(NicConfig {
            addrs: vec![addr],
            src_port: SrcPortPolicy::Fixed(4791),
            max_mtu: crate::Mtu::Mtu1024,
            ..NicConfig::default()
        })
    }

    /// A host with its NIC made of `config`.
    pub(super) fn new_with(config: NicConfig) -> Self {
        let mut nic = Nic::new(config);
        let pd = nic.alloc_pd();
        let cq = nic.create_cq(64);
        let mr = nic.reg_mr(pd, 4096, crate::Access::ALL).unwrap();
        let qpn = nic.create_qp(&QpInit::new(QpType::Rc, pd, cq, 16)).unwrap();
        Self {
            nic,
            pd,
            cq,
            mr,
            qpn,
        }
    }

    pub(super) fn events(&mut self) -> Vec<CmEvent> {
        std::iter::from_fn(|| self.nic.poll_cm_event()).collect()
    }
}

/// A MAD in flight: who sent it and its attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    pub(super) from: char,
    pub(super) attr: Attr,
    pub(super) at: Instant,
    pub(super) mad: [u8; MAD_LEN],
}

/// Two hosts and the wire between them; `lose` decides which MADs the wire loses.
pub(super) struct Net {
    pub(super) a: Host,
    pub(super) b: Host,
    pub(super) now: Instant,
    pub(super) log: Vec<Sent>,
    pub(super) lose: Box<dyn FnMut(&Sent) -> bool>,
    /// Every MAD is delivered twice when set.
    pub(super) duplicate: bool,
}

impl Net {
    pub(super) fn new() -> Self {
        Self {
            a: Host::new(A),
            b: Host::new(B),
            now: Instant::ZERO,
            log: Vec::new(),
            lose: Box::new(|_| false),
            duplicate: false,
        }
    }

    /// Has a's QP 1 send `mad` to b's, as a peer (or anyone on the wire) can.
    pub(super) fn mad_from_a(&mut self, mad: [u8; MAD_LEN]) {
        let datagram = GsiDatagram {
            peer: B,
            local: A,
            peer_qp: GSI_QPN,
            mad,
        };
        self.a.nic.send_gsi(datagram).unwrap();
    }

    /// Carries packets both ways until neither side has one.
    pub(super) fn pump(&mut self) {
        let mut buf = vec![0; crate::MAX_DATAGRAM];
        loop {
            let mut moved = false;
            for from in ['a', 'b'] {
                let (src, dst) = match from {
                    'a' => (&mut self.a.nic, &mut self.b.nic),
                    _ => (&mut self.b.nic, &mut self.a.nic),
                };
                while let Some(t) = src.poll_transmit(self.now, &mut buf) {
                    moved = true;
                    let payload = buf[..t.len].to_vec();
                    let attr = attr_of(&payload);
                    if let Some((attr, mad)) = attr {
                        let sent = Sent {
                            from,
                            attr,
                            at: self.now,
                            mad,
                        };
                        self.log.push(sent);
                        if (self.lose)(&sent) {
                            continue;
                        }
                    }
                    let copies = if self.duplicate && attr.is_some() {
                        2
                    } else {
                        1
                    };
                    for _ in 0..copies {
                        dst.handle_datagram(
                            self.now,
                            Datagram {
                                src: SocketAddr::new(t.src, t.src_port),
                                dst: t.dst,
                                ecn: Ecn::NotEct,
                                ip_id: Some(0),
                                segment: 0,
                                payload: &payload,
                            },
                        );
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Jumps to the next deadline of either NIC and fires it; false when none is left.
    pub(super) fn tick(&mut self) -> bool {
        let next = [self.a.nic.poll_timeout(), self.b.nic.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = next else {
            return false;
        };
        self.now = self.now.max(at);
        self.a.nic.handle_timeout(self.now);
        self.b.nic.handle_timeout(self.now);
        self.pump();
        true
    }

    /// MADs sent so far by `from` of `attr`.
    pub(super) fn sent(&self, from: char, attr: Attr) -> usize {
        self.log
            .iter()
            .filter(|s| s.from == from && s.attr == attr)
            .count()
    }

    /// a connects to b's rping service with `data` as private data.
    pub(super) fn connect(&mut self, data: &[u8]) -> ConnId {
        let mut params = ConnectParams::new(self.a.qpn, A, B, RPING, Psn::new(0x11_1111));
        params.src_port = 40_000;
        params.private_data = data.to_vec();
        let conn = self.a.nic.cm_connect(self.now, &params).unwrap();
        self.pump();
        conn
    }

    /// b's one connect request.
    pub(super) fn request(&mut self) -> ConnectRequest {
        match self.b.events().as_slice() {
            [CmEvent::ConnectRequest(req)] => (**req).clone(),
            other => panic!("b expected one connect request, got {other:?}"),
        }
    }

    /// b accepts `conn` with `data`.
    pub(super) fn accept(&mut self, conn: ConnId, data: &[u8]) {
        let mut params = AcceptParams::new(self.b.qpn, Psn::new(0x22_2222));
        params.private_data = data.to_vec();
        self.b.nic.cm_accept(self.now, conn, &params).unwrap();
        self.pump();
    }

    /// Connect, accept, establish: the two connection IDs.
    pub(super) fn establish(&mut self) -> (ConnId, ConnId) {
        self.b.nic.cm_listen(self.now, RPING).unwrap();
        let a_conn = self.connect(b"");
        let b_conn = self.request().conn;
        self.accept(b_conn, b"");
        assert!(matches!(self.a.events()[..], [CmEvent::Established { .. }]));
        assert_eq!(
            self.b.events(),
            vec![CmEvent::Established {
                conn: b_conn,
                private_data: Vec::new()
            }]
        );
        (a_conn, b_conn)
    }
}

/// The CM attribute and the MAD of a RoCE packet to QP 1, if it is one.
fn attr_of(payload: &[u8]) -> Option<(Attr, [u8; MAD_LEN])> {
    let packet = RocePacket::new_checked(payload).ok()?;
    if packet.bth().dest_qp() != GSI_QPN {
        return None;
    }
    let mad = <[u8; MAD_LEN]>::try_from(packet.payload()).ok()?;
    CmMad::parse(&mad).ok().map(|m| (m.message.attr(), mad))
}

/// The first `n` bytes of `data`.
fn head(data: &[u8], n: usize) -> &[u8] {
    &data[..n.min(data.len())]
}

#[test]
fn connect_accept_rtu_take_both_qps_to_rts_and_a_send_lands() {
    let mut net = Net::new();
    let listen = net.b.nic.cm_listen(net.now, RPING).unwrap();
    let a_conn = net.connect(b"hello from a");
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::ReqSent));
    assert_eq!(net.a.nic.qp_state(net.a.qpn), Ok(QpState::Init));

    // The REQ: the listener's request carries the peer's QP, PSN, MTU and consumer data.
    let req = net.request();
    assert_eq!(req.listen, listen);
    assert_eq!((req.peer, req.local, req.peer_port), (A, B, Some(40_000)));
    assert_eq!(req.peer_qpn, net.a.qpn);
    assert_eq!(req.peer_psn, Psn::new(0x11_1111));
    assert_eq!(req.mtu, crate::Mtu::Mtu1024);
    assert_eq!((req.responder_resources, req.initiator_depth), (1, 1));
    assert_eq!((req.retry_count, req.rnr_retry_count), (7, 7));
    assert_eq!(head(&req.private_data, 12), b"hello from a");
    assert_eq!(
        req.private_data.len(),
        56,
        "the user data after the cma_hdr"
    );
    // Nothing moved on b before the accept.
    assert_eq!(net.b.nic.qp_state(net.b.qpn), Ok(QpState::Reset));

    // The accept: b's QP to RTR and RTS, the REP; a's QP to RTR and RTS, the RTU.
    net.accept(req.conn, b"welcome");
    assert_eq!(net.b.nic.qp_state(net.b.qpn), Ok(QpState::Rts));
    assert_eq!(net.a.nic.qp_state(net.a.qpn), Ok(QpState::Rts));
    match &net.a.events()[..] {
        [CmEvent::Established { conn, private_data }] => {
            assert_eq!(*conn, a_conn);
            assert_eq!(head(private_data, 7), b"welcome");
        }
        other => panic!("a: {other:?}"),
    }
    assert!(matches!(net.b.events()[..], [CmEvent::Established { conn, .. }] if conn == req.conn));
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Established));
    assert_eq!(net.b.nic.cm_state(req.conn), Some(CmState::Established));
    // Each side's responder expects the PSN it announced (a in the REQ, b in the REP), its
    // requester starts at the peer's, as the Linux CM sets them up (rxe NAKs otherwise).
    assert_eq!(
        net.a.nic.qp_psns(net.a.qpn),
        Ok((Psn::new(0x22_2222), Psn::new(0x11_1111)))
    );
    assert_eq!(
        net.b.nic.qp_psns(net.b.qpn),
        Ok((Psn::new(0x11_1111), Psn::new(0x22_2222)))
    );
    let order: Vec<_> = net.log.iter().map(|s| (s.from, s.attr)).collect();
    assert_eq!(
        order,
        [('a', Attr::Req), ('b', Attr::Rep), ('a', Attr::Rtu)]
    );

    // Data on the connected QPs.
    let (b_qpn, b_lkey, b_addr) = (net.b.qpn, net.b.mr.lkey(), net.b.mr.addr());
    let sge = |addr, lkey| {
        vec![Sge {
            addr,
            length: 5,
            lkey,
        }]
    };
    net.b
        .nic
        .post_recv(
            b_qpn,
            RecvWr {
                wr_id: 7,
                sgl: sge(b_addr, b_lkey).into(),
            },
        )
        .unwrap();
    net.a.mr.write(0, b"ping!");
    let wr = SendWr::new(9, SendOp::Send, sge(net.a.mr.addr(), net.a.mr.lkey()));
    net.a.nic.post_send(net.a.qpn, wr).unwrap();
    net.pump();
    let recv = net.b.nic.poll_completion(net.b.cq).unwrap();
    assert_eq!(
        (recv.wr_id, recv.status, recv.byte_len),
        (7, WcStatus::Success, 5)
    );
    assert_eq!(net.b.mr.read(0, 5).unwrap(), b"ping!");
    let send = net.a.nic.poll_completion(net.a.cq).unwrap();
    assert_eq!((send.wr_id, send.status), (9, WcStatus::Success));
}

#[test]
fn a_rejected_request_carries_the_consumers_data_and_leaves_the_passive_qp_alone() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let a_conn = net.connect(b"may I?");
    let req = net.request();
    net.b
        .nic
        .cm_reject(net.now, req.conn, b"not today")
        .unwrap();
    net.pump();
    match &net.a.events()[..] {
        [
            CmEvent::Rejected {
                conn,
                reason,
                private_data,
            },
        ] => {
            assert_eq!(*conn, a_conn);
            assert_eq!(*reason, RejectReason::ConsumerDefined);
            assert_eq!(head(private_data, 9), b"not today");
        }
        other => panic!("a: {other:?}"),
    }
    assert_eq!(net.a.nic.qp_state(net.a.qpn), Ok(QpState::Err));
    assert_eq!(net.b.nic.qp_state(net.b.qpn), Ok(QpState::Reset));
    assert_eq!((net.a.nic.cm_conns(), net.b.nic.cm_conns()), (0, 0));
    assert_eq!(net.a.nic.poll_timeout(), None, "no REQ is sent again");
    assert!(net.b.events().is_empty());
}

/// A REQ that comes before its listener (perftest -R's client, whose server listens again
/// after its first connection, with its threads off the processor) is held, and the listener
/// that comes within the grace takes it: the connection is made as if the REQ came then.
#[test]
fn a_request_that_comes_just_before_its_listener_waits_for_it() {
    let mut net = Net::new();
    net.duplicate = true; // the REQ comes twice: held once
    let a_conn = net.connect(b"hello");
    assert!(net.a.events().is_empty());
    assert!(net.b.events().is_empty());
    assert_eq!(net.sent('b', Attr::Rej), 0, "not rejected");
    assert_eq!(net.b.nic.stats().cm_rx_req_held, 1);
    assert_eq!(net.b.nic.stats().cm_rx_duplicates, 1);
    // The listener comes 100 ms later, within the grace.
    net.now += crate::Duration::from_millis(100);
    net.b.nic.handle_timeout(net.now);
    net.duplicate = false;
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let request = net.request();
    assert!(request.private_data.starts_with(b"hello"));
    net.accept(request.conn, b"");
    assert!(
        matches!(net.a.events()[..], [CmEvent::Established { conn, .. }] if conn == a_conn),
        "a is connected"
    );
    assert_eq!(net.sent('b', Attr::Rej), 0);
    assert_eq!(net.b.nic.stats().cm_rx_no_listener, 0);
    // Nothing is held any longer: no REJ comes later.
    while net.tick() {}
    assert_eq!(net.sent('b', Attr::Rej), 0);
}

/// With no grace (`NicConfig::cm_listen_grace` zero), a REQ no listener takes is rejected at
/// once, as ib_cm rejects it.
#[test]
fn without_a_grace_a_request_nobody_listens_for_is_rejected_at_once() {
    let mut net = Net::new();
    let mut config = net.b.nic.config().clone();
    config.cm_listen_grace = crate::Duration::ZERO;
    net.b = Host::new_with(config);
    let a_conn = net.connect(b"");
    match &net.a.events()[..] {
        [CmEvent::Rejected { conn, reason, .. }] => {
            assert_eq!((*conn, *reason), (a_conn, RejectReason::InvalidServiceId));
        }
        other => panic!("a: {other:?}"),
    }
    assert_eq!(net.b.nic.stats().cm_rx_req_held, 0);
    assert_eq!(net.b.nic.stats().cm_rx_no_listener, 1);
}

//= rxe:cm.c/cm_req_handler
//# a REQ no listener takes is rejected INVALID_SERVICE_ID
#[test]
fn a_request_for_a_service_nobody_listens_on_is_rejected_invalid_service_id() {
    let mut net = Net::new();
    net.b
        .nic
        .cm_listen(net.now, ServiceId::new(PortSpace::TCP, 1).0)
        .unwrap();
    let a_conn = net.connect(b"");
    // Held a moment for a listener that does not come (parked.rs), then rejected.
    assert!(net.a.events().is_empty(), "nothing yet");
    assert_eq!(net.b.nic.stats().cm_rx_req_held, 1);
    assert!(net.tick());
    match &net.a.events()[..] {
        [CmEvent::Rejected { conn, reason, .. }] => {
            assert_eq!((*conn, *reason), (a_conn, RejectReason::InvalidServiceId));
            assert_eq!(u16::from(*reason), 8);
        }
        other => panic!("a: {other:?}"),
    }
    assert_eq!(net.b.nic.stats().cm_rx_no_listener, 1);
    assert_eq!(net.b.nic.cm_conns(), 0, "b holds nothing");
    assert!(net.b.events().is_empty());
    assert_eq!(net.b.nic.qp_state(net.b.qpn), Ok(QpState::Reset));
}

#[test]
fn a_listener_per_service_id_and_calls_in_the_wrong_state_are_refused() {
    let mut net = Net::new();
    let (a_conn, b_conn) = net.establish();
    assert!(
        net.b.nic.cm_listen(net.now, RPING).is_err(),
        "one listener per service ID"
    );
    // Established: neither accept nor reject is possible, and the QP is the connection's.
    let params = AcceptParams::new(net.b.qpn, Psn::new(1));
    assert!(net.b.nic.cm_accept(net.now, b_conn, &params).is_err());
    assert!(net.b.nic.cm_reject(net.now, b_conn, b"").is_err());
    let again = ConnectParams::new(net.a.qpn, A, B, RPING, Psn::new(1));
    assert!(net.a.nic.cm_connect(net.now, &again).is_err());
    let mut too_long = ConnectParams::new(net.a.qpn, A, B, RPING, Psn::new(1));
    too_long.private_data = vec![0; 57];
    assert!(net.a.nic.cm_connect(net.now, &too_long).is_err());
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Established));
    assert_eq!(net.log.len(), 3, "the refused calls sent nothing");
    let other = net.b.nic.cm_listen(net.now, RPING + 1).unwrap();
    assert!(net.b.nic.cm_unlisten(other).is_ok());
    assert!(net.b.nic.cm_unlisten(other).is_err());
}

#[test]
fn an_active_disconnect_is_a_dreq_answered_by_a_drep_then_both_wait_out_timewait() {
    let mut net = Net::new();
    let (a_conn, b_conn) = net.establish();
    net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
    assert_eq!(net.a.nic.qp_state(net.a.qpn), Ok(QpState::Err));
    net.pump();
    assert_eq!(net.b.events(), vec![CmEvent::Disconnected { conn: b_conn }]);
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::DreqRcvd));
    assert!(net.a.events().is_empty(), "a waits for the DREP");
    net.b.nic.cm_disconnect(net.now, b_conn).unwrap();
    net.pump();
    assert_eq!(net.b.nic.qp_state(net.b.qpn), Ok(QpState::Err));
    assert_eq!(net.a.events(), vec![CmEvent::Disconnected { conn: a_conn }]);
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Timewait));
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::Timewait));
    // Timewait lasts the ACK timeout (17: 512 ms).
    let entered = net.now;
    while net.tick() {}
    assert_eq!(net.a.events(), vec![CmEvent::TimewaitExit { conn: a_conn }]);
    assert_eq!(net.b.events(), vec![CmEvent::TimewaitExit { conn: b_conn }]);
    assert_eq!(net.now, entered + crate::Duration::from_millis(512));
    assert_eq!((net.a.nic.cm_conns(), net.b.nic.cm_conns()), (0, 0));
    assert_eq!(net.sent('a', Attr::Dreq), 1);
    assert_eq!(net.sent('b', Attr::Drep), 1);
}

#[test]
fn a_passive_disconnect_works_the_same_the_other_way() {
    let mut net = Net::new();
    let (a_conn, b_conn) = net.establish();
    net.b.nic.cm_disconnect(net.now, b_conn).unwrap();
    net.pump();
    assert_eq!(net.a.events(), vec![CmEvent::Disconnected { conn: a_conn }]);
    net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
    net.pump();
    assert_eq!(net.b.events(), vec![CmEvent::Disconnected { conn: b_conn }]);
    while net.tick() {}
    assert_eq!(net.a.events(), vec![CmEvent::TimewaitExit { conn: a_conn }]);
    assert_eq!(net.b.events(), vec![CmEvent::TimewaitExit { conn: b_conn }]);
    assert_eq!(
        (net.sent('b', Attr::Dreq), net.sent('a', Attr::Drep)),
        (1, 1)
    );
}

//= rxe:cm.c/cm_match_req
//# a REQ from a QP we still hold a connection with is rejected STALE_CONN, and a live
//# connection of that QP is disconnected
#[test]
fn a_request_from_a_qp_still_connected_is_stale_and_the_old_connection_is_disconnected() {
    let mut net = Net::new();
    let (_, b_conn) = net.establish();
    // a's host restarts: the same address, the same QPN (one seed), its connection forgotten.
    // Its first connection, of another QP, takes the comm ID the old one had: to b, a
    // duplicate of a REQ it answered, which it ignores.
    net.a = Host::new(A);
    let spare = net
        .a
        .nic
        .create_qp(&QpInit::new(QpType::Rc, net.a.pd, net.a.cq, 4))
        .unwrap();
    let params = ConnectParams::new(spare, A, B, RPING, Psn::new(5));
    net.a.nic.cm_connect(net.now, &params).unwrap();
    net.pump();
    assert!(net.a.events().is_empty());
    assert_eq!(net.b.nic.stats().cm_rx_duplicates, 1);
    let a_conn = net.connect(b"");
    match &net.a.events()[..] {
        [CmEvent::Rejected { conn, reason, .. }] => {
            assert_eq!((*conn, *reason), (a_conn, RejectReason::StaleConn));
        }
        other => panic!("a: {other:?}"),
    }
    assert_eq!(net.a.nic.cm_state(a_conn), Some(CmState::Timewait));
    assert_eq!(net.b.nic.qp_state(net.b.qpn), Ok(QpState::Err));
    assert_eq!(net.sent('b', Attr::Dreq), 1);
    // The new host knows nothing of the old connection's DREQ but answers it: the old
    // connection is in timewait.
    assert_eq!(net.b.nic.cm_state(b_conn), Some(CmState::Timewait));
    assert_eq!(net.a.nic.stats().cm_rx_unmatched, 1);
    assert_eq!(net.b.events(), vec![CmEvent::Disconnected { conn: b_conn }]);
}

#[test]
fn malformed_cm_mads_are_dropped_and_counted_and_change_nothing() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let mut valid = [0u8; MAD_LEN];
    let req = roce_wire::mad::examples::all()[0];
    req.emit(&mut valid).unwrap();
    let mut bad: Vec<[u8; MAD_LEN]> = Vec::new();
    let mut unknown_attr = valid;
    unknown_attr[16..18].copy_from_slice(&0x0099u16.to_be_bytes());
    bad.push(unknown_attr);
    let mut response_method = valid;
    response_method[3] = 0x83;
    bad.push(response_method);
    let mut base_version = valid;
    base_version[0] = 2;
    bad.push(base_version);
    let mut lap = valid;
    lap[16..18].copy_from_slice(&Attr::Lap.id().to_be_bytes());
    bad.push(lap);
    for mad in &bad {
        net.mad_from_a(*mad);
    }
    net.pump();
    let stats = net.b.nic.stats();
    // ib_mad's validate_mad drops a CM MAD whose method is not Send and one whose base
    // version is not 1 before the CM sees them; the CM drops what it cannot parse.
    assert_eq!(
        (stats.rx_gsi_cm_method, stats.rx_gsi_bad_base_version),
        (1, 1)
    );
    assert_eq!(stats.cm_rx_mads, 2);
    assert_eq!(stats.cm_rx_malformed, 2);
    assert_eq!(net.b.nic.cm_conns(), 0);
    assert!(net.b.events().is_empty());
    assert!(
        net.log.iter().all(|s| s.from != 'b'),
        "b answered none of them (no REJ, no MRA)"
    );
    assert_eq!(net.b.nic.poll_gsi(), None, "and none went to another agent");
    assert_eq!(net.b.nic.poll_timeout(), None);
}

#[test]
fn a_request_whose_cma_header_is_bad_is_rejected_consumer_defined() {
    let mut net = Net::new();
    net.b.nic.cm_listen(net.now, RPING).unwrap();
    let mut mad = [0u8; MAD_LEN];
    let mut example = roce_wire::mad::examples::all()[0];
    if let roce_wire::CmMessage::Req(req) = &mut example.message {
        req.transport_service_type = roce_wire::mad::req::TRANSPORT_RC;
        req.private_data[0] = 0x99; // cma_version
    }
    example.emit(&mut mad).unwrap();
    net.mad_from_a(mad);
    net.pump();
    assert_eq!(net.b.nic.stats().cm_rx_bad_private_data, 1);
    assert_eq!(net.sent('b', Attr::Rej), 1);
    assert_eq!(net.b.nic.cm_conns(), 0);
    assert!(net.b.events().is_empty());
}
