//! The SRQ verbs' refusals — each checked to have changed nothing — and the asynchronous event
//! queue: QP_FATAL as rxe (never) and as asked, and a full queue.

use super::*;

#[test]
fn destroying_an_srq_in_use_is_refused_and_changes_nothing() {
    let mut s = story(srq_of(8, 1), NicConfig::default());
    s.post_srq(1);
    s.post_srq(2);
    let before = s.b.srq_attr(s.srq).unwrap();
    assert_eq!(
        s.b.destroy_srq(s.srq),
        Err(VerbsError::SrqBusy {
            srq: s.srq.value(),
            qps: 2
        })
    );
    assert_eq!(s.b.srq_attr(s.srq), Ok(before));
    assert_eq!(s.b.srq_wqes_waiting(s.srq), Ok(2));
    s.post_send(0, 1, b"still there");
    s.pump();
    assert_eq!(
        s.b_completion(0),
        Some((1, WcStatus::Success, s.b_qps[0], 11))
    );
    // With one QP left it is still refused; with none it goes.
    s.b.destroy_qp(s.b_qps[0]).unwrap();
    assert_eq!(
        s.b.destroy_srq(s.srq),
        Err(VerbsError::SrqBusy {
            srq: s.srq.value(),
            qps: 1
        })
    );
    s.b.destroy_qp(s.b_qps[1]).unwrap();
    assert_eq!(s.b.destroy_srq(s.srq), Ok(()));
    assert_eq!(
        s.b.srq_attr(s.srq),
        Err(VerbsError::UnknownSrq(s.srq.value()))
    );
}

#[test]
fn post_recv_on_a_qp_with_an_srq_is_refused_and_queues_nothing() {
    let mut s = story(srq_of(8, 0), NicConfig::default());
    let sge = Sge {
        addr: s.b_mr.addr(),
        length: 64,
        lkey: s.b_mr.lkey(),
    };
    let wr = RecvWr {
        wr_id: 7,
        sgl: [sge].into(),
    };
    assert_eq!(
        s.b.post_recv(s.b_qps[0], wr),
        Err(VerbsError::RecvThroughSrq(s.b_qps[0]))
    );
    s.post_send(0, 1, b"x");
    s.pump();
    assert_eq!(s.b.stats().tx_rnr_naks, 1, "the refused WR was not queued");
    assert_eq!(s.b_completion(0), None);
    assert_eq!(s.b.qp_srq(s.b_qps[0]), Ok(Some(s.srq)));
}

#[test]
fn post_srq_recv_checks_the_wr_as_post_recv_does_and_a_refusal_queues_nothing() {
    let mut s = story(srq_of(2, 0), NicConfig::default());
    let mr = s.b_mr.clone();
    let sge = |addr, length, lkey| Sge { addr, length, lkey };
    let wr = |sgl| RecvWr { wr_id: 9, sgl };
    let srq = s.srq.value();
    let good = sge(mr.addr(), 64, mr.lkey());
    assert_eq!(
        s.b.post_srq_recv(s.srq, wr(vec![good, good].into())),
        Err(VerbsError::InvalidSrqWorkRequest {
            srq,
            reason: "more SGEs than the SRQ's max_sge"
        })
    );
    let outside = sge(mr.addr() + mr.len() as u64 - 8, 64, mr.lkey());
    assert!(matches!(
        s.b.post_srq_recv(s.srq, wr(vec![outside].into())),
        Err(VerbsError::BadSge { .. })
    ));
    let other_pd = s.b.alloc_pd();
    let foreign = s.b.reg_mr(other_pd, 4096, Access::ALL).unwrap();
    assert!(matches!(
        s.b.post_srq_recv(
            s.srq,
            wr(vec![sge(foreign.addr(), 64, foreign.lkey())].into())
        ),
        Err(VerbsError::BadSge { .. })
    ));
    let read_only = s.b.reg_mr(s.b_pd, 4096, Access::NONE).unwrap();
    assert!(matches!(
        s.b.post_srq_recv(
            s.srq,
            wr(vec![sge(read_only.addr(), 64, read_only.lkey())].into())
        ),
        Err(VerbsError::BadSge { .. })
    ));
    assert_eq!(
        s.b.srq_wqes_waiting(s.srq),
        Ok(0),
        "nothing refused was queued"
    );
    s.post_srq(1);
    s.post_srq(2);
    assert_eq!(
        s.b.post_srq_recv(s.srq, wr(vec![good].into())),
        Err(VerbsError::SrqFull { srq, depth: 2 })
    );
    assert_eq!(s.b.srq_wqes_waiting(s.srq), Ok(2));
    assert_eq!(
        s.b.post_srq_recv(SrqHandle(99), wr(vec![good].into())),
        Err(VerbsError::UnknownSrq(99))
    );
}

#[test]
//= rxe:rxe_qp.c/rxe_qp_from_init
fn an_srq_of_another_protection_domain_is_refused() {
    let mut s = story(srq_of(8, 0), NicConfig::default());
    let other_pd = s.b.alloc_pd();
    let cq = s.b.create_cq(4);
    let init = QpInit::new(QpType::Rc, other_pd, cq, 4);
    assert_eq!(
        s.b.create_qp_with_srq(&init, s.srq),
        Err(VerbsError::SrqWrongPd {
            srq: s.srq.value(),
            srq_pd: s.b_pd.value(),
            qp_pd: other_pd.value(),
        })
    );
    assert_eq!(
        s.b.create_qp_with_srq(&init, SrqHandle(99)),
        Err(VerbsError::UnknownSrq(99))
    );
    // The refusal attached nothing: with B's two QPs gone the SRQ can be destroyed.
    for qpn in s.b_qps {
        s.b.destroy_qp(qpn).unwrap();
    }
    assert_eq!(s.b.destroy_srq(s.srq), Ok(()));
}

