//! `roce perf`: perftest's bandwidth and latency tests, speaking the out-of-band protocol of
//! perftest 4.5-0.17 (Debian 12's) byte for byte, so either side can be `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_send_lat`, `ib_read_lat` or `ib_atomic_lat`.

use std::cell::RefCell;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use roce_core::{Qpn, RecvWr, Sge};
use roce_device::DeviceHandle;
use roce_oob::perftest::{
    self, Amount, BwReport, Config, Connection, Exchange, IbvMtu, Kind, Modes, RunParams, Session,
    Side, Test, Verb,
};

mod check;
mod counts;
mod params;
mod rdma_cm;
mod report;
mod setup;
mod traffic;

use counts::{bytes, depth, iterations, seconds, timeout};
use params::check_params;
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

/// perftest's -c: the QPs' transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ConnectionArg {
    /// Reliable connected.
    #[value(name = "RC")]
    Rc,
    /// Unreliable connected: write and send.
    #[value(name = "UC")]
    Uc,
    /// Unreliable datagram: send, one packet a message.
    #[value(name = "UD")]
    Ud,
}

impl ConnectionArg {
    pub(crate) fn oob(self) -> Connection {
        match self {
            Self::Rc => Connection::Rc,
            Self::Uc => Connection::Uc,
            Self::Ud => Connection::Ud,
        }
    }
}

/// perftest's Q_Key of its UD QPs (perftest_parameters.h `DEF_QKEY`).
pub(crate) const QKEY: u32 = 0x1111_1111;

