//! The engine's connection manager for roce-emu's librdmacm (safe code: the private interface
//! of `roce_cabi::cm`, its C side in `ffi_cm.rs`).
//!
//! librdmacm names a QP by the `struct ibv_qp *` this library gave it; the CM calls here turn
//! it into the engine's QP number, draw the QP's first PSN (the kernel's rdma_cm draws it,
//! `cma_init_conn_qp`: the engine draws no random number), and take the path MTU from the
//! port. The events the engine raises go to the sink librdmacm installed, as records.

use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;

use roce_cabi::cm::{CmEventRecord, CmSink, ip_to_bytes, kind};
use roce_core::{
    AcceptParams, CmError, CmEvent, ConnId, ConnectParams, ListenHandle, Psn, SidrParams,
};
use roce_device::Verb;

use crate::state::{self, Errno};
use crate::verbs;

/// A connect, as librdmacm asks for it.
#[derive(Debug, Clone)]
pub(crate) struct Connect {
    /// Our QP; 0 when the consumer moves it itself and only `qp_num` is announced.
    pub(crate) qp: usize,
    pub(crate) qp_num: u32,
    pub(crate) local: IpAddr,
    pub(crate) peer: IpAddr,
    pub(crate) service_id: u64,
    pub(crate) src_port: u16,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) private_data: Vec<u8>,
}

/// An accept, as librdmacm asks for it.
#[derive(Debug, Clone)]
pub(crate) struct Accept {
    /// Our QP; 0 when the consumer moves it itself and only `qp_num` is announced.
    pub(crate) qp: usize,
    pub(crate) qp_num: u32,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) private_data: Vec<u8>,
}

/// The errno librdmacm's callers get for a refused CM call.
fn cm_err(e: CmError) -> Errno {
    match e {
        CmError::ServiceInUse(_) => Errno(libc::EADDRINUSE),
        CmError::Exhausted(_) => Errno(libc::ENOMEM),
        CmError::Qp(v) => verbs::engine_err(v),
        _ => Errno(libc::EINVAL),
    }
}

/// A first PSN of 24 random bits.
fn random_psn() -> Psn {
    Psn::new(RandomState::new().hash_one(std::time::SystemTime::now()) as u32)
}

/// Runs `f` on the running NIC: `ENODEV` before a context was opened.
fn on_engine<R>(f: impl FnOnce(&mut roce_core::Nic, roce_core::Instant) -> R) -> Result<R, Errno> {
    let engine = state::running_engine()?;
    engine
        .device
        .verb(Verb::Other, f)
        .map_err(|_| Errno(libc::EIO))
}

/// `roce_cm_listen`.
pub(crate) fn listen(service_id: u64) -> Result<u32, Errno> {
    on_engine(|nic, now| nic.cm_listen(now, service_id))?
        .map(|h| h.0)
        .map_err(cm_err)
}

/// `roce_cm_unlisten`.
pub(crate) fn unlisten(listen: u32) -> Result<(), Errno> {
    on_engine(|nic, _| nic.cm_unlisten(ListenHandle(listen)))?.map_err(cm_err)
}

/// `roce_cm_connect`: the REQ leaves.
pub(crate) fn connect(c: Connect) -> Result<u32, Errno> {
    let qpn = announced(c.qp, c.qp_num)?;
    let mtu = state::device()?
        .ok_or(Errno(libc::ENODEV))?
        .model
        .spec
        .mtu();
    let mut p = ConnectParams::new(qpn, c.local, c.peer, c.service_id, random_psn());
    p.consumer_qp = c.qp == 0;
    p.src_port = c.src_port;
    p.private_data = c.private_data;
    p.responder_resources = c.responder_resources;
    p.initiator_depth = c.initiator_depth;
    p.retry_count = c.retry_count;
    p.rnr_retry_count = c.rnr_retry_count;
    p.mtu = mtu;
    on_engine(|nic, now| nic.cm_connect(now, &p))?
        .map(|c| c.0)
        .map_err(cm_err)
}

/// `roce_cm_accept`: the QP goes to RTR and RTS, the REP leaves.
pub(crate) fn accept(conn: u32, a: Accept) -> Result<(), Errno> {
    let qpn = announced(a.qp, a.qp_num)?;
    let mut p = AcceptParams::new(qpn, random_psn());
    p.consumer_qp = a.qp == 0;
    p.private_data = a.private_data;
    p.responder_resources = a.responder_resources;
    p.initiator_depth = a.initiator_depth;
    p.rnr_retry_count = a.rnr_retry_count;
    on_engine(|nic, now| nic.cm_accept(now, ConnId(conn), &p))?.map_err(cm_err)
}

