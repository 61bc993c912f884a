//! Shared receive queues and asynchronous events, told as stories between two NICs wired back
//! to back in virtual time: A sends on two RC QPs, B receives on two QPs that share one SRQ
//! (each with its own receive CQ). Every datagram goes straight from one NIC to the other,
//! unless the story cuts the wire. The verbs' refusals and the event queue are in `verbs.rs`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::*;

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
/// Each receive WR and each message gets its own slot of a region.
const SLOT: u64 = 4096;

/// What `t` of `buf` is as the datagram the other NIC receives.
fn delivered<'a>(t: &Transmit, buf: &'a [u8]) -> Datagram<'a> {
    Datagram {
        src: SocketAddr::new(t.src, t.src_port),
        dst: t.dst,
        ecn: t.ecn,
        ip_id: Some(0),
        segment: 0,
        payload: &buf[..t.len],
    }
}

/// Carries what `from` sends to `to` (or loses it when `cut`); how many datagrams went.
fn carry(from: &mut Nic, to: &mut Nic, now: Instant, cut: bool) -> usize {
    let mut buf = vec![0; MAX_DATAGRAM];
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        n += 1;
        if !cut {
            to.handle_datagram(now, delivered(&t, &buf));
        }
    }
    n
}

struct Story {
    a: Nic,
    b: Nic,
    now: Instant,
    /// What A sends is lost.
    cut: bool,
    a_mr: MemoryRegion,
    a_cq: CqHandle,
    a_qps: [Qpn; 2],
    b_pd: PdHandle,
    b_mr: MemoryRegion,
    /// B's QPs' receive CQs, one each.
    b_cqs: [CqHandle; 2],
    b_qps: [Qpn; 2],
    srq: SrqHandle,
}

/// A's two RC QPs connected to B's two, which share one SRQ of `srq` in B's PD.
fn story(srq: SrqInit, a_config: NicConfig) -> Story {
    let mut a = Nic::new(NicConfig {
        addrs: vec![A],
        ..a_config
    });
    let mut b = Nic::new(NicConfig {
        addrs: vec![B],
        ..NicConfig::default()
    });
    let a_pd = a.alloc_pd();
    let a_cq = a.create_cq(64);
    let a_mr = a.reg_mr(a_pd, 1 << 16, Access::ALL).unwrap();
    let b_pd = b.alloc_pd();
    let b_mr = b.reg_mr(b_pd, 1 << 16, Access::ALL).unwrap();
    let b_cqs = [b.create_cq(64), b.create_cq(64)];
    let srq = b.create_srq(b_pd, srq).unwrap();
    let a_qps = [0, 1].map(|_| {
        a.create_qp(&QpInit::new(QpType::Rc, a_pd, a_cq, 16))
            .unwrap()
    });
    let b_qps = b_cqs.map(|cq| {
        b.create_qp_with_srq(&QpInit::new(QpType::Rc, b_pd, cq, 16), srq)
            .unwrap()
    });
    for i in 0..2 {
        let path = |src, dst, dest| Connect::rc(AddressVector::new(src, dst), dest, psn(0), psn(0));
        a.connect_qp(a_qps[i], &path(A, B, b_qps[i])).unwrap();
        b.connect_qp(b_qps[i], &path(B, A, a_qps[i])).unwrap();
    }
    Story {
        a,
        b,
        now: Instant::ZERO,
        cut: false,
        a_mr,
        a_cq,
        a_qps,
        b_pd,
        b_mr,
        b_cqs,
        b_qps,
        srq,
    }
}

fn psn(value: u32) -> Psn {
    Psn::new(value)
}

fn srq_of(max_wr: usize, limit: usize) -> SrqInit {
    SrqInit {
        max_wr,
        max_sge: 1,
        limit,
    }
}

impl Story {
    /// B posts receive WR `wr_id` to the SRQ, into its slot `wr_id` of B's region.
    fn post_srq(&mut self, wr_id: u64) {
        let sge = Sge {
            addr: self.b_mr.addr() + wr_id * SLOT,
            length: SLOT as u32,
            lkey: self.b_mr.lkey(),
        };
        self.b
            .post_srq_recv(
                self.srq,
                RecvWr {
                    wr_id,
                    sgl: [sge].into(),
                },
            )
            .unwrap();
    }

