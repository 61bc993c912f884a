//! `roce exec`: runs an unmodified libibverbs program on an emulated NIC.
//!
//! The program loads roce-emu's `libibverbs.so.1` instead of the system's: `roce exec` puts
//! the library's directory first on `LD_LIBRARY_PATH` and describes the device in `ROCE_VERBS_*`
//! variables, which the library reads when the program lists its devices (crates/roce-verbs
//! `config.rs` documents them). roce-emu's `librdmacm.so.1` (crates/roce-rdmacm) goes on the
//! path next to it, so RDMA CM programs (rping, perftest's `-R`) use the same NIC. The NIC runs inside the program's process: each program is its
//! own NIC, so two programs on one host need two addresses (127.0.0.1 and 127.0.0.2, or two
//! network namespaces). `roce exec` waits for the program and exits with its status.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::low_level::siginfo::Cause;
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

use roce_device::{BackendKind, Cc, CcParam, DeviceSpec, Recovery};

use crate::device::parse_gbps;
use crate::libs;

pub(crate) mod tree;

/// How `--stats` prints the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StatsFormat {
    /// One `name value` line per counter that is not zero.
    Text,
    /// The library's JSON object: {"device", "ip", "mtu", "counters": {name: value}}.
    Json,
}

/// Run an unmodified verbs program (ibv_rc_pingpong, ib_write_bw, your own) on an emulated NIC.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Run an unmodified libibverbs program on an emulated RoCEv2 NIC: no kernel module, \
        no root, no RDMA hardware.\n\n\
        The program gets roce-emu's libibverbs.so.1 (through LD_LIBRARY_PATH) and sees one device \
        with one port, as Soft-RoCE (rxe) shows it: GID 0 is the link-local IPv6 form, GID 1 \
        --ip (an IPv4 address in its ::ffff:a.b.c.d form, an IPv6 address as itself), so \
        scripts written for rxe keep their -g 1 / -x 1. The NIC \
        runs inside the program's process, and every process on one address shares it, as \
        processes share a host's RNIC: they reach each other through it and other hosts from \
        it (UDP backend; --private-nic gives a program a NIC of its own). Two hosts are two \
        addresses: 127.0.0.1 and 127.0.0.2 on loopback, or two network namespaces. Setuid \
        programs ignore LD_LIBRARY_PATH and keep the system library.\n\n\
        The NIC's warnings (a receive buffer capped by net.core.rmem_max, ...) go to the \
        program's stderr; RUST_LOG, as for roce itself, asks for more: RUST_LOG=roce_core=debug \
        says why each failed WR failed, =trace follows every packet, dropped ones too.\n\n\
        The program also sees the device as the kernel shows it to programs that look past \
        libibverbs (UCX, NCCL): /dev/infiniband/uverbs0 and rdma_cm (character devices, binds \
        of /dev/null), /sys/class/infiniband/<name>/ (GUIDs, ports/1/gids/N, \
        gid_attrs/types/N \"RoCE v2\", gid_attrs/ndevs/N, device/net/<ifname>) and \
        /sys/class/infiniband_verbs/uverbs0/. They are mounted in a private mount namespace \
        (without root, inside a user namespace that maps you back onto your own uid): the \
        host's /dev and /sys do not change, the network is the host's. Inside, setuid \
        programs gain nothing without root, and others' files show as nobody. --no-sysfs \
        turns this off.\n\n\
        ibv_devinfo, ibv_{rc,uc,ud}_pingpong (also -e and -N) and perftest's \
        ib_{write,read,send,atomic}_{bw,lat} run as they are. Verbs the library does not have \
        yet (memory windows, ...) fail with EOPNOTSUPP and say so once on stderr; \
        docs/verbs.md lists them.\n\n\
        RDMA CM programs (rping, ucmatose, udaddy, rdma_server/rdma_client, perftest's -R) get \
        roce-emu's librdmacm.so.1 too, and connect through the NIC's IB CM (REQ, REP, RTU, \
        DREQ, DREP, SIDR on QP 1), to each other and to the kernel's rdma_cm; calls the library \
        does not have yet (multicast, rsockets, ...) fail with ENOSYS and say so once on stderr \
        (docs/rdmacm.md).\n\n\
        The libraries: roce carries both inside itself. Run from the build (cargo run, \
        target/release/roce), it uses the ones the build linked; installed (cargo install), it \
        writes its copies once into $XDG_CACHE_HOME/roce-emu/KEY/ (~/.cache/roce-emu/KEY/; KEY \
        changes with their contents) and uses them from there, or, where that cannot be \
        written, from a private roce-emu-UID/ in $TMPDIR or /tmp. A copy there is used only if \
        its bytes are the same, and is written again if not; the cache may be deleted at any \
        time. --lib-dir or ROCE_VERBS_LIB_DIR names other libraries; ROCE_EXEC_NO_BUILD_DIR=1 \
        skips the build's, as an installed roce does.\n\n\
        Ctrl-C, SIGTERM and SIGHUP: roce exec waits for the program and ends with its status \
        (130 for Ctrl-C); a signal sent to roce exec alone (kill) is passed on to the program. \
        With --stats, a program that such a signal ends still leaves its counters, which are \
        printed.",
    after_help = "Examples:\n  roce exec --ip 127.0.0.1 -- ibv_devices\n  \
        roce exec --ip 127.0.0.1 -- ibv_rc_pingpong -g 1 &\n  \
        roce exec --ip 127.0.0.2 -- ibv_rc_pingpong -g 1 127.0.0.1\n  \
        roce exec --ip 127.0.0.1 --mtu 4096 -- ibv_devinfo -v\n  \
        roce exec --ip ::1 -- ibv_devinfo -v\n  \
        roce exec --ip 127.0.0.1 -- rping -s -a 127.0.0.1 -v -C 3 &\n  \
        roce exec --ip 127.0.0.2 -- rping -c -a 127.0.0.1 -v -C 3\n  \
        roce exec --ip 127.0.0.1 --stats json -- ./my_verbs_app --flag"
)]
pub(crate) struct Args {
    /// The NIC's IPv4 or IPv6 address (GID index 1: an IPv4 address's ::ffff: form, an IPv6
    /// address itself). With the UDP backend the program binds UDP `<ip>:4791` (`[ip]:4791`),
    /// so the address must be one of this host's (127.x and ::1 work).
    #[arg(long, value_name = "ADDR")]
    ip: IpAddr,
    /// Backend: udp (no privileges) or raw (CAP_NET_RAW, whole frames on --dev).
    #[arg(long, value_enum, default_value_t = BackendKind::Udp)]
    backend: BackendKind,
    /// Interface of the raw backend (e.g. a veth).
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    /// The port's active MTU, which is the largest path MTU a QP may use: 256, 512, 1024,
    /// 2048 or 4096. rxe shows 1024 on a 1500-byte netdev, 4096 on a 9000-byte one.
    #[arg(long, default_value_t = 1024, value_parser = parse_mtu)]
    mtu: u32,
    /// Write every packet the NIC sends and receives to this pcap.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    #[command(flatten)]
    snaplen: crate::device::SnapLenOpt,
    /// Congestion control on every QP (see docs/congestion.md).
    #[arg(long, value_enum, default_value_t = Cc::None)]
    cc: Cc,
    /// One of the congestion control's parameters over its defaults, KEY=VALUE; repeat it for
    /// more (the keys: the algorithm's fields, as a network scenario's [network.ALGO] table
    /// names them; docs/congestion.md). --cc hpcc --cc-param base_rtt_ns=400000, say.
    #[arg(long = "cc-param", value_name = "KEY=VALUE")]
    cc_params: Vec<CcParam>,
    /// How RC QPs recover lost packets: go-back-n (as rxe and hardware RNICs) or
    /// selective-repeat (IRN-style: only what is missing is sent again, so a lossy path without
    /// PFC costs little). Both ends must use the same; with a peer that is not roce-emu, keep
    /// go-back-n. With --loss on both sides, the retransmit counters show the difference.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Recovery::GoBackN)]
    loss_recovery: Recovery,
    /// The port's line rate, Gb/s: where the congestion control's rate (DCQCN, DCTCP, TIMELY)
    /// starts and the most it climbs back to.
    #[arg(long, value_name = "GBPS", default_value_t = 100.0, value_parser = parse_gbps)]
    line_rate: f64,
    /// Drop this fraction (0 to 1) of the datagrams the NIC receives, to watch recovery work.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = crate::device::parse_fraction)]
    loss: f64,
    /// Busy polling: the NIC's thread never sleeps. Lower latency, one busy core per program.
    #[arg(long)]
    busy_poll: bool,
    /// UDP backend: one datagram per system call instead of GSO batches (for captures on a
    /// veth, which see a batch as one frame).
    #[arg(long)]
    no_gso: bool,
    /// The program's NIC is its own: a second process on the same address fails to bind it.
    /// Without this (UDP backend), every process on an address shares one NIC, as processes
    /// share a host's RNIC: they reach each other through it and other hosts from it, each
    /// with its own QPs, and a small agent (`roce agent`) started by the first of them steers
    /// received datagrams to the process that owns their QP.
    #[arg(long)]
    private_nic: bool,
    /// The device name that ibv_devices lists and -d/--ib-dev selects.
    #[arg(long, default_value = "roce0")]
    name: String,
    /// Print the NIC's counters on stderr when the program exits, Ctrl-C or SIGTERM included:
    /// text (the default) or json.
    #[arg(long, value_enum, value_name = "FORMAT", num_args = 0..=1, default_missing_value = "text")]
    stats: Option<StatsFormat>,
    /// The directory of roce-emu's libibverbs.so.1 (default: $ROCE_VERBS_LIB_DIR, then
    /// roce-verbs/ beside this executable, then where the build put it, then the copy this
    /// executable carries, written out once to ~/.cache/roce-emu/). librdmacm.so.1 is taken
    /// from the same directory if it is there, else from the same places.
    #[arg(long, value_name = "DIR")]
    lib_dir: Option<PathBuf>,
    /// Run the program without the device's /dev/infiniband and /sys/class/infiniband trees
    /// (and without the private mount and user namespaces that hold them): programs that read
    /// them (UCX, NCCL) then see no device.
    #[arg(long)]
    no_sysfs: bool,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
    command: Vec<OsString>,
}