/// `roce_cm_reject`: a REJ, or the SIDR_REP that refuses a SIDR request.
pub(crate) fn reject(conn: u32, private_data: &[u8]) -> Result<(), Errno> {
    on_engine(|nic, now| {
        if nic.cm_is_sidr_request(ConnId(conn)) {
            nic.cm_sidr_reject(now, ConnId(conn), private_data)
        } else {
            nic.cm_reject(now, ConnId(conn), private_data)
        }
    })?
    .map_err(cm_err)
}

/// `roce_cm_sidr_resolve`: the SIDR_REQ leaves.
pub(crate) fn sidr_resolve(c: Connect) -> Result<u32, Errno> {
    let p = SidrParams {
        local: c.local,
        peer: c.peer,
        service_id: c.service_id,
        src_port: c.src_port,
        private_data: c.private_data,
    };
    on_engine(|nic, now| nic.cm_sidr_resolve(now, &p))?
        .map(|c| c.0)
        .map_err(cm_err)
}

/// `roce_cm_sidr_accept`: the SIDR_REP with the UD QP at `qp`.
pub(crate) fn sidr_accept(
    conn: u32,
    qp: usize,
    qkey: u32,
    private_data: &[u8],
) -> Result<(), Errno> {
    let qpn = verbs::qpn_of(qp)?;
    on_engine(|nic, now| nic.cm_sidr_accept(now, ConnId(conn), qpn, qkey, private_data))?
        .map_err(cm_err)
}

/// The QP number a REQ or REP announces: the engine's number of our QP at `qp`, or with none
/// (0: the consumer moves its QP itself) the 24 bits of `qp_num` as given.
fn announced(qp: usize, qp_num: u32) -> Result<roce_core::Qpn, Errno> {
    if qp == 0 {
        Ok(roce_core::Qpn::new(qp_num & 0x00ff_ffff))
    } else {
        verbs::qpn_of(qp)
    }
}

/// `roce_cm_establish`.
pub(crate) fn establish(conn: u32) -> Result<(), Errno> {
    on_engine(|nic, now| nic.cm_establish(now, ConnId(conn)))?.map_err(cm_err)
}

/// `roce_cm_init_qp_attr`: the attributes and their mask that take the connection's QP to
/// `state` (an `enum ibv_qp_state`: INIT, RTR or RTS).
pub(crate) fn init_qp_attr(conn: u32, state: i32) -> Result<(crate::abi::IbvQpAttr, i32), Errno> {
    use roce_core::QpState::{Init, Rtr, Rts};
    let state = verbs::qp_state(state)
        .ok()
        .filter(|s| matches!(s, Init | Rtr | Rts))
        .ok_or(Errno(libc::EINVAL))?;
    let attr = on_engine(|nic, _| nic.cm_qp_attr(ConnId(conn), state))?.map_err(cm_err)?;
    let device = state::device()?.ok_or(Errno(libc::ENODEV))?;
    Ok(verbs::c_qp_attr(&attr, &device.model))
}

/// `roce_cm_disconnect`.
pub(crate) fn disconnect(conn: u32) -> Result<(), Errno> {
    on_engine(|nic, now| nic.cm_disconnect(now, ConnId(conn)))?.map_err(cm_err)
}

