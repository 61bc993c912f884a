//! `roce demo`: two emulated NICs in one process, over UDP on loopback, running every operation
//! with its data checked.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use roce_core::{
    Access, Cqe, MemoryRegion, Mtu, Psn, RecvWr, Remote, SendOp, SendWr, Sge, Stats, WcStatus,
};
use roce_device::backend::udp::UdpBackend;
use roce_device::{Connection, Device, DeviceConfig, DeviceHandle, RcEndpoint, Recovery, Tap};
use roce_sim::pattern;
use serde_json::json;

/// Run two emulated RoCEv2 NICs in this process and exercise every operation between them.
///
/// NIC a and NIC b each bind UDP port 4791 on a loopback address (no root needed), create an RC
/// QP, connect them as ibv_rc_pingpong would, then run SEND, SEND with immediate, RDMA WRITE,
/// WRITE with immediate, RDMA READ, compare-and-swap and fetch-and-add, checking every byte and
/// every value that arrives. A table shows messages, bytes, time, goodput and retransmitted
/// packets per operation: the requests either NIC sent again (go-back-N), plus the responses b
/// sent again to duplicate requests (READ responses, atomic ACKs replayed from its cache; the
/// ACKs of SENDs and WRITEs are coalesced, so a re-sent one cannot be told apart and is not
/// counted). Everything a sends and b sends is written to a pcap that Wireshark opens (and
/// `roce dump` checks).
///
/// Ctrl-C stops the run at the operation it is in: the operations that ended are printed (with
/// "interrupted" naming the one stopped, in --json), and the capture holds every packet sent
/// until then.
///
/// Exit status: 0 when every check passed, 1 when one failed, 2 on a setup error (for example
/// port 4791 already taken on those addresses: pick others with --ip-a/--ip-b), 130 on Ctrl-C.
#[derive(Debug, clap::Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "Examples:\n  \
    roce demo                       # 64 messages of 64 KiB per operation\n  \
    roce demo --loss 0.01           # drop 1 % of received packets: go-back-N at work\n  \
    roce demo --loss 0.01 --loss-recovery selective-repeat   # only what is lost is sent again\n  \
    roce demo --size 4096 --mtu 4096 --json"
)]
pub(crate) struct Args {
    /// Address of NIC a (any 127.x.y.z works on Linux without configuration). IPv6 works too,
    /// with two addresses of this host: IPv6 has one loopback address, ::1, and the two NICs
    /// cannot share it (e.g. two addresses on `lo` in a network namespace).
    #[arg(long = "ip-a", value_name = "IP", default_value = "127.0.0.1")]
    a: IpAddr,
    /// Address of NIC b.
    #[arg(long = "ip-b", value_name = "IP", default_value = "127.0.0.2")]
    b: IpAddr,
    /// Bytes per message (atomics always move 8).
    #[arg(short, long, default_value_t = 65536)]
    size: u32,
    /// Messages per operation.
    #[arg(short = 'n', long, default_value_t = 64)]
    iters: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short, long, default_value_t = 1024)]
    mtu: u32,
    /// DSCP of the RoCE packets (0 to 63; RoCE fabrics commonly use 26).
    #[arg(long, default_value_t = 0)]
    dscp: u8,
    /// Drop this fraction of the datagrams each NIC receives (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// How the QPs recover lost packets: go-back-n (as rxe) or selective-repeat (IRN-style:
    /// only what is missing is sent again). Try both with --loss.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Recovery::GoBackN)]
    loss_recovery: Recovery,
    /// Where to write the capture.
    #[arg(long, default_value = "roce-demo.pcap")]
    pcap: PathBuf,
    /// Do not write a capture.
    #[arg(long, conflicts_with = "pcap")]
    no_pcap: bool,
    #[command(flatten)]
    snaplen: crate::device::SnapLenOpt,
    /// Print the results as one JSON object.
    #[arg(long)]
    json: bool,
}

/// What one operation did.
struct Outcome {
    name: &'static str,
    messages: u32,
    bytes: u64,
    elapsed: Duration,
    /// Request packets sent again, by either NIC (`retransmitted_packets`).
    requests_resent: u64,
    /// Response packets b sent again (READ responses, atomic ACKs) to duplicate requests.
    responses_resent: u64,
    check: Result<(), CheckError>,
}

impl Outcome {
    /// Every packet sent again for this operation.
    fn retransmits(&self) -> u64 {
        self.requests_resent + self.responses_resent
    }
}

