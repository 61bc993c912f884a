//! `roce pingpong`: ibv_rc_pingpong's test, speaking its out-of-band protocol byte for byte, so
//! either side can be the real `ibv_rc_pingpong` (on rxe or hardware).

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use roce_core::cm::{AcceptParams, CmEvent, ConnId, ConnectParams};
use roce_core::{Access, Mtu, Psn, Qpn, RecvWr, SendOp, SendWr, Sge, WcStatus};
use roce_device::{Connection, DeviceHandle, RcEndpoint};
use roce_oob::pingpong::{self, Dest};
use roce_wire::Gid;
use serde_json::json;

/// Ping-pong SENDs over an RC QP, as `ibv_rc_pingpong` does, with its out-of-band protocol.
///
/// Without SERVER it waits for a client on TCP port 18515; with SERVER it connects to it. Either
/// side may be the real `ibv_rc_pingpong`: the 52-byte `LID:QPN:PSN:GID` messages and the
/// closing "done" are exactly its own. Our NIC binds UDP port 4791 on the address the TCP
/// connection uses (or --ip), or with --backend raw plays --ip on --dev. Against rxe, run `ibv_rc_pingpong -g 1` there (GID index 1 is the
/// `::ffff:IPv4` GID of a fresh rxe device; index 0 is IPv6 link-local and hangs), and keep
/// `-m` no larger than rxe's active MTU (1024 on a 1500-byte netdev).
///
/// Prints the two lines ibv_rc_pingpong prints (or, with --json, one object with its figures
/// and the NIC's counters). Ctrl-C prints the figures of the round trips done so far.
/// Exit status: 0, 1 when the test failed (an error completion, or no progress for
/// --timeout), 2 on a setup error, 130 on Ctrl-C.
#[derive(Debug, clap::Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "Examples (198.18.0.12 runs rxe):\n  \
    ibv_rc_pingpong -g 1                      # on the rxe host: the server\n  \
    roce pingpong 198.18.0.12                 # here: the client\n  \
    roce pingpong -s 65536 -n 100             # here: the server, for ibv_rc_pingpong -g 1 198.18.0.1\n  \
    roce pingpong -R --ip 127.0.0.1           # a server through the CM, and its client:\n  \
    roce pingpong -R --ip 127.0.0.2 127.0.0.1"
)]
pub(crate) struct Args {
    /// The server to connect to; without it, be the server.
    server: Option<String>,
    /// TCP port of the out-of-band exchange (with -R: the port of the CM's service ID).
    #[arg(short, long, default_value_t = 18515)]
    port: u16,
    /// Connect the QP through the RDMA connection manager (REQ, REP and RTU over QP 1, as
    /// rdma_cm connects it; service ID: the TCP port space and --port) instead of exchanging
    /// QP numbers over TCP. Both sides need -R (ibv_rc_pingpong has no such option: the peer is
    /// another `roce pingpong -R`). Each side's address message rides in the REQ's and the REP's
    /// private data. The server needs --ip (there is no TCP connection to take it from); a
    /// client without --ip uses the address its host sends from to reach SERVER. A connect to
    /// a port nobody listens on fails at once ("rejected: no listener"); one to a host with no
    /// RoCE NIC gives up after --timeout.
    #[arg(short = 'R', long = "rdma-cm")]
    rdma_cm: bool,
    /// Device name (accepted for compatibility; the NIC is this process's).
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// Port number (only 1 exists).
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// Bytes per message.
    #[arg(short, long, default_value_t = 4096)]
    size: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short, long, default_value_t = 1024)]
    mtu: u32,
    /// Receive WRs kept posted.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// Round trips.
    #[arg(short = 'n', long, default_value_t = 1000)]
    iters: u32,
    /// Service level (accepted; RoCEv2 carries none).
    #[arg(short = 'l', long, default_value_t = 0)]
    sl: u8,
    /// Sleep on completion events (accepted; completions are always event-driven here).
    #[arg(short = 'e', long)]
    events: bool,
    /// GID index of the local GID (accepted: our GID is the ::ffff: form of our address, which is
    /// what index 1 is on rxe).
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    #[command(flatten)]
    pub(crate) device: crate::device::DeviceOpts,
    /// Give up when no completion comes for this many seconds (ibv_rc_pingpong would hang).
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    /// Milliseconds to stay up after the test, answering the peer's retransmissions of its last
    /// message (our ACK of it may have been lost).
    #[arg(long, default_value_t = 500)]
    linger: u64,
    /// Print the result as one JSON object: bytes, iterations, seconds, Mbit/s, µs per
    /// iteration, both addresses, every NIC counter ("counters"), every drop by reason
    /// ("drops") and the totals ("rx_dropped", "naks_sent", "naks_received",
    /// "rnr_naks_sent", "rnr_naks_received", "duplicates", "retransmitted_packets").
    #[arg(long)]
    json: bool,
    /// Print the NIC's counters after the result: drops by reason, NAKs, RNR NAKs,
    /// duplicates, and every counter that is not 0.
    #[arg(long)]
    stats: bool,
}

