//! `roce perf -R`: perftest's rdma_cm flavour (perftest_communication.c at `v4.5-0.17`).
//!
//! 1. `establish_connection` → `rdma_client_connect` / `rdma_server_connect`: the control
//!    connection, one RC QP connected by the CM to the server's `-p` port (service ID
//!    `0x0106 << 16 | port`), no private data, responder resources and initiator depth 0,
//!    retry count `-r`'s 7, RNR retry 7; each side posts its one receive before the REQ / the
//!    accept, and the server stops listening once it accepted;
//! 2. the exchange of the TCP flavour over it, each message one SEND ([`CmStream`]), keys as
//!    the binary `struct pingpong_dest`;
//! 3. `create_rdma_cm_connection`: a handshake; the server listens on the same port again and
//!    accepts `-q` REQs (ours listens before the handshake: [`listen_for_data`]), the client
//!    connects each test QP (again 10 times, 100 ms apart, while the server has no listener
//!    yet: `rdma_cm_client_connection`); a handshake. Responder
//!    resources and initiator depth are the out_reads (128 here) for READ and atomics, 0
//!    otherwise; retry and RNR retry 7;
//! 4. at the end, `destroy_ctx`: every connection disconnected.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use roce_core::cm::{AcceptParams, ConnId, ConnectParams, ListenHandle};
use roce_core::{Access, Mtu, Psn};
use roce_device::{DeviceHandle, RcEndpoint};
use roce_oob::perftest::{Side, Verb};

use super::Args;
use super::setup::Qps;
use crate::cm;
use crate::cm_stream::CmStream;

/// perftest's tries of a test QP's connect (`rdma_cm_client_connection`: `max_retries = 10`).
const DATA_TRIES: u32 = 10;
/// Outstanding READs and atomics each side offers (`out_reads`, as the TCP flavour announces).
const OUT_READS: u8 = super::setup::OUT_READS as u8;

/// The device on --ip, or for a client the address its host sends from to reach the server.
pub(super) fn spawn_device(args: &Args) -> anyhow::Result<(DeviceHandle, IpAddr)> {
    let ip = match (&args.server, args.device.ip) {
        (_, Some(ip)) => ip,
        (Some(server), None) => cm::source_for(cm::server_ip(server)?)?,
        (None, None) => bail!(
            "-R: the server needs --ip ADDR, the address its CM listens on (there is no TCP \
             connection to take it from)"
        ),
    };
    args.device.spawn(ip)
}

/// A port for the `cma_hdr` of our REQs, as rdma_cm binds an ephemeral one.
fn ephemeral_port() -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    32768 + ((nanos ^ std::process::id()) % 28232) as u16
}

/// A 24-bit PSN that differs between runs (rdma_cm draws one per connection).
fn psn() -> Psn {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Psn::new((nanos.rotate_left(11) ^ std::process::id()) & 0x00ff_ffff)
}

fn connect_params(args: &Args, qpn: roce_core::Qpn, local: IpAddr, peer: IpAddr) -> ConnectParams {
    let mut params = ConnectParams::new(qpn, local, peer, cm::service(args.port), psn());
    params.src_port = ephemeral_port();
    params.responder_resources = 0;
    params.initiator_depth = 0;
    params.retry_count = 7;
    params.rnr_retry_count = 7;
    params
}

/// The control connection (step 1): its stream and its CM connection.
pub(super) async fn control(
    args: &Args,
    device: &DeviceHandle,
    local_ip: IpAddr,
    side: Side,
) -> anyhow::Result<(CmStream, ConnId)> {
    let limit = Duration::from_secs(args.timeout);
    let qp = RcEndpoint::create(device, 8).await?;
    qp.init(Access::LOCAL_WRITE).await?;
    let mut stream = CmStream::new(&qp, limit).await?;
    let conn = match (side, &args.server) {
        (Side::Client, Some(server)) => {
            let peer = cm::server_ip(server)?;
            let mut params = connect_params(args, qp.qpn, local_ip, peer);
            params.mtu = Mtu::from_bytes(args.mtu).unwrap_or(Mtu::Mtu1024);
            cm::connect(device, &params, args.port, limit).await?.0
        }
        _ => {
            let listen = cm::listen(device, args.port)?;
            eprintln!(
                "roce perf: waiting for a client on {local_ip} port {} through the CM (service \
                 ID {:#018x})",
                args.port,
                cm::service(args.port)
            );
            let req = cm::request(device, None).await?;
            cm::unlisten(device, listen)?;
            let mut params = AcceptParams::new(qp.qpn, psn());
            params.responder_resources = 0;
            params.initiator_depth = 0;
            cm::accept(device, &req, &params)?;
            req.conn
        }
    };
    stream.set_conn(conn);
    Ok((stream, conn))
}

/// The server's listener for the test QPs' connections, opened before step 3's first
/// handshake (`None` on the client). perftest's server listens again only after that
/// handshake, and its client connects as soon as the handshake is done: a client faster than
/// the server's second listen gets a REJ (reason 8, invalid service ID) that perftest 4.5-0.17
/// does not survive (its retry reuses the ids it destroyed). Listening first, our server has
/// the REQs wait as connect requests for [`connect_data`] instead.
pub(super) fn listen_for_data(
    args: &Args,
    device: &DeviceHandle,
    side: Side,
) -> anyhow::Result<Option<ListenHandle>> {
    match (side, &args.server) {
        (Side::Client, Some(_)) => Ok(None),
        _ => cm::listen(device, args.port).map(Some),
    }
}

/// The test QPs' connections (step 3, between the two handshakes), QP `i` to the peer's
/// `i`-th; the server accepts them on `listen` ([`listen_for_data`]) and stops listening.
pub(super) async fn connect_data(
    args: &Args,
    qps: &Qps,
    side: Side,
    verb: Verb,
    mtu: Mtu,
    listen: Option<ListenHandle>,
) -> anyhow::Result<Vec<ConnId>> {
    let limit = Duration::from_secs(args.timeout);
    let device = &qps.device;
    let reads = if matches!(verb, Verb::Read | Verb::Atomic) {
        OUT_READS
    } else {
        0
    };
    let mut conns = Vec::with_capacity(qps.endpoints.len());
    match (side, &args.server) {
        (Side::Client, Some(server)) => {
            let peer = cm::server_ip(server)?;
            for qp in &qps.endpoints {
                let mut params = connect_params(args, qp.qpn, qps.local_ip, peer);
                params.mtu = mtu;
                params.responder_resources = reads;
                params.initiator_depth = reads;
                let (conn, _) =
                    cm::connect_retrying(qp, Access::ALL, &params, args.port, limit, DATA_TRIES)
                        .await?;
                conns.push(conn);
            }
        }
        _ => {
            let listen = listen.context("the server listens before step 3 (listen_for_data)")?;
            let deadline = std::time::Instant::now() + limit;
            for qp in &qps.endpoints {
                let req = cm::request(device, Some(deadline)).await?;
                let mut params = AcceptParams::new(qp.qpn, psn());
                params.responder_resources = reads;
                params.initiator_depth = reads;
                cm::accept(device, &req, &params)?;
                conns.push(req.conn);
            }
            cm::unlisten(device, listen)?;
        }
    }
    Ok(conns)
}

/// Disconnects every connection, as perftest's `destroy_ctx` does at the end.
pub(super) async fn disconnect_all(device: &DeviceHandle, conns: &[ConnId]) {
    cm::disconnect(device, conns).await;
}