impl Args {
    /// The device the program gets.
    pub(crate) fn spec(&self) -> DeviceSpec {
        let mut spec = DeviceSpec::new(self.ip);
        spec.backend = self.backend;
        spec.dev = self.dev.clone();
        spec.mtu = roce_core::Mtu::from_bytes(self.mtu);
        spec.cc = self.cc;
        spec.cc_params = self.cc_params.clone();
        spec.recovery = self.loss_recovery;
        spec.line_rate_bps = (self.line_rate * 1e9) as u64;
        spec.busy_poll = self.busy_poll;
        spec.no_gso = self.no_gso;
        spec.pcap = self.pcap.clone();
        spec.snaplen = self.snaplen.snaplen;
        spec.loss = self.loss;
        crate::device::share_unless(&mut spec, self.private_nic);
        spec
    }
}

fn parse_mtu(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(m @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(m),
        _ => Err(format!("{text:?}: an MTU is 256, 512, 1024, 2048 or 4096")),
    }
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if args.backend == BackendKind::Raw && args.dev.is_none() {
        bail!("--backend raw needs --dev IFACE");
    }
    if args.backend == BackendKind::Raw && args.ip.is_ipv6() {
        bail!("--backend raw takes an IPv4 --ip only; the UDP backend takes IPv6");
    }
    let lib_dir = libs::verbs_dir(args.lib_dir.as_deref())?;
    let (program, rest) = args
        .command
        .split_first()
        .context("no program given after --")?;
    let mut cmd = if args.no_sysfs {
        let mut cmd = Command::new(program);
        cmd.args(rest);
        cmd
    } else {
        tree::helper_command(&args.command)?
    };
    // Whatever the caller's environment says about a device, this one is the device.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ROCE_VERBS_") && key != libs::LIB_DIR_ENV {
            cmd.env_remove(&key);
        }
    }
    let mut path = OsString::from(&lib_dir);
    if let Some(dir) = libs::rdmacm_dir(&lib_dir).filter(|d| *d != lib_dir) {
        path.push(":");
        path.push(dir);
    }
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    cmd.env("LD_LIBRARY_PATH", path)
        .env(roce_verbs::config::ENV_NAME, &args.name)
        .env(roce_verbs::config::ENV_UVERBS, tree::free_uverbs_name());
    // The NIC in the program logs as roce does (ROCE_VERBS_LOG, read by the library).
    if let Some(filter) = std::env::var_os("RUST_LOG") {
        cmd.env(roce_verbs::config::ENV_LOG, filter);
    }
    let spec = args.spec();
    for (var, value) in spec.env() {
        cmd.env(var, value);
    }
    crate::device::empty_shared_capture(&spec)?;
    let stats_file = args
        .stats
        .map(|_| std::env::temp_dir().join(format!("roce-exec-{}-stats.json", std::process::id())));
    if let Some(file) = &stats_file {
        for old in stats_files(file) {
            let _ = std::fs::remove_file(old);
        }
        cmd.env(roce_verbs::config::ENV_STATS, file);
    }
    // Caught before the program starts, so that no signal meant for it ends us first.
    let mut signals = SignalsInfo::<WithOrigin>::new(RELAYED)
        .context("cannot catch the signals that end a program")?;
    let signals_handle = signals.handle();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", Path::new(program).display()))?;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let relay = std::thread::spawn(move || {
        for origin in &mut signals {
            if let Ok(signal) = Signal::try_from(origin.signal)
                && relays(origin.cause)
            {
                let _ = kill(pid, signal);
            }
        }
    });
    let status = child.wait();
    signals_handle.close();
    let _ = relay.join();
    let status = status.with_context(|| format!("waiting for {}", Path::new(program).display()))?;
    if let (Some(format), Some(file)) = (args.stats, &stats_file) {
        let files = stats_files(file);
        print_stats(format, &files, program);
        for file in files {
            let _ = std::fs::remove_file(file);
        }
    }
    Ok(exit_code(status))
}