    /// A's QP `i` posts SEND `wr_id` of `data` (from slot `wr_id` of A's region).
    fn post_send(&mut self, i: usize, wr_id: u64, data: &[u8]) {
        let offset = wr_id * SLOT;
        assert!(self.a_mr.write(offset as usize, data));
        let sge = Sge {
            addr: self.a_mr.addr() + offset,
            length: data.len() as u32,
            lkey: self.a_mr.lkey(),
        };
        let wr = SendWr::new(wr_id, SendOp::Send, sge);
        self.a.post_send(self.a_qps[i], wr).unwrap();
    }

    /// Carries datagrams both ways until neither NIC has one to send.
    fn pump(&mut self) {
        while carry(&mut self.a, &mut self.b, self.now, self.cut)
            + carry(&mut self.b, &mut self.a, self.now, false)
            > 0
        {}
    }

    /// Moves the clock to A's next deadline, fires it and pumps.
    fn next_timer(&mut self) {
        self.now = self.a.poll_timeout().expect("A has a timer set");
        self.a.handle_timeout(self.now);
        self.pump();
    }

    /// What landed in B's slot `wr_id`.
    fn landed(&self, wr_id: u64, len: usize) -> Vec<u8> {
        self.b_mr.read((wr_id * SLOT) as usize, len).unwrap()
    }

    /// The next receive completion of B's QP `i`: (wr_id, status, QP, bytes).
    fn b_completion(&mut self, i: usize) -> Option<(u64, WcStatus, Qpn, u32)> {
        let cqe = self.b.poll_completion(self.b_cqs[i])?;
        Some((cqe.wr_id, cqe.status, cqe.qpn, cqe.byte_len))
    }

    /// Asserts that B's QP `i` completed the receive `wr_id` with `len` bytes, successfully.
    #[track_caller]
    fn received(&mut self, i: usize, wr_id: u64, len: u32) {
        let qpn = self.b_qps[i];
        assert_eq!(
            self.b_completion(i),
            Some((wr_id, WcStatus::Success, qpn, len))
        );
    }

    fn events(&mut self, nic: char) -> Vec<AsyncEvent> {
        let nic = if nic == 'a' { &mut self.a } else { &mut self.b };
        std::iter::from_fn(|| nic.poll_event()).collect()
    }
}

#[test]
//= rxe:rxe_resp.c/get_srq_wqe
fn sends_to_two_qps_sharing_an_srq_take_its_wqes_in_the_order_they_were_posted() {
    let mut s = story(srq_of(8, 0), NicConfig::default());
    for wr_id in 10..14 {
        s.post_srq(wr_id);
    }
    s.post_send(0, 1, b"one");
    s.pump();
    s.post_send(1, 2, b"two");
    s.pump();
    s.received(0, 10, 3);
    s.received(1, 11, 3);
    assert_eq!(
        (s.landed(10, 3), s.landed(11, 3)),
        (b"one".to_vec(), b"two".to_vec())
    );
    // A two-packet SEND on QP 0 and a one-packet SEND on QP 1 leave interleaved (QPs take
    // turns): QP 0 takes WQE 12 with its FIRST, QP 1 takes 13, and QP 0's LAST still lands in
    // 12, the WQE it holds.
    let long: Vec<u8> = (0..1500u32).map(|i| i as u8).collect();
    s.post_send(0, 3, &long);
    s.post_send(1, 4, b"short");
    s.pump();
    s.received(1, 13, 5);
    s.received(0, 12, 1500);
    assert_eq!(s.landed(12, 1500), long);
    assert_eq!(s.landed(13, 5), b"short");
    assert_eq!((s.b_completion(0), s.b_completion(1)), (None, None));
    assert_eq!(s.b.srq_wqes_waiting(s.srq), Ok(0));
    let sent: Vec<_> = std::iter::from_fn(|| s.a.poll_completion(s.a_cq))
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(sent.len(), 4);
    assert!(sent.iter().all(|&(_, status)| status == WcStatus::Success));
    assert_eq!(s.events('b'), []);
}