/// The room before a UD message in its receive buffer, for the GRH (perftest_parameters.h
/// `UD_ADDITION`).
pub(crate) const GRH: u32 = 40;

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
/// perftest's modes: -b (both directions at once), -c UC|UD (the QPs' transport), -e (wait
/// on completion events) and --run_infinitely (a row every -D seconds until Ctrl-C), each
/// with perftest's rules, against perftest's tools as against another `roce perf`.
///
/// Two `roce perf`s compare -n/-D, -s/-a, -q, -b, -c and --run_infinitely before any traffic
/// and both stop, naming the difference, if they were not given the same (perftest 4.5 does
/// not send them: against it, a mismatch shows as a side that waits until --timeout).
///
/// Ctrl-C prints what was measured so far (with "interrupted": true in --json) and exits 130.
///
/// Exit status: 0, 1 when the test failed (an error completion or no progress for --timeout),
/// 2 on a setup or protocol error (the two sides' parameters differ, for one), 130 on Ctrl-C.
#[derive(Debug, clap::Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "Examples (198.18.0.12 runs rxe):\n  \
    ib_write_bw -x 1                  # there: the server\n  \
    roce perf write 198.18.0.12       # here: the client\n  \
    roce perf write -a 198.18.0.12    # every size from 2 bytes to 8 MiB\n  \
    roce perf send -D 10 198.18.0.12  # for 10 seconds (give the server -D 10 too)\n  \
    roce perf send --lat              # here: the server, for ib_send_lat -x 1 198.18.0.1\n  \
    roce perf write -R --ip 198.18.0.1  # the server through the CM, for ib_write_bw -R 198.18.0.1\n  \
    roce perf write -b 198.18.0.12    # both directions at once (ib_write_bw -b -x 1 there)\n  \
    roce perf send -c UD 198.18.0.12  # over UD (ib_send_bw -c UD -x 1 there)\n  \
    roce perf send -e 198.18.0.12     # waiting on completion events (ib_send_bw -e -x 1 there)\n  \
    roce perf write --run_infinitely -D 2 198.18.0.12  # a row every 2 s until Ctrl-C"
)]
pub(crate) struct Args {
    /// The operation.
    #[arg(value_enum)]
    verb: VerbArg,
    /// The server to connect to; without it, be the server.
    server: Option<String>,
    /// Latency test (ib_*_lat) instead of bandwidth (ib_*_bw).
    #[arg(long)]
    lat: bool,
    /// TCP port of the out-of-band exchange (with -R: the port of the CM's service ID).
    #[arg(short, long, default_value_t = 18515)]
    port: u16,
    /// Connect through the RDMA connection manager, as perftest's -R: the out-of-band
    /// exchange runs over an RC connection the CM makes to the server's --port (service ID:
    /// the TCP port space and --port; each message one SEND; the keys as perftest's binary
    /// struct; no "done"), and each test QP is connected by a CM connection of its own to the
    /// same port, between two handshakes, instead of by the QP numbers of the exchange. Give
    /// both sides -R (the peer may be ib_*_bw -R / ib_*_lat -R). The server needs --ip (there
    /// is no TCP connection to take it from); a client without --ip uses the address its host
    /// sends from to reach SERVER. A connect to a port nobody listens on fails at once
    /// ("rejected: no listener", after 10 tries 100 ms apart for the test QPs, as perftest
    /// tries); one to a host with no RoCE NIC gives up after --timeout. The CM's QPs send
    /// with DSCP 0 whatever --dscp says.
    #[arg(short = 'R', long = "rdma_cm", alias = "rdma-cm")]
    rdma_cm: bool,
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
    /// Check every byte that arrives against the seeded pattern it was sent with, and stop
    /// at the first difference, naming the QP, the message and the byte (exit status 1).
    /// Bandwidth tests of write, read and send; give it on the side that receives: the
    /// server for write and send, the client for read (both may). Both sides always send
    /// patterns, so a `roce perf` peer needs no flag of its own; a perftest peer does not.
    #[arg(long)]
    check: bool,
    /// Wait for completions on the CQ's completion channel instead of polling it, as
    /// perftest's -e: the CQ is armed (ibv_req_notify_cq) and each wait takes one event
    /// (ibv_get_cq_event), arms it again and polls what is there. --json counts the events
    /// ("cq_events"). As perftest: not for write tests (whose receiver sees no completions),
    /// nor with -D; and not with --busy-poll, which polls.
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// Both sides send at once, as perftest's -b (bandwidth tests; give both sides -b): each
    /// side runs the test towards the other (a send test's server sends once the client's
    /// first message came), they swap their reports after each run, and each prints its own
    /// #bytes and #iterations with the sum of both directions' BW peak, BW average and
    /// MsgRate, as perftest does (a send test with -D prints its own figures alone, as
    /// perftest). --json adds "local_bw_avg_mb_s" and "remote_bw_avg_mb_s".
    #[arg(short = 'b', long = "bidirectional")]
    bidirectional: bool,
    /// Run until Ctrl-C, printing a result row every -D seconds (5 without -D) of what
    /// completed since the row before, as perftest's --run_infinitely (bandwidth tests; give
    /// both sides the same; no peak; the server of a one-way write/read/atomic test prints
    /// nothing and waits; with -b each row counts both directions as twice this side's, as
    /// perftest does). Ctrl-C prints a last row, of what completed since the row before,
    /// and the footer (exit status 130). --json prints one object per row. Not with -n, -a,
    /// -e, --lat, nor -b in a send test (as perftest).
    #[arg(long = "run_infinitely", alias = "run-infinitely", conflicts_with_all = ["iters", "all"])]
    run_infinitely: bool,
    /// The QPs' transport, as perftest's -c: RC (default), UC (write and send: no ACKs, a
    /// lost packet loses its message) or UD (send only: one packet a message, so at most the
    /// path MTU: without -s, or with -a, the size is cut to it, as perftest; each send names
    /// the peer's QP and Q_Key 0x11111111, and each receive buffer has 40 bytes for the GRH
    /// before the message). With UC or UD and -r left at 512, -r is the iterations (at most
    /// 16000), as perftest, since nothing slows a sender down to its receiver. Give both
    /// sides the same. Not with -R; UD not with --check.
    #[arg(
        short = 'c',
        long = "connection",
        value_enum,
        ignore_case = true,
        default_value = "RC"
    )]
    connection: ConnectionArg,
    #[command(flatten)]
    device: crate::device::DeviceOpts,
}

