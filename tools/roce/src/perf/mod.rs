//! `roce perf`: perftest's bandwidth and latency tests, speaking the out-of-band protocol of
//! perftest 4.5-0.17 (Debian 12's) byte for byte, so either side can be `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_send_lat`, `ib_read_lat` or `ib_atomic_lat`.

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use roce_core::{Access, Mtu, Psn, QpInit, QpType, Qpn, RecvWr, Remote, Sge};
use roce_device::{Connection, DeviceHandle, RcEndpoint};
use roce_oob::perftest::{
    self, Amount, BwReport, Config, IbvMtu, Kind, PerftestDest, RunParams, Session, Side, Test,
    Verb,
};
use roce_wire::Gid;
use tokio::net::{TcpListener, TcpStream};

mod report;
mod traffic;

use report::{Measured, Part, Unit, print_result};
use traffic::{Live, Plan, RECV, Runner};

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
/// MB/sec there is perftest's, 2^20 bytes per second, or Gb/sec with --report_gbits, while
/// --json always gives MB/s of 10^6 bytes); with --lat, latency tests print t_min, t_max,
/// t_typical, t_avg, t_stdev and the 99 % and 99.9 % percentiles. Against rxe give its tool
/// `-x 1` (the ::ffff:IPv4 GID).
///
/// BW average is the bytes of every iteration over the time from the first post to the last
/// completion (with -D: what completed in the sampling window, over the window). BW peak is
/// perftest's: the best time per message over any window from the post of one WR to a later
/// completion (windows ending at every 100th completion, as perftest's default cq_mod lets it
/// see them, and at the last), so it is never below the average. As perftest, it is not
/// computed (0 in the table, null in --json) with -D, above 20000 iterations per QP (or
/// 200000 of all QPs), and on a send test's server.
///
/// Two `roce perf`s compare -n/-D, -s/-a and -q before any traffic and both stop, naming the
/// difference, if they were not given the same (perftest 4.5 does not send them: against it,
/// a mismatch shows as a side that waits until --timeout).
///
/// Ctrl-C prints what was measured so far (with "interrupted": true in --json) and exits 130.
///
/// Exit status: 0, 1 when the test failed (an error completion or no progress for --timeout),
/// 2 on a setup or protocol error (the two sides' parameters differ, for one), 130 on Ctrl-C.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples (198.18.0.12 runs rxe):\n  \
    ib_write_bw -x 1                  # there: the server\n  \
    roce perf write 198.18.0.12       # here: the client\n  \
    roce perf write -a 198.18.0.12    # every size from 2 bytes to 8 MiB\n  \
    roce perf send -D 10 198.18.0.12  # for 10 seconds (give the server -D 10 too)\n  \
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
    /// Bytes per message, at least 1 (default 65536, or 2 with --lat; atomics move 8).
    #[arg(short, long, value_parser = bytes, conflicts_with = "all")]
    size: Option<u32>,
    /// Every message size from 2 bytes to 8 MiB (2^1 to 2^23), one table row each, as
    /// perftest's -a (bandwidth tests; not atomics, which move 8 bytes). --json prints one
    /// object per size, one per line.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Iterations per QP, at least 1 (default 5000, or 1000 with --lat).
    #[arg(short = 'n', long, value_parser = iterations, conflicts_with = "duration")]
    iters: Option<u32>,
    /// Run for this many seconds instead of -n iterations, as perftest's -D (bandwidth tests;
    /// give both sides the same). What completes from a quarter of it after the start to a
    /// quarter of it before the end is counted (perftest's default --margin); no peak.
    #[arg(short = 'D', long, value_name = "SECS", value_parser = seconds)]
    duration: Option<u32>,
    /// Path MTU offered: 256, 512, 1024, 2048 or 4096 (both sides use the smaller).
    #[arg(short, long, default_value_t = 1024)]
    mtu: u32,
    /// Work requests in flight (bandwidth tests), at least 1.
    #[arg(short = 't', long = "tx-depth", default_value_t = 128, value_parser = depth)]
    tx_depth: u32,
    /// Receive WRs posted by a send test's server, at least 1.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512, value_parser = depth)]
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
    /// result is for all QPs together; --json adds "qps", "per_qp_bytes" (each QP's whole
    /// run), "per_qp_mb_s" (each QP's goodput over its own transfer: its bytes, from the start
    /// — when every QP has work posted — to its last completion; null for a QP that
    /// completed nothing) and "jain" (Jain's fairness index of those: 1 when every QP took as
    /// long for the same bytes; null if a QP has no goodput). The server of a one-way
    /// WRITE/READ/atomic test sees no completions: null there.
    #[arg(short = 'q', long = "qp", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=perftest::MAX_QPS as i64))]
    qps: u32,
    /// Atomic operation: FETCH_AND_ADD or CMP_AND_SWAP.
    #[arg(short = 'A', long = "atomic_type", default_value = "FETCH_AND_ADD")]
    atomic_type: String,
    /// Report bandwidth in Gb/sec (10^9 bits) instead of MB/sec (2^20 bytes), in the table
    /// and in the report sent to the peer, as perftest's --report_gbits.
    #[arg(long = "report_gbits", alias = "report-gbits")]
    report_gbits: bool,
    /// Accepted for perftest's users (its -F: do not fail when the CPU frequency varies);
    /// this tool times with the OS clock, not CPU cycles, so it has nothing to warn about.
    #[arg(short = 'F', long = "CPU-freq")]
    cpu_freq: bool,
    /// Give up when no completion comes for this many seconds (at least 1).
    #[arg(long, default_value_t = 10, value_parser = timeout)]
    timeout: u64,
    /// Print the result as one JSON object (one per size with -a), with every NIC counter
    /// ("counters"), every drop by reason ("drops") and the totals ("rx_dropped",
    /// "naks_sent", "naks_received", "rnr_naks_sent", "rnr_naks_received", "duplicates",
    /// "retransmitted_packets").
    #[arg(long)]
    json: bool,
    /// Print the NIC's counters after the table: drops by reason, NAKs, RNR NAKs,
    /// duplicates, and every counter that is not 0.
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    device: crate::device::DeviceOpts,
}