/// How far a run got, for Ctrl-C.
#[derive(Debug, Default)]
struct Live {
    /// The device and when the round trips started.
    running: RefCell<Option<(DeviceHandle, Instant)>>,
    sends: Cell<u32>,
    receives: Cell<u32>,
    addresses: RefCell<(Option<Dest>, Option<Dest>)>,
}

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

/// Runs `roce pingpong`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mtu = Mtu::from_bytes(args.mtu)
        .with_context(|| format!("-m {}: not 256, 512, 1024, 2048 or 4096", args.mtu))?;
    if args.ib_port != 1 {
        bail!("-i {}: this NIC has one port, 1", args.ib_port);
    }
    if args.rx_depth < 2 || args.iters == 0 {
        bail!("-r must be at least 2 and -n at least 1");
    }
    let runtime = crate::device::runtime(&args.device)?;
    runtime.block_on(interruptible(args, mtu))
}

/// Runs the test; Ctrl-C stops it and prints the round trips done so far.
async fn interruptible(args: &Args, mtu: Mtu) -> anyhow::Result<ExitCode> {
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot catch Ctrl-C")?;
    let live = Live::default();
    tokio::select! {
        outcome = pingpong(args, mtu, &live) => outcome,
        _ = interrupt.recv() => {
            let Some((device, start)) = live.running.borrow_mut().take() else {
                eprintln!("roce pingpong: interrupted before the test started");
                return Ok(ExitCode::from(130));
            };
            let (sends, receives) = (live.sends.get(), live.receives.get());
            eprintln!("roce pingpong: interrupted after {sends} sends and {receives} receives");
            // A round trip is a send and a receive.
            let done = sends.min(receives);
            let (local, remote) = *live.addresses.borrow();
            print_result(args, done, start.elapsed(), &device, (local, remote), true).await?;
            Ok(ExitCode::from(130))
        }
    }
}

/// The result: ibv_rc_pingpong's two lines, or one JSON object; then, with --stats, the
/// counters.
async fn print_result(
    args: &Args,
    iters: u32,
    elapsed: Duration,
    device: &DeviceHandle,
    (local, remote): (Option<Dest>, Option<Dest>),
    interrupted: bool,
) -> anyhow::Result<()> {
    let stats = device.stats().await?;
    let backend = device.backend_stats();
    if args.json {
        let usec = elapsed.as_micros() as f64;
        let bytes = u64::from(args.size) * u64::from(iters) * 2;
        let address = |d: Option<Dest>| {
            d.map(|d| json!({ "lid": d.lid, "qpn": d.qpn, "psn": d.psn, "gid": Gid(d.gid).to_string() }))
        };
        let mut value = json!({
            "size": args.size, "iterations": iters, "bytes": bytes,
            "seconds": usec / 1e6,
            "mbit_s": (usec > 0.0).then(|| bytes as f64 * 8.0 / usec),
            "usec_per_iter": (iters > 0).then(|| usec / f64::from(iters)),
            "local": address(local), "remote": address(remote),
            "interrupted": interrupted,
        });
        crate::json::add_counters(&mut value, &stats, &backend);
        println!("{value}");
    } else {
        if iters > 0 {
            print!(
                "{}",
                pingpong::summary(args.size, iters, elapsed.as_micros() as i64)
            );
        }
        if args.stats {
            print!("{}", crate::json::stats_text(&stats, &backend));
        }
    }
    if stats.retransmitted_packets > 0 || stats.rx_icrc_errors > 0 {
        eprintln!(
            "roce pingpong: {} packets retransmitted, {} received packets dropped for a bad ICRC",
            stats.retransmitted_packets, stats.rx_icrc_errors
        );
    }
    Ok(())
}

