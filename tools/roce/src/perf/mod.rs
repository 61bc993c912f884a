//! `roce perf`: perftest's bandwidth and latency tests, speaking the out-of-band protocol of
//! perftest 4.5-0.17 (Debian 12's) byte for byte, so either side can be `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_send_lat`, `ib_read_lat` or `ib_atomic_lat`.

use std::process::ExitCode;

use anyhow::{Context, bail};
use roce_core::Qpn;
use roce_device::DeviceHandle;
use roce_oob::perftest::{self, IbvMtu, Kind, Test, Verb};

mod args;
mod check;
mod counts;
mod params;
mod rdma_cm;
mod report;
mod rules;
mod setup;
mod test_run;
mod traffic;
mod traffic_and_end;

pub(crate) use args::{Args, ConnectionArg, VerbArg};
use rules::{check_connection, check_events, check_run_infinitely};
use test_run::perf;

/// perftest's Q_Key of its UD QPs (perftest_parameters.h `DEF_QKEY`).
pub(crate) const QKEY: u32 = 0x1111_1111;

/// The room before a UD message in its receive buffer, for the GRH (perftest_parameters.h
/// `UD_ADDITION`).
pub(crate) const GRH: u32 = 40;

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

/// perftest's interval of --run_infinitely without -D (perftest_parameters.h `DEF_DURATION`).
const DEFAULT_INTERVAL_SECS: u32 = 5;

/// What a Ctrl-C needs to print the run it stopped.
struct Current {
    device: DeviceHandle,
    qpn: Qpn,
    size: u32,
    header: bool,
}