impl Args {
    fn unit(&self) -> Unit {
        if self.report_gbits {
            Unit::Gbit
        } else {
            Unit::MiB
        }
    }
}

/// A whole number of at least 1, or why not.
fn positive(text: &str, zero: &str) -> Result<u64, String> {
    let n: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if n == 0 {
        return Err(zero.to_owned());
    }
    Ok(n)
}

fn positive_u32(text: &str, zero: &str) -> Result<u32, String> {
    let n = positive(text, zero)?;
    u32::try_from(n).map_err(|_| format!("{n} is more than {}", u32::MAX))
}

fn iterations(text: &str) -> Result<u32, String> {
    positive_u32(
        text,
        "0 iterations: a test needs at least 1 (-D SECS runs for a time instead)",
    )
}

fn bytes(text: &str) -> Result<u32, String> {
    positive_u32(text, "0 bytes: a message has at least 1")
}

fn depth(text: &str) -> Result<u32, String> {
    positive_u32(text, "0: nothing would ever be posted; give at least 1")
}

fn seconds(text: &str) -> Result<u32, String> {
    let n = positive_u32(text, "0 seconds: give at least 1")?;
    if n > i32::MAX as u32 {
        return Err(format!("{n} seconds is more than perftest's {}", i32::MAX));
    }
    Ok(n)
}

fn timeout(text: &str) -> Result<u64, String> {
    positive(
        text,
        "0 seconds: every wait would give up at once; give at least 1",
    )
}

/// perftest's -a: 2^1 to 2^23 bytes (write_bw.c, `RUN_ALL`: `for (i = 1; i < 24 ; ++i)`).
fn all_sizes() -> Vec<u32> {
    (1..24).map(|i| 1u32 << i).collect()
}