/// What ends a program from outside: Ctrl-C, `kill`, a closed terminal. `roce exec` does not
/// die of them: it waits for the program, so that `--stats` prints the counters the program
/// leaves as it ends (roce-verbs writes them on these signals too), and ends with the program's
/// status.
const RELAYED: &[i32] = &[SIGINT, SIGTERM, SIGHUP];

/// Whether a signal `roce exec` got is passed on to the program: one that a process sent
/// (`kill`), which the program has not had, but not one the kernel sent (Ctrl-C, a hang-up),
/// which reached the terminal's whole foreground group, the program with us — as sudo relays
/// only what a process sent.
fn relays(cause: Cause) -> bool {
    matches!(cause, Cause::Sent(_) | Cause::Unknown)
}

/// The program's status as the shell reports it: its exit code, or 128 + the signal.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        (None, None) => ExitCode::FAILURE,
    }
}

/// The counter files of a run: `file` (a NIC of its own), or `file.PID`, one per process of a
/// shared NIC.
fn stats_files(file: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n == *name.to_string_lossy()
                || n.strip_prefix(&prefix)
                    .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

fn print_stats(format: StatsFormat, files: &[PathBuf], program: &OsString) {
    let texts: Vec<String> = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect();
    if let ([json], StatsFormat::Json) = (texts.as_slice(), format) {
        eprint!("{json}");
        return;
    }
    let reports: Vec<serde_json::Value> = texts
        .iter()
        .filter_map(|json| match serde_json::from_str(json) {
            Ok(v) => Some(v),
            Err(err) => {
                eprintln!("roce exec: counters unreadable ({err}): {json}");
                None
            }
        })
        .collect();
    let report = match reports.len() {
        0 if texts.is_empty() => {
            eprintln!(
                "roce exec: {} did not open the device: no counters",
                Path::new(program).display()
            );
            return;
        }
        0 => return,
        1 => reports.into_iter().next().unwrap_or_default(),
        _ => whole_nic(reports),
    };
    match format {
        StatsFormat::Json => eprintln!("{report}"),
        StatsFormat::Text => eprint!("{}", stats_text(&report)),
    }
}

/// The counters of every process of a shared NIC added up, and each process's own under
/// `processes`.
fn whole_nic(reports: Vec<serde_json::Value>) -> serde_json::Value {
    let mut total = serde_json::Map::new();
    for report in &reports {
        for (name, n) in report["counters"].as_object().into_iter().flatten() {
            let sum = total
                .get(name)
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
                + n.as_u64().unwrap_or(0);
            total.insert(name.clone(), sum.into());
        }
    }
    let first = &reports[0];
    serde_json::json!({
        "device": first["device"],
        "ip": first["ip"],
        "mtu": first["mtu"],
        "counters": total,
        "processes": reports
            .iter()
            .map(|r| serde_json::json!({"pid": r["pid"], "counters": r["counters"]}))
            .collect::<Vec<_>>(),
    })
}

/// `roce0 127.0.0.1 mtu 1024` and one `  name value` line per counter that is not zero.
fn stats_text(v: &serde_json::Value) -> String {
    let mut out = format!(
        "roce exec: counters of {} ({}, mtu {})\n",
        v["device"].as_str().unwrap_or("?"),
        v["ip"].as_str().unwrap_or("?"),
        v["mtu"]
    );
    let counters = v["counters"].as_object();
    let nonzero: Vec<_> = counters
        .into_iter()
        .flatten()
        .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
        .collect();
    if nonzero.is_empty() {
        out.push_str("  (all zero)\n");
    }
    for (name, n) in nonzero {
        out.push_str(&format!("  {name:<28} {n}\n"));
    }
    let processes = v["processes"].as_array().into_iter().flatten();
    for process in processes {
        out.push_str(&format!("  process {}:", process["pid"]));
        for key in ["tx_packets", "rx_packets"] {
            out.push_str(&format!(" {key} {}", process["counters"][key]));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lists_the_counters_that_moved() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"device":"roce0","ip":"127.0.0.1","mtu":1024,"counters":{"tx_packets":3,"rx_packets":0}}"#,
        )
        .unwrap();
        let text = stats_text(&v);
        assert!(text.contains("roce0 (127.0.0.1, mtu 1024)"), "{text}");
        assert!(text.contains("tx_packets"), "{text}");
        assert!(!text.contains("rx_packets"), "{text}");
    }

    #[test]
    fn mtus_are_the_ib_ones() {
        assert_eq!(parse_mtu("4096"), Ok(4096));
        assert!(parse_mtu("1500").is_err());
        assert!(parse_mtu("x").is_err());
    }
}
