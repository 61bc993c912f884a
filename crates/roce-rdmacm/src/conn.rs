//! What an `rdma_cm_id` does through the engine's connection manager: listen, connect,
//! accept, reject, disconnect, and the events these bring (`materialize`), with the
//! behaviour of librdmacm 44 over the kernel's rdma_cm:
//! - the RDMA IP CM service ID of the port space and port (`cma_get_service_id`);
//! - a CONNECT_REQUEST makes a child id on the listener's channel, with the listener's
//!   context (`cma_ib_new_conn_id`); a synchronous listener's child gets its own channel, as
//!   `rdma_get_request` migrates it;
//! - a REJECTED, UNREACHABLE or CONNECT_ERROR moves the id's QP to the error state
//!   (`ucma_process_conn_resp` and friends: a thread waiting on its receives wakes up);
//! - a synchronous id's `rdma_connect`, `rdma_accept`, `rdma_disconnect` and
//!   `rdma_get_request` wait for their event (`ucma_complete`).

use std::ffi::c_int;

use crate::Errno;
use crate::abi::{IbvQpAttr, event, qp};
use crate::inbox;
use crate::state::{self, EINVAL, Id, Phase, Tables, with};
use crate::{ibv, id};

mod active;
mod cm_event;
mod passive;

pub(crate) use active::{connect, establish};
pub(crate) use cm_event::materialize;
pub(crate) use passive::{accept, get_request, listen, reject};

/// Responder resources and initiator depth without a `conn_param`: the device's
/// `max_qp_rd_atom` (librdmacm takes the device's).
const DEFAULT_RD_ATOMIC: u8 = 128;

/// `RDMA_MAX_RESP_RES` and `RDMA_MAX_INIT_DEPTH`: "as many as the device allows".
const RDMA_MAX_RD_ATOMIC: u8 = 0xff;

/// A `conn_param`'s responder resources or initiator depth as librdmacm takes it
/// (`rdma_connect`, `rdma_accept`, `ucma_valid_param`): `RDMA_MAX_*` is the device's maximum
/// (`max_qp_rd_atom`, `max_qp_init_rd_atom`: 128, as rxe's), a larger value `EINVAL`.
fn rd_atomic(v: u8) -> Result<u8, Errno> {
    match v {
        RDMA_MAX_RD_ATOMIC => Ok(DEFAULT_RD_ATOMIC),
        v if v > DEFAULT_RD_ATOMIC => Err(EINVAL),
        v => Ok(v),
    }
}

/// `param` with its responder resources and initiator depth taken as [`rd_atomic`] takes them.
fn with_rd_atomic(param: ConnParam) -> Result<ConnParam, Errno> {
    Ok(ConnParam {
        responder_resources: rd_atomic(param.responder_resources)?,
        initiator_depth: rd_atomic(param.initiator_depth)?,
        ..param
    })
}

/// The RDMA IP CM service ID of port `port` in port space `ps` (`cma_get_service_id`).
pub(crate) fn service_id(ps: c_int, port: u16) -> u64 {
    ((ps as u64 & 0xffff) << 16) | u64::from(port)
}

/// What the program's `struct rdma_conn_param` asks for, read by value.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnParam {
    pub(crate) private_data: Vec<u8>,
    /// The QP number to announce when the id has no QP (the program moves its QP itself).
    pub(crate) qp_num: u32,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
}

/// The channel of `id`'s CM events, made for a synchronous id the first time.
fn events_channel(t: &mut Tables, id: usize) -> Result<usize, Errno> {
    let i = t.ids.get(&id).ok_or(EINVAL)?;
    if let Some(ch) = i.events_channel() {
        return Ok(ch);
    }
    let ch = state::new_channel(t)?;
    if let Some(i) = t.ids.get_mut(&id) {
        i.sync_channel = Some(ch);
    }
    Ok(ch)
}

/// Whether `id` is synchronous (made with a NULL channel).
fn is_sync(id: usize) -> bool {
    with(|t| t.ids.get(&id).is_some_and(|i| i.channel.is_none()))
}

/// `rdma_init_qp_attr`: the attributes that take the id's QP to `qp_attr->qp_state` (INIT,
/// RTR or RTS) and their mask, as the CM would give them: from the connection once there is
/// one (the REQ came, or the REP), else INIT's alone (`id::init_attr`).
pub(crate) fn init_qp_attr(id: usize, state: c_int) -> Result<(IbvQpAttr, c_int), Errno> {
    let (conn, qp_type) =
        with(|t| t.ids.get(&id).map(|i| (i.conn, i.c.get().qp_type))).ok_or(EINVAL)?;
    match (conn, state) {
        (Some(conn), _) => ibv::cm_init_qp_attr(conn, state),
        //= rxe:cma.c/cma_ib_init_qp_attr
        //# INIT before a connection: P_Key index, port, and no remote access (a Q_Key for UD)
        (None, qp::STATE_INIT) => Ok(id::init_attr(qp_type)),
        (None, _) => Err(EINVAL),
    }
}

