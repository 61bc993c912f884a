//! Work requests from the application: each is checked completely against the QP, the device
//! limits and the memory it names before it is queued (IBTA vol. 1 §10.8.3; rxe
//! `rxe_post_send`, `validate_send_wr`), so a WR the NIC accepts can always be sent.

use roce_wire::Qpn;

use super::{Nic, Shared};
use crate::VerbsError;
use crate::cq::{Cqe, WcOpcode, WcStatus};
use crate::mr::{Access, PdHandle};
use crate::qp::inline_data::InlineData;
use crate::qp::{self, Qp, QpState, QpType, SendWqe};
use crate::wr::{RecvWr, SendOp, SendWr, Sge};

impl Nic {
    // C. verbs from the application: work requests

    /// Posts a send WR (`ibv_post_send`). The QP must be in RTS (or, for SQD, the WR waits);
    /// in the Error state the WR is taken and completes at once with WR_FLUSH_ERR.
    pub fn post_send(&mut self, qpn: Qpn, mut wr: SendWr) -> Result<(), VerbsError> {
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        if qp.state == QpState::Err {
            let cqe = Cqe::new(WcStatus::WrFlushErr, wr.wr_id, wr.op.wc_opcode(), qpn);
            self.shared.complete_at_once(qp.send_cq, cqe);
            return Ok(());
        }
        let shape = send_wqe(&self.shared, qp, &mut wr)?;
        qp.sq.push(SendWqe {
            wr,
            length: shape.length,
            first_psn: None,
            npsn: shape.npsn,
            sent: false,
        });
        self.sched.push_ready(qp);
        self.sched.index(qp);
        self.sched.tidy(&mut self.qps, &self.shared.config);
        Ok(())
    }

    /// Posts a receive WR (`ibv_post_recv`). Allowed from INIT on; in the Error state the WR
    /// is taken and completes at once with WR_FLUSH_ERR.
    pub fn post_recv(&mut self, qpn: Qpn, wr: RecvWr) -> Result<(), VerbsError> {
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        if qp.srq.is_some() {
            return Err(VerbsError::RecvThroughSrq(qpn));
        }
        if qp.state == QpState::Err {
            let cqe = Cqe::new(WcStatus::WrFlushErr, wr.wr_id, WcOpcode::Recv, qpn);
            self.shared.complete_at_once(qp.recv_cq, cqe);
            return Ok(());
        }
        if qp.state == QpState::Reset {
            return Err(VerbsError::WrongState {
                qpn,
                state: qp.state,
                what: "post_recv",
            });
        }
        if qp.rq.len() >= qp.max_recv_wr {
            return Err(VerbsError::QueueFull {
                qpn,
                queue: "receive",
                depth: qp.max_recv_wr,
            });
        }
        if wr.sgl.len() > self.shared.config.max_sge {
            return Err(VerbsError::InvalidWorkRequest {
                qpn,
                reason: "more SGEs than the device allows",
            });
        }
        check_sgl(&self.shared, qp.pd, &wr.sgl, true)?;
        qp.rq.push_back(wr);
        Ok(())
    }
}

/// What the send queue keeps of a checked WR besides the WR itself.
struct Shape {
    /// Total bytes of the message.
    length: u32,
    /// PSNs it takes.
    npsn: u32,
}