impl Args {
    /// The receives posted per QP: -r, or with UC/UD and -r at perftest's default, the
    /// iterations up to 16000 (perftest_parameters.c `force_dependecies`: `if (rx_depth ==
    /// DEF_RX_SEND) rx_depth = (iters < UC_MAX_RX) ? iters : UC_MAX_RX`).
    fn rx_depth(&self) -> u32 {
        let iters = self.iters.unwrap_or(if self.lat { 1000 } else { 5000 });
        let counted = self.duration.is_none() && !self.run_infinitely;
        if self.connection != ConnectionArg::Rc && self.rx_depth == 512 && counted {
            iters.min(16000)
        } else {
            self.rx_depth
        }
    }

    fn unit(&self) -> Unit {
        if self.report_gbits {
            Unit::Gbit
        } else {
            Unit::MiB
        }
    }
}

/// perftest's -a: 2^1 to 2^23 bytes (write_bw.c, `RUN_ALL`: `for (i = 1; i < 24 ; ++i)`).
fn all_sizes() -> Vec<u32> {
    (1..24).map(|i| 1u32 << i).collect()
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
    if args.check && (args.lat || verb == Verb::Atomic) {
        bail!("--check: bandwidth tests of write, read and send only");
    }
    if args.duration.is_some() && args.lat {
        bail!("-D: bandwidth tests only (a latency test counts -n iterations)");
    }
    check_events(args, verb)?;
    if args.bidirectional && args.lat {
        bail!(
            "-b: bandwidth tests only, as perftest (\"Bidirectional is only available in BW test\")"
        );
    }
    check_run_infinitely(args, verb)?;
    check_connection(args, verb)?;
    if args.bidirectional && args.check {
        bail!("--check: not with -b (it checks one direction: give it to a one-way run)");
    }
    // The buffer is checked against the NIC's region limit and this machine's memory before a
    // socket is bound or the peer is reached (setup.rs lays it out).
    crate::memory::check_regions(
        &buffer_what(args),
        buffer_bytes(args, test),
        buffer_bytes(args, test),
    )?;
    let runtime = crate::device::runtime(&args.device)?;
    runtime.block_on(perf(args, test, mtu))
}

/// The options that size the buffer, as a user typed them, for the refusal's sentence.
fn buffer_what(args: &Args) -> String {
    let size = match (args.all, args.size) {
        (true, _) => "-a".to_owned(),
        (false, Some(size)) => format!("-s {size}"),
        (false, None) => "the default size".to_owned(),
    };
    format!("roce perf {size} -q {}", args.qps)
}

/// The bytes of the one region perftest's layout needs (setup.rs): a send half and a receive
/// half per QP, each the larger of the largest message and the cycle buffer (a page, 4096 on
/// Linux: what perftest sends in its `sys_data`).
fn buffer_bytes(args: &Args, test: Test) -> u128 {
    let largest = match test.verb {
        Verb::Atomic => 8,
        _ if args.all => all_sizes().into_iter().max().unwrap_or(1),
        _ => args
            .size
            .unwrap_or(if test.kind == Kind::Latency { 2 } else { 65536 }),
    };
    2 * u128::from(args.qps) * u128::from(largest.max(4096))
}

/// perftest's rules for -e (perftest_parameters.c: `case 'e'`, "Events feature not available
/// on WRITE verb"; `force_dependecies`, "Duration mode doesn't work with events."), and ours:
/// events are not polled for.
fn check_events(args: &Args, verb: Verb) -> anyhow::Result<()> {
    if !args.events {
        return Ok(());
    }
    if verb == Verb::Write {
        bail!(
            "-e: not for write tests, as perftest (\"Events feature not available on WRITE verb\")"
        );
    }
    if args.duration.is_some() {
        bail!("-e: not with -D, as perftest (\"Duration mode doesn't work with events\")");
    }
    if args.device.busy_poll {
        bail!("-e waits for completion events, --busy-poll polls: give one of them");
    }
    Ok(())
}

