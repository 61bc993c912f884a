//! `roce perf`: perftest's bandwidth and latency tests, speaking the out-of-band protocol of
//! perftest 4.5-0.17 (Debian 12's) byte for byte, so either side can be `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_send_lat`, `ib_read_lat` or `ib_atomic_lat`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use roce_core::{
    Access, Cqe, Mtu, Psn, QpInit, QpType, Qpn, RecvWr, Remote, SendOp, SendWr, Sge, WcStatus,
};
use roce_device::{Connection, DeviceHandle, RcEndpoint};
use roce_oob::perftest::{
    self, BwReport, Config, IbvMtu, Kind, PerftestDest, Session, Side, Test, Verb,
};
use roce_sim::scenario::jain_index;
use roce_wire::Gid;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

use crate::device::CcKind;

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

const RECV: u64 = 1;

/// Completions taken from the CQ at a time (perftest's `CTX_POLL_BATCH`).
const POLL_BATCH: usize = 16;

/// What a run measured.
#[derive(Debug, Default, Clone)]
struct Measured {
    elapsed: Duration,
    /// One-way latencies, for latency tests.
    samples: Vec<Duration>,
    /// From the peer's report only.
    reported: Option<(f64, f64, f64)>,
    /// Bandwidth tests that see completions: what each QP did.
    per_qp: Option<PerQp>,
}

impl Measured {
    fn report(&self, size: u32, iters: u64) -> BwReport {
        let (peak, avg, rate) = self.bandwidth(size, iters);
        BwReport {
            size: u64::from(size),
            iters,
            bw_peak: peak,
            bw_avg: avg,
            msg_rate_avg: rate,
        }
    }

    /// Each QP's goodput in MB/s while all QPs were busy, and Jain's fairness index of them
    /// (`None` without per-QP completions).
    fn fairness(&self, size: u32) -> Option<(Vec<f64>, f64)> {
        let per_qp = self.per_qp.as_ref()?;
        let (interval, done) = per_qp.busy.as_ref()?;
        let secs = interval.as_secs_f64();
        let rates: Vec<f64> = done
            .iter()
            .map(|&n| {
                if secs > 0.0 {
                    f64::from(size) * f64::from(n) / secs / 1e6
                } else {
                    0.0
                }
            })
            .collect();
        let jain = jain_index(&rates);
        Some((rates, jain))
    }

    fn from_report(report: &BwReport) -> Self {
        Self {
            reported: Some((report.bw_peak, report.bw_avg, report.msg_rate_avg)),
            ..Self::default()
        }
    }

    /// perftest's units: MB/sec as perftest 4.5-0.17 counts them, 2^20 bytes per second
    /// (`print_report_bw`: `format_factor = 0x100000` unless `--report_gbits`), and Mpps. These
    /// go into the report the peer prints, and into the text table, as perftest's do.
    fn bandwidth(&self, size: u32, iters: u64) -> (f64, f64, f64) {
        if let Some(reported) = self.reported {
            return reported;
        }
        let secs = self.elapsed.as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let avg = f64::from(size) * iters as f64 / secs / MIB;
        (avg, avg, iters as f64 / secs / 1e6)
    }
}

/// Bytes in perftest's "MB".
const MIB: f64 = 1_048_576.0;

/// perftest's MB/sec (2^20 bytes per second) as MB/s of 10^6 bytes, the unit of `--json`.
fn mb_per_s(perftest_mb: f64) -> f64 {
    perftest_mb * MIB / 1e6
}

/// What each QP of a bandwidth test completed.
#[derive(Debug, Clone)]
struct PerQp {
    /// When every QP had work.
    start: Instant,
    /// Iterations each QP has to do.
    iters: u32,
    /// Completions per QP.
    done: Vec<u32>,
    /// Their sum.
    sum: u64,
    /// When the first QP finished, and what each QP had completed by then: the interval in
    /// which every QP had work, over which their goodputs compare.
    busy: Option<(Duration, Vec<u32>)>,
}

impl PerQp {
    fn new(qps: usize, iters: u32, start: Instant) -> Self {
        Self {
            start,
            iters,
            done: vec![0; qps],
            sum: 0,
            busy: None,
        }
    }

