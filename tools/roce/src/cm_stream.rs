//! A message stream over an RC QP that the CM connected: perftest's `-R` control channel
//! (perftest_communication.c `rdma_write_data` / `rdma_read_data`: each message one signalled
//! SEND of its own length, each read one receive of at most `sizeof(struct pingpong_dest)`,
//! posted again at once).
//!
//! Each `poll_write` posts one SEND of the whole buffer (so a `write_all` of a message is one
//! SEND) and `poll_flush` waits for its completion; a read takes the bytes of the next received
//! message. Send and receive completions share one CQ and are told apart by their work request
//! IDs. A completion that does not come within the limit is an error, never a hang.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use roce_core::{
    CmState, ConnId, Cqe, MemoryRegion, QpState, Qpn, RecvWr, SendOp, SendWr, Sge, WcStatus,
};
use roce_device::{DeviceError, DeviceHandle, RcEndpoint, Verb};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest message: perftest's receive buffer, `sizeof(struct pingpong_dest)`.
pub(crate) const SLOT: usize = roce_oob::perftest::KEY_STRUCT_SIZE;
/// Receives kept posted (perftest keeps one; the exchange never has two messages in flight).
const RECEIVES: usize = 4;
/// The send's work request ID; receive `i` is `RECV_BASE + i`.
const SEND_ID: u64 = 0x5e5d;
const RECV_BASE: u64 = 0x1000;

type Wait = Pin<Box<dyn Future<Output = Result<Cqe, DeviceError>>>>;

/// The stream; `endpoint`'s QP must be connected (or about to be) and owns the region.
pub(crate) struct CmStream {
    device: DeviceHandle,
    qpn: Qpn,
    cq: roce_core::CqHandle,
    /// Slot 0 sends; slots 1..=RECEIVES receive.
    mr: MemoryRegion,
    inbound: VecDeque<u8>,
    posted: u64,
    completed: u64,
    wait: Option<Wait>,
    limit: Duration,
    /// The connection, once made: while it is up, a wait longer than `limit` goes on (the
    /// server of a one-way test hears nothing until the client's traffic is over).
    conn: Option<ConnId>,
}

impl std::fmt::Debug for CmStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmStream")
            .field("qpn", &self.qpn)
            .field("inbound", &self.inbound.len())
            .field("posted", &self.posted)
            .field("completed", &self.completed)
            .finish_non_exhaustive()
    }
}

impl CmStream {
    /// Registers the buffer of `endpoint`'s QP (in INIT) and posts its receives: call before
    /// the connection's REQ or accept, as perftest posts its receive before `rdma_connect` /
    /// `rdma_accept`. A completion not within `limit` fails the read or flush.
    pub(crate) async fn new(endpoint: &RcEndpoint, limit: Duration) -> anyhow::Result<Self> {
        let device = endpoint.device.clone();
        let mr = device
            .reg_mr(
                endpoint.pd,
                SLOT * (RECEIVES + 1),
                roce_core::Access::LOCAL_WRITE,
            )
            .await?;
        let stream = Self {
            device,
            qpn: endpoint.qpn,
            cq: endpoint.cq,
            mr,
            inbound: VecDeque::new(),
            posted: 0,
            completed: 0,
            wait: None,
            limit,
            conn: None,
        };
        for slot in 0..RECEIVES {
            stream.post_recv(slot).map_err(io_to_anyhow)?;
        }
        Ok(stream)
    }

    /// The CM connection of the QP: a wait goes on as long as it is established.
    pub(crate) fn set_conn(&mut self, conn: ConnId) {
        self.conn = Some(conn);
    }

    /// Whether the connection is still up (not disconnected by the peer).
    fn connection_up(&self) -> bool {
        let Some(conn) = self.conn else {
            return false;
        };
        let qpn = self.qpn;
        self.device
            .verb(Verb::Other, move |nic, _| {
                nic.cm_state(conn) == Some(CmState::Established)
                    && nic.qp_state(qpn).is_ok_and(|s| s == QpState::Rts)
            })
            .unwrap_or(false)
    }