/// Response packets `responder` sent again between `before` and `after`, when it owed
/// `expected` responses (READ response packets, or one atomic ACK per atomic) and sends nothing
/// else but NAKs (selective repeat's included) and CNPs. The engine has no counter of responses sent again: what it sent
/// beyond those is that.
fn resent_responses(before: &Stats, after: &Stats, expected: u64) -> u64 {
    let sent = |s: &Stats| s.tx_packets;
    let other =
        |s: &Stats| s.tx_nak_seq_err + s.tx_rnr_naks + s.tx_naks_other + s.tx_cnps + s.tx_sacks;
    (sent(after) - sent(before)).saturating_sub(expected + other(after) - other(before))
}

/// Runs `roce demo`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mtu = Mtu::from_bytes(args.mtu)
        .with_context(|| format!("--mtu {}: not 256, 512, 1024, 2048 or 4096", args.mtu))?;
    if !(0.0..1.0).contains(&args.loss) {
        bail!(
            "--loss {}: a fraction from 0 up to (not including) 1",
            args.loss
        );
    }
    if args.dscp > 63 {
        bail!("--dscp {}: from 0 to 63", args.dscp);
    }
    if args.iters == 0 || args.iters > 512 {
        bail!("--iters {}: from 1 to 512", args.iters);
    }
    if args.size > 1 << 31 {
        bail!(
            "--size {}: at most 2147483648 (2^31, the longest RDMA message)",
            args.size
        );
    }
    // Two NICs, one region each: checked before anything is allocated.
    crate::memory::check_regions(
        &format!("roce demo --size {} -n {}", args.size, args.iters),
        region_len(args) * 2,
        region_len(args),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(demo(args, mtu))
}

/// Each NIC's region: every message of an operation twice over (what is sent and where it
/// lands), and a page for the atomics.
fn region_len(args: &Args) -> u128 {
    u128::from(args.size) * u128::from(args.iters) * 2 + 4096
}