    fn completed(&mut self, qp: usize) {
        self.done[qp] += 1;
        self.sum += 1;
        if self.done[qp] == self.iters && self.busy.is_none() {
            self.busy = Some((self.start.elapsed(), self.done.clone()));
        }
    }

    /// Iterations of all QPs together.
    fn total(&self) -> u64 {
        u64::from(self.iters) * self.done.len() as u64
    }

    fn finished(&self) -> bool {
        self.sum >= self.total()
    }
}

struct Runner<'a> {
    device: &'a DeviceHandle,
    /// The QPs, QP 0 first; latency tests have one.
    qps: &'a [RcEndpoint],
    /// Each QP's place in `qps`, to attribute the completions of the shared CQ.
    index: HashMap<Qpn, usize>,
    /// Each QP's send buffer.
    sges: Vec<Sge>,
    /// Each QP's receive buffer.
    recv_sges: Vec<Sge>,
    /// Each QP's buffer at the peer.
    remotes: Vec<Remote>,
    limit: Duration,
    /// Per QP.
    iters: u32,
}

impl Runner<'_> {
    /// QP 0, the one of a latency test.
    fn qp(&self) -> &RcEndpoint {
        &self.qps[0]
    }

    fn op(&self, qp: usize, verb: Verb, cas: bool, i: u32) -> SendOp {
        let remote = self.remotes[qp];
        match verb {
            Verb::Write => SendOp::RdmaWrite(remote),
            Verb::Read => SendOp::RdmaRead(remote),
            Verb::Send => SendOp::Send,
            Verb::Atomic if cas => SendOp::CompareSwap {
                remote,
                compare: u64::from(i),
                swap: u64::from(i) + 1,
            },
            Verb::Atomic => SendOp::FetchAdd { remote, add: 1 },
        }
    }

    /// The next completion of the (shared) CQ, which must be a success, and its QP's index.
    async fn complete(&self) -> Result<(Cqe, usize), String> {
        let cqe = self
            .device
            .next_completion_within(self.qp().cq, self.limit)
            .await
            .map_err(|e| e.to_string())?;
        self.check(cqe)
    }

    /// Up to `max` completions, at least one; each must be a success of one of our QPs.
    async fn complete_many(&self, max: usize) -> Result<Vec<(Cqe, usize)>, String> {
        self.device
            .next_completions_within(self.qp().cq, max, self.limit)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|cqe| self.check(cqe))
            .collect()
    }

    /// A successful completion of one of our QPs, and that QP's index.
    fn check(&self, cqe: Cqe) -> Result<(Cqe, usize), String> {
        if cqe.status != WcStatus::Success {
            return Err(format!(
                "completion with status {:?} on QP {}",
                cqe.status, cqe.qpn
            ));
        }
        let qp = self
            .index
            .get(&cqe.qpn)
            .copied()
            .ok_or_else(|| format!("a completion of QP {}, which is not ours", cqe.qpn))?;
        Ok((cqe, qp))
    }

    /// The WRs that may be posted now: round robin over the QPs, one WR per QP per round, each
    /// QP until it has `depth` in flight or all its iterations posted (`posted` counts them).
    fn fill(
        &self,
        (verb, depth, cas): (Verb, u32, bool),
        posted: &mut [u32],
        done: &[u32],
    ) -> Vec<(Qpn, SendWr)> {
        let mut list = Vec::new();
        loop {
            let before = list.len();
            for qp in 0..self.qps.len() {
                if posted[qp] >= self.iters || posted[qp] - done[qp] >= depth.max(1) {
                    continue;
                }
                let n = posted[qp];
                let wr = SendWr::new(u64::from(n), self.op(qp, verb, cas, n), vec![self.sges[qp]]);
                list.push((self.qps[qp].qpn, wr));
                posted[qp] += 1;
            }
            if list.len() == before {
                return list;
            }
        }
    }

    /// Keeps up to `depth` WRs in flight on every QP until each has completed `iters`, as
    /// perftest's `run_iter_bw` (perftest_resources.c) does: round robin over the QPs, each
    /// while `scnt[index] < iters` and `scnt[index] - ccnt[index] < tx_depth`, until
    /// `iters * num_of_qps` have completed. A post here is a round trip to the device's task
    /// (microseconds, not perftest's nanoseconds), so the WRs that fit are posted as one list
    /// (perftest's `--post_list`) and completions are taken up to 16 at a time (perftest's
    /// `CTX_POLL_BATCH`); the windows are filled one WR per QP per round, so that QP 0 does not
    /// run alone while the others' fill. The per-QP interval starts when every QP has a WR
    /// posted.
    async fn bandwidth(&self, verb: Verb, depth: u32, cas: bool) -> Result<Measured, String> {
        let start = Instant::now();
        let n = self.qps.len();
        let wr = (verb, depth, cas);
        let mut posted = vec![0u32; n];
        let mut per_qp = PerQp::new(n, self.iters, start);
        let mut progress = Progress::new(per_qp.total());
        let mut first_round = true;
        while !per_qp.finished() {
            let list = self.fill(wr, &mut posted, &per_qp.done);
            if !list.is_empty() {
                self.device
                    .post_send_list(list)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            if first_round {
                per_qp.start = Instant::now();
                first_round = false;
            }
            for (_, qp) in self.complete_many(POLL_BATCH).await? {
                per_qp.completed(qp);
            }
            progress.tick(per_qp.sum);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            per_qp: Some(per_qp),
            ..Measured::default()
        })
    }

    /// A send test's server: receives `iters` messages on every QP, reposting receives as they
    /// are used (perftest's `run_iter_bw_server`: while `posted_per_qp[wc_id] < iters`).
    async fn receive_all(&self, posted: u32) -> Result<Measured, String> {
        let start = Instant::now();
        let n = self.qps.len();
        let mut outstanding = vec![posted; n];
        let mut per_qp = PerQp::new(n, self.iters, start);
        let mut progress = Progress::new(per_qp.total());
        while !per_qp.finished() {
            let (_, qp) = self.complete().await?;
            per_qp.completed(qp);
            outstanding[qp] -= 1;
            if per_qp.done[qp] + outstanding[qp] < self.iters {
                self.device
                    .post_recv(
                        self.qps[qp].qpn,
                        RecvWr {
                            wr_id: RECV,
                            sgl: vec![self.recv_sges[qp]],
                        },
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                outstanding[qp] += 1;
            }
            progress.tick(per_qp.sum);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            per_qp: Some(per_qp),
            ..Measured::default()
        })
    }

    /// One READ or atomic at a time; each sample is the round trip.
    async fn latency(&self, verb: Verb, cas: bool) -> Result<Measured, String> {
        let start = Instant::now();
        let mut samples = Vec::with_capacity(self.iters as usize);
        for i in 0..self.iters {
            let t = Instant::now();
            let wr = SendWr::new(u64::from(i), self.op(0, verb, cas, i), vec![self.sges[0]]);
            self.device
                .post_send(self.qp().qpn, wr)
                .await
                .map_err(|e| e.to_string())?;
            self.complete().await?;
            samples.push(t.elapsed());
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples,
            ..Measured::default()
        })
    }

    /// ib_send_lat: the client sends, the server answers each message; half a round trip per
    /// sample, as perftest reports.
    async fn send_latency(&self, client: bool) -> Result<Measured, String> {
        let start = Instant::now();
        let mut samples = Vec::with_capacity(self.iters as usize);
        let send = |i: u32| {
            let mut wr = SendWr::new(u64::from(i) + 2, SendOp::Send, vec![self.sges[0]]);
            wr.inline = self.sges[0].length <= 400;
            self.device.post_send(self.qp().qpn, wr)
        };
        for i in 0..self.iters {
            let t = Instant::now();
            if client {
                send(i).await.map_err(|e| e.to_string())?;
            }
            // Wait for both this side's send and the peer's message.
            let mut waiting = if client { 2 } else { 1 };
            while waiting > 0 {
                let cqe = self
                    .device
                    .next_completion_within(self.qp().cq, self.limit)
                    .await
                    .map_err(|e| e.to_string())?;
                if cqe.status != WcStatus::Success {
                    return Err(format!("completion with status {:?}", cqe.status));
                }
                if cqe.wr_id == RECV {
                    self.device
                        .post_recv(
                            self.qp().qpn,
                            RecvWr {
                                wr_id: RECV,
                                sgl: vec![self.sges[0]],
                            },
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    if !client {
                        send(i).await.map_err(|e| e.to_string())?;
                        waiting += 1;
                    }
                }
                waiting -= 1;
            }
            samples.push(t.elapsed() / 2);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples,
            ..Measured::default()
        })
    }
}

