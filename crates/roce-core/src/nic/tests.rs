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
            sgl: Vec::new(),
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
