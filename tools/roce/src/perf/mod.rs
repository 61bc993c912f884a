//! `roce perf`: perftest's bandwidth and latency tests, speaking the out-of-band protocol of
//! perftest 4.5-0.17 (Debian 12's) byte for byte, so either side can be `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_send_lat`, `ib_read_lat` or `ib_atomic_lat`.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use roce_core::{Access, Mtu, Psn, QpInit, QpType, Qpn, RecvWr, Remote, Sge};
use roce_device::{Connection, DeviceHandle, RcEndpoint};
use roce_oob::perftest::{self, Config, IbvMtu, Kind, PerftestDest, Session, Side, Test, Verb};
use roce_wire::Gid;
use tokio::net::{TcpListener, TcpStream};

mod report;
mod traffic;

use report::{Measured, print_result};
use traffic::{RECV, Runner};

/// The operation a perftest tool measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum VerbArg {
    /// RDMA WRITE (ib_write_bw).
    Write,
    /// RDMA READ (ib_read_bw, ib_read_lat).
    Read,
    /// SEND (ib_send_bw, ib_send_lat).
    Send,
    /// Atomics (ib_atomic_bw, ib_atomic_lat).
    Atomic,
}

/// perftest's tests, with its out-of-band protocol, against the real tools or another `roce perf`.
///
/// Without SERVER it waits on TCP port 18515 (the server); with SERVER it connects (the client),
/// as perftest does. Bandwidth tests print perftest's table (#bytes, #iterations, BW peak,
/// BW average, MsgRate; with -q N those of all QPs together, and a line on the QPs' fairness;
/// MB/sec there is perftest's, 2^20 bytes per second, while --json gives MB/s of 10^6 bytes);
/// with --lat, latency tests print t_min, t_max, t_typical, t_avg, t_stdev and the 99 % and
/// 99.9 % percentiles. Against rxe give its tool `-x 1` (the ::ffff:IPv4 GID).
///
/// Exit status: 0, 1 when the test failed (an error completion or no progress for --timeout),
/// 2 on a setup or protocol error.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples (198.18.0.12 runs rxe):\n  \
    ib_write_bw -x 1                  # there: the server\n  \
    roce perf write 198.18.0.12       # here: the client\n  \
    roce perf send --lat              # here: the server, for ib_send_lat -x 1 198.18.0.1")]
pub(crate) struct Args {
    /// The operation.
    #[arg(value_enum)]
    verb: VerbArg,
    /// The server to connect to; without it, be the server.
    server: Option<String>,
    /// Latency test (ib_*_lat) instead of bandwidth (ib_*_bw).
    #[arg(long)]
    lat: bool,
    /// TCP port of the out-of-band exchange.
    #[arg(short, long, default_value_t = 18515)]
    port: u16,
    /// Bytes per message (default 65536, or 2 with --lat; atomics move 8).
    #[arg(short, long)]
    size: Option<u32>,
    /// Iterations (default 5000, or 1000 with --lat).
    #[arg(short = 'n', long)]
    iters: Option<u32>,
    /// Path MTU offered: 256, 512, 1024, 2048 or 4096 (both sides use the smaller).
    #[arg(short, long, default_value_t = 1024)]
    mtu: u32,
    /// Work requests in flight (bandwidth tests).
    #[arg(short = 't', long = "tx-depth", default_value_t = 128)]
    tx_depth: u32,
    /// Receive WRs posted by a send test's server.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512)]
    rx_depth: u32,
    /// GID index (accepted: our GID is the ::ffff: form of our address).
    #[arg(short = 'x', long = "gid-index")]
    gid_index: Option<u32>,
    /// Device name (accepted for compatibility).
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// QPs of a bandwidth test, 1 to 16384, as perftest's -q: each does --iters iterations
    /// with up to --tx-depth in flight, posted round robin; all share one CQ and one memory
    /// region (QP i's half buffers at i and N + i). The peer must be given the same -q. The
    /// result is for all QPs together; --json adds "qps", "per_qp_bytes" (each QP's whole run),
    /// "per_qp_mb_s" (each QP's goodput while all were busy: its completions from the start
    /// until the first QP finished, over that interval) and "jain" (Jain's fairness index of
    /// those). The server of a one-way WRITE/READ/atomic test sees no completions: null there.
    #[arg(short = 'q', long = "qp", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=perftest::MAX_QPS as i64))]
    qps: u32,
    /// Atomic operation: FETCH_AND_ADD or CMP_AND_SWAP.
    #[arg(short = 'A', long = "atomic_type", default_value = "FETCH_AND_ADD")]
    atomic_type: String,
    /// Give up when no completion comes for this many seconds.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: crate::device::DeviceOpts,
}

