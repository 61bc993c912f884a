//! `roce perf`: perftest's bandwidth and latency tests, speaking the out-of-band protocol of
//! perftest 4.5-0.17 (Debian 12's) byte for byte, so either side can be `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_send_lat`, `ib_read_lat` or `ib_atomic_lat`.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use roce_core::{Access, Mtu, Psn, Qpn, RecvWr, Remote, SendOp, SendWr, Sge, WcStatus};
use roce_device::{Connection, DeviceHandle, RcEndpoint};
use roce_oob::perftest::{BwReport, Config, IbvMtu, Kind, PerftestDest, Session, Side, Test, Verb};
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
/// BW average, MsgRate); with --lat, latency tests print t_min, t_max, t_typical, t_avg, t_stdev
/// and the 99 % and 99.9 % percentiles. Against rxe give its tool `-x 1` (the ::ffff:IPv4 GID).
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
    /// QPs (only 1 for now).
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
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
    if args.qps != 1 {
        bail!("-q {}: only one QP for now", args.qps);
    }
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
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
    let depth = (args.tx_depth.max(args.rx_depth) + 4) as usize;
    let qp = RcEndpoint::create(&device, depth).await?;
    qp.init(Access::ALL).await?;
    // perftest's buffer: a send half and a receive half, each the larger of the message and the
    // cycle buffer (`BUFF_SIZE`); the keys announce the receive half, where the peer's WRITEs land
    // and where ib_write_lat polls (perftest_resources.c: `vaddr = buf + (num_of_qps + i) *
    // BUFF_SIZE`, `poll_buf = buf + BUFF_SIZE + size - 1`).
    let half = (size as usize)
        .max(session.sys_data().cycle_buffer as usize)
        .max(8);
    let buf_len = 2 * half;
    let mr = device.reg_mr(qp.pd, buf_len, Access::ALL).await?;
    let out_reads: u16 = 16;
    let local = PerftestDest {
        lid: 0,
        out_reads,
        qpn: qp.qpn.value(),
        psn: initial_psn(),
        rkey: mr.rkey(),
        vaddr: mr.addr() + half as u64,
        gid: Some(Gid::from_ip(local_ip).0),
        srqn: 0,
    };
    let remote = session.exchange_keys(local).await?;
    let Some(gid) = remote.gid else {
        bail!("the peer sent no GID")
    };
    let remote_ip = Gid(gid).to_ip();
    let path_mtu = Mtu::from_bytes(session.mtu().bytes()).context("the negotiated MTU")?;
    let mut connection = Connection::new(
        local_ip,
        remote_ip,
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
    session.connected().await?;
    let sge = Sge {
        addr: mr.addr(),
        length: size,
        lkey: mr.lkey(),
    };
    let receives = test.verb == Verb::Send && (lat || side == Side::Server);
    let posted = if receives {
        args.rx_depth.min(iters).max(1)
    } else {
        0
    };
    for _ in 0..posted {
        device
            .post_recv(
                qp.qpn,
                RecvWr {
                    wr_id: RECV,
                    sgl: vec![sge],
                },
            )
            .await?;
    }
    session.ready().await?;

    let limit = Duration::from_secs(args.timeout);
    let runner = Runner {
        device: &device,
        qp: &qp,
        sge,
        remote: Remote {
            addr: remote.vaddr,
            rkey: remote.rkey,
        },
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
    let report = measured.report(size, iters);
    let finish = session.finish(&report).await?;
    // A one-way test's server prints what the client measured, as perftest does.
    let shown = match (side, finish.remote_report) {
        (Side::Server, Some(remote)) if test.verb != Verb::Send => Measured::from_report(&remote),
        _ => measured,
    };
    print_result(args, test, size, iters, &shown, &device, qp.qpn).await?;
    Ok(ExitCode::SUCCESS)
}

const RECV: u64 = 1;

/// What a run measured.
#[derive(Debug, Default, Clone)]
struct Measured {
    elapsed: Duration,
    /// One-way latencies, for latency tests.
    samples: Vec<Duration>,
    /// From the peer's report only.
    reported: Option<(f64, f64, f64)>,
}

impl Measured {
    fn report(&self, size: u32, iters: u32) -> BwReport {
        let (peak, avg, rate) = self.bandwidth(size, iters);
        BwReport {
            size: u64::from(size),
            iters: u64::from(iters),
            bw_peak: peak,
            bw_avg: avg,
            msg_rate_avg: rate,
        }
    }

    fn from_report(report: &BwReport) -> Self {
        Self {
            reported: Some((report.bw_peak, report.bw_avg, report.msg_rate_avg)),
            ..Self::default()
        }
    }

    /// MB/s (10^6 bytes, as perftest prints with its default units) and Mpps.
    fn bandwidth(&self, size: u32, iters: u32) -> (f64, f64, f64) {
        if let Some(reported) = self.reported {
            return reported;
        }
        let secs = self.elapsed.as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let avg = f64::from(size) * f64::from(iters) / secs / 1e6;
        (avg, avg, f64::from(iters) / secs / 1e6)
    }
}

struct Runner<'a> {
    device: &'a DeviceHandle,
    qp: &'a RcEndpoint,
    sge: Sge,
    remote: Remote,
    limit: Duration,
    iters: u32,
}

