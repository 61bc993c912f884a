//! The NIC's own outputs, seen from a driver.

use crate::{Access, Connect, Nic, NicConfig, QpAttr, QpInit, QpState, QpType, RecvWr, WcStatus};

/// A QP in INIT on its own CQ, with `receives` receive WRs posted.
fn qp_with_receives(nic: &mut Nic, receives: u64) -> crate::CqHandle {
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(16);
    let qpn = nic.create_qp(&QpInit::new(QpType::Rc, pd, cq, 16)).unwrap();
    nic.modify_qp(qpn, &Connect::init_with(Access::NONE))
        .unwrap();
    for wr_id in 0..receives {
        let wr = RecvWr {
            wr_id,
            sgl: Default::default(),
        };
        nic.post_recv(qpn, wr).unwrap();
    }
    let error = QpAttr {
        qp_state: Some(QpState::Err),
        ..QpAttr::default()
    };
    nic.modify_qp(qpn, &error).unwrap();
    cq
}

#[test]
fn a_driver_learns_each_cq_that_gained_completions_once() {
    let mut nic = Nic::new(NicConfig::default());
    assert_eq!(nic.poll_completed_cq(), None, "nothing completed yet");
    // Entering the error state flushes the posted receives into each QP's CQ.
    let a = qp_with_receives(&mut nic, 3);
    let b = qp_with_receives(&mut nic, 1);
    let _idle = nic.create_cq(4);

    let mut listed = vec![nic.poll_completed_cq(), nic.poll_completed_cq()];
    listed.sort();
    assert_eq!(
        listed,
        vec![Some(a), Some(b)],
        "each CQ once, whatever its count"
    );
    assert_eq!(nic.poll_completed_cq(), None);
    // Being listed takes nothing: the completions wait for poll_completion.
    assert_eq!(nic.completions_waiting(a), 3);
    let first = nic.poll_completion(a).unwrap();
    assert_eq!((first.wr_id, first.status), (0, WcStatus::WrFlushErr));

    // A CQ is listed again when it gains another completion.
    let c = qp_with_receives(&mut nic, 2);
    assert_eq!(nic.poll_completed_cq(), Some(c));
    assert_eq!(nic.poll_completed_cq(), None);
}

/// A CE-marked request that asks for no ACK (the first packet of a WRITE of three) leaves its
/// QP in B's ready line with a CNP due and nothing else to send: the next poll sends the CNP
/// (a QP in line with nothing to send is passed over, and one with only a CNP due is not that).
#[test]
fn a_qp_in_line_with_only_a_cnp_due_sends_it() {
    use std::net::SocketAddr;

    use crate::{Congestion, Datagram, DcqcnConfig, Ecn, MAX_DATAGRAM};
    let super::tests_cc::Pair {
        mut a,
        mut b,
        a_qp,
        sge,
        remote,
    } = super::tests_cc::Pair::new(Congestion::Dcqcn(DcqcnConfig::default()));
    let sge = crate::Sge {
        length: 3072,
        ..sge
    };
    let write = crate::SendWr::new(1, crate::SendOp::RdmaWrite(remote), sge);
    a.post_send(a_qp, write).unwrap();
    let now = crate::Instant::ZERO;
    let mut buf = vec![0; MAX_DATAGRAM];
    let first = a
        .poll_transmit(now, &mut buf)
        .expect("the WRITE's first packet");
    assert_eq!(buf[0], 0x06, "RC_RDMA_WRITE_FIRST");
    assert_eq!(buf[8] & 0x80, 0, "the first of three asks for no ACK");
    b.handle_datagram(
        now,
        Datagram {
            src: SocketAddr::new(first.src, first.src_port),
            dst: first.dst,
            ecn: Ecn::Ce,
            ip_id: Some(0),
            segment: 0,
            payload: &buf[..first.len],
        },
    );
    let cnp = b.poll_transmit(now, &mut buf).expect("the CNP");
    assert_eq!(buf[0], 0x81, "a CNP");
    assert_eq!(Some(cnp.dst.ip()), a.config().addrs.first().copied());
    assert!(
        b.poll_transmit(now, &mut buf).is_none(),
        "nothing but the CNP"
    );
}

#[test]
fn a_resized_cq_keeps_its_completions_and_a_refused_resize_changes_nothing() {
    let mut nic = Nic::new(NicConfig::default());
    // Three flushed receives wait in a CQ of 16.
    let cq = qp_with_receives(&mut nic, 3);
    // rxe_cq_chk_attr: 0, or fewer entries than wait, is EINVAL (here OutOfRange).
    for bad in [0, 2] {
        assert!(
            matches!(
                nic.resize_cq(cq, bad),
                Err(crate::VerbsError::OutOfRange { attr: "cqe", .. })
            ),
            "depth {bad}"
        );
    }
    assert!(matches!(
        nic.resize_cq(crate::CqHandle(999), 8),
        Err(crate::VerbsError::UnknownCq(999))
    ));
    nic.resize_cq(cq, 3).unwrap();
    let ids: Vec<u64> = std::iter::from_fn(|| nic.poll_completion(cq))
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(ids, [0, 1, 2], "the waiting completions, in order");
}