/// perftest's rules for --run_infinitely (perftest_parameters.c `force_dependecies`: "run_infinitely
/// does not support events feature yet", "run_infinitely exists only in BW tests for now",
/// "run_infinitely mode is not supported in SEND Bidirectional BW test").
fn check_run_infinitely(args: &Args, verb: Verb) -> anyhow::Result<()> {
    if !args.run_infinitely {
        return Ok(());
    }
    if args.events {
        bail!(
            "--run_infinitely: not with -e, as perftest (\"run_infinitely does not support events feature yet\")"
        );
    }
    if args.lat {
        bail!(
            "--run_infinitely: bandwidth tests only, as perftest (\"run_infinitely exists only in BW tests for now\")"
        );
    }
    if args.bidirectional && verb == Verb::Send {
        bail!(
            "--run_infinitely: not with -b in a send test, as perftest (\"run_infinitely mode is not supported in SEND Bidirectional BW test\")"
        );
    }
    Ok(())
}

/// perftest's rules for -c (perftest_parameters.c `change_conn_type`: "UC connection not
/// possible in READ/ATOMIC verbs", "UD connection only possible in SEND verb";
/// `force_dependecies`: "UC is not supported in librdmacm"), and ours.
fn check_connection(args: &Args, verb: Verb) -> anyhow::Result<()> {
    match args.connection {
        ConnectionArg::Rc => {}
        ConnectionArg::Uc if matches!(verb, Verb::Read | Verb::Atomic) => {
            bail!(
                "-c UC: write and send only, as perftest (\"UC connection not possible in READ/ATOMIC verbs\")"
            );
        }
        ConnectionArg::Ud if verb != Verb::Send => {
            bail!("-c UD: send only, as perftest (\"UD connection only possible in SEND verb\")");
        }
        ConnectionArg::Uc if args.rdma_cm => {
            bail!("-c UC: not with -R, as perftest (\"UC is not supported in librdmacm\")");
        }
        ConnectionArg::Ud if args.rdma_cm => {
            bail!("-c UD: not with -R (roce perf's CM connects RC QPs)");
        }
        ConnectionArg::Ud if args.check => {
            bail!("--check: not with -c UD");
        }
        _ => {}
    }
    Ok(())
}

/// With -c UD, the sizes that fit one packet of the path MTU (perftest_communication.c
/// `check_mtu`: "Max msg size in UD is MTU" and the size cut to it without -s or with -a;
/// "Max message size in UD cannot be greater than MTU" with a larger -s; send_bw.c runs -a
/// up to the MTU).
fn ud_sizes(args: &Args, sizes: Vec<u32>, mtu: IbvMtu) -> anyhow::Result<Vec<u32>> {
    let mtu = mtu.bytes();
    if args.connection != ConnectionArg::Ud || sizes.iter().all(|&s| s <= mtu) {
        return Ok(sizes);
    }
    if args.size.is_some() {
        bail!(
            "-c UD: -s {} is more than the path MTU, {mtu} bytes (\"Max message size in UD cannot be greater than MTU\")",
            sizes[0]
        );
    }
    eprintln!("roce perf: -c UD: a message is one packet: at most the path MTU, {mtu} bytes");
    let mut cut: Vec<u32> = sizes.into_iter().filter(|&s| s <= mtu).collect();
    if !args.all {
        cut = vec![mtu];
    }
    Ok(cut)
}