impl Runner<'_> {
    fn op(&self, verb: Verb, cas: bool, i: u32) -> SendOp {
        match verb {
            Verb::Write => SendOp::RdmaWrite(self.remote),
            Verb::Read => SendOp::RdmaRead(self.remote),
            Verb::Send => SendOp::Send,
            Verb::Atomic if cas => SendOp::CompareSwap {
                remote: self.remote,
                compare: u64::from(i),
                swap: u64::from(i) + 1,
            },
            Verb::Atomic => SendOp::FetchAdd {
                remote: self.remote,
                add: 1,
            },
        }
    }

    async fn complete(&self) -> Result<(), String> {
        let cqe = self
            .device
            .next_completion_within(self.qp.cq, self.limit)
            .await
            .map_err(|e| e.to_string())?;
        if cqe.status == WcStatus::Success {
            Ok(())
        } else {
            Err(format!("completion with status {:?}", cqe.status))
        }
    }

    /// Keeps `depth` WRs in flight until `iters` completed.
    async fn bandwidth(&self, verb: Verb, depth: u32, cas: bool) -> Result<Measured, String> {
        let start = Instant::now();
        let (mut posted, mut done) = (0u32, 0u32);
        let mut progress = Progress::new(self.iters);
        while done < self.iters {
            while posted < self.iters && posted - done < depth.max(1) {
                let wr = SendWr::new(
                    u64::from(posted),
                    self.op(verb, cas, posted),
                    vec![self.sge],
                );
                self.device
                    .post_send(self.qp.qpn, wr)
                    .await
                    .map_err(|e| e.to_string())?;
                posted += 1;
            }
            self.complete().await?;
            done += 1;
            progress.tick(done);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            ..Measured::default()
        })
    }

    /// A send test's server: receives `iters` messages, reposting receives as they are used.
    async fn receive_all(&self, posted: u32) -> Result<Measured, String> {
        let start = Instant::now();
        let mut outstanding = posted;
        let mut progress = Progress::new(self.iters);
        for received in 1..=self.iters {
            self.complete().await?;
            outstanding -= 1;
            if received + outstanding < self.iters {
                self.device
                    .post_recv(
                        self.qp.qpn,
                        RecvWr {
                            wr_id: RECV,
                            sgl: vec![self.sge],
                        },
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                outstanding += 1;
            }
            progress.tick(received);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            ..Measured::default()
        })
    }

    /// One READ or atomic at a time; each sample is the round trip.
    async fn latency(&self, verb: Verb, cas: bool) -> Result<Measured, String> {
        let start = Instant::now();
        let mut samples = Vec::with_capacity(self.iters as usize);
        for i in 0..self.iters {
            let t = Instant::now();
            let wr = SendWr::new(u64::from(i), self.op(verb, cas, i), vec![self.sge]);
            self.device
                .post_send(self.qp.qpn, wr)
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
            let mut wr = SendWr::new(u64::from(i) + 2, SendOp::Send, vec![self.sge]);
            wr.inline = self.sge.length <= 400;
            self.device.post_send(self.qp.qpn, wr)
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
                    .next_completion_within(self.qp.cq, self.limit)
                    .await
                    .map_err(|e| e.to_string())?;
                if cqe.status != WcStatus::Success {
                    return Err(format!("completion with status {:?}", cqe.status));
                }
                if cqe.wr_id == RECV {
                    self.device
                        .post_recv(
                            self.qp.qpn,
                            RecvWr {
                                wr_id: RECV,
                                sgl: vec![self.sge],
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
        let last = self.sge.length.max(1) as usize - 1;
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
                    SendOp::RdmaWrite(self.remote),
                    vec![self.sge],
                );
                self.device
                    .post_send(self.qp.qpn, wr)
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
    total: u32,
}

impl Progress {
    fn new(total: u32) -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            total,
        }
    }

    fn tick(&mut self, done: u32) {
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
    iters: u32,
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
        if args.json {
            println!(
                "{}",
                json!({
                    "test": format!("{:?}_bw", test.verb).to_lowercase(), "bytes": size, "iterations": iters,
                    "bw_peak_mb_s": peak, "bw_avg_mb_s": avg, "msg_rate_mpps": rate,
                    "retransmitted_packets": stats.retransmitted_packets, "congestion": congestion,
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