/// What differs between this side's parameters and the peer's, as a sentence.
fn mismatch(mine: &RunParams, theirs: &RunParams) -> Option<String> {
    let amount = |a: Amount| match a {
        Amount::Iterations(n) => format!("-n {n}"),
        Amount::Seconds(s) => format!("-D {s}"),
    };
    let size = |s: Option<u32>| s.map_or_else(|| "-a".to_owned(), |s| format!("-s {s}"));
    let mut diffs = Vec::new();
    if mine.amount != theirs.amount {
        diffs.push(format!(
            "{} here, {} there",
            amount(mine.amount),
            amount(theirs.amount)
        ));
    }
    if mine.size != theirs.size {
        diffs.push(format!(
            "{} here, {} there",
            size(mine.size),
            size(theirs.size)
        ));
    }
    if mine.qps != theirs.qps {
        diffs.push(format!("-q {} here, -q {} there", mine.qps, theirs.qps));
    }
    (!diffs.is_empty()).then(|| {
        format!(
            "the peer was given other parameters ({}): give both sides the same -n/-D, -s/-a and -q",
            diffs.join("; ")
        )
    })
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
    if args.all && (args.lat || verb == Verb::Atomic) {
        bail!("-a: bandwidth tests of write, read and send only (atomics move 8 bytes)");
    }
    if args.duration.is_some() && args.lat {
        bail!("-D: bandwidth tests only (a latency test counts -n iterations)");
    }
    let runtime = crate::device::runtime(&args.device)?;
    runtime.block_on(perf(args, test, mtu))
}

/// What a Ctrl-C needs to print the run it stopped.
struct Current {
    device: DeviceHandle,
    qpn: Qpn,
    size: u32,
    header: bool,
}

/// Runs the test; Ctrl-C stops it, prints what was measured until then and exits 130.
async fn perf(args: &Args, test: Test, mtu: IbvMtu) -> anyhow::Result<ExitCode> {
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot catch Ctrl-C")?;
    let live = RefCell::new(Live::default());
    let current = RefCell::new(None);
    tokio::select! {
        outcome = test_run(args, test, mtu, &live, &current) => outcome,
        _ = interrupt.recv() => {
            let Some(now) = current.borrow_mut().take() else {
                eprintln!("roce perf: interrupted before the test started");
                return Ok(ExitCode::from(130));
            };
            let live = live.take();
            let elapsed = live.started.map_or(Duration::ZERO, |s| s.elapsed());
            eprintln!(
                "roce perf: interrupted after {} iterations, {:.1} s; what was measured so far:",
                live.completed,
                elapsed.as_secs_f64()
            );
            let measured = Measured {
                elapsed,
                iterations: live.completed,
                samples: live.samples,
                ..Measured::default()
            };
            let part = Part { header: now.header, footer: true, interrupted: true };
            print_result(args, test, now.size, &measured, &now.device, now.qpn, part).await?;
            Ok(ExitCode::from(130))
        }
    }
}

