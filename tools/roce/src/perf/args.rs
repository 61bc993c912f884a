//! The command line of `roce perf`: its help, the operation, perftest's options and the
//! device's.

use roce_oob::perftest::{self, Connection, Verb};

use super::counts::{bytes, cq_mod, depth, iterations, seconds, timeout};
use super::report::Unit;

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
    pub(super) verb: VerbArg,
    /// The server to connect to; without it, be the server.
    pub(super) server: Option<String>,
    /// Latency test (ib_*_lat) instead of bandwidth (ib_*_bw).
    #[arg(long)]
    pub(super) lat: bool,
    /// TCP port of the out-of-band exchange (with -R: the port of the CM's service ID).
    #[arg(short, long, default_value_t = 18515)]
    pub(super) port: u16,
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
    pub(super) rdma_cm: bool,
    /// Bytes per message, at least 1 (default 65536, or 2 with --lat; atomics move 8).
    #[arg(short, long, value_parser = bytes, conflicts_with = "all")]
    pub(super) size: Option<u32>,
    /// Every message size from 2 bytes to 8 MiB (2^1 to 2^23), one table row each, as
    /// perftest's -a (bandwidth tests; not atomics, which move 8 bytes). --json prints one
    /// object per size, one per line.
    #[arg(short = 'a', long = "all")]
    pub(super) all: bool,
    /// Iterations per QP, at least 1 (default 5000, or 1000 with --lat).
    #[arg(short = 'n', long, value_parser = iterations, conflicts_with = "duration")]
    pub(super) iters: Option<u32>,
    /// Run for this many seconds instead of -n iterations, as perftest's -D (bandwidth tests;
    /// give both sides the same). What completes from a quarter of it after the start to a
    /// quarter of it before the end is counted (perftest's default --margin); no peak.
    #[arg(short = 'D', long, value_name = "SECS", value_parser = seconds)]
    pub(super) duration: Option<u32>,
    /// Path MTU offered: 256, 512, 1024, 2048 or 4096 (both sides use the smaller).
    #[arg(short, long, default_value_t = 1024)]
    pub(super) mtu: u32,
    /// Work requests in flight (bandwidth tests), at least 1.
    #[arg(short = 't', long = "tx-depth", default_value_t = 128, value_parser = depth)]
    pub(super) tx_depth: u32,
    /// CQ moderation, as perftest's -Q: the poster of a bandwidth test asks for a completion
    /// every this many WRs of a QP and for its last, and posts the others unsignaled (an RC
    /// QP's WRs complete in order, so one completion stands for those before it). Default 100,
    /// perftest's, but 1 for messages over 8 KiB (perftest's MSG_SIZE_CQ_MOD_LIMIT, its
    /// default 64 KiB among them) unless -a, -e or UD; above --tx-depth it is --tx-depth, as
    /// perftest makes it. 1 asks for a completion per WR, as does a READ test with --check
    /// (its client checks each landing). --json counts what the poster took ("completions").
    /// With small messages give a --tx-depth of at least twice -Q (or a smaller -Q): the WRs
    /// after one that asked are done unseen until the next one's completion, so a window no
    /// deeper than -Q empties at every completion (perftest's defaults, -t 128 and -Q 100, do
    /// that to 64-byte WRITEs).
    #[arg(short = 'Q', long = "cq-mod", value_parser = cq_mod)]
    pub(super) cq_mod: Option<u32>,
    /// Receive WRs posted by a send test's server, at least 1.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512, value_parser = depth)]
    pub(super) rx_depth: u32,
    /// GID index (accepted: our GID is the ::ffff: form of our address).
    #[arg(short = 'x', long = "gid-index")]
    pub(super) gid_index: Option<u32>,
    /// Device name (accepted for compatibility).
    #[arg(short = 'd', long = "ib-dev")]
    pub(super) ib_dev: Option<String>,
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
    pub(super) qps: u32,
    /// Atomic operation: FETCH_AND_ADD or CMP_AND_SWAP.
    #[arg(short = 'A', long = "atomic_type", default_value = "FETCH_AND_ADD")]
    pub(super) atomic_type: String,
    /// Report bandwidth in Gb/sec (10^9 bits) instead of MB/sec (2^20 bytes), in the table
    /// and in the report sent to the peer, as perftest's --report_gbits.
    #[arg(long = "report_gbits", alias = "report-gbits")]
    pub(super) report_gbits: bool,
    /// Accepted for perftest's users (its -F: do not fail when the CPU frequency varies);
    /// this tool times with the OS clock, not CPU cycles, so it has nothing to warn about.
    #[arg(short = 'F', long = "CPU-freq")]
    pub(super) cpu_freq: bool,
    /// Give up when no completion comes for this many seconds (at least 1).
    #[arg(long, default_value_t = 10, value_parser = timeout)]
    pub(super) timeout: u64,
    /// Print the result as one JSON object (one per size with -a), with every NIC counter
    /// ("counters"), every drop by reason ("drops") and the totals ("rx_dropped",
    /// "naks_sent", "naks_received", "rnr_naks_sent", "rnr_naks_received", "duplicates",
    /// "retransmitted_packets").
    #[arg(long)]
    pub(super) json: bool,
    /// Print the NIC's counters after the table: drops by reason, NAKs, RNR NAKs,
    /// duplicates, and every counter that is not 0.
    #[arg(long)]
    pub(super) stats: bool,
    /// Check every byte that arrives against the seeded pattern it was sent with, and stop
    /// at the first difference, naming the QP, the message and the byte (exit status 1).
    /// Bandwidth tests of write, read and send; give it on the side that receives: the
    /// server for write and send, the client for read (both may). Both sides always send
    /// patterns, so a `roce perf` peer needs no flag of its own; a perftest peer does not.
    #[arg(long)]
    pub(super) check: bool,
    /// Wait for completions on the CQ's completion channel instead of polling it, as
    /// perftest's -e: the CQ is armed (ibv_req_notify_cq) and each wait takes one event
    /// (ibv_get_cq_event), arms it again and polls what is there. --json counts the events
    /// ("cq_events"). As perftest: not for write tests (whose receiver sees no completions),
    /// nor with -D; and not with --busy-poll, which polls.
    #[arg(short = 'e', long = "events")]
    pub(super) events: bool,
    /// Both sides send at once, as perftest's -b (bandwidth tests; give both sides -b): each
    /// side runs the test towards the other (a send test's server sends once the client's
    /// first message came), they swap their reports after each run, and each prints its own
    /// #bytes and #iterations with the sum of both directions' BW peak, BW average and
    /// MsgRate, as perftest does (a send test with -D prints its own figures alone, as
    /// perftest). --json adds "local_bw_avg_mb_s" and "remote_bw_avg_mb_s".
    #[arg(short = 'b', long = "bidirectional")]
    pub(super) bidirectional: bool,
    /// Run until Ctrl-C, printing a result row every -D seconds (5 without -D) of what
    /// completed since the row before, as perftest's --run_infinitely (bandwidth tests; give
    /// both sides the same; no peak; the server of a one-way write/read/atomic test prints
    /// nothing and waits; with -b each row counts both directions as twice this side's, as
    /// perftest does). Ctrl-C prints a last row, of what completed since the row before,
    /// and the footer (exit status 130). --json prints one object per row. Not with -n, -a,
    /// -e, --lat, nor -b in a send test (as perftest).
    #[arg(long = "run_infinitely", alias = "run-infinitely", conflicts_with_all = ["iters", "all"])]
    pub(super) run_infinitely: bool,
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
    pub(super) connection: ConnectionArg,
    #[command(flatten)]
    pub(crate) device: crate::device::DeviceOpts,
}

