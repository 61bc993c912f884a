//! `roce-blast`: the strongest anchor our socket path can be measured against — a UDP sender
//! and receiver that use the kernel's offloads, as a NIC on the UDP backend could at best.
//!
//! - `send` hands the kernel 64 KiB per `sendmsg` with a `UDP_SEGMENT` control message, so one
//!   system call (and, on a veth, one skb) carries up to 64 datagrams of `--size` bytes;
//! - `recv` turns on `UDP_GRO`, so one `recvmsg` returns a whole coalesced batch, and counts
//!   the datagrams by the batch's segment size.
//!
//! Neither side touches the payload beyond what the kernel copies: the figure is the rate at
//! which the kernel can move datagrams of that size between two processes, the ceiling of any
//! userspace protocol on UDP. bench/veth.sh runs it beside `roce perf` in one run.
//!
//! With `--buffers N` each side moves its datagrams from (or into) N buffers of 64 KiB in turn,
//! one per system call: the working set of N QPs that each write their own 64 KiB region, as
//! `roce perf write -q N` (and perftest) lay them out. It says what that working set costs the
//! kernel's own copies, apart from anything a NIC does.
//!
//! Unlike iperf3 (`-u -b 0`, one datagram per system call, no offload), which bench/veth.sh
//! keeps as the second, weaker anchor.
//!
//! `cores` is the benches' other instrument: how far apart two CPUs are, sampled over time
//! (`cores.rs`), beside the goodput cells of bench/veth.sh and bench/exec.sh.

mod cores;

use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, sendmsg, setsockopt,
    sockopt,
};

/// A UDP blast with segmentation offload on send and GRO on receive.
#[derive(Debug, Parser)]
#[command(
    about,
    after_help = "Example, on a veth pair between namespaces a and b:\n  \
        ip netns exec b roce-blast recv --bind 198.18.2.2:5300 --seconds 3 &\n  \
        ip netns exec a roce-blast send --to 198.18.2.2:5300 --size 4112 --seconds 3\n\
        The receiver prints one JSON object: bytes, datagrams, seconds, mb_s, datagrams_per_s."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Receive with UDP_GRO until --seconds have passed since the first datagram (or 1 s of
    /// silence after it), then print what arrived.
    Recv {
        /// Address to bind.
        #[arg(long)]
        bind: SocketAddr,
        /// How long to count, from the first datagram.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// How long to wait for the first datagram before giving up.
        #[arg(long, default_value_t = 30.0)]
        wait: f64,
        /// Receive into this many 64 KiB buffers in turn, one per recvmsg.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
        buffers: u32,
    },
    /// Send datagrams of --size bytes, 64 KiB (at most 64 datagrams) per sendmsg, for --seconds.
    Send {
        /// Where to send.
        #[arg(long)]
        to: SocketAddr,
        /// Bytes of UDP payload per datagram.
        #[arg(long, default_value_t = 4112)]
        size: u16,
        /// How long to send.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Send from this many 64 KiB buffers in turn, one per sendmsg.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
        buffers: u32,
    },
    /// How far apart two CPUs are: the round trip of a cache line between a thread pinned on
    /// each, every --every-ms, one line per sample: "unix_ms ns_per_round_trip". On a virtual
    /// machine it shows when the host moves the vCPUs apart (docs/benchmarks.md).
    Cores {
        /// The two CPUs, "A,B".
        #[arg(long, default_value = "0,1", value_parser = two_cpus)]
        cpus: (usize, usize),
        /// Round trips timed per sample.
        #[arg(long, default_value_t = 4000, value_parser = clap::value_parser!(u32).range(1..))]
        round_trips: u32,
        /// Milliseconds between samples.
        #[arg(long, default_value_t = 50)]
        every_ms: u64,
        /// Samples to take; 0: until killed.
        #[arg(long, default_value_t = 0)]
        samples: u64,
    },
}

/// The kernel's limit on segments per UDP_SEGMENT send before Linux 6.9 (`UDP_MAX_SEGMENTS`).
const MAX_SEGMENTS: usize = 64;
/// The largest UDP payload one send may carry.
const MAX_SEND: usize = 65_507;
/// Socket buffer asked for (the kernel caps it at `net.core.rmem_max` and `wmem_max`).
const SOCKET_BUFFER: usize = 8 << 20;

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Recv {
            bind,
            seconds,
            wait,
            buffers,
        } => recv(bind, seconds, wait, buffers as usize),
        Command::Send {
            to,
            size,
            seconds,
            buffers,
        } => send(to, size, seconds, buffers as usize),
        Command::Cores {
            cpus,
            round_trips,
            every_ms,
            samples,
        } => cores::run(cpus, round_trips, Duration::from_millis(every_ms), samples),
    }
}