#[test]
//= rxe:rxe_resp.c/check_resource
fn an_empty_srq_is_an_rnr_nak_and_the_send_lands_once_a_wqe_is_posted() {
    let mut s = story(srq_of(8, 0), NicConfig::default());
    s.post_send(0, 1, b"early");
    s.pump();
    assert_eq!(s.b.stats().tx_rnr_naks, 1, "no WQE in the SRQ: RNR NAK");
    assert_eq!(s.a.stats().rx_rnr_naks, 1);
    assert_eq!(s.b_completion(0), None);
    assert_eq!(s.a.poll_completion(s.a_cq), None, "A waits its RNR timer");
    s.post_srq(15);
    s.next_timer();
    s.received(0, 15, 5);
    assert_eq!(s.landed(15, 5), b"early");
    let sent = s.a.poll_completion(s.a_cq).unwrap();
    assert_eq!((sent.wr_id, sent.status), (1, WcStatus::Success));
}

#[test]
//= rxe:rxe_resp.c/get_srq_wqe
fn the_limit_event_fires_once_below_the_limit_and_again_only_once_rearmed() {
    let mut s = story(srq_of(8, 2), NicConfig::default());
    for wr_id in 0..3 {
        s.post_srq(wr_id);
    }
    s.post_send(0, 1, b"a");
    s.pump();
    assert_eq!(s.events('b'), [], "2 left: not below the limit of 2");
    assert_eq!(s.b.srq_attr(s.srq).unwrap().limit, 2);
    s.post_send(1, 2, b"b");
    s.pump();
    assert_eq!(s.b.events_waiting(), 1);
    assert_eq!(s.events('b'), [AsyncEvent::SrqLimitReached(s.srq)]);
    assert_eq!(
        s.b.srq_attr(s.srq).unwrap().limit,
        0,
        "the event disarms the limit"
    );
    // Disarmed: taking the last WQE, even below the old limit, raises nothing.
    s.post_send(0, 3, b"c");
    s.pump();
    assert_eq!(s.b.srq_wqes_waiting(s.srq), Ok(0));
    assert_eq!(s.events('b'), []);
    // Re-armed at 3 with 4 waiting: the take that leaves 2 fires it once more.
    for wr_id in 3..7 {
        s.post_srq(wr_id);
    }
    let arm = SrqModify {
        limit: Some(3),
        ..SrqModify::default()
    };
    s.b.modify_srq(s.srq, &arm).unwrap();
    s.post_send(0, 4, b"d");
    s.pump();
    assert_eq!(s.events('b'), [], "3 left");
    s.post_send(1, 5, b"e");
    s.post_send(0, 6, b"f");
    s.pump();
    assert_eq!(
        s.events('b'),
        [AsyncEvent::SrqLimitReached(s.srq)],
        "once, at 2 left"
    );
    assert_eq!(s.b.events_raised(), 2);
    assert_eq!(s.b.stats().async_events, 2);
}

#[test]
//= rxe:rxe_resp.c/flush_recv_queue
fn a_qp_with_an_srq_in_error_flushes_the_wqe_it_holds_and_raises_last_wqe_reached() {
    let mut s = story(srq_of(8, 0), NicConfig::default());
    for wr_id in 1..4 {
        s.post_srq(wr_id);
    }
    // Only the FIRST of a two-packet SEND reaches B: QP 0 holds WQE 1.
    let long = vec![7u8; 1500];
    s.post_send(0, 1, &long);
    let mut buf = vec![0; MAX_DATAGRAM];
    let t = s.a.poll_transmit(s.now, &mut buf).unwrap();
    s.b.handle_datagram(s.now, delivered(&t, &buf));
    assert_eq!(s.b.srq_wqes_waiting(s.srq), Ok(2));
    let to_error = QpAttr {
        qp_state: Some(QpState::Err),
        ..QpAttr::default()
    };
    s.b.modify_qp(s.b_qps[0], &to_error).unwrap();
    assert_eq!(
        s.b_completion(0),
        Some((1, WcStatus::WrFlushErr, s.b_qps[0], 0))
    );
    assert_eq!(
        s.b_completion(0),
        None,
        "the SRQ's own WQEs are not flushed"
    );
    assert_eq!(s.events('b'), [AsyncEvent::QpLastWqeReached(s.b_qps[0])]);
    assert_eq!(s.b.srq_wqes_waiting(s.srq), Ok(2));
    // Again to the error state: no second event.
    s.b.modify_qp(s.b_qps[0], &to_error).unwrap();
    assert_eq!(s.events('b'), []);
    // The other QP goes on taking from the SRQ.
    s.post_send(1, 2, b"on");
    s.pump();
    s.received(1, 2, 2);
}