/// Posts `count` receive WRs of `sge` to `qpn`, as rc_pingpong's `pp_post_recv`.
async fn post_recvs(device: &DeviceHandle, qpn: Qpn, sge: Sge, count: u32) -> anyhow::Result<()> {
    for _ in 0..count {
        let wr = RecvWr {
            wr_id: RECV_WRID,
            sgl: [sge].into(),
        };
        device.post_recv(qpn, wr).await?;
    }
    Ok(())
}

async fn pingpong(args: &Args, mtu: Mtu, live: &Live) -> anyhow::Result<ExitCode> {
    let mut stream = None;
    let (device, local_ip) = if args.rdma_cm {
        let default_ip = match (&args.server, args.device.ip) {
            (_, Some(ip)) => ip,
            (Some(server), None) => crate::cm::source_for(crate::cm::server_ip(server)?)?,
            (None, None) => bail!(
                "-R: the server needs --ip ADDR, the address its CM listens on (there is no TCP \
                 connection to take it from)"
            ),
        };
        args.device.spawn(default_ip)?
    } else {
        let tcp =
            crate::oob::connect_or_accept(args.server.as_deref(), args.port, "pingpong").await?;
        let default_ip = crate::oob::local_ip(&tcp)?;
        stream = Some(tcp);
        args.device.spawn(default_ip)?
    };
    let depth = args.rx_depth as usize + 2;
    let qp = RcEndpoint::create(&device, depth).await?;
    qp.init(Access::LOCAL_WRITE).await?;
    let mr = device
        .reg_mr(qp.pd, args.size.max(1) as usize, Access::LOCAL_WRITE)
        .await?;
    let sge = Sge {
        addr: mr.addr(),
        length: args.size,
        lkey: mr.lkey(),
    };
    post_recvs(&device, qp.qpn, sge, args.rx_depth).await?;
    let local = Dest {
        lid: 0,
        qpn: qp.qpn.value(),
        psn: initial_psn(),
        gid: Gid::from_ip(local_ip).0,
    };
    if !args.json {
        println!("  local address:  {}", describe(&local));
    }

    let dscp = args.device.dscp;
    let connect = |remote: Dest| {
        let qp = qp.clone();
        async move {
            let remote_ip = Gid(remote.gid).to_ip();
            let mut c = Connection::new(
                local_ip,
                remote_ip,
                Qpn::new(remote.qpn),
                Psn::new(remote.psn),
                Psn::new(local.psn),
            );
            c.mtu = mtu;
            c.dscp = dscp;
            c.max_rd_atomic = 1;
            c.max_dest_rd_atomic = 1;
            c.access = Access::NONE;
            qp.connect(&c).await
        }
    };
    let mut cm_conn = None;
    let remote = if let Some(server) = args.server.as_deref().filter(|_| args.rdma_cm) {
        let (conn, remote) = cm_client(args, mtu, &device, local_ip, server, &local).await?;
        cm_conn = Some(conn);
        remote
    } else if args.rdma_cm {
        let (conn, remote) = cm_server(args, &device, &local).await?;
        cm_conn = Some(conn);
        remote
    } else if let Some(stream) = stream.as_mut().filter(|_| args.server.is_some()) {
        let remote = pingpong::client_exchange(stream, &local).await?;
        check_remote(&remote, local_ip)?;
        connect(remote).await?;
        remote
    } else if let Some(stream) = stream.as_mut() {
        pingpong::server_exchange(stream, &local, |remote| async move {
            check_remote(&remote, local_ip)?;
            connect(remote).await.map_err(anyhow::Error::from)
        })
        .await?
    } else {
        bail!("no out-of-band connection")
    };
    if !args.json {
        println!("  remote address: {}", describe(&remote));
    }
    *live.addresses.borrow_mut() = (Some(local), Some(remote));

    let limit = Duration::from_secs(args.timeout);
    let send = || {
        let device = device.clone();
        let qpn = qp.qpn;
        async move {
            let mut wr = SendWr::new(SEND_WRID, SendOp::Send, sge);
            // rc_pingpong sends inline when the device allows it (rxe: up to 400 bytes).
            wr.inline = sge.length as usize <= 400;
            device.post_send(qpn, wr).await
        }
    };
    let (mut scnt, mut rcnt, mut routs) = (0u32, 0u32, args.rx_depth);
    let mut pending = RECV_WRID;
    let start = Instant::now();
    *live.running.borrow_mut() = Some((device.clone(), start));
    // The client sends first; each side sends again once its last send and receive completed.
    if args.server.is_some() {
        send().await?;
        pending |= SEND_WRID;
    }
    while rcnt < args.iters || scnt < args.iters {
        let cqe = match device.next_completion_within(qp.cq, limit).await {
            Ok(cqe) => cqe,
            Err(roce_device::DeviceError::Timeout(_)) => {
                eprintln!(
                    "roce pingpong: no completion for {} s after {scnt} sends and {rcnt} receives: the peer \
                     is not answering (its path MTU above its active MTU? a firewall on UDP 4791?)",
                    args.timeout
                );
                return Ok(ExitCode::from(1));
            }
            Err(err) => return Err(err.into()),
        };
        if cqe.status != WcStatus::Success {
            // The ACK of our very last SEND can be lost after the peer got every message it
            // waited for and exited: its QP is gone and our retries go unanswered. The peer's own
            // success is the proof the message arrived; say so, and do not fail the run for it.
            let last = cqe.wr_id == SEND_WRID && scnt + 1 == args.iters && rcnt == args.iters;
            if last && cqe.status == WcStatus::RetryExcErr {
                eprintln!(
                    "roce pingpong: the last SEND was never acknowledged; the peer had all {rcnt} \
                     messages it waits for and had probably exited (a lost final ACK)"
                );
                scnt += 1;
                continue;
            }
            eprintln!("Failed status {:?} for wr_id {}", cqe.status, cqe.wr_id);
            return Ok(ExitCode::from(1));
        }
        match cqe.wr_id {
            SEND_WRID => {
                scnt += 1;
                live.sends.set(scnt);
            }
            RECV_WRID => {
                routs -= 1;
                if routs <= 1 {
                    post_recvs(&device, qp.qpn, sge, args.rx_depth - routs).await?;
                    routs = args.rx_depth;
                }
                rcnt += 1;
                live.receives.set(rcnt);
            }
            other => bail!("completion for unknown wr_id {other}"),
        }
        pending &= !cqe.wr_id;
        if scnt < args.iters && pending == 0 {
            send().await?;
            pending = RECV_WRID | SEND_WRID;
        }
    }
    let elapsed = start.elapsed();
    // Stay up a moment: if our ACK of the peer's last message was lost, the peer sends it again
    // (every 67 ms with ibv_rc_pingpong's timeout 14) and must find us there.
    tokio::time::sleep(Duration::from_millis(args.linger)).await;
    if let Some(conn) = cm_conn {
        crate::cm::disconnect(&device, &[conn]).await;
    }
    live.running.borrow_mut().take();
    let addresses = (Some(local), Some(remote));
    print_result(args, args.iters, elapsed, &device, addresses, false).await?;
    Ok(ExitCode::SUCCESS)
}

