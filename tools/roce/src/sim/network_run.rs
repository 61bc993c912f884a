//! Running a network scenario: its flows (generated, or `--flows`), the checks made before the
//! run (every endpoint a host, the topology connected, the memory estimate), the run itself on
//! [`Network::run_flows`], and the files it writes (see [`super::network_out`]).

use std::io::IsTerminal as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant as WallClock;

use anyhow::{Context, anyhow, bail};
use roce_core::{Duration, Instant};
use roce_sim::file::network::{NetScenario, load};
use roce_sim::file::overrides::Set;
use roce_sim::network::{HEADER_BYTES, Network, NetworkConfig, Payload, RunProgress};
use roce_sim::workload::{
    Traffic, incast, incast_expected, parse_flow_file, poisson, poisson_expected,
};
use roce_sim::{FctRecord, FlowSpec, NodeId, NodeKind, Topology};

use super::Args;
use super::network_out;
use super::progress;

/// The memory a run may need by the estimate before `--allow-large` is required: 4 GiB.
pub(super) const MEMORY_LIMIT: u64 = 4 << 30;
/// Per flow: its spec, its slot while running and its record.
const FLOW_BYTES: u64 = 256;
/// Per running flow: its two QPs (rough; the engine's per-QP state and queues).
const QP_PAIR_BYTES: u64 = 16 << 10;
/// Per flow, in the concurrency estimate: its ideal time is taken as this much longer.
const FLOW_OVERHEAD_S: f64 = 10e-6;
/// Per packet in flight: the frame and the pool slot.
const PACKET_OVERHEAD_BYTES: u64 = 160;

/// What a run is: the scenario, its flows, and when it stops.
pub(super) struct Plan {
    pub(super) scenario: NetScenario,
    /// The flows to run; empty when they were not made (`expected` says how many there would
    /// be).
    pub(super) flows: Vec<FlowSpec>,
    /// Flows of the workload or file that start at or after `until` (not run).
    pub(super) cut: usize,
    /// `--check` of a workload: the flows were not made, and would be about this many, with
    /// about this many of them cut.
    pub(super) expected: Option<(f64, f64)>,
    pub(super) until: Instant,
    pub(super) end: Instant,
    pub(super) memory: Memory,
}

/// The memory estimate, by part.
#[derive(Debug, Clone, Copy)]
pub(super) struct Memory {
    pub(super) flows: u64,
    pub(super) concurrent_flows: u64,
    pub(super) packets_in_flight: u64,
    pub(super) regions: u64,
    pub(super) bytes: u64,
}

/// What of the command line [`plan`] takes.
pub(super) struct Options<'a> {
    /// `--topology`, `--flows`.
    pub(super) topology: Option<&'a Path>,
    pub(super) flows: Option<&'a Path>,
    pub(super) allow_large: bool,
    /// Make no flow of a workload (`--check`).
    pub(super) check: bool,
    /// `--set`s.
    pub(super) sets: &'a [Set],
}

impl<'a> Options<'a> {
    fn of(args: &'a Args) -> Self {
        Self {
            topology: args.topology.as_deref(),
            flows: args.flows.as_deref(),
            allow_large: args.allow_large,
            check: args.check,
            sets: &args.set,
        }
    }
}

/// "320 hosts, about 996506 flows, at most 200 ms simulated": what a network scenario's file
/// makes, from its plan without flows (a flow file is read). A size, not a time: how long it
/// takes depends on the machine.
pub(super) fn size_text(path: &Path, text: &str) -> anyhow::Result<String> {
    let options = Options {
        topology: None,
        flows: None,
        allow_large: true,
        check: true,
        sets: &[],
    };
    let plan = plan(&options, path, text)?;
    let flows = match plan.expected {
        Some((run, _)) => format!("about {run:.0}"),
        None => plan.flows.len().to_string(),
    };
    Ok(format!(
        "{} hosts, {flows} flows, at most {} ms simulated",
        plan.scenario.topology.hosts().count(),
        super::millis(plan.end.as_nanos() as f64 / 1e6)
    ))
}