async fn demo(args: &Args, mtu: Mtu) -> anyhow::Result<ExitCode> {
    // Caught from the start, so that a Ctrl-C during the set-up ends the run at the first
    // operation, with what it has, rather than killing the process.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot catch Ctrl-C")?;
    let tap = if args.no_pcap {
        None
    } else {
        Some(
            Tap::create(&args.pcap, false, args.snaplen.get())
                .with_context(|| format!("cannot create {}", args.pcap.display()))?,
        )
    };
    let start_device = |addr: IpAddr, seed: u64, option: &str| -> anyhow::Result<DeviceHandle> {
        let backend = UdpBackend::bind(addr, roce_wire::ROCE_V2_UDP_PORT)
            .map_err(|err| crate::device::bind_error(addr, err, option))?;
        let mut config = DeviceConfig::new(addr);
        config.tap = tap.clone();
        config.rx_loss = args.loss;
        config.seed = seed;
        config.nic.loss_recovery = args.loss_recovery.loss_recovery();
        Ok(Device::spawn(config, backend))
    };
    let dev_a = start_device(args.a, 1, "--ip-a")?;
    let dev_b = start_device(args.b, 2, "--ip-b")?;
    let depth = args.iters as usize + 8;
    let qp_a = RcEndpoint::create(&dev_a, depth).await?;
    let qp_b = RcEndpoint::create(&dev_b, depth).await?;
    qp_a.init(Access::ALL).await?;
    qp_b.init(Access::ALL).await?;
    let (psn_a, psn_b) = (Psn::new(0x00_1000), Psn::new(0x7f_f000));
    let mut to_b = Connection::new(args.a, args.b, qp_b.qpn, psn_b, psn_a);
    let mut to_a = Connection::new(args.b, args.a, qp_a.qpn, psn_a, psn_b);
    for c in [&mut to_b, &mut to_a] {
        c.mtu = mtu;
        c.dscp = args.dscp;
        // A short local ACK timeout (4.096 µs × 2^12 ≈ 17 ms) so losses recover quickly here,
        // yet long enough that a busy host, whose device threads may wait their turn for a few
        // milliseconds, does not run out of retries without a loss (at 2^10, 4 ms, eight
        // timeouts in a row ended a demo with --loss in a loaded test run).
        c.timeout = 12;
    }
    qp_a.connect(&to_b).await?;
    qp_b.connect(&to_a).await?;

    let region = region_len(args) as usize;
    let mr_a = dev_a.reg_mr(qp_a.pd, region, Access::ALL).await?;
    let mr_b = dev_b.reg_mr(qp_b.pd, region, Access::ALL).await?;
    let ctx = Ctx {
        args,
        qp_a,
        qp_b,
        mr_a,
        mr_b,
    };
    let mut outcomes = Vec::new();
    let mut interrupted = None;
    for op in [
        Op::Send,
        Op::SendWithImm,
        Op::Write,
        Op::WriteWithImm,
        Op::Read,
        Op::CompareSwap,
        Op::FetchAdd,
    ] {
        tokio::select! {
            outcome = ctx.run(op) => outcomes.push(outcome?),
            _ = interrupt.recv() => {
                interrupted = Some(op.name());
                break;
            }
        }
    }
    let failed = outcomes.iter().filter(|o| o.check.is_err()).count();
    let mut sent = 0;
    for dev in [&dev_a, &dev_b] {
        sent += dev.stats().await?.tx_packets;
    }
    report(args, &outcomes, sent, interrupted);
    if let Some(op) = interrupted {
        eprintln!(
            "roce demo: interrupted during {op}; the operations above are the ones that ended"
        );
        return Ok(ExitCode::from(130));
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Prints the table (or the JSON object) of the operations that ended, `sent` packets in all;
/// `interrupted` names the operation a Ctrl-C stopped.
fn report(args: &Args, outcomes: &[Outcome], sent: u64, interrupted: Option<&str>) {
    let failed = outcomes.iter().filter(|o| o.check.is_err()).count();
    if args.json {
        let ops: Vec<_> = outcomes
            .iter()
            .map(|o| {
                json!({
                    "operation": o.name,
                    "messages": o.messages,
                    "bytes": o.bytes,
                    "seconds": o.elapsed.as_secs_f64(),
                    "goodput_gbps": goodput(o),
                    "retransmitted_packets": o.retransmits(),
                    "retransmitted_requests": o.requests_resent,
                    "resent_responses": o.responses_resent,
                    "ok": o.check.is_ok(),
                    "error": o.check.as_ref().err().map(ToString::to_string),
                })
            })
            .collect();
        let report = json!({
            "a": args.a.to_string(), "b": args.b.to_string(), "mtu": args.mtu, "size": args.size,
            "iters": args.iters, "loss": args.loss, "loss_recovery": args.loss_recovery.name(),
            "packets_sent": sent,
            "pcap": (!args.no_pcap).then(|| args.pcap.display().to_string()),
            "operations": ops, "ok": failed == 0 && interrupted.is_none(),
            "interrupted": interrupted,
        });
        println!("{report}");
    } else {
        println!(
            "roce demo: two NICs over UDP, {} <-> {} port 4791, path MTU {}, {} messages of {} bytes per operation{}",
            args.a,
            args.b,
            args.mtu,
            args.iters,
            args.size,
            if args.loss > 0.0 {
                format!(
                    ", {:.1} % of received packets dropped, {} recovers them",
                    args.loss * 100.0,
                    args.loss_recovery.name()
                )
            } else {
                String::new()
            }
        );
        println!(
            "{:<16} {:>8} {:>12} {:>10} {:>14} {:>12}  data",
            "operation", "messages", "bytes", "time ms", "goodput Gb/s", "retransmits"
        );
        for o in outcomes {
            println!(
                "{:<16} {:>8} {:>12} {:>10.2} {:>14.3} {:>12}  {}",
                o.name,
                o.messages,
                o.bytes,
                o.elapsed.as_secs_f64() * 1e3,
                goodput(o),
                o.retransmits(),
                match &o.check {
                    Ok(()) => "ok".to_owned(),
                    Err(why) => format!("FAILED: {why}"),
                }
            );
        }
        if outcomes.iter().any(|o| o.retransmits() > 0) {
            println!(
                "retransmits: request packets either NIC sent again, plus READ responses and \
                 atomic ACKs b sent again to duplicates ({} of those)",
                outcomes.iter().map(|o| o.responses_resent).sum::<u64>()
            );
        }
        if !args.no_pcap {
            println!(
                "capture: {} ({sent} packets); open it in Wireshark, or run: roce dump {}",
                args.pcap.display(),
                args.pcap.display()
            );
        }
    }
}

fn goodput(o: &Outcome) -> f64 {
    let secs = o.elapsed.as_secs_f64();
    if secs > 0.0 {
        o.bytes as f64 * 8.0 / secs / 1e9
    } else {
        0.0
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Send,
    SendWithImm,
    Write,
    WriteWithImm,
    Read,
    CompareSwap,
    FetchAdd,
}

impl Op {
    /// The operation's name in the table and in --json.
    fn name(self) -> &'static str {
        match self {
            Self::Send => "SEND",
            Self::SendWithImm => "SEND_WITH_IMM",
            Self::Write => "RDMA_WRITE",
            Self::WriteWithImm => "RDMA_WRITE_IMM",
            Self::Read => "RDMA_READ",
            Self::CompareSwap => "ATOMIC_CMP_SWP",
            Self::FetchAdd => "ATOMIC_FETCH_ADD",
        }
    }
}

struct Ctx<'a> {
    args: &'a Args,
    qp_a: RcEndpoint,
    qp_b: RcEndpoint,
    mr_a: MemoryRegion,
    mr_b: MemoryRegion,
}

impl Ctx<'_> {
    async fn run(&self, op: Op) -> anyhow::Result<Outcome> {
        let (a, b) = (&self.qp_a.device, &self.qp_b.device);
        let size = self.args.size;
        let n = self.args.iters;
        let half = u64::from(size) * u64::from(n);
        let sge = |mr: &MemoryRegion, offset: u64, len: u32| Sge {
            addr: mr.addr() + offset,
            length: len,
            lkey: mr.lkey(),
        };
        let remote = |offset: u64| Remote {
            addr: self.mr_b.addr() + offset,
            rkey: self.mr_b.rkey(),
        };
        let seed = op as u64 + 1;
        let data = pattern(seed, half as usize);
        let (a_before, b_before) = (a.stats().await?, b.stats().await?);
        let name = op.name();
        // Sources hold a fresh pattern, targets are cleared: stale bytes cannot pass a check.
        match op {
            Op::Read => {
                self.mr_b.write(0, &data);
                self.mr_a.with_bytes(|bytes| bytes[..half as usize].fill(0));
            }
            _ => {
                self.mr_a.write(0, &data);
                self.mr_b.with_bytes(|bytes| bytes.fill(0));
            }
        }
        if matches!(op, Op::Send | Op::SendWithImm | Op::WriteWithImm) {
            for i in 0..n {
                let offset = u64::from(i) * u64::from(size);
                let sgl = if matches!(op, Op::WriteWithImm) {
                    vec![]
                } else {
                    vec![sge(&self.mr_b, offset, size)]
                };
                b.post_recv(
                    self.qp_b.qpn,
                    RecvWr {
                        wr_id: u64::from(i),
                        sgl: sgl.into(),
                    },
                )
                .await?;
            }
        }
        let started = Instant::now();
        for i in 0..n {
            let offset = u64::from(i) * u64::from(size);
            let imm = 0x1000_0000 + i;
            let (sendop, sgl) = match op {
                Op::Send => (SendOp::Send, vec![sge(&self.mr_a, offset, size)]),
                Op::SendWithImm => (
                    SendOp::SendWithImm(imm),
                    vec![sge(&self.mr_a, offset, size)],
                ),
                Op::Write => (
                    SendOp::RdmaWrite(remote(offset)),
                    vec![sge(&self.mr_a, offset, size)],
                ),
                Op::WriteWithImm => (
                    SendOp::RdmaWriteWithImm(remote(offset), imm),
                    vec![sge(&self.mr_a, offset, size)],
                ),
                Op::Read => (
                    SendOp::RdmaRead(remote(offset)),
                    vec![sge(&self.mr_a, offset, size)],
                ),
                // A chain: the i-th swap expects what the (i-1)-th left.
                Op::CompareSwap => (
                    SendOp::CompareSwap {
                        remote: remote(half),
                        compare: u64::from(i),
                        swap: u64::from(i) + 1,
                    },
                    vec![sge(&self.mr_a, half + 8 * u64::from(i), 8)],
                ),
                Op::FetchAdd => (
                    SendOp::FetchAdd {
                        remote: remote(half),
                        add: 3,
                    },
                    vec![sge(&self.mr_a, half + 8 * u64::from(i), 8)],
                ),
            };
            a.post_send(self.qp_a.qpn, SendWr::new(u64::from(i), sendop, sgl))
                .await?;
        }
        let limit = Duration::from_secs(30);
        let mut check = Ok(());
        for i in 0..n {
            let cqe = a.next_completion_within(self.qp_a.cq, limit).await?;
            if cqe.status != WcStatus::Success || cqe.wr_id != u64::from(i) {
                check = Err(CheckError::Send { i, cqe });
            }
        }
        if matches!(op, Op::Send | Op::SendWithImm | Op::WriteWithImm) {
            for i in 0..n {
                let cqe = b.next_completion_within(self.qp_b.cq, limit).await?;
                let imm =
                    matches!(op, Op::SendWithImm | Op::WriteWithImm).then_some(0x1000_0000 + i);
                if cqe.status != WcStatus::Success || cqe.imm_data != imm || cqe.byte_len != size {
                    check = Err(CheckError::Receive { i, cqe });
                }
            }
        }
        let elapsed = started.elapsed();
        if check.is_ok() {
            check = self.verify(op, &data, half);
        }
        let (messages, bytes) = match op {
            Op::CompareSwap | Op::FetchAdd => (n, 8 * u64::from(n)),
            _ => (n, half),
        };
        let (a_after, b_after) = (a.stats().await?, b.stats().await?);
        let requests_resent = (a_after.retransmitted_packets - a_before.retransmitted_packets)
            + (b_after.retransmitted_packets - b_before.retransmitted_packets);
        let responses_resent = match op {
            Op::Read => {
                let per_read = u64::from(size.div_ceil(self.args.mtu).max(1));
                resent_responses(&b_before, &b_after, per_read * u64::from(n))
            }
            Op::CompareSwap | Op::FetchAdd => resent_responses(&b_before, &b_after, u64::from(n)),
            // ACKs are coalesced: how many b owed is not known.
            _ => 0,
        };
        Ok(Outcome {
            name,
            messages,
            bytes,
            elapsed,
            requests_resent,
            responses_resent,
            check,
        })
    }

    fn verify(&self, op: Op, data: &[u8], half: u64) -> Result<(), CheckError> {
        let n = u64::from(self.args.iters);
        let value = |mr: &MemoryRegion, at: u64| {
            let bytes = mr.read(at as usize, 8).unwrap_or_default();
            u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]))
        };
        match op {
            Op::Send | Op::SendWithImm | Op::Write | Op::WriteWithImm => {
                (self.mr_b.read(0, data.len()).as_deref() == Some(data))
                    .then_some(())
                    .ok_or(CheckError::ArrivedDiffer)
            }
            Op::Read => (self.mr_a.read(0, data.len()).as_deref() == Some(data))
                .then_some(())
                .ok_or(CheckError::ReadDiffer),
            Op::CompareSwap => {
                let originals: Vec<u64> = (0..n).map(|i| value(&self.mr_a, half + 8 * i)).collect();
                let expected: Vec<u64> = (0..n).collect();
                if originals != expected || value(&self.mr_b, half) != n {
                    return Err(CheckError::SwapChain(originals));
                }
                Ok(())
            }
            Op::FetchAdd => {
                let originals: Vec<u64> = (0..n).map(|i| value(&self.mr_a, half + 8 * i)).collect();
                let expected: Vec<u64> = (0..n).map(|i| 3 * i).collect();
                if originals != expected || value(&self.mr_b, half) != 3 * n {
                    return Err(CheckError::Additions(originals));
                }
                Ok(())
            }
        }
    }
}

/// Why an operation's check failed: a completion or the memory it left is not what it should be.
#[derive(Debug, thiserror::Error)]
enum CheckError {
    /// A send-side completion failed or came out of order.
    #[error("send completion {i}: {cqe:?}")]
    Send { i: u32, cqe: Cqe },
    /// A receive-side completion failed, or its immediate or length is wrong.
    #[error("receive completion {i}: {cqe:?}")]
    Receive { i: u32, cqe: Cqe },
    /// The target's bytes after a SEND or WRITE.
    #[error("the bytes that arrived differ")]
    ArrivedDiffer,
    /// The initiator's bytes after a READ.
    #[error("the bytes read differ")]
    ReadDiffer,
    /// The originals the compare-and-swaps returned.
    #[error("swap chain broke: originals {0:?}")]
    SwapChain(Vec<u64>),
    /// The originals the fetch-and-adds returned.
    #[error("additions went wrong: originals {0:?}")]
    Additions(Vec<u64>),
}