/// perftest's interval of --run_infinitely without -D (perftest_parameters.h `DEF_DURATION`).
const DEFAULT_INTERVAL_SECS: u32 = 5;

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
            let since = if args.run_infinitely { " since the last row" } else { "" };
            eprintln!(
                "roce perf: interrupted after {} iterations, {:.1} s{since}; what was measured so far:",
                live.completed,
                elapsed.as_secs_f64()
            );
            let mut measured = Measured {
                elapsed,
                iterations: live.completed,
                samples: live.samples,
                ..Measured::default()
            };
            if args.run_infinitely && args.bidirectional {
                // As the rows: both directions, as twice this side's.
                measured.remote = Some(measured.report(now.size, args.unit()));
            }
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
        // --run_infinitely: no end; rows every -D seconds.
        _ if args.run_infinitely => Plan::Iterations(u32::MAX),
        // perftest_parameters.c: `margin = duration / 4` unless --margin is given.
        Some(secs) => Plan::Duration {
            total: Duration::from_secs(secs.into()),
            margin: Duration::from_secs((secs / 4).into()),
        },
        None => Plan::Iterations(iters),
    };
    let params = RunParams {
        amount: match args.duration {
            _ if args.run_infinitely => {
                Amount::Seconds(args.duration.unwrap_or(DEFAULT_INTERVAL_SECS))
            }
            Some(secs) => Amount::Seconds(secs),
            None => Amount::Iterations(iters),
        },
        size: (!args.all).then_some(size),
        qps: u16::try_from(args.qps).unwrap_or(u16::MAX),
        modes: Modes {
            duplex: args.bidirectional,
            run_infinitely: args.run_infinitely,
            connection: args.connection.oob(),
        },
    };
    let side = if args.server.is_some() {
        Side::Client
    } else {
        Side::Server
    };
    let config = Config {
        mtu,
        params: Some(params),
        duplex: args.bidirectional,
        ..Config::default()
    };
    let largest = sizes.iter().copied().max().unwrap_or(size);
    if args.rdma_cm {
        let (device, local_ip) = rdma_cm::spawn_device(args)?;
        let (stream, control) = rdma_cm::control(args, &device, local_ip, side).await?;
        let mut session =
            Session::start_over(stream, side, test, &config, Exchange::RdmaCm).await?;
        check_params(&session, &params)?;
        let qps = setup::Qps::create(args, device.clone(), local_ip).await?;
        // create_rdma_cm_connection: a handshake, the data QPs' connections, a handshake.
        let listen = rdma_cm::listen_for_data(args, &device, side)?;
        session.rdma_cm_sync().await?;
        let path_mtu =
            roce_core::Mtu::from_bytes(session.mtu().bytes()).context("the negotiated MTU")?;
        let mut conns =
            rdma_cm::connect_data(args, &qps, side, test.verb, path_mtu, listen).await?;
        session.rdma_cm_sync().await?;
        conns.push(control);
        let set_up = setup::set_up(args, &mut session, qps, largest, true).await?;
        let outcome =
            traffic_and_end(args, test, &sizes, plan, session, set_up, live, current).await;
        rdma_cm::disconnect_all(&device, &conns).await;
        return outcome;
    }
    let stream = crate::oob::connect_or_accept(args.server.as_deref(), args.port, "perf").await?;
    let default_ip = crate::oob::local_ip(&stream)?;
    let mut session = Session::start(stream, side, test, &config).await?;
    check_params(&session, &params)?;
    let sizes = ud_sizes(args, sizes, session.mtu())?;
    let largest = sizes.iter().copied().max().unwrap_or(size);
    let (device, local_ip) = args.device.spawn(default_ip)?;
    let qps = setup::Qps::create(args, device, local_ip).await?;
    let set_up = setup::set_up(args, &mut session, qps, largest, false).await?;
    traffic_and_end(args, test, &sizes, plan, session, set_up, live, current).await
}