impl Runner<'_> {
    /// ib_write_lat: each side RDMA-WRITEs its buffer into the peer's, whose last byte carries
    /// the count, and polls its own last byte for the peer's; the server writes first
    /// (perftest's `run_iter_lat_write`: `!(scnt < 1 && machine == SERVER)`). Half a round trip
    /// per sample.
    async fn write_latency(
        &self,
        mr: &roce_core::MemoryRegion,
        half: usize,
        server: bool,
    ) -> Result<Measured, String> {
        // We post from the send half; the peer's count arrives in the receive half.
        let last = self.sges[0].length.max(1) as usize - 1;
        let poll = half + last;
        let start = Instant::now();
        let mut samples = Vec::with_capacity(self.iters as usize);
        let (mut scnt, mut rcnt) = (0u32, 0u32);
        let mut round = Instant::now();
        while scnt < self.iters || rcnt < self.iters {
            if rcnt < self.iters && !(scnt < 1 && server) {
                rcnt += 1;
                let deadline = Instant::now() + self.limit;
                while mr.read(poll, 1).is_none_or(|b| b[0] != rcnt as u8) {
                    if Instant::now() > deadline {
                        return Err(format!(
                            "no write from the peer for {:?} (ping {rcnt})",
                            self.limit
                        ));
                    }
                    // The device runs on this thread: let it take the peer's packets in.
                    tokio::task::yield_now().await;
                }
                samples.push(round.elapsed() / 2);
            }
            if scnt < self.iters {
                scnt += 1;
                mr.write(last, &[scnt as u8]);
                round = Instant::now();
                let wr = SendWr::new(
                    u64::from(scnt),
                    SendOp::RdmaWrite(self.remotes[0]),
                    vec![self.sges[0]],
                );
                self.device
                    .post_send(self.qp().qpn, wr)
                    .await
                    .map_err(|e| e.to_string())?;
                self.complete().await?;
            }
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples,
            ..Measured::default()
        })
    }
}