/// The CM's parameters of a pingpong QP: rc_pingpong's (one READ each way, 7 retries of
/// each kind, our path MTU).
fn cm_connect_params(
    args: &Args,
    mtu: Mtu,
    local_ip: IpAddr,
    peer: IpAddr,
    local: &Dest,
) -> ConnectParams {
    let mut params = ConnectParams::new(
        Qpn::new(local.qpn),
        local_ip,
        peer,
        crate::cm::service(args.port),
        Psn::new(local.psn),
    );
    params.mtu = mtu;
    params.src_port = args.port;
    params.private_data = pingpong::encode(local).to_vec();
    params
}

/// The address message a peer sent in its REQ or REP; one that sent none (or not ours) gets
/// the parts the CM knows.
fn peer_dest(private_data: &[u8], qpn: u32, psn: u32, peer: IpAddr) -> Dest {
    let head = private_data.get(..pingpong::MSG_LEN).unwrap_or_default();
    pingpong::decode(head).unwrap_or(Dest {
        lid: 0,
        qpn,
        psn,
        gid: Gid::from_ip(peer).0,
    })
}

/// -R, client: a REQ to the server's pingpong service; returns the connection and the server's
/// address message (from the REP).
async fn cm_client(
    args: &Args,
    mtu: Mtu,
    device: &DeviceHandle,
    local_ip: IpAddr,
    server: &str,
    local: &Dest,
) -> anyhow::Result<(ConnId, Dest)> {
    let peer = crate::cm::server_ip(server)?;
    let params = cm_connect_params(args, mtu, local_ip, peer, local);
    let limit = Duration::from_secs(args.timeout);
    let (conn, private_data) = crate::cm::connect(device, &params, args.port, limit).await?;
    Ok((conn, peer_dest(&private_data, 0, 0, peer)))
}

