//! perftest's `-R` flavour of the exchange (`Exchange::RdmaCm`): the same steps, the keys as
//! the 56-byte binary `struct pingpong_dest`, no `"done"`, and the two handshakes around the
//! data QPs' rdma_cm connections.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use roce_oob::OobError;
use roce_oob::perftest::{
    BwReport, Config, Exchange, KEY_STRUCT_SIZE, PerftestDest, Session, Side, Test,
};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf, duplex};

/// A stream that keeps every write, as the SENDs of the control connection would be.
struct Recorder {
    inner: DuplexStream,
    writes: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl AsyncRead for Recorder {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Recorder {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        self.writes.lock().unwrap().push(buf[..n].to_vec());
        Poll::Ready(Ok(n))
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn dest(qpn: u32) -> PerftestDest {
    PerftestDest {
        lid: 0,
        out_reads: 16,
        qpn,
        psn: 0x12_3456,
        rkey: 0xabcd_0000 | qpn,
        vaddr: 0x7f00_0000_0000 + u64::from(qpn),
        gid: Some([0; 16]),
        srqn: 0,
    }
}

/// One side of `ib_write_bw -R`: returns the peer's keys.
async fn side(stream: Recorder, side: Side, local: PerftestDest) -> Result<PerftestDest, OobError> {
    let test = Test::WRITE_BW;
    let mut session =
        Session::start_over(stream, side, test, &Config::default(), Exchange::RdmaCm).await?;
    session.rdma_cm_sync().await?;
    // Here the data QPs connect through the CM.
    session.rdma_cm_sync().await?;
    let remote = session.exchange_keys(local).await?;
    session.connected().await?;
    session.ready().await?;
    let finish = session.finish(&BwReport::default()).await?;
    assert_eq!(finish.peer_done, None, "no \"done\" with rdma_cm");
    Ok(remote)
}

#[tokio::test]
async fn write_bw_over_rdma_cm_sends_binary_keys_and_no_done() {
    let (a, b) = duplex(4096);
    let (wa, wb) = (Arc::default(), Arc::default());
    let client = Recorder {
        inner: a,
        writes: Arc::clone(&wa),
    };
    let server = Recorder {
        inner: b,
        writes: Arc::clone(&wb),
    };
    let (from_server, from_client) = tokio::join!(
        side(client, Side::Client, dest(0x11)),
        side(server, Side::Server, dest(0x22))
    );
    assert_eq!(from_server.unwrap(), dest(0x22));
    assert_eq!(from_client.unwrap(), dest(0x11));
    for writes in [wa, wb] {
        let writes = writes.lock().unwrap();
        let lens: Vec<usize> = writes.iter().map(Vec::len).collect();
        // Version, sys data (2), MTU; then the handshakes and the five report values.
        assert_eq!(&lens[..4], &[16, 4, 4, 2], "{lens:?}");
        // Two syncs around the CM connections, the keys, the per-QP sync, ready, the end
        // sync, the close: seven binary structs.
        let keys = lens.iter().filter(|&&n| n == KEY_STRUCT_SIZE).count();
        assert_eq!(keys, 7, "{lens:?}");
        assert_eq!(lens.iter().filter(|&&n| n == 8).count(), 5, "{lens:?}");
        // Nothing longer than perftest's one receive, and no "done".
        assert!(lens.iter().all(|&n| n <= KEY_STRUCT_SIZE), "{lens:?}");
        assert!(writes.iter().all(|w| w.as_slice() != b"done\0"), "{lens:?}");
        assert_eq!(lens.len(), 4 + 7 + 5, "{lens:?}");
    }
}

#[tokio::test]
async fn the_syncs_come_before_the_keys_only() {
    let (a, b) = duplex(4096);
    let wr = |inner| Recorder {
        inner,
        writes: Arc::default(),
    };
    let config = Config::default();
    let (client, server) = tokio::join!(
        Session::start_over(
            wr(a),
            Side::Client,
            Test::SEND_BW,
            &config,
            Exchange::RdmaCm
        ),
        Session::start_over(
            wr(b),
            Side::Server,
            Test::SEND_BW,
            &config,
            Exchange::RdmaCm
        )
    );
    let (mut client, mut server) = (client.unwrap(), server.unwrap());
    let (c, s) = tokio::join!(client.exchange_keys(dest(1)), server.exchange_keys(dest(2)));
    assert_eq!(c.unwrap(), dest(2));
    assert_eq!(s.unwrap(), dest(1));
    let err = client.rdma_cm_sync().await.unwrap_err();
    assert!(
        matches!(
            err,
            OobError::Sequence {
                called: "rdma_cm_sync",
                ..
            }
        ),
        "{err}"
    );
}
