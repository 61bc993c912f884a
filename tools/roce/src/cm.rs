//! `-R` of `roce pingpong` and `roce perf`: RC QPs connected through the engine's
//! communication manager (REQ, REP, RTU over QP 1, as rdma_cm connects them) instead of by
//! QP numbers exchanged over TCP.
//!
//! These functions wait for the CM's events (`DeviceHandle::next_cm_event`, woken as each is
//! raised) until a deadline, so that a peer that never answers ends in a clear error, never a
//! hang.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::Context;
use roce_core::cm::{
    AcceptParams, CmEvent, ConnId, ConnectParams, ConnectRequest, ListenHandle, PortSpace,
    ServiceId,
};
use roce_core::{Access, QpAttr, QpState};
use roce_device::{DeviceHandle, RcEndpoint, Verb};
use roce_wire::mad::rej::RejectReason;

/// The service ID rdma_cm gives TCP port `port` (`RDMA_PS_TCP`): what `rdma_listen` on that
/// port listens on and what `rdma_connect` to it asks for.
pub(crate) fn service(port: u16) -> u64 {
    ServiceId::new(PortSpace::TCP, port).0
}

/// Why a connect through the CM failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The peer answered the REQ with a REJ.
    #[error("{peer} port {port}: rejected: {}(reason {reason})", why(*reason))]
    Rejected {
        peer: IpAddr,
        port: u16,
        reason: RejectReason,
    },
    /// Nobody answered the REQ, however often it was sent.
    #[error(
        "{peer} port {port}: unreachable: the REQ was sent again and again and never answered \
         (no RoCE NIC at {peer}? a firewall on UDP 4791?)"
    )]
    Unreachable { peer: IpAddr, port: u16 },
    /// The REP came but our QP could not take its attributes.
    #[error("{peer} port {port}: connect error: our QP refused the peer's REP: {why}")]
    Qp {
        peer: IpAddr,
        port: u16,
        why: String,
    },
    /// No answer within the tool's timeout.
    #[error(
        "{peer} port {port}: no answer from the CM within {secs} s (is the peer's NIC up, and \
         was the peer given -R too?)"
    )]
    Timeout { peer: IpAddr, port: u16, secs: u64 },
    /// The device or the CM refused the call.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// What a rejection means to someone who typed a command.
fn why(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::InvalidServiceId => "no listener ",
        RejectReason::ConsumerDefined => "the peer's application refused ",
        RejectReason::StaleConn => "stale connection ",
        _ => "",
    }
}

impl ConnectError {
    /// Whether nobody listened: a server that is not listening yet may be soon.
    pub(crate) fn is_no_listener(&self) -> bool {
        matches!(
            self,
            Self::Rejected {
                reason: RejectReason::InvalidServiceId,
                ..
            }
        )
    }
}

/// The next CM event, or `None` once `deadline` has passed.
pub(crate) async fn next_event(device: &DeviceHandle, deadline: Instant) -> Option<CmEvent> {
    let event = device.next_cm_event(deadline).await;
    if let Some(event) = &event {
        tracing::debug!(?event, "cm event");
    }
    event
}

/// Sends a REQ with `params` and waits until the connection is up (the QP in RTS); returns the
/// connection and the REP's private data.
pub(crate) async fn connect(
    device: &DeviceHandle,
    params: &ConnectParams,
    port: u16,
    timeout: Duration,
) -> Result<(ConnId, Vec<u8>), ConnectError> {
    let peer = params.peer;
    let deadline = Instant::now() + timeout;
    let conn = device
        .verb(Verb::Other, |nic, now| nic.cm_connect(now, params))
        .map_err(anyhow::Error::from)?
        .with_context(|| format!("cannot connect to {peer} port {port} through the CM"))?;
    loop {
        let Some(event) = next_event(device, deadline).await else {
            return Err(ConnectError::Timeout {
                peer,
                port,
                secs: timeout.as_secs(),
            });
        };
        match event {
            CmEvent::Established {
                conn: c,
                private_data,
            } if c == conn => return Ok((conn, private_data)),
            CmEvent::Rejected {
                conn: c, reason, ..
            } if c == conn => return Err(ConnectError::Rejected { peer, port, reason }),
            CmEvent::Unreachable { conn: c } if c == conn => {
                return Err(ConnectError::Unreachable { peer, port });
            }
            CmEvent::ConnectError { conn: c, error } if c == conn => {
                return Err(ConnectError::Qp {
                    peer,
                    port,
                    why: error.to_string(),
                });
            }
            other => tracing::debug!(?other, "cm: an event for another connection"),
        }
    }
}