/// Runs a network scenario (`text` is the file's contents).
pub(super) fn run(args: &Args, path: &Path, text: &str) -> anyhow::Result<ExitCode> {
    let plan = plan(&Options::of(args), path, text)?;
    if args.check {
        print!("{}", network_out::plan_text(&plan));
        return Ok(ExitCode::SUCCESS);
    }
    let name = plan.scenario.name.clone();
    let network = Network::new(plan.scenario.topology.clone(), plan.scenario.config.clone())
        .map_err(|e| {
            anyhow!(
                "topology {}: {e} (every host must reach every other through switches)",
                plan.scenario.topology_source
            )
        })?;
    if let Some(note) = roce_sim::network::rtt_note(
        &plan.scenario.config.host.nic.congestion,
        network.max_base_rtt(),
    ) {
        eprintln!("roce sim {name}: {note}");
    }
    if let Some(note) = roce_sim::network::read_note(&plan.scenario.config) {
        eprintln!("roce sim {name}: {note}");
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("sim-out").join(&name));
    let every = match super::progress_every(args)? {
        None if args.progress || std::io::stderr().is_terminal() => {
            Some(Duration::from_millis(500))
        }
        every => every,
    };
    let mut network = network;
    let capture = args
        .pcap
        .as_deref()
        .map(super::create_capture)
        .transpose()?;
    if let Some(capture) = &capture {
        network.capture(capture.clone());
    }
    let interrupt = crate::interrupt::Interrupt::catch()?;
    let started = WallClock::now();
    let (network, records) = run_with_progress(network, &plan, every, &interrupt)?;
    let wall = started.elapsed().as_secs_f64();
    let captured = capture
        .map(|c| super::finish_capture(&c, args.pcap.as_deref().unwrap_or(Path::new(""))))
        .transpose()?;
    network_out::write_all(&out, &plan, &network, &records, wall, args.json)?;
    if let Some(said) = captured {
        eprintln!("{said}");
    }
    if interrupt.asked() {
        eprintln!(
            "roce sim {name}: interrupted at {} of at most {} s simulated; what is above and what \
             was written covers the run until then ({} flows finished)",
            network.now(),
            plan.end,
            records.len()
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// Everything checked before the run: the file, the flows, the memory estimate. The estimate
/// is made and held to its limit twice: first from what the file says (a workload's expected
/// flow count, a flow file's declared one) before any flow is made, then from the flows made.
/// With `--check`, a workload's flows are not made at all, nor is the network built.
pub(super) fn plan(args: &Options<'_>, path: &Path, text: &str) -> anyhow::Result<Plan> {
    let scenario = load(path, text, args.topology, args.flows.is_some(), args.sets)?;
    // Connected first: the flows are about hosts that must reach each other.
    Network::check(&scenario.topology).map_err(|e| {
        anyhow!(
            "topology {}: {e} (every host must reach every other through switches)",
            scenario.topology_source
        )
    })?;
    let guard = |memory: &Memory| check_memory(args, path, &scenario, memory);
    let flows_file = args
        .flows
        .map(Path::to_path_buf)
        .or_else(|| scenario.flows_file.clone());
    let (mut flows, default_until) = match (&flows_file, &scenario.workload) {
        (Some(file), _) => {
            // The count it declares bounds what parsing it holds (more lines are an error).
            if let Some(declared) = declared_count(file) {
                guard(&estimate_parts(&scenario, declared, 0.0, 1.0))?;
            }
            let flows = read_flows(file, &scenario.topology)?;
            let last = flows.iter().map(|f| f.start).max().unwrap_or(Instant::ZERO);
            (flows, last + Duration::from_nanos(1))
        }
        (None, Some((w, cdf))) => {
            let hosts: Vec<NodeId> = scenario.topology.hosts().collect();
            let t = Traffic {
                hosts,
                host_rate_bps: host_rate(&scenario.topology)?,
                start: Instant::from_micros(w.start_us),
                duration: Duration::from_micros(w.duration_us),
                pg: 3,
                dport: 100,
                seed: w.seed,
            };
            let incast_traffic = Traffic {
                dport: 200,
                seed: w.seed.wrapping_add(1),
                ..t.clone()
            };
            let default_until = t.start + t.duration;
            let until = scenario.until.map_or(default_until, |u| Instant::ZERO + u);
            // Before any flow is made: the workload's expected flows, all of which are made,
            // the share of them that starts before `until` run.
            let workload_error = |key: &str, e| anyhow!("{}: {key}: {e}", path.display());
            let rate = t.host_rate_bps as f64;
            let mut total =
                poisson_expected(&t, w.load, cdf).map_err(|e| workload_error("workload", e))?;
            let mut busy = total * (cdf.mean() * 8.0 / rate + FLOW_OVERHEAD_S);
            if let Some(i) = &w.incast {
                let n = incast_expected(&incast_traffic, i.fraction, i.senders, i.size_bytes)
                    .map_err(|e| workload_error("workload.incast", e))?;
                total += n;
                busy += n * (i.size_bytes as f64 * 8.0 / rate + FLOW_OVERHEAD_S);
            }
            let share = ((until.saturating_duration_since(t.start)).as_secs_f64()
                / t.duration.as_secs_f64())
            .clamp(0.0, 1.0);
            if share == 0.0 {
                bail!(
                    "{}: no flow starts before {} s (run.until_us); nothing to run",
                    path.display(),
                    until
                );
            }
            let span = until.saturating_duration_since(t.start).as_secs_f64();
            let memory = estimate_parts(&scenario, total, busy * share, span);
            guard(&memory)?;
            if args.check {
                let end = until + scenario.drain;
                return Ok(Plan {
                    scenario,
                    flows: Vec::new(),
                    cut: 0,
                    expected: Some((total * share, total * (1.0 - share))),
                    until,
                    end,
                    memory,
                });
            }
            let mut flows = poisson(&t, w.load, cdf).map_err(|e| workload_error("workload", e))?;
            if let Some(i) = &w.incast {
                let more = incast(&incast_traffic, i.fraction, i.senders, i.size_bytes)
                    .map_err(|e| workload_error("workload.incast", e))?;
                flows.extend(more);
                flows.sort_by_key(|f| f.start);
            }
            (flows, default_until)
        }
        (None, None) => bail!("{}: no workload and no --flows", path.display()),
    };
    let until = scenario.until.map_or(default_until, |u| Instant::ZERO + u);
    let before = flows.len();
    flows.retain(|f| f.start < until);
    let cut = before - flows.len();
    if flows.is_empty() {
        bail!(
            "{}: no flow starts before {} s (run.until_us); nothing to run",
            path.display(),
            until
        );
    }
    let end = until + scenario.drain;
    let memory = estimate(&scenario, &flows, before, until);
    guard(&memory)?;
    Ok(Plan {
        scenario,
        flows,
        cut,
        expected: None,
        until,
        end,
        memory,
    })
}

/// Refuses a run whose estimate is above [`MEMORY_LIMIT`] unless `--allow-large`.
fn check_memory(
    args: &Options<'_>,
    path: &Path,
    scenario: &NetScenario,
    memory: &Memory,
) -> anyhow::Result<()> {
    if memory.bytes <= MEMORY_LIMIT || args.allow_large {
        return Ok(());
    }
    let regions = match memory.regions {
        0 => String::new(),
        r => format!(" + {:.2} GiB of the hosts' memory regions", gib(r)),
    };
    bail!(
        "{}: too large for memory by the estimate: {:.2} GiB ({} flows x {FLOW_BYTES} B + {} \
         running at once x {} KiB of QP state + {} packets in flight x about {} B{regions}), \
         above the limit of {} GiB; shorten \
         workload.duration_us or run.until_us, or pass --allow-large to run it anyway",
        path.display(),
        gib(memory.bytes),
        memory.flows,
        memory.concurrent_flows,
        QP_PAIR_BYTES >> 10,
        memory.packets_in_flight,
        packet_bytes(&scenario.config),
        MEMORY_LIMIT >> 30,
    )
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

/// The count on the first line of a flow file that is neither blank nor a comment, if it
/// reads as one (else parsing the file says what is wrong).
fn declared_count(file: &Path) -> Option<f64> {
    use std::io::BufRead as _;
    let reader = std::io::BufReader::new(std::fs::File::open(file).ok()?);
    let first = reader
        .lines()
        .map_while(Result::ok)
        .map(|l| l.trim().to_owned())
        .find(|l| !l.is_empty() && !l.starts_with('#'))?;
    first.parse::<u64>().ok().map(|n| n as f64)
}

/// The rate of the hosts' links (the generators need one; the first host's).
fn host_rate(topology: &Topology) -> anyhow::Result<u64> {
    let host = topology
        .hosts()
        .next()
        .ok_or_else(|| anyhow!("the topology has no hosts"))?;
    let &(_, link) = topology
        .neighbors(host)
        .first()
        .ok_or_else(|| anyhow!("host {host} has no link"))?;
    Ok(topology.links()[link].rate_bps)
}

/// Reads an HPCC flow file and checks that every endpoint is a host of `topology`.
fn read_flows(file: &Path, topology: &Topology) -> anyhow::Result<Vec<FlowSpec>> {
    let name = file.display().to_string();
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read the flows {name}"))?;
    let flows = parse_flow_file(&name, &text).map_err(|e| anyhow!("{e}"))?;
    // The n-th flow is on the n-th line after the count that is neither blank nor a comment.
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim().starts_with('#'))
        .skip(1)
        .map(|(i, _)| i + 1);
    for (flow, line) in flows.iter().zip(lines) {
        for (key, node) in [("src", flow.src), ("dst", flow.dst)] {
            if topology.kind(node) != Some(NodeKind::Host) {
                let what = match topology.kind(node) {
                    Some(NodeKind::Switch) => "a switch",
                    _ => "not a node",
                };
                bail!(
                    "{name}:{line}: {key} {node} is {what} of the topology ({} nodes, hosts {}): \
                     flows run between hosts",
                    topology.node_count(),
                    host_ranges(topology)
                );
            }
        }
    }
    Ok(flows)
}

/// "0-319" (or "0-3, 8-11").
fn host_ranges(topology: &Topology) -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for h in topology.hosts() {
        match ranges.last_mut() {
            Some(r) if r.1 + 1 == h.0 => r.1 = h.0,
            _ => ranges.push((h.0, h.0)),
        }
    }
    let parts: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    parts.join(", ")
}

fn packet_bytes(config: &NetworkConfig) -> u64 {
    let kept = match config.payload {
        Payload::Bytes => u64::from(config.host.mtu.bytes()),
        // The first bytes of its UDP payload, all that the pool keeps of it.
        Payload::Lengths => HEADER_BYTES as u64,
    };
    kept + PACKET_OVERHEAD_BYTES
}

/// The memory estimate of `flows` made (`made` of them, the rest cut before `until`): see
/// [`estimate_parts`].
fn estimate(s: &NetScenario, flows: &[FlowSpec], made: usize, until: Instant) -> Memory {
    let rate = host_rate(&s.topology).unwrap_or(1).max(1) as f64;
    let busy_s: f64 = flows
        .iter()
        .map(|f| f.size_bytes as f64 * 8.0 / rate + FLOW_OVERHEAD_S)
        .sum();
    let first = flows.iter().map(|f| f.start).min().unwrap_or(Instant::ZERO);
    let span_s = (until - first).as_secs_f64();
    estimate_parts(s, made as f64, busy_s, span_s)
}

/// The memory estimate: every flow's bookkeeping (`flows` of them, made or expected), the QPs
/// of the flows running at once (by Little's law: `busy_s`, their ideal times at the host rate
/// plus 10 µs each, times a slowdown of 10, over the `span_s` they start in), the packets in
/// flight (the hosts' windows, at most what the switches' buffers hold: one per egress port,
/// or one per switch when shared) and the hosts' memory regions; with lengths only, a packet's
/// first 64 bytes and no regions.
fn estimate_parts(s: &NetScenario, flows: f64, busy_s: f64, span_s: f64) -> Memory {
    // `as` saturates: an absurd count stays absurd, and above the limit.
    let n = flows.ceil() as u64;
    let concurrent = ((busy_s * 10.0 / span_s.max(1e-6)).ceil() as u64).min(n);
    let hosts = s.topology.hosts().count() as u64;
    let window = hosts * u64::from(s.config.host.nic.max_unacked_total);
    let ports = 2 * s.topology.links().len() as u64;
    let per_packet = packet_bytes(&s.config);
    let buffers = match s.config.switch.shared {
        // One per switch.
        Some(_) => s.topology.node_count() as u64 - hosts,
        None => ports,
    };
    let buffered = buffers * s.config.switch.buffer_bytes as u64 / per_packet;
    let packets = window.min(buffered + ports * 64);
    // With lengths only, a host's regions store nothing (they count what is written).
    let regions = match s.config.payload {
        Payload::Bytes => hosts * 2 * s.config.host.region_len as u64,
        Payload::Lengths => 0,
    };
    Memory {
        flows: n,
        concurrent_flows: concurrent,
        packets_in_flight: packets,
        regions,
        bytes: n
            .saturating_mul(FLOW_BYTES)
            .saturating_add(concurrent.saturating_mul(QP_PAIR_BYTES))
            .saturating_add(packets * per_packet + regions),
    }
}

/// "roce sim NAME: 0.000120 of at most 0.021 s simulated (1 %), flows …": `of` the end
/// measured against, `percent` of it reached.
fn progress_text(plan: &Plan, p: &RunProgress, of: &str, percent: f64, wall: f64) -> String {
    // Since the start: the run publishes once per 100 µs of simulated time, which can take
    // longer than a line's interval.
    let rate = p.packet_hops as f64 / wall.max(1e-9);
    format!(
        "roce sim {}: {:.6} of {of} s simulated ({percent:.0} %), flows {} started and {} \
         finished of {}, {:.2} M packet-hops/s, {wall:.1} s of wall time",
        plan.scenario.name,
        p.now.as_nanos() as f64 / 1e9,
        p.started,
        p.finished,
        plan.flows.len(),
        rate / 1e6,
    )
}

/// Runs the flows on this thread (see [`super::progress`] for why not on another); with
/// `every`, says on standard error at that interval of wall time the simulated time reached
/// against the target, the flows started and finished, and the packet-hops per wall second so
/// far.
fn run_with_progress(
    mut network: Network,
    plan: &Plan,
    every: Option<Duration>,
    interrupt: &crate::interrupt::Interrupt,
) -> anyhow::Result<(Network, Vec<FctRecord>)> {
    let end = plan.end;
    let started = WallClock::now();
    // The run's position, published after every slice of it.
    let shared = Mutex::new(None::<RunProgress>);
    let spoke = std::sync::atomic::AtomicBool::new(false);
    let report = |wall: Duration| {
        spoke.store(true, std::sync::atomic::Ordering::Relaxed);
        let wall = wall.as_secs_f64();
        let Some(p) = shared.lock().ok().and_then(|slot| *slot) else {
            eprintln!(
                "roce sim {}: setting up {} flows, {wall:.1} s of wall time",
                plan.scenario.name,
                plan.flows.len()
            );
            return;
        };
        // Against the configured end: the run may end sooner, when every flow has finished
        // (then its last line says so).
        let target = end.as_nanos().max(1) as f64;
        let percent = 100.0 * p.now.as_nanos() as f64 / target;
        eprintln!(
            "{}",
            progress_text(plan, &p, &format!("at most {end}"), percent, wall)
        );
    };
    let every = every.map(|every| progress::Every {
        first: every,
        then: every,
    });
    let records = progress::run_reporting(every, report, || {
        network.run_flows_observed(&plan.flows, end, |p| {
            if let Ok(mut slot) = shared.lock() {
                *slot = Some(*p);
            }
            interrupt.control()
        })
    })
    .map_err(|_| anyhow!("{}: the simulation panicked", plan.scenario.name))?;
    // The last line, once lines were said: where the run really ended, as 100 %.
    if let Some(p) = shared.lock().ok().and_then(|slot| *slot)
        && spoke.load(std::sync::atomic::Ordering::Relaxed)
    {
        let why = if interrupt.asked() {
            "interrupted (Ctrl-C)".to_owned()
        } else if network.deadlock().is_some() {
            "stopped by a PFC deadlock".to_owned()
        } else if p.now < end {
            format!("every flow finished, before the configured end of {end} s")
        } else {
            "the configured end".to_owned()
        };
        let wall = started.elapsed().as_secs_f64();
        let line = progress_text(plan, &p, &p.now.to_string(), 100.0, wall);
        eprintln!("{line}; the run ended: {why}");
    }
    Ok((network, records))
}