    fn sge(&self, slot: usize, len: usize) -> Sge {
        Sge {
            addr: self.mr.addr() + (slot * SLOT) as u64,
            length: len as u32,
            lkey: self.mr.lkey(),
        }
    }

    fn post_recv(&self, receive: usize) -> io::Result<()> {
        let wr = RecvWr {
            wr_id: RECV_BASE + receive as u64,
            sgl: [self.sge(receive + 1, SLOT)].into(),
        };
        let qpn = self.qpn;
        self.device
            .verb(Verb::PostRecv, move |nic, _| nic.post_recv(qpn, wr))
            .map_err(io::Error::other)?
            .map_err(io::Error::other)
    }

    /// Waits for one completion and takes it in: a send's counts, a receive's bytes join the
    /// inbound queue and its receive is posted again.
    fn poll_completion(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = loop {
            let wait = self.wait.get_or_insert_with(|| {
                let (device, cq, limit) = (self.device.clone(), self.cq, self.limit);
                Box::pin(async move { device.next_completion_within(cq, limit).await })
            });
            let done = ready!(wait.as_mut().poll(cx));
            self.wait = None;
            if matches!(done, Err(DeviceError::Timeout(_))) && self.connection_up() {
                tracing::debug!("control connection: still waiting for the peer");
                continue;
            }
            break done;
        };
        let cqe = done.map_err(|err| match err {
            DeviceError::Timeout(_) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "nothing from the peer on the control connection for {} s, and the \
                     connection is down (the peer disconnected)",
                    self.limit.as_secs()
                ),
            ),
            other => io::Error::other(other),
        })?;
        if cqe.status != WcStatus::Success {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!(
                    "the control connection failed: {:?} completion (wr_id {:#x})",
                    cqe.status, cqe.wr_id
                ),
            )));
        }
        if cqe.wr_id == SEND_ID {
            self.completed += 1;
            return Poll::Ready(Ok(()));
        }
        let Some(receive) = cqe
            .wr_id
            .checked_sub(RECV_BASE)
            .and_then(|r| usize::try_from(r).ok())
            .filter(|r| *r < RECEIVES)
        else {
            return Poll::Ready(Err(io::Error::other(format!(
                "a completion of an unknown work request {:#x} on the control connection",
                cqe.wr_id
            ))));
        };
        let len = (cqe.byte_len as usize).min(SLOT);
        let bytes = self
            .mr
            .read((receive + 1) * SLOT, len)
            .ok_or_else(|| io::Error::other("control buffer out of range"))?;
        self.inbound.extend(bytes);
        self.post_recv(receive)?;
        Poll::Ready(Ok(()))
    }
}

fn io_to_anyhow(err: io::Error) -> anyhow::Error {
    anyhow::Error::new(err).context("cannot post the control connection's receives")
}

impl AsyncRead for CmStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.inbound.is_empty() {
            ready!(this.poll_completion(cx))?;
        }
        let n = buf.remaining().min(this.inbound.len());
        let bytes: Vec<u8> = this.inbound.drain(..n).collect();
        buf.put_slice(&bytes);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for CmStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.len() > SLOT {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {}-byte message: perftest's receive takes {SLOT}",
                    buf.len()
                ),
            )));
        }
        // One send buffer: the last SEND must be done before it is written again.
        while this.completed < this.posted {
            ready!(this.poll_completion(cx))?;
        }
        if !this.mr.write(0, buf) {
            return Poll::Ready(Err(io::Error::other("control buffer out of range")));
        }
        let wr = SendWr::new(SEND_ID, SendOp::Send, this.sge(0, buf.len()));
        let qpn = this.qpn;
        this.device
            .verb(Verb::PostSend, move |nic, _| nic.post_send(qpn, wr))
            .map_err(io::Error::other)?
            .map_err(io::Error::other)?;
        this.posted += 1;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.completed < this.posted {
            ready!(this.poll_completion(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}