/// -R, server: listens on the pingpong service, accepts the first REQ (its QP goes to RTR and
/// RTS) and waits for the RTU; returns the connection and the client's address message.
async fn cm_server(
    args: &Args,
    device: &DeviceHandle,
    local: &Dest,
) -> anyhow::Result<(ConnId, Dest)> {
    let listen = crate::cm::listen(device, args.port)?;
    eprintln!(
        "roce pingpong: waiting for a client on port {} through the CM (service ID {:#018x})",
        args.port,
        crate::cm::service(args.port)
    );
    let req = crate::cm::request(device, None).await?;
    crate::cm::unlisten(device, listen)?;
    let remote = peer_dest(
        &req.private_data,
        req.peer_qpn.value(),
        req.peer_psn.value(),
        req.peer,
    );
    let mut params = AcceptParams::new(Qpn::new(local.qpn), Psn::new(local.psn));
    params.private_data = pingpong::encode(local).to_vec();
    crate::cm::accept(device, &req, &params)?;
    // The client sends once it has the REP; its RTU comes with (or before) the first message.
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    loop {
        match crate::cm::next_event(device, deadline).await {
            Some(CmEvent::Established { conn, .. }) if conn == req.conn => break,
            Some(other) => tracing::debug!(?other, "cm: waiting for the RTU"),
            None => bail!(
                "the client's RTU did not come within {} s of our REP",
                args.timeout
            ),
        }
    }
    Ok((req.conn, remote))
}

/// A peer without a GID cannot be reached over RoCEv2 (ibv_rc_pingpong without -g).
fn check_remote(remote: &Dest, local: IpAddr) -> anyhow::Result<()> {
    if !remote.is_global() {
        bail!(
            "the peer sent no GID: run ibv_rc_pingpong with -g (GID index 1 on rxe, the ::ffff:IPv4 one)"
        );
    }
    let ip = Gid(remote.gid).to_ip();
    if ip.is_ipv4() != local.is_ipv4() {
        bail!(
            "the peer's GID {} is not of our address family ({local}): pick its IPv4 GID index",
            Gid(remote.gid)
        );
    }
    Ok(())
}

fn describe(dest: &Dest) -> String {
    format!(
        "LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}",
        dest.lid,
        dest.qpn,
        dest.psn,
        Gid(dest.gid)
    )
}

/// A 24-bit PSN that differs between runs (rc_pingpong: `lrand48() & 0xffffff`).
fn initial_psn() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos ^ std::process::id().rotate_left(12)) & 0x00ff_ffff
}