/// [`connect`], again every 100 ms while the peer has no listener yet, `tries` times at most,
/// as perftest's client does for its data QPs (`rdma_cm_client_connection`: 10 tries, 100 ms
/// apart). A rejection leaves the QP in the error state: it goes back to RESET and to INIT
/// with `access` before the next try.
pub(crate) async fn connect_retrying(
    qp: &RcEndpoint,
    access: Access,
    params: &ConnectParams,
    port: u16,
    timeout: Duration,
    tries: u32,
) -> Result<(ConnId, Vec<u8>), ConnectError> {
    let device = &qp.device;
    let mut left = tries.max(1);
    loop {
        match connect(device, params, port, timeout).await {
            Err(err) if err.is_no_listener() && left > 1 => {
                left -= 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                let reset = QpAttr {
                    qp_state: Some(QpState::Reset),
                    ..QpAttr::default()
                };
                device
                    .modify_qp(qp.qpn, reset)
                    .await
                    .context("cannot reset the QP after a rejection")?;
                qp.init(access)
                    .await
                    .context("cannot take the QP to INIT again")?;
            }
            other => return other,
        }
    }
}

/// Listens on TCP port `port`'s service ID.
pub(crate) fn listen(device: &DeviceHandle, port: u16) -> anyhow::Result<ListenHandle> {
    device
        .verb(Verb::Other, |nic, now| nic.cm_listen(now, service(port)))?
        .with_context(|| format!("cannot listen on port {port} through the CM"))
}

/// Stops listening.
pub(crate) fn unlisten(device: &DeviceHandle, listen: ListenHandle) -> anyhow::Result<()> {
    device
        .verb(Verb::Other, |nic, _| nic.cm_unlisten(listen))?
        .context("cannot stop listening through the CM")
}

/// Waits for a connect request, until `deadline` (`None`: for ever).
pub(crate) async fn request(
    device: &DeviceHandle,
    deadline: Option<Instant>,
) -> anyhow::Result<Box<ConnectRequest>> {
    loop {
        // Without a deadline, look again every minute.
        let until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(60));
        match next_event(device, until).await {
            Some(CmEvent::ConnectRequest(req)) => return Ok(req),
            Some(other) => tracing::debug!(?other, "cm: waiting for a connect request"),
            None if deadline.is_some() => {
                anyhow::bail!("no connect request came through the CM in time")
            }
            None => {}
        }
    }
}

/// Accepts `req` with `params` (the QP goes to RTR and RTS, the REP leaves).
pub(crate) fn accept(
    device: &DeviceHandle,
    req: &ConnectRequest,
    params: &AcceptParams,
) -> anyhow::Result<()> {
    device
        .verb(Verb::Other, |nic, now| nic.cm_accept(now, req.conn, params))?
        .with_context(|| format!("cannot accept the connection from {}", req.peer))
}

/// Disconnects `conns` (a DREQ each, or the DREP that answers the peer's) and waits up to a
/// second for every one to be down, so that the MADs leave before the process ends and a peer
/// waiting for its DISCONNECTED gets it; the outcome does not matter any more.
pub(crate) async fn disconnect(device: &DeviceHandle, conns: &[ConnId]) {
    let mut up: Vec<ConnId> = conns
        .iter()
        .copied()
        .filter(|&conn| {
            matches!(
                device.verb(Verb::Other, |nic, now| nic.cm_disconnect(now, conn)),
                Ok(Ok(()))
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(1);
    while !up.is_empty() {
        let Some(event) = next_event(device, deadline).await else {
            return;
        };
        if let CmEvent::Disconnected { conn } = event {
            up.retain(|&c| c != conn);
        }
    }
}

/// The address this host sends from to reach `server` (a UDP socket's, connected to it; no
/// packet leaves).
pub(crate) fn source_for(server: IpAddr) -> anyhow::Result<IpAddr> {
    let any: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let socket = UdpSocket::bind(any).context("no UDP socket for the route lookup")?;
    socket
        .connect(SocketAddr::new(server, 9))
        .with_context(|| format!("no route to {server}"))?;
    Ok(socket.local_addr()?.ip())
}

/// `server` as an address (the CM needs one: no name lookup).
pub(crate) fn server_ip(server: &str) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = server.parse() {
        return Ok(ip);
    }
    use std::net::ToSocketAddrs;
    (server, 0)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {server}"))?
        .map(|a| a.ip())
        .find(IpAddr::is_ipv4)
        .with_context(|| format!("{server} has no IPv4 address"))
}