#[test]
//= rxe:rxe_srq.c/rxe_srq_chk_attr
fn create_and_modify_srq_check_their_limits_before_changing_anything() {
    let mut s = story(srq_of(4, 0), NicConfig::default());
    let pd = s.b_pd;
    let max_srq_wr = s.b.config().max_srq_wr;
    for bad in [
        srq_of(0, 0),
        srq_of(max_srq_wr + 1, 0),
        srq_of(4, 5),
        SrqInit {
            max_sge: 33,
            ..srq_of(4, 0)
        },
    ] {
        assert!(
            matches!(s.b.create_srq(pd, bad), Err(VerbsError::OutOfRange { .. })),
            "{bad:?}"
        );
    }
    assert_eq!(
        s.b.create_srq(PdHandle(77), srq_of(4, 0)),
        Err(VerbsError::UnknownPd(77))
    );
    for wr_id in 0..3 {
        s.post_srq(wr_id);
    }
    let before = s.b.srq_attr(s.srq).unwrap();
    for bad in [
        SrqModify {
            max_wr: Some(2),
            ..SrqModify::default()
        },
        SrqModify {
            limit: Some(5),
            ..SrqModify::default()
        },
        SrqModify {
            max_wr: Some(6),
            limit: Some(7),
        },
    ] {
        assert!(
            matches!(
                s.b.modify_srq(s.srq, &bad),
                Err(VerbsError::OutOfRange { .. })
            ),
            "{bad:?}"
        );
        assert_eq!(s.b.srq_attr(s.srq), Ok(before), "{bad:?} changed nothing");
    }
    let grow = SrqModify {
        max_wr: Some(6),
        limit: Some(6),
    };
    s.b.modify_srq(s.srq, &grow).unwrap();
    let attr = s.b.srq_attr(s.srq).unwrap();
    assert_eq!((attr.max_wr, attr.limit, attr.max_sge), (6, 6, 1));
    let shrink_below_limit = SrqModify {
        max_wr: Some(5),
        ..SrqModify::default()
    };
    assert!(s.b.modify_srq(s.srq, &shrink_below_limit).is_err());
    let small = NicConfig {
        addrs: vec![B],
        max_srq: 1,
        ..NicConfig::default()
    };
    let mut nic = Nic::new(small);
    let pd = nic.alloc_pd();
    nic.create_srq(pd, srq_of(1, 0)).unwrap();
    assert_eq!(
        nic.create_srq(pd, srq_of(1, 0)),
        Err(VerbsError::Exhausted("SRQs"))
    );
}

/// A's QP 0 sends into a cut wire until its retries run out.
fn retries_exhausted(a_config: NicConfig) -> Story {
    let mut s = story(srq_of(8, 0), a_config);
    s.cut = true;
    s.post_send(0, 1, b"lost");
    s.pump();
    // retry_cnt 7: the eighth local ACK timeout fails the WR.
    for _ in 0..8 {
        s.next_timer();
    }
    let failed = s.a.poll_completion(s.a_cq).unwrap();
    assert_eq!((failed.wr_id, failed.status), (1, WcStatus::RetryExcErr));
    assert_eq!(s.a.qp_state(s.a_qps[0]), Ok(QpState::Err));
    s
}

#[test]
fn exhausted_retries_raise_qp_fatal_when_asked_and_nothing_by_default_as_rxe() {
    let asked = NicConfig {
        qp_fatal_events: true,
        ..NicConfig::default()
    };
    let mut s = retries_exhausted(asked);
    assert_eq!(s.events('a'), [AsyncEvent::QpFatal(s.a_qps[0])]);
    let mut s = retries_exhausted(NicConfig::default());
    assert_eq!(s.events('a'), []);
    assert_eq!(s.a.events_raised(), 0);
}

#[test]
fn a_full_event_queue_loses_the_newest_event_and_counts_it() {
    let mut nic = Nic::new(NicConfig {
        addrs: vec![B],
        max_async_events: 1,
        ..NicConfig::default()
    });
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(4);
    let srq = nic.create_srq(pd, srq_of(4, 0)).unwrap();
    let init = QpInit::new(QpType::Rc, pd, cq, 4);
    let qps = [0, 1].map(|_| nic.create_qp_with_srq(&init, srq).unwrap());
    let to_error = QpAttr {
        qp_state: Some(QpState::Err),
        ..QpAttr::default()
    };
    for qpn in qps {
        nic.modify_qp(qpn, &Connect::init_with(Access::ALL))
            .unwrap();
        nic.modify_qp(qpn, &to_error).unwrap();
    }
    assert_eq!(nic.events_raised(), 2);
    assert_eq!(nic.stats().async_event_overflows, 1);
    assert_eq!(nic.poll_event(), Some(AsyncEvent::QpLastWqeReached(qps[0])));
    assert_eq!(nic.poll_event(), None);
}