/// The traffic of every size, then the end of the exchange and the result.
#[allow(clippy::too_many_arguments)]
async fn traffic_and_end<S>(
    args: &Args,
    test: Test,
    sizes: &[u32],
    plan: Plan,
    mut session: Session<S>,
    set_up: setup::SetUp,
    live: &RefCell<Live>,
    current: &RefCell<Option<Current>>,
) -> anyhow::Result<ExitCode>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let lat = test.kind == Kind::Latency;
    let side = session.side();
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let size = sizes.first().copied().unwrap_or(1);
    let setup::SetUp {
        device,
        endpoints,
        mr,
        half,
        remotes,
        ..
    } = &set_up;
    let (device, endpoints, mr, half) = (device, endpoints.as_slice(), mr, *half);
    let qps = args.qps as usize;
    let ours: Vec<Qpn> = endpoints.iter().map(|qp| qp.qpn).collect();
    check::fill(mr, &ours, half);
    // Who receives checks: the server what a client WRITEs or SENDs, the client what it READs.
    let checker = args.check.then(|| {
        let half_seen = match test.verb {
            Verb::Read => check::Half::Receive,
            _ => check::Half::Send,
        };
        RefCell::new(check::Checker::new(
            &ours,
            &set_up.peer_qpns,
            half_seen,
            largest as usize,
        ))
    });
    let checks_here = match test.verb {
        Verb::Read => side == Side::Client,
        _ => side == Side::Server,
    };
    let checker = checker.filter(|_| checks_here);
    let slot = |i: usize, size: u32| Sge {
        addr: mr.addr() + (i * half) as u64,
        length: size,
        lkey: mr.lkey(),
    };
    let duplex = args.bidirectional;
    let receives = test.verb == Verb::Send && (lat || side == Side::Server || duplex);
    let posted = if receives {
        args.rx_depth()
            .min(u32::try_from(plan.iters()).unwrap_or(u32::MAX))
            .max(1)
    } else {
        0
    };
    let one_way_server = side == Side::Server && test.verb != Verb::Send && !duplex;
    let qpn = endpoints[0].qpn;
    let index: std::collections::HashMap<Qpn, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, qp)| (qp.qpn, i))
        .collect();
    let cas = args.atomic_type == "CMP_AND_SWAP";
    // -e: the CQ armed once before the traffic, as perftest arms it after connecting.
    let channel = if args.events {
        Some(traffic::events::Channel::new(device, endpoints[0].cq)?)
    } else {
        None
    };
    // --run_infinitely: the runner's rows, printed as they come.
    let (rows_out, mut rows_in) = tokio::sync::mpsc::unbounded_channel();
    let rows = args.run_infinitely.then(|| {
        let secs = args.duration.unwrap_or(DEFAULT_INTERVAL_SECS);
        RefCell::new(traffic::rows::Rows::new(
            Duration::from_secs(secs.into()),
            rows_out,
        ))
    });
    let mut last = (size, Measured::default());
    for (k, &size) in sizes.iter().enumerate() {
        // With one QP receives land in the send half, where ib_send_lat's answer is sent
        // from; with several, each QP's in its receive half (perftest_resources.c
        // `ctx_set_recv_wqes`: `buf[0] + (num_of_qps + k) * send_qp_buff_size`).
        // A UD receive has the GRH's 40 bytes before the message.
        let grh = if args.connection == ConnectionArg::Ud {
            GRH
        } else {
            0
        };
        let recv_sges: Vec<Sge> = (0..qps)
            .map(|i| slot(if qps == 1 { 0 } else { qps + i }, size + grh))
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
        // write_bw.c, read_bw.c, atomic_bw.c with -b: a handshake before each run.
        // (Not with --run_infinitely, whose branch of those mains has none.)
        if duplex && test.verb != Verb::Send && !args.run_infinitely {
            session.sync().await?;
        }
        *current.borrow_mut() = Some(Current {
            device: device.clone(),
            qpn,
            size,
            header: k == 0,
        });
        let runner = Runner {
            device,
            qps: endpoints,
            index: index.clone(),
            sges: (0..qps).map(|i| slot(i, size)).collect(),
            recv_sges,
            remotes: remotes.clone(),
            limit: Duration::from_secs(args.timeout),
            plan,
            live,
            check: checker.as_ref().map(|c| (mr, c)),
            events: channel.as_ref(),
            rows: rows.as_ref(),
            ud: set_up.ud.as_deref(),
        };
        let run = async {
            match (test.kind, test.verb, side) {
                (Kind::Bandwidth, Verb::Send, side) if duplex => {
                    runner
                        .bidirectional(args.tx_depth, posted, side == Side::Client)
                        .await
                }
                (Kind::Bandwidth, verb, _) if duplex => {
                    runner.bandwidth(verb, args.tx_depth, cas).await
                }
                (Kind::Bandwidth, Verb::Send, Side::Server) => runner.receive_all(posted).await,
                (Kind::Bandwidth, _, Side::Server) => Ok(Measured::default()),
                (Kind::Bandwidth, verb, Side::Client) => {
                    runner.bandwidth(verb, args.tx_depth, cas).await
                }
                (Kind::Latency, Verb::Send, side) => {
                    runner.send_latency(side == Side::Client).await
                }
                (Kind::Latency, Verb::Write, side) => {
                    runner.write_latency(mr, half, side == Side::Server).await
                }
                (Kind::Latency, _, Side::Server) => Ok(Measured::default()),
                (Kind::Latency, verb, Side::Client) => runner.latency(verb, cas).await,
            }
        };
        // The rows of --run_infinitely, printed while the traffic runs (the printer waits
        // for ever: the run ends first, on an error, or Ctrl-C ends both).
        let print_rows = async {
            let mut first = true;
            while let Some(row) = rows_in.recv().await {
                let row = Measured {
                    // perftest's `run_inf_bi_factor`: -b counts twice this side's traffic.
                    remote: duplex.then(|| row.report(size, args.unit())),
                    ..row
                };
                let part = Part {
                    header: first,
                    footer: false,
                    interrupted: false,
                };
                print_result(args, test, size, &row, device, qpn, part).await?;
                if let Some(now) = current.borrow_mut().as_mut() {
                    now.header = false;
                }
                first = false;
            }
            std::future::pending::<()>().await;
            anyhow::Ok(())
        };
        let outcome = tokio::select! {
            outcome = run => outcome,
            Err(why) = print_rows => return Err(why),
        };
        let measured = match outcome {
            Ok(measured) => Measured {
                cq_events: channel.as_ref().map(traffic::events::Channel::events),
                ..measured
            },
            Err(traffic::TrafficError::Silence { secs, .. }) if args.run_infinitely => {
                // A run without end ends when the peer stops sending (Ctrl-C there).
                if !args.json {
                    println!("{}", "-".repeat(87));
                }
                eprintln!("roce perf: nothing came for {secs} s: the peer ended the run");
                return Ok(ExitCode::SUCCESS);
            }
            Err(why) => {
                eprintln!("roce perf: {why}");
                return Ok(ExitCode::from(1));
            }
        };
        // write_bw.c and read_bw.c with -b -a: a handshake after each run (perftest >= 4.6).
        if duplex && args.all && test.verb != Verb::Send {
            session.sync().await?;
        }
        // -b: the reports swapped, and each side shows the sum of both (not a send test's
        // with -D: send_bw.c `if (user_param.duplex && user_param.test_type != DURATION)`).
        let measured = if duplex && !lat && !(test.verb == Verb::Send && args.duration.is_some()) {
            let remote = session
                .exchange_reports(&measured.report(size, args.unit()))
                .await?;
            Measured {
                remote: Some(remote),
                ..measured
            }
        } else {
            measured
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
            print_result(args, test, size, &measured, device, qpn, part).await?;
        }
        last = (size, measured);
    }
    *current.borrow_mut() = None;
    let (size, measured) = last;
    let report: BwReport = measured.report(size, args.unit());
    if args.run_infinitely && one_way_server {
        // Its client runs until Ctrl-C there, and then closes the exchange: the end.
        if session.finish(&report).await.is_err() {
            eprintln!("roce perf: the client ended the run (--run_infinitely)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let finish = session.finish(&report).await.map_err(|e| {
        anyhow::Error::new(e)
            .context("the peer stopped before the end of the test (see its output)")
    })?;
    if let Some(checker) = &checker {
        let mut checker = checker.borrow_mut();
        // A WRITE's target sees no completion: its last message, whole, once the test is over.
        if test.verb == Verb::Write {
            for (qp, _) in endpoints.iter().enumerate() {
                let target = slot(qps + qp, size);
                let message = measured.per_qp.as_ref().map_or(0, |p| p.done[qp]);
                if let Err(mismatch) = checker.check(mr, target, qp, message) {
                    eprintln!("roce perf: {mismatch}");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        eprintln!(
            "roce perf: --check: {} messages ({} bytes) checked, every byte as sent",
            checker.checked.messages, checker.checked.bytes
        );
    }
    let whole = Part {
        header: true,
        footer: true,
        interrupted: false,
    };
    if lat {
        print_result(args, test, size, &measured, device, qpn, whole).await?;
    } else if one_way_server {
        // A one-way test's server prints what the client measured, as perftest does.
        let shown = finish
            .remote_report
            .map(|r| Measured::from_report(&r))
            .unwrap_or(measured);
        print_result(args, test, size, &shown, device, qpn, whole).await?;
    }
    Ok(ExitCode::SUCCESS)
}