/// perftest's CQ moderation (`DEF_CQ_MOD`).
const DEFAULT_CQ_MOD: u32 = 100;
/// Messages longer than this run without CQ moderation unless `-Q` asks for it (perftest's
/// `MSG_SIZE_CQ_MOD_LIMIT`).
const CQ_MOD_SIZE_LIMIT: u32 = 8192;

impl Args {
    /// The receives posted per QP: -r, or with UC/UD and -r at perftest's default, the
    /// iterations up to 16000 (perftest_parameters.c `force_dependecies`: `if (rx_depth ==
    /// DEF_RX_SEND) rx_depth = (iters < UC_MAX_RX) ? iters : UC_MAX_RX`).
    /// The CQ moderation of a `verb` test of `size`-byte messages: `-Q`, but 1 for a READ
    /// test with `--check`, whose client checks what landed at each completion, before the
    /// next READ lands there. Without `-Q`, perftest's: 100, but 1 for messages over 8 KiB
    /// unless every size runs (-a), completions come as events (-e) or the QPs are UD
    /// (perftest_parameters.c `force_dependecies`, MSG_SIZE_CQ_MOD_LIMIT).
    pub(super) fn cq_mod(&self, verb: Verb, size: u32) -> u32 {
        if self.check && verb == Verb::Read {
            return 1;
        }
        if let Some(cq_mod) = self.cq_mod {
            return cq_mod;
        }
        let unmoderated = size > CQ_MOD_SIZE_LIMIT
            && !self.all
            && !self.events
            && self.connection != ConnectionArg::Ud;
        if unmoderated { 1 } else { DEFAULT_CQ_MOD }
    }

    pub(super) fn rx_depth(&self) -> u32 {
        let iters = self.iters.unwrap_or(if self.lat { 1000 } else { 5000 });
        let counted = self.duration.is_none() && !self.run_infinitely;
        if self.connection != ConnectionArg::Rc && self.rx_depth == 512 && counted {
            iters.min(16000)
        } else {
            self.rx_depth
        }
    }

    pub(super) fn unit(&self) -> Unit {
        if self.report_gbits {
            Unit::Gbit
        } else {
            Unit::MiB
        }
    }
}