#[test]
fn a_send_too_long_for_the_wqe_it_took_ends_the_qp_which_then_raises_last_wqe_reached() {
    let mut s = story(srq_of(8, 0), NicConfig::default());
    s.post_srq(1);
    s.post_srq(2);
    // WQE 1 holds one slot (4096 bytes); the SEND is 5000.
    s.post_send(0, 1, &vec![3u8; 5000]);
    s.pump();
    assert_eq!(
        s.b_completion(0),
        Some((1, WcStatus::LocLenErr, s.b_qps[0], 0))
    );
    assert_eq!(s.b.qp_state(s.b_qps[0]), Ok(QpState::Err));
    assert_eq!(s.events('b'), [AsyncEvent::QpLastWqeReached(s.b_qps[0])]);
    assert_eq!(
        s.b.srq_wqes_waiting(s.srq),
        Ok(1),
        "WQE 2 stays for the other QP"
    );
    let sent = s.a.poll_completion(s.a_cq).unwrap();
    assert_eq!((sent.wr_id, sent.status), (1, WcStatus::RemInvReqErr));
}

#[test]
fn ud_qps_take_their_receive_wqes_from_a_shared_srq() {
    let mut a = Nic::new(NicConfig {
        addrs: vec![A],
        ..NicConfig::default()
    });
    let mut b = Nic::new(NicConfig {
        addrs: vec![B],
        ..NicConfig::default()
    });
    let (a_pd, b_pd) = (a.alloc_pd(), b.alloc_pd());
    let (a_cq, b_cq) = (a.create_cq(8), b.create_cq(8));
    let a_mr = a.reg_mr(a_pd, 4096, Access::ALL).unwrap();
    let b_mr = b.reg_mr(b_pd, 4 * SLOT as usize, Access::ALL).unwrap();
    let srq = b.create_srq(b_pd, srq_of(4, 0)).unwrap();
    let ud = |qkey| Connect {
        qp_type: QpType::Ud,
        qkey,
        ..Connect::rc(AddressVector::new(A, B), Qpn::new(0), psn(0), psn(0))
    };
    let sender = a
        .create_qp(&QpInit::new(QpType::Ud, a_pd, a_cq, 4))
        .unwrap();
    a.connect_qp(sender, &ud(0x11)).unwrap();
    let init = QpInit::new(QpType::Ud, b_pd, b_cq, 4);
    let receivers = [0, 1].map(|_| b.create_qp_with_srq(&init, srq).unwrap());
    for qpn in receivers {
        b.connect_qp(qpn, &ud(0x11)).unwrap();
    }
    for wr_id in 0..2u64 {
        let sge = Sge {
            addr: b_mr.addr() + wr_id * SLOT,
            length: SLOT as u32,
            lkey: b_mr.lkey(),
        };
        b.post_srq_recv(
            srq,
            RecvWr {
                wr_id,
                sgl: [sge].into(),
            },
        )
        .unwrap();
    }
    assert!(a_mr.write(0, b"datagram"));
    for (wr_id, qpn) in [(5, receivers[1]), (6, receivers[0])] {
        let mut wr = SendWr::new(
            wr_id,
            SendOp::Send,
            Sge {
                addr: a_mr.addr(),
                length: 8,
                lkey: a_mr.lkey(),
            },
        );
        wr.ud = Some(UdDest {
            ip: B,
            qpn,
            qkey: 0x11,
        });
        a.post_send(sender, wr).unwrap();
        carry(&mut a, &mut b, Instant::ZERO, false);
    }
    let got: Vec<_> = std::iter::from_fn(|| b.poll_completion(b_cq))
        .map(|c| (c.wr_id, c.qpn, c.status, c.byte_len))
        .collect();
    assert_eq!(
        got,
        [
            (0, receivers[1], WcStatus::Success, 48),
            (1, receivers[0], WcStatus::Success, 48)
        ],
        "a 40-byte GRH area and the 8 bytes, in the SRQ's order"
    );
    assert_eq!(b_mr.read(40, 8).unwrap(), b"datagram");
    assert_eq!(b_mr.read(SLOT as usize + 40, 8).unwrap(), b"datagram");
}

mod verbs;