/// `wr` checked against `qp`, the device's limits and the memory it names, and the shape of
/// the WQE the requester will send from. An inline WR's bytes are gathered into
/// `wr.inline_data` here, at the post. The WR is checked in place and moved once, into the
/// send queue: a WQE is some 170 bytes, and each move of it through a return value was a
/// `memcpy` on the path of every post.
//= ibta:vol1/10.8.3
//# a work request is checked whole when it is posted
fn send_wqe(shared: &Shared, qp: &Qp, wr: &mut SendWr) -> Result<Shape, VerbsError> {
    let qpn = qp.qpn;
    let config = &shared.config;
    if !matches!(qp.state, QpState::Rts | QpState::Sqd) {
        return Err(VerbsError::WrongState {
            qpn,
            state: qp.state,
            what: "post_send",
        });
    }
    if qp.sq.len() >= qp.max_send_wr {
        return Err(VerbsError::QueueFull {
            qpn,
            queue: "send",
            depth: qp.max_send_wr,
        });
    }
    let invalid = |reason| Err(VerbsError::InvalidWorkRequest { qpn, reason });
    if wr.op.is_local() {
        // rxe takes binds and local invalidations on RC and UC QPs (rxe_opcode.c
        // `rxe_wr_opcode_info`); their SGL is not read. Whether the window and region allow the
        // bind is checked when it is carried out: a refusal is an error completion.
        if qp.qp_type == QpType::Ud {
            return invalid("UD QPs only SEND");
        }
        if wr.inline || wr.inline_data.is_some() {
            return invalid("a bind or an invalidation carries no data");
        }
        return Ok(Shape { length: 0, npsn: 0 });
    }
    if wr.sgl.len() > config.max_sge {
        return invalid("more SGEs than the device allows");
    }
    let length = match &wr.inline_data {
        Some(data) => data.len() as u64,
        None => wr.length(),
    };
    if length > u64::from(config.max_msg_size) {
        return invalid("message longer than the device allows");
    }
    match (qp.qp_type, wr.op) {
        (QpType::Ud, SendOp::Send | SendOp::SendWithImm(_)) => {
            let Some(ud) = wr.ud else {
                return invalid("a UD send needs a destination");
            };
            if !config.addrs.iter().any(|a| a.is_ipv4() == ud.ip.is_ipv4()) {
                return invalid("no address of the NIC's is of the UD destination's IP family");
            }
            if length > u64::from(qp.mtu.bytes()) {
                return invalid("a UD message must fit in one packet (path MTU)");
            }
        }
        (QpType::Ud, _) => return invalid("UD QPs only SEND"),
        (QpType::Uc, op) if op.is_read_or_atomic() || matches!(op, SendOp::SendWithInv(_)) => {
            return invalid("UC QPs do not READ, run atomics or SEND with invalidate");
        }
        (QpType::Rc, op) if op.is_read_or_atomic() && qp.max_rd_atomic == 0 => {
            return invalid("max_rd_atomic is 0: no READ or atomic can be outstanding");
        }
        (_, op) if op.is_atomic() && length < 8 => {
            return invalid("an atomic needs 8 bytes of local memory for the original value");
        }
        _ => {}
    }
    if (wr.inline || wr.inline_data.is_some()) && length > config.max_inline as u64 {
        return invalid("inline data over max_inline");
    }
    if wr.inline_data.is_some() {
        if wr.op.is_read_or_atomic() {
            return invalid("a READ or an atomic cannot be inline: it needs memory to land in");
        }
    } else if wr.inline {
        let gathered = InlineData::gathered(length as usize, |data| {
            qp::gather(&shared.mrs, &wr.sgl, 0, data)
        });
        let Some(data) = gathered else {
            let sge = wr.sgl.first().copied().unwrap_or(Sge {
                addr: 0,
                length: 0,
                lkey: 0,
            });
            return Err(VerbsError::BadSge {
                addr: sge.addr,
                len: sge.length,
                lkey: sge.lkey,
            });
        };
        wr.inline_data = Some(data);
    } else {
        // READ responses and atomic results land in the SGL: it needs local write rights.
        let lands = matches!(wr.op, SendOp::RdmaRead(_)) || wr.op.is_atomic();
        check_sgl(shared, qp.pd, &wr.sgl, lands)?;
    }
    let npsn = match wr.op {
        op if op.is_atomic() => 1,
        _ => (length as u32).div_ceil(qp.mtu.bytes()).max(1),
    };
    Ok(Shape {
        length: length as u32,
        npsn,
    })
}

/// Every SGE lies inside a region of the PD; `write` asks for local write rights.
pub(super) fn check_sgl(
    shared: &Shared,
    pd: PdHandle,
    sgl: &[Sge],
    write: bool,
) -> Result<(), VerbsError> {
    for sge in sgl {
        let bad = || VerbsError::BadSge {
            addr: sge.addr,
            len: sge.length,
            lkey: sge.lkey,
        };
        let entry = shared.mrs.get(&sge.lkey).ok_or_else(bad)?;
        if entry.mr.pd() != pd
            || (write && !entry.mr.access().contains(Access::LOCAL_WRITE))
            || entry.mr.offset_of(sge.addr, sge.length.into()).is_none()
        {
            return Err(bad());
        }
    }
    Ok(())
}