/// Runs `roce perf`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let verb = match args.verb {
        VerbArg::Write => Verb::Write,
        VerbArg::Read => Verb::Read,
        VerbArg::Send => Verb::Send,
        VerbArg::Atomic => Verb::Atomic,
    };
    if !["FETCH_AND_ADD", "CMP_AND_SWAP"].contains(&args.atomic_type.as_str()) {
        bail!("-A {}: FETCH_AND_ADD or CMP_AND_SWAP", args.atomic_type);
    }
    let mtu = IbvMtu::from_bytes(args.mtu)
        .with_context(|| format!("-m {}: not 256, 512, 1024, 2048 or 4096", args.mtu))?;
    let test = Test::new(
        verb,
        if args.lat {
            Kind::Latency
        } else {
            Kind::Bandwidth
        },
    );
    // perftest_parameters.c, `case 'q'`: "Multiple QPs only available on bw tests".
    perftest::check_qps(test, args.qps as usize).with_context(|| format!("-q {}", args.qps))?;
    let runtime = crate::device::runtime(&args.device)?;
    runtime.block_on(perf(args, test, mtu))
}

async fn perf(args: &Args, test: Test, mtu: IbvMtu) -> anyhow::Result<ExitCode> {
    let lat = test.kind == Kind::Latency;
    let size = match test.verb {
        Verb::Atomic => 8,
        _ => args.size.unwrap_or(if lat { 2 } else { 65536 }),
    };
    let iters = args.iters.unwrap_or(if lat { 1000 } else { 5000 });
    let (stream, side) = match &args.server {
        Some(server) => {
            let target = format!("{server}:{}", args.port);
            (
                TcpStream::connect(&target)
                    .await
                    .with_context(|| format!("couldn't connect to {target}"))?,
                Side::Client,
            )
        }
        None => {
            let listener =
                TcpListener::bind(SocketAddr::new(IpAddr::from([0, 0, 0, 0]), args.port))
                    .await
                    .with_context(|| format!("cannot listen on TCP port {}", args.port))?;
            (listener.accept().await?.0, Side::Server)
        }
    };
    let default_ip = stream.local_addr()?.ip();
    let config = Config {
        mtu,
        ..Config::default()
    };
    let mut session = Session::start(stream, side, test, &config).await?;
    let (device, local_ip) = args.device.spawn(default_ip)?;
    let qps = args.qps as usize;
    let depth = (args.tx_depth.max(args.rx_depth) + 4) as usize;
    let endpoints = create_endpoints(&device, depth, qps).await?;
    for qp in &endpoints {
        qp.init(Access::ALL).await?;
    }
    // perftest's buffer: one region, a send half and a receive half per QP, each the larger of
    // the message and the cycle buffer (`BUFF_SIZE`); QP i sends from `buf + i * BUFF_SIZE`
    // and its keys announce its receive half, where the peer's WRITEs land and where
    // ib_write_lat polls (perftest_resources.c `create_mr`: `buf[i] = buf[0] + i * BUFF_SIZE`;
    // perftest_communication.c `set_up_connection`: `vaddr = buf[0] + (num_of_qps + i) *
    // BUFF_SIZE`; `poll_buf = buf + BUFF_SIZE + size - 1` with one QP).
    let half = (size as usize)
        .max(session.sys_data().cycle_buffer as usize)
        .max(8);
    let buf_len = 2 * qps * half;
    let mr = device.reg_mr(endpoints[0].pd, buf_len, Access::ALL).await?;
    let out_reads: u16 = 16;
    let locals: Vec<PerftestDest> = endpoints
        .iter()
        .enumerate()
        .map(|(i, qp)| PerftestDest {
            lid: 0,
            out_reads,
            qpn: qp.qpn.value(),
            psn: initial_psn(),
            rkey: mr.rkey(),
            vaddr: mr.addr() + ((qps + i) * half) as u64,
            gid: Some(Gid::from_ip(local_ip).0),
            srqn: 0,
        })
        .collect();
    let remotes = session.exchange_qp_keys(locals.clone()).await?;
    let path_mtu = Mtu::from_bytes(session.mtu().bytes()).context("the negotiated MTU")?;
    for ((qp, local), remote) in endpoints.iter().zip(&locals).zip(&remotes) {
        let Some(gid) = remote.gid else {
            bail!("the peer sent no GID")
        };
        let mut connection = Connection::new(
            local_ip,
            Gid(gid).to_ip(),
            Qpn::new(remote.qpn),
            Psn::new(remote.psn),
            Psn::new(local.psn),
        );
        connection.mtu = path_mtu;
        connection.dscp = args.device.dscp;
        // perftest#114: never ask for more outstanding READs/atomics than the peer serves.
        connection.max_rd_atomic = u8::try_from(remote.out_reads.clamp(1, out_reads)).unwrap_or(1);
        connection.max_dest_rd_atomic = u8::try_from(out_reads).unwrap_or(16);
        qp.connect(&connection).await?;
    }
    session.connected().await?;
    let slot = |i: usize| Sge {
        addr: mr.addr() + (i * half) as u64,
        length: size,
        lkey: mr.lkey(),
    };
    let receives = test.verb == Verb::Send && (lat || side == Side::Server);
    let posted = if receives {
        args.rx_depth.min(iters).max(1)
    } else {
        0
    };
    // With one QP receives land in the send half, where ib_send_lat's answer is sent from;
    // with several, each QP's in its receive half (perftest_resources.c `ctx_set_recv_wqes`:
    // `buf[0] + (num_of_qps + k) * send_qp_buff_size`).
    let recv_sges: Vec<Sge> = (0..qps)
        .map(|i| slot(if qps == 1 { 0 } else { qps + i }))
        .collect();
    for (qp, sge) in endpoints.iter().zip(&recv_sges) {
        for _ in 0..posted {
            device
                .post_recv(
                    qp.qpn,
                    RecvWr {
                        wr_id: RECV,
                        sgl: vec![*sge],
                    },
                )
                .await?;
        }
    }
    session.ready().await?;

    let limit = Duration::from_secs(args.timeout);
    let runner = Runner {
        device: &device,
        qps: &endpoints,
        index: endpoints
            .iter()
            .enumerate()
            .map(|(i, qp)| (qp.qpn, i))
            .collect(),
        sges: (0..qps).map(slot).collect(),
        recv_sges,
        remotes: remotes
            .iter()
            .map(|r| Remote {
                addr: r.vaddr,
                rkey: r.rkey,
            })
            .collect(),
        limit,
        iters,
    };
    let cas = args.atomic_type == "CMP_AND_SWAP";
    let outcome = match (test.kind, test.verb, side) {
        (Kind::Bandwidth, Verb::Send, Side::Server) => runner.receive_all(posted).await,
        (Kind::Bandwidth, _, Side::Server) => Ok(Measured::default()),
        (Kind::Bandwidth, verb, Side::Client) => runner.bandwidth(verb, args.tx_depth, cas).await,
        (Kind::Latency, Verb::Send, side) => runner.send_latency(side == Side::Client).await,
        (Kind::Latency, Verb::Write, side) => {
            runner.write_latency(&mr, half, side == Side::Server).await
        }
        (Kind::Latency, _, Side::Server) => Ok(Measured::default()),
        (Kind::Latency, verb, Side::Client) => runner.latency(verb, cas).await,
    };
    let measured = match outcome {
        Ok(measured) => measured,
        Err(why) => {
            eprintln!("roce perf: {why}");
            return Ok(ExitCode::from(1));
        }
    };
    let total_iters = u64::from(iters) * u64::from(args.qps);
    let report = measured.report(size, total_iters);
    let finish = session.finish(&report).await?;
    // A one-way test's server prints what the client measured, as perftest does.
    let shown = match (side, finish.remote_report) {
        (Side::Server, Some(remote)) if test.verb != Verb::Send => Measured::from_report(&remote),
        _ => measured,
    };
    print_result(
        args,
        test,
        size,
        total_iters,
        &shown,
        &device,
        endpoints[0].qpn,
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// `qps` RC QPs in RESET with queues of `depth`, sharing one PD and one CQ as perftest's QPs
/// share its CQs (`create_reg_cqs`: `tx_depth * num_of_qps` entries); one QP is what
/// [`RcEndpoint::create`] makes.
async fn create_endpoints(
    device: &DeviceHandle,
    depth: usize,
    qps: usize,
) -> anyhow::Result<Vec<RcEndpoint>> {
    if qps == 1 {
        return Ok(vec![RcEndpoint::create(device, depth).await?]);
    }
    let pd = device.alloc_pd().await?;
    let cq = device.create_cq(depth * 2 * qps).await?;
    let mut endpoints = Vec::with_capacity(qps);
    for _ in 0..qps {
        let qpn = device
            .create_qp(QpInit {
                pd,
                qp_type: QpType::Rc,
                send_cq: cq,
                recv_cq: cq,
                max_send_wr: depth,
                max_recv_wr: depth,
            })
            .await?;
        endpoints.push(RcEndpoint {
            device: device.clone(),
            pd,
            cq,
            qpn,
        });
    }
    Ok(endpoints)
}

/// A 24-bit PSN that differs between runs (perftest: `lrand48() & 0xffffff`).
fn initial_psn() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos.rotate_left(7) ^ std::process::id()) & 0x00ff_ffff
}