async fn test_run(
    args: &Args,
    test: Test,
    mtu: IbvMtu,
    live: &RefCell<Live>,
    current: &RefCell<Option<Current>>,
) -> anyhow::Result<ExitCode> {
    let lat = test.kind == Kind::Latency;
    let size = match test.verb {
        Verb::Atomic => 8,
        _ => args.size.unwrap_or(if lat { 2 } else { 65536 }),
    };
    let sizes = if args.all { all_sizes() } else { vec![size] };
    let iters = args.iters.unwrap_or(if lat { 1000 } else { 5000 });
    let plan = match args.duration {
        // perftest_parameters.c: `margin = duration / 4` unless --margin is given.
        Some(secs) => Plan::Duration {
            total: Duration::from_secs(secs.into()),
            margin: Duration::from_secs((secs / 4).into()),
        },
        None => Plan::Iterations(iters),
    };
    let params = RunParams {
        amount: args
            .duration
            .map_or(Amount::Iterations(iters), Amount::Seconds),
        size: (!args.all).then_some(size),
        qps: u16::try_from(args.qps).unwrap_or(u16::MAX),
    };
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
            let at = SocketAddr::new(IpAddr::from([0, 0, 0, 0]), args.port);
            let listener = TcpListener::bind(at)
                .await
                .with_context(|| format!("cannot listen on TCP port {}", args.port))?;
            eprintln!("roce perf: waiting for a client on {at} (TCP, every address)");
            (listener.accept().await?.0, Side::Server)
        }
    };
    let default_ip = stream.local_addr()?.ip();
    let config = Config {
        mtu,
        params: Some(params),
        ..Config::default()
    };
    let mut session = Session::start(stream, side, test, &config).await?;
    if let Some(theirs) = &session.peer_version().params
        && let Some(why) = mismatch(&params, theirs)
    {
        bail!(why);
    }
    let (device, local_ip) = args.device.spawn(default_ip)?;
    let qps = args.qps as usize;
    let depth = (args.tx_depth.max(args.rx_depth) + 4) as usize;
    let endpoints = create_endpoints(&device, depth, qps).await?;
    for qp in &endpoints {
        qp.init(Access::ALL).await?;
    }
    // perftest's buffer: one region, a send half and a receive half per QP, each the larger of
    // the (largest) message and the cycle buffer (`BUFF_SIZE`); QP i sends from
    // `buf + i * BUFF_SIZE` and its keys announce its receive half, where the peer's WRITEs
    // land and where ib_write_lat polls (perftest_resources.c `create_mr`: `buf[i] = buf[0] +
    // i * BUFF_SIZE`; perftest_communication.c `set_up_connection`: `vaddr = buf[0] +
    // (num_of_qps + i) * BUFF_SIZE`; `poll_buf = buf + BUFF_SIZE + size - 1` with one QP).
    let largest = sizes.iter().copied().max().unwrap_or(size);
    let half = (largest as usize)
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
    let slot = |i: usize, size: u32| Sge {
        addr: mr.addr() + (i * half) as u64,
        length: size,
        lkey: mr.lkey(),
    };
    let receives = test.verb == Verb::Send && (lat || side == Side::Server);
    let posted = if receives {
        args.rx_depth.min(plan.iters()).max(1)
    } else {
        0
    };
    let one_way_server = side == Side::Server && test.verb != Verb::Send;
    let qpn = endpoints[0].qpn;
    let remotes: Vec<Remote> = remotes
        .iter()
        .map(|r| Remote {
            addr: r.vaddr,
            rkey: r.rkey,
        })
        .collect();
    let index: std::collections::HashMap<Qpn, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, qp)| (qp.qpn, i))
        .collect();
    let cas = args.atomic_type == "CMP_AND_SWAP";
    let mut last = (size, Measured::default());
    for (k, &size) in sizes.iter().enumerate() {
        // With one QP receives land in the send half, where ib_send_lat's answer is sent
        // from; with several, each QP's in its receive half (perftest_resources.c
        // `ctx_set_recv_wqes`: `buf[0] + (num_of_qps + k) * send_qp_buff_size`).
        let recv_sges: Vec<Sge> = (0..qps)
            .map(|i| slot(if qps == 1 { 0 } else { qps + i }, size))
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
        // send_bw.c with -a: a handshake once each size's receives are posted.
        if k == 0 {
            session.ready().await?;
        } else if test.verb == Verb::Send {
            session.sync().await?;
        }
        *current.borrow_mut() = Some(Current {
            device: device.clone(),
            qpn,
            size,
            header: k == 0,
        });
        let runner = Runner {
            device: &device,
            qps: &endpoints,
            index: index.clone(),
            sges: (0..qps).map(|i| slot(i, size)).collect(),
            recv_sges,
            remotes: remotes.clone(),
            limit: Duration::from_secs(args.timeout),
            plan,
            live,
        };
        let outcome = match (test.kind, test.verb, side) {
            (Kind::Bandwidth, Verb::Send, Side::Server) => runner.receive_all(posted).await,
            (Kind::Bandwidth, _, Side::Server) => Ok(Measured::default()),
            (Kind::Bandwidth, verb, Side::Client) => {
                runner.bandwidth(verb, args.tx_depth, cas).await
            }
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
        // ... and one after its run.
        if args.all && test.verb == Verb::Send {
            session.sync().await?;
        }
        // A bandwidth row as soon as its size is done, on the sides that measure.
        if !lat && !one_way_server {
            let part = Part {
                header: k == 0,
                footer: k + 1 == sizes.len(),
                interrupted: false,
            };
            print_result(args, test, size, &measured, &device, qpn, part).await?;
        }
        last = (size, measured);
    }
    *current.borrow_mut() = None;
    let (size, measured) = last;
    let report: BwReport = measured.report(size, args.unit());
    let finish = session.finish(&report).await.map_err(|e| {
        anyhow::Error::new(e)
            .context("the peer stopped before the end of the test (see its output)")
    })?;
    let whole = Part {
        header: true,
        footer: true,
        interrupted: false,
    };
    if lat {
        print_result(args, test, size, &measured, &device, qpn, whole).await?;
    } else if one_way_server {
        // A one-way test's server prints what the client measured, as perftest does.
        let shown = finish
            .remote_report
            .map(|r| Measured::from_report(&r))
            .unwrap_or(measured);
        print_result(args, test, size, &shown, &device, qpn, whole).await?;
    }
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