/// A line on standard error every 2 s of a run longer than 3 s.
struct Progress {
    start: Instant,
    last: Instant,
    total: u64,
}

impl Progress {
    fn new(total: u64) -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            total,
        }
    }

    fn tick(&mut self, done: u64) {
        let now = Instant::now();
        if now - self.start > Duration::from_secs(3) && now - self.last > Duration::from_secs(2) {
            self.last = now;
            eprintln!(
                "roce perf: {done}/{} iterations, {:.0} s",
                self.total,
                (now - self.start).as_secs_f64()
            );
        }
    }
}

async fn print_result(
    args: &Args,
    test: Test,
    size: u32,
    iters: u64,
    m: &Measured,
    device: &DeviceHandle,
    qpn: Qpn,
) -> anyhow::Result<()> {
    let stats = device.stats().await?;
    let cc = device.qp_congestion(qpn).await?;
    // The QP's congestion control, in the JSON result and (when on) in a line of text.
    let congestion = json!({
        "algorithm": format!("{:?}", args.device.cc).to_lowercase(),
        "rate_bps": cc.rate_bps, "target_bps": cc.target_bps, "alpha": cc.alpha,
        "cnps_sent": cc.cnps_sent, "cnps_received": cc.cnps_received,
        "rate_decreases": stats.rate_decreases, "rate_increases": stats.rate_increases,
    });
    if !args.json && args.device.cc != CcKind::None {
        let mbps =
            |r: Option<u64>| r.map_or_else(|| "-".to_owned(), |r| format!("{:.1}", r as f64 / 1e6));
        println!(
            " congestion: rate {} Mb/s, target {} Mb/s, alpha {:.3}, CNPs sent {}, received {}, rate decreases {}",
            mbps(cc.rate_bps),
            mbps(cc.target_bps),
            cc.alpha,
            cc.cnps_sent,
            cc.cnps_received,
            stats.rate_decreases
        );
    }
    let line = "-".repeat(87);
    if test.kind == Kind::Bandwidth {
        let (peak, avg, rate) = m.bandwidth(size, iters);
        let fairness = m.fairness(size);
        if args.json {
            let per_qp_bytes = m.per_qp.as_ref().map(|p| {
                p.done
                    .iter()
                    .map(|&n| u64::from(n) * u64::from(size))
                    .collect::<Vec<_>>()
            });
            println!(
                "{}",
                json!({
                    "test": format!("{:?}_bw", test.verb).to_lowercase(), "bytes": size, "iterations": iters,
                    "bw_peak_mb_s": mb_per_s(peak), "bw_avg_mb_s": mb_per_s(avg), "msg_rate_mpps": rate,
                    "qps": args.qps, "per_qp_bytes": per_qp_bytes,
                    "per_qp_mb_s": fairness.as_ref().map(|f| &f.0), "jain": fairness.as_ref().map(|f| f.1),
                    "retransmitted_packets": stats.retransmitted_packets, "congestion": congestion,
                    "rx_dropped": stats.rx_dropped(), "rx_icrc_errors": stats.rx_icrc_errors,
                    "rx_icrc_id_solved": stats.rx_icrc_id_solved,
                })
            );
        } else {
            println!("{line}");
            println!(
                " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
            );
            println!(
                " {size:<10} {iters:<10}       {peak:<10.2}         {avg:<10.2}           {rate:.6}"
            );
            println!("{line}");
            if let Some((rates, jain)) = fairness.filter(|_| args.qps > 1) {
                let (min, max) = rates.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| {
                    (lo.min(r), hi.max(r))
                });
                println!(
                    " {} QPs while all were busy: per-QP BW [MB/sec] min {:.2}, max {:.2}; Jain's fairness index {jain:.4}",
                    args.qps,
                    min * 1e6 / MIB,
                    max * 1e6 / MIB
                );
            }
        }
    } else {
        let mut us: Vec<f64> = m.samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        us.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            us.get(((us.len() as f64 * q) as usize).min(us.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0.0)
        };
        let avg = if us.is_empty() {
            0.0
        } else {
            us.iter().sum::<f64>() / us.len() as f64
        };
        let stdev = if us.is_empty() {
            0.0
        } else {
            (us.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / us.len() as f64).sqrt()
        };
        let (min, max, typical) = (pick(0.0), pick(1.0), pick(0.5));
        if args.json {
            println!(
                "{}",
                json!({
                    "test": format!("{:?}_lat", test.verb).to_lowercase(), "bytes": size, "iterations": iters,
                    "t_min_us": min, "t_max_us": max, "t_typical_us": typical, "t_avg_us": avg, "t_stdev_us": stdev,
                    "p99_us": pick(0.99), "p999_us": pick(0.999), "retransmitted_packets": stats.retransmitted_packets,
                    "rx_dropped": stats.rx_dropped(), "rx_icrc_errors": stats.rx_icrc_errors,
                    "rx_icrc_id_solved": stats.rx_icrc_id_solved,
                    "congestion": congestion,
                })
            );
        } else if us.is_empty() {
            println!("{line}\n (the client measures this test)\n{line}");
        } else {
            println!("{line}");
            println!(
                " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
            );
            println!(
                " {size:<6} {iters:<10}     {min:<10.2}     {max:<10.2}   {typical:<10.2}       {avg:<10.2}     {stdev:<10.2}      {:<10.2}             {:<10.2}",
                pick(0.99),
                pick(0.999)
            );
            println!("{line}");
        }
    }
    Ok(())
}

/// A 24-bit PSN that differs between runs (perftest: `lrand48() & 0xffffff`).
fn initial_psn() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos.rotate_left(7) ^ std::process::id()) & 0x00ff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_and_the_table_count_megabytes_as_perftest_does() {
        // 2^20 bytes a second for one second: perftest's 1 MB/sec; 1.048576 MB/s in --json.
        let measured = Measured {
            elapsed: Duration::from_secs(1),
            ..Measured::default()
        };
        let report = measured.report(1 << 20, 1);
        assert_eq!((report.bw_avg, report.msg_rate_avg), (1.0, 1e-6));
        assert_eq!(mb_per_s(report.bw_avg), 1.048_576);
        // A peer's report is shown in its own units.
        let shown = Measured::from_report(&report).bandwidth(0, 0);
        assert_eq!(shown, (1.0, 1.0, 1e-6));
    }
}