/// "A,B": two CPU numbers.
fn two_cpus(text: &str) -> Result<(usize, usize), String> {
    let parse = |n: &str| {
        n.trim()
            .parse::<usize>()
            .map_err(|_| format!("\"{text}\": two CPU numbers, \"A,B\""))
    };
    match text.split_once(',') {
        Some((a, b)) => Ok((parse(a)?, parse(b)?)),
        None => Err(format!("\"{text}\": two CPU numbers, \"A,B\"")),
    }
}

fn recv(bind: SocketAddr, seconds: f64, wait: f64, buffers: usize) -> anyhow::Result<()> {
    let waited = Instant::now();
    let socket = UdpSocket::bind(bind).with_context(|| format!("binding {bind}"))?;
    let fd = socket.as_raw_fd();
    setsockopt(&socket, sockopt::UdpGroSegment, &true).context("turning on UDP_GRO")?;
    let _ = setsockopt(&socket, sockopt::RcvBuf, &SOCKET_BUFFER);
    socket.set_read_timeout(Some(Duration::from_secs(1)))?;
    let limit = Duration::from_secs_f64(seconds);
    // Touched once, so that no page is first faulted in while counting.
    let mut bufs = vec![0x5au8; buffers << 16];
    let mut next = 0;
    let mut cmsg = nix::cmsg_space!(i32);
    let (mut bytes, mut datagrams) = (0u64, 0u64);
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let buf = &mut bufs[next << 16..(next + 1) << 16];
        next = (next + 1) % buffers;
        let mut iov = [IoSliceMut::new(buf)];
        let msg = match recvmsg::<SockaddrStorage>(fd, &mut iov, Some(&mut cmsg), MsgFlags::empty())
        {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EAGAIN) if first.is_some() => break,
            Err(nix::errno::Errno::EAGAIN) if waited.elapsed().as_secs_f64() < wait => continue,
            Err(nix::errno::Errno::EAGAIN) => bail!("no datagram arrived within {wait} s"),
            Err(err) => return Err(err).context("recvmsg"),
        };
        let len = msg.bytes;
        let mut stride = len;
        for c in msg.cmsgs().context("reading control messages")? {
            if let ControlMessageOwned::UdpGroSegments(size) = c {
                stride = usize::try_from(size).unwrap_or(len).max(1);
            }
        }
        let now = Instant::now();
        let start = *first.get_or_insert(now);
        bytes += len as u64;
        datagrams += len.div_ceil(stride.max(1)) as u64;
        last = now;
        if now.duration_since(start) >= limit {
            break;
        }
    }
    let Some(start) = first else {
        bail!("no datagram arrived within {wait} s");
    };
    let secs = last.duration_since(start).as_secs_f64().max(1e-9);
    let report = serde_json::json!({
        "bytes": bytes,
        "datagrams": datagrams,
        "seconds": secs,
        "mb_s": bytes as f64 / secs / 1e6,
        "datagrams_per_s": datagrams as f64 / secs,
        "buffers": buffers,
    });
    println!("{report}");
    Ok(())
}

fn send(to: SocketAddr, size: u16, seconds: f64, buffers: usize) -> anyhow::Result<()> {
    if size == 0 {
        bail!("--size must be at least 1 byte");
    }
    let bind: SocketAddr = if to.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let socket = UdpSocket::bind(bind)?;
    socket
        .connect(to)
        .with_context(|| format!("connecting to {to}"))?;
    let _ = setsockopt(&socket, sockopt::SndBuf, &SOCKET_BUFFER);
    let fd = socket.as_raw_fd();
    let per_send = (MAX_SEND / usize::from(size)).clamp(1, MAX_SEGMENTS);
    let payload_len = per_send * usize::from(size);
    let payloads = vec![0xa5u8; buffers << 16];
    let mut next = 0;
    let limit = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let (mut sends, mut refused) = (0u64, 0u64);
    while start.elapsed() < limit {
        let cmsgs = [ControlMessage::UdpGsoSegments(&size)];
        let cmsgs = if per_send > 1 { &cmsgs[..] } else { &[][..] };
        let payload = &payloads[next << 16..][..payload_len];
        next = (next + 1) % buffers;
        match sendmsg::<()>(fd, &[IoSlice::new(payload)], cmsgs, MsgFlags::empty(), None) {
            Ok(_) => sends += 1,
            // The receiver not up yet, or a full queue: count and go on.
            Err(nix::errno::Errno::ECONNREFUSED | nix::errno::Errno::ENOBUFS) => refused += 1,
            Err(err) => return Err(err).context("sendmsg with UDP_SEGMENT"),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let sent = sends * per_send as u64;
    let report = serde_json::json!({
        "datagrams": sent,
        "datagrams_per_send": per_send,
        "buffers": buffers,
        "refused_sends": refused,
        "seconds": secs,
        "mb_s": (sent * u64::from(size)) as f64 / secs / 1e6,
    });
    println!("{report}");
    Ok(())
}