/// `rdma_disconnect`: the QP to the error state, and a DREQ (or the DREP that answers the
/// peer's). A connection already down is no error, as with rdma_cm.
pub(crate) fn disconnect(id: usize) -> Result<(), Errno> {
    let wait = with(|t| {
        let ch = events_channel(t, id)?;
        let i = t.ids.get_mut(&id).ok_or(EINVAL)?;
        let Some(conn) = i.conn else {
            return Err(EINVAL);
        };
        let was = i.phase;
        i.phase = Phase::Disconnected;
        // The engine moves the QP to the error state and sends the DREQ or DREP; a connection
        // already in timewait refuses, which rdma_cm does not report.
        let sent = ibv::cm_disconnect(conn).is_ok();
        if !sent {
            fail_qp(i);
        }
        // A synchronous id waits for DISCONNECTED unless it was reported already.
        Ok((sent && was != Phase::Disconnected).then_some(ch))
    })?;
    if let Some(ch) = wait
        && is_sync(id)
    {
        complete(id, ch, event::DISCONNECTED)?;
    }
    Ok(())
}

/// Waits on a synchronous id's channel for `want` (`ucma_complete`): its failure as librdmacm
/// gives it (REJECTED is `ECONNREFUSED`, UNREACHABLE `ETIMEDOUT`).
fn complete(id: usize, channel: usize, want: c_int) -> Result<(), Errno> {
    loop {
        let e = state::get_event(channel)? as usize;
        let got = with(|t| t.events.get(&e).map(|e| e.c.get()));
        let _ = state::ack_event(e);
        let Some(ev) = got else { continue };
        if ev.id as usize != id {
            continue;
        }
        return match ev.event {
            x if x == want => Ok(()),
            event::REJECTED => Err(Errno(libc::ECONNREFUSED)),
            _ if ev.status < 0 => Err(Errno(-ev.status)),
            // DISCONNECTED while waiting for ESTABLISHED, and the like.
            _ => Err(Errno(libc::ECONNRESET)),
        };
    }
}

/// Moves an id's QP to the error state.
fn fail_qp(i: &Id) {
    let qp = i.c.get().qp as usize;
    if qp != 0 {
        let err = IbvQpAttr {
            qp_state: qp::STATE_ERR,
            ..IbvQpAttr::default()
        };
        let _ = ibv::modify_qp(qp, err, qp::ATTR_STATE);
    }
}

/// At exit, what the kernel does when a process's rdma_cm file closes (`ucma_close` destroys
/// every id of the file): each id still listening stops, a request not answered is rejected,
/// a connection up or being made is disconnected (the DREQ leaves; libibverbs's at-exit,
/// which runs after this one, lets the NIC send it), and a DREQ not answered gets its DREP.
/// A program that returns from `main` with a connection up (qperf's server does) thus ends it
/// at once for the peer, which otherwise would wait out its own timeouts.
pub(crate) fn close_all() {
    with(|t| {
        for i in t.ids.values_mut() {
            close(i);
        }
    });
}

/// What `rdma_destroy_id` does to the id's connection and listener: a request not answered
/// is rejected, a connection up is disconnected, the listener goes; later events of either
/// are dropped.
pub(crate) fn close(i: &mut Id) {
    if let Some(h) = i.listen.take() {
        inbox::unroute_listen(h);
        let _ = ibv::cm_unlisten(h);
    }
    if let Some(conn) = i.conn.take() {
        inbox::close_conn(conn);
        let _ = match i.phase {
            Phase::Requested => ibv::cm_reject(conn, &[]),
            // Disconnected: the peer's DREQ came and the program did not answer it; the DREP
            // leaves now (ib_destroy_cm_id in DREQ_RCVD sends it). In timewait the engine
            // refuses, harmlessly.
            Phase::Connecting | Phase::Accepting | Phase::Connected | Phase::Disconnected => {
                ibv::cm_disconnect(conn)
            }
            _ => Ok(()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_ids_are_the_port_space_and_the_port() {
        // rping's default port 7174 in the TCP port space (cma_get_service_id).
        assert_eq!(
            service_id(crate::abi::RDMA_PS_TCP, 7174),
            0x0000_0000_0106_1c06
        );
        assert_eq!(
            service_id(crate::abi::RDMA_PS_UDP, 1),
            0x0000_0000_0111_0001
        );
    }
}