/// At exit: lets the NIC's thread send the CM's last MADs (at most 100 ms). A program that
/// answers the peer's DREQ with `rdma_disconnect` and returns from `main` at once would
/// otherwise take the DREP with it, and the peer would wait out its DREQ retries (the kernel's
/// CM sends it from the kernel, which outlives the process).
pub(crate) fn flush() {
    let Ok(engine) = state::running_engine() else {
        return;
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(100);
    let mut waited = false;
    while std::time::Instant::now() < deadline {
        match engine.device.verb(Verb::Other, |nic, _| nic.gsi_waiting()) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                waited = true;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
    if waited {
        // Taken from the queue is not yet sent: the send ends the device's turn.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// `roce_cm_set_sink`: from now on every CM event of the engine goes to `sink` (before, they
/// wait in the engine).
pub(crate) fn set_sink(sink: CmSink) -> Result<(), Errno> {
    let engine = state::running_engine()?;
    engine
        .device
        .on_cm_event(move |event| sink(&record(&event)));
    Ok(())
}

/// The record of a request for a listener: the listener, the service, the peer's address,
/// ours and the peer's port.
fn request(
    listen: ListenHandle,
    service_id: u64,
    (peer, local, peer_port): (IpAddr, IpAddr, Option<u16>),
) -> CmEventRecord {
    CmEventRecord {
        listen: listen.0,
        peer: ip_to_bytes(peer),
        local: ip_to_bytes(local),
        service_id,
        peer_port: peer_port.unwrap_or(0),
        ..CmEventRecord::default()
    }
}

/// The record of `event`; its private data points into the event, which outlives the call.
pub(crate) fn record(event: &CmEvent) -> CmEventRecord {
    let mut r = CmEventRecord::default();
    let none: &[u8] = &[];
    // Each event's kind, connection, status and private data; the fields of its own.
    let (kind, conn, status, data) = match event {
        CmEvent::ConnectRequest(req) => {
            r = request(
                req.listen,
                req.service_id,
                (req.peer, req.local, req.peer_port),
            );
            r.responder_resources = req.responder_resources;
            r.initiator_depth = req.initiator_depth;
            r.retry_count = req.retry_count;
            r.rnr_retry_count = req.rnr_retry_count;
            r.srq = u8::from(req.srq);
            r.peer_qpn = req.peer_qpn.value();
            (kind::CONNECT_REQUEST, req.conn, 0, &req.private_data[..])
        }
        CmEvent::Established { conn, private_data } => {
            (kind::ESTABLISHED, *conn, 0, &private_data[..])
        }
        CmEvent::ConnectResponse { conn, private_data } => {
            (kind::CONNECT_RESPONSE, *conn, 0, &private_data[..])
        }
        CmEvent::Rejected {
            conn,
            reason,
            private_data,
        } => (
            kind::REJECTED,
            *conn,
            i32::from(u16::from(*reason)),
            &private_data[..],
        ),
        CmEvent::ConnectError { conn, error } => (
            kind::CONNECT_ERROR,
            *conn,
            verbs::engine_err(*error).0,
            none,
        ),
        CmEvent::Unreachable { conn } => (kind::UNREACHABLE, *conn, 0, none),
        CmEvent::Disconnected { conn } => (kind::DISCONNECTED, *conn, 0, none),
        CmEvent::TimewaitExit { conn } => (kind::TIMEWAIT_EXIT, *conn, 0, none),
        CmEvent::SidrRequest(req) => {
            r = request(
                req.listen,
                req.service_id,
                (req.peer, req.local, req.peer_port),
            );
            (kind::SIDR_REQUEST, req.conn, 0, &req.private_data[..])
        }
        CmEvent::SidrResolved {
            conn,
            qpn,
            qkey,
            private_data,
        } => {
            r.peer_qpn = qpn.value();
            r.qkey = *qkey;
            (kind::SIDR_RESOLVED, *conn, 0, &private_data[..])
        }
        CmEvent::SidrRejected {
            conn,
            status,
            private_data,
        } => (
            kind::SIDR_REJECTED,
            *conn,
            i32::from(u8::from(*status)),
            &private_data[..],
        ),
    };
    r.kind = kind;
    r.conn = conn.0;
    r.status = status;
    r.private_data_len = u32::try_from(data.len()).unwrap_or(0);
    if !data.is_empty() {
        r.private_data = data.as_ptr();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_wire::mad::rej::RejectReason;

    #[test]
    fn a_rejection_carries_its_reason_number_and_private_data() {
        let event = CmEvent::Rejected {
            conn: ConnId(7),
            reason: RejectReason::InvalidServiceId,
            private_data: vec![1, 2, 3],
        };
        let r = record(&event);
        assert_eq!((r.kind, r.conn, r.status), (kind::REJECTED, 7, 8));
        assert_eq!(r.private_data_len, 3);
        assert!(!r.private_data.is_null());
    }

    #[test]
    fn a_connect_request_carries_the_peer_and_what_it_asks_for() {
        let req = roce_core::ConnectRequest {
            conn: ConnId(3),
            listen: ListenHandle(1),
            service_id: 0x0106_0000_0000_1c06,
            peer: "198.18.0.2".parse().unwrap(),
            local: "198.18.0.1".parse().unwrap(),
            peer_port: Some(40000),
            private_data: Vec::new(),
            peer_qpn: roce_core::Qpn::new(0x11),
            peer_psn: Psn::new(5),
            mtu: roce_core::Mtu::Mtu1024,
            responder_resources: 4,
            initiator_depth: 2,
            retry_count: 6,
            rnr_retry_count: 7,
            srq: true,
        };
        let r = record(&CmEvent::ConnectRequest(Box::new(req)));
        assert_eq!(r.kind, kind::CONNECT_REQUEST);
        assert_eq!(
            (r.conn, r.listen, r.peer_port, r.peer_qpn),
            (3, 1, 40000, 0x11)
        );
        assert_eq!(
            roce_cabi::cm::ip_from_bytes(r.peer),
            "198.18.0.2".parse::<IpAddr>().unwrap()
        );
        assert_eq!((r.responder_resources, r.initiator_depth), (4, 2));
        assert_eq!((r.retry_count, r.rnr_retry_count, r.srq), (6, 7, 1));
        assert_eq!(r.private_data_len, 0);
        assert!(r.private_data.is_null());
    }
}
