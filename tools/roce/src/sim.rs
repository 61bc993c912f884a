//! `roce sim`: a congestion experiment from a TOML file, played in virtual time by
//! `roce_sim::scenario::run`, written out as a JSON time series and an SVG plot, and summed up.
//!
//! The file format ([`ScenarioFile`]) is a small, flat description that maps onto
//! [`Scenario`]; unknown keys are an error, so a misspelt key never silently takes a default.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Instant as WallClock;

use anyhow::{Context, anyhow, bail};
use plotters::prelude::*;
use roce_core::{Duration, Mtu};
use roce_sim::scenario::{Flow, NicCongestion, jain_index};
use roce_sim::switch::{MarkAt, Pfc};
use roce_sim::{EcnMarking, Scenario, Series, SwitchConfig};
use serde::Deserialize;
use serde_json::{Value, json};

/// Run a congestion experiment (hosts on one switch, RC WRITE flows) in virtual time.
///
/// SCENARIO is a TOML file, or the name of a shipped one (`scenarios/NAME.toml`; `--list`
/// shows them). Writes `series.json` (per sample: each flow's goodput and DCQCN rate, the
/// bottleneck queue, and the switch's drops, PAUSEs and CE marks and the NICs' CNPs, cumulative)
/// and `plot.svg` (flow rates and bottleneck queue against time) into the output directory, and
/// prints a summary: per-flow mean goodput, Jain's fairness index, queue maximum, drops, pauses,
/// CNPs.
///
/// The same file gives the same series, bit for bit. Exit status: 0, or 2 when the file cannot
/// be read or is not a valid scenario (unknown keys included).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    roce sim --list\n  \
    roce sim incast-dcqcn                 # scenarios/incast-dcqcn.toml -> sim-out/incast-dcqcn/\n  \
    roce sim my.toml --out /tmp/my --json | jq .flows\n\n\
    File format: see docs/congestion.md (\"roce sim\") and scenarios/*.toml.")]
pub(crate) struct Args {
    /// The scenario: a TOML file, or the name of a shipped scenario.
    #[arg(required_unless_present = "list", value_name = "SCENARIO")]
    scenario: Option<String>,
    /// Output directory (default: sim-out/NAME, NAME being the scenario's name).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the summary as one JSON object on standard output instead of text.
    #[arg(long)]
    json: bool,
    /// List the shipped scenarios, one line each, and exit.
    #[arg(long, conflicts_with_all = ["scenario", "out", "json"])]
    list: bool,
}

/// A scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    /// Name for reports and the output directory; default: the file's stem.
    name: Option<String>,
    /// One line on what it shows (for `--list`).
    description: Option<String>,
    /// Hosts on the switch; host i is on port i.
    hosts: usize,
    /// The switch.
    #[serde(default)]
    switch: SwitchFile,
    /// The NICs' congestion control.
    #[serde(default)]
    congestion: CongestionName,
    /// Path MTU of the flows' QPs, bytes.
    #[serde(default = "default_mtu")]
    mtu: u32,
    /// Bytes per RC WRITE.
    #[serde(default = "default_message_bytes")]
    message_bytes: u32,
    /// WRITEs each flow keeps posted.
    #[serde(default = "default_outstanding")]
    outstanding: usize,
    /// Simulated time of the run.
    duration_ms: u64,
    /// Sampling interval.
    sample_us: u64,
    /// The port whose queue is recorded; default: the destination most flows share.
    bottleneck: Option<usize>,
    /// The summary's means and queue maximum over (summary_from_ms, duration]; default 0.
    #[serde(default)]
    summary_from_ms: u64,
    /// Seed of the switch's marking decisions.
    #[serde(default)]
    seed: u64,
    /// The flows.
    flows: Vec<FlowFile>,
}

fn default_mtu() -> u32 {
    1024
}

fn default_message_bytes() -> u32 {
    64 * 1024
}

fn default_outstanding() -> usize {
    4
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum CongestionName {
    #[default]
    None,
    Dcqcn,
    DcqcnPaper,
}

impl CongestionName {
    fn nic(self) -> NicCongestion {
        match self {
            Self::None => NicCongestion::None,
            Self::Dcqcn => NicCongestion::Dcqcn,
            Self::DcqcnPaper => NicCongestion::DcqcnPaper,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Dcqcn => "dcqcn",
            Self::DcqcnPaper => "dcqcn-paper",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchFile {
    /// Line rate of every port (and every NIC), Gb/s.
    #[serde(default = "default_rate")]
    rate_gbps: f64,
    /// Propagation delay of each cable.
    #[serde(default = "default_latency")]
    latency_us: u64,
    /// Buffer per egress port, drop-tail.
    #[serde(default = "default_buffer")]
    buffer_bytes: usize,
    /// RED ECN marking; absent: no marking.
    ecn: Option<EcnFile>,
    /// When marking is decided.
    #[serde(default)]
    mark_at: MarkAtName,
    /// PFC; absent: a lossy fabric.
    pfc: Option<PfcFile>,
}

impl Default for SwitchFile {
    fn default() -> Self {
        Self {
            rate_gbps: default_rate(),
            latency_us: default_latency(),
            buffer_bytes: default_buffer(),
            ecn: None,
            mark_at: MarkAtName::default(),
            pfc: None,
        }
    }
}

fn default_rate() -> f64 {
    10.0
}

fn default_latency() -> u64 {
    1
}

fn default_buffer() -> usize {
    1 << 20
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum MarkAtName {
    #[default]
    Enqueue,
    Dequeue,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EcnFile {
    kmin_bytes: usize,
    kmax_bytes: usize,
    pmax: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PfcFile {
    xoff_bytes: usize,
    xon_bytes: usize,
    /// Priorities PFC applies to; default: priority 3 alone.
    #[serde(default = "default_priorities")]
    priorities: Vec<u8>,
    /// Pause time per PAUSE frame, quanta of 512 bit times.
    #[serde(default = "default_quanta")]
    pause_quanta: u16,
}

fn default_priorities() -> Vec<u8> {
    vec![3]
}

fn default_quanta() -> u16 {
    0xffff
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowFile {
    src: usize,
    dst: usize,
    #[serde(default)]
    start_us: u64,
    #[serde(default = "default_dscp")]
    dscp: u8,
    /// Bytes to write; absent: a long flow.
    bytes: Option<u64>,
}

fn default_dscp() -> u8 {
    26
}

/// A scenario as loaded, with what the summary needs beyond [`Scenario`].
#[derive(Debug)]
struct Loaded {
    scenario: Scenario,
    description: Option<String>,
    congestion: CongestionName,
    summary_from: Duration,
}

impl ScenarioFile {
    fn into_loaded(self, stem: &str) -> anyhow::Result<Loaded> {
        let sw = &self.switch;
        if !(sw.rate_gbps.is_finite() && sw.rate_gbps > 0.0 && sw.rate_gbps <= 10_000.0) {
            bail!("switch.rate_gbps = {}: from >0 to 10000", sw.rate_gbps);
        }
        let ecn = match &sw.ecn {
            None => None,
            Some(e) => {
                if !(0.0..=1.0).contains(&e.pmax) {
                    bail!("switch.ecn.pmax = {}: from 0 to 1", e.pmax);
                }
                if e.kmin_bytes > e.kmax_bytes {
                    bail!(
                        "switch.ecn: kmin_bytes {} is above kmax_bytes {}",
                        e.kmin_bytes,
                        e.kmax_bytes
                    );
                }
                Some(EcnMarking {
                    k_min_bytes: e.kmin_bytes,
                    k_max_bytes: e.kmax_bytes,
                    p_max: e.pmax,
                })
            }
        };
        let pfc = match &sw.pfc {
            None => None,
            Some(p) => {
                if p.xon_bytes > p.xoff_bytes {
                    bail!(
                        "switch.pfc: xon_bytes {} is above xoff_bytes {}",
                        p.xon_bytes,
                        p.xoff_bytes
                    );
                }
                let mut priorities = 0u8;
                for &prio in &p.priorities {
                    if prio > 7 {
                        bail!("switch.pfc.priorities: {prio} is not a priority (0 to 7)");
                    }
                    priorities |= 1 << prio;
                }
                Some(Pfc {
                    xoff_bytes: p.xoff_bytes,
                    xon_bytes: p.xon_bytes,
                    pause_quanta: p.pause_quanta,
                    priorities,
                })
            }
        };
        let mtu = Mtu::from_bytes(self.mtu)
            .ok_or_else(|| anyhow!("mtu = {}: one of 256, 512, 1024, 2048, 4096", self.mtu))?;
        if self.flows.is_empty() {
            bail!("no flows: add at least one [[flows]] table");
        }
        if self.summary_from_ms >= self.duration_ms {
            bail!(
                "summary_from_ms = {} is not before duration_ms = {}",
                self.summary_from_ms,
                self.duration_ms
            );
        }
        let bottleneck = self
            .bottleneck
            .unwrap_or_else(|| busiest_destination(&self.flows));
        let scenario = Scenario {
            name: self.name.unwrap_or_else(|| stem.to_owned()),
            hosts: self.hosts,
            switch: SwitchConfig {
                bandwidth_bps: (sw.rate_gbps * 1e9).round() as u64,
                latency: Duration::from_micros(sw.latency_us),
                buffer_bytes: sw.buffer_bytes,
                ecn,
                mark_at: match sw.mark_at {
                    MarkAtName::Enqueue => MarkAt::Enqueue,
                    MarkAtName::Dequeue => MarkAt::Dequeue,
                },
                pfc,
                ..SwitchConfig::default()
            },
            congestion: self.congestion.nic(),
            mtu,
            message_bytes: self.message_bytes,
            outstanding: self.outstanding,
            flows: self
                .flows
                .iter()
                .map(|f| Flow {
                    from: f.src,
                    to: f.dst,
                    bytes: f.bytes,
                    start: Duration::from_micros(f.start_us),
                    dscp: f.dscp,
                })
                .collect(),
            duration: Duration::from_millis(self.duration_ms),
            interval: Duration::from_micros(self.sample_us),
            bottleneck,
            seed: self.seed,
        };
        scenario.validate().map_err(|e| anyhow!("{e}"))?;
        Ok(Loaded {
            scenario,
            description: self.description,
            congestion: self.congestion,
            summary_from: Duration::from_millis(self.summary_from_ms),
        })
    }
}

/// The destination most flows share (the lowest on a tie).
fn busiest_destination(flows: &[FlowFile]) -> usize {
    let mut best = (0usize, 0usize);
    for f in flows {
        let count = flows.iter().filter(|g| g.dst == f.dst).count();
        if count > best.1 || (count == best.1 && f.dst < best.0) {
            best = (f.dst, count);
        }
    }
    best.0
}

/// Reads and checks a scenario file.
fn load(path: &Path) -> anyhow::Result<Loaded> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file: ScenarioFile = toml::from_str(&text)
        .map_err(|e| anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
    let stem = path
        .file_stem()
        .and_then(OsStr::to_str)
        .unwrap_or("scenario");
    file.into_loaded(stem)
        .with_context(|| format!("{}: not a valid scenario", path.display()))
}

/// Where shipped scenarios are looked for: `scenarios/` here, then the source tree's.
fn scenario_dirs() -> Vec<PathBuf> {
    vec![
        PathBuf::from("scenarios"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios"),
    ]
}

/// A file if `arg` names one, else a shipped scenario called `arg`.
fn resolve(arg: &str) -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(arg);
    if path.is_file() {
        return Ok(path);
    }
    let is_name = !arg.is_empty() && !arg.contains(['/', '\\']) && !arg.ends_with(".toml");
    if is_name {
        for dir in scenario_dirs() {
            let candidate = dir.join(format!("{arg}.toml"));
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        bail!("no file {arg} and no shipped scenario called {arg} (roce sim --list shows them)");
    }
    bail!("cannot read {arg}: no such file")
}

/// Runs `roce sim`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if args.list {
        return list();
    }
    let Some(arg) = &args.scenario else {
        bail!("no scenario given (roce sim --list shows the shipped ones)");
    };
    let path = resolve(arg)?;
    let loaded = load(&path)?;
    let name = loaded.scenario.name.clone();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("sim-out").join(&name));

    let started = WallClock::now();
    let series = run_with_progress(&loaded.scenario)?;
    let wall = started.elapsed();

    let summary = summarise(&loaded, &series, wall.as_secs_f64());
    std::fs::create_dir_all(&out)
        .with_context(|| format!("cannot create the directory {}", out.display()))?;
    let series_path = out.join("series.json");
    let plot_path = out.join("plot.svg");
    let document = series_json(&loaded, &series, &summary);
    let text = serde_json::to_string_pretty(&document).context("cannot encode series.json")?;
    std::fs::write(&series_path, text + "\n")
        .with_context(|| format!("cannot write {}", series_path.display()))?;
    let svg = plot(&loaded, &series)?;
    std::fs::write(&plot_path, svg)
        .with_context(|| format!("cannot write {}", plot_path.display()))?;

    if args.json {
        let mut value = summary.clone();
        value["series"] = json!(series_path.display().to_string());
        value["plot"] = json!(plot_path.display().to_string());
        println!("{value}");
    } else {
        print!("{}", summary_text(&loaded, &summary));
        println!(
            "wrote {} and {}",
            series_path.display(),
            plot_path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `roce sim --list`: the shipped scenarios and their descriptions.
fn list() -> anyhow::Result<ExitCode> {
    let Some(dir) = scenario_dirs().into_iter().find(|d| d.is_dir()) else {
        bail!("no scenarios/ directory here or in the source tree");
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension() == Some(OsStr::new("toml")))
        .collect();
    files.sort();
    let width = files
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.len()))
        .max()
        .unwrap_or(0);
    for file in &files {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let about = match load(file) {
            Ok(loaded) => loaded.description.unwrap_or_default(),
            Err(err) => format!("(not a valid scenario: {err:#})"),
        };
        println!("{stem:<width$}  {about}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the scenario on a thread and says on standard error that it is still running when it
/// takes more than two seconds (`run` has no progress callback).
fn run_with_progress(scenario: &Scenario) -> anyhow::Result<Series> {
    let (tx, rx) = mpsc::channel();
    let owned = scenario.clone();
    let worker = std::thread::spawn(move || {
        // The receiver only goes away when the main thread has given up.
        let _ = tx.send(roce_sim::scenario::run(&owned));
    });
    let started = WallClock::now();
    let mut wait = Duration::from_secs(2);
    let result = loop {
        match rx.recv_timeout(wait) {
            Ok(result) => break result,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                eprintln!(
                    "roce sim: {}: {:.1} s of wall time so far for {} ms of simulated time...",
                    scenario.name,
                    started.elapsed().as_secs_f64(),
                    scenario.duration.as_millis()
                );
                wait = Duration::from_secs(5);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(roce_sim::scenario::ScenarioError(
                    "the simulation stopped without a result".into(),
                ));
            }
        }
    };
    let _ = worker.join();
    result.map_err(|e| anyhow!("{}: the run failed: {e}", scenario.name))
}

fn gbps(bps: f64) -> f64 {
    bps / 1e9
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The summary, as the JSON object `--json` prints (and `series.json` holds).
fn summarise(loaded: &Loaded, series: &Series, wall_s: f64) -> Value {
    let s = &loaded.scenario;
    let (from, to) = (loaded.summary_from, s.duration);
    let means: Vec<f64> = (0..s.flows.len())
        .map(|f| series.mean_goodput(f, from, to))
        .collect();
    let flows: Vec<Value> = s
        .flows
        .iter()
        .zip(&series.flows)
        .zip(&means)
        .map(|((flow, fs), mean)| {
            json!({
                "src": flow.from,
                "dst": flow.to,
                "start_us": flow.start.as_micros() as u64,
                "dscp": flow.dscp,
                "mean_goodput_gbps": gbps(*mean),
                "bytes": fs.bytes,
                "finished_ms": fs.finished.map(ms),
                "cnps_received": fs.cnps,
            })
        })
        .collect();
    json!({
        "name": s.name,
        "congestion": loaded.congestion.as_str(),
        "hosts": s.hosts,
        "bottleneck": s.bottleneck,
        "duration_ms": ms(s.duration),
        "window_ms": [ms(from), ms(to)],
        "flows": flows,
        "jain_index": jain_index(&means),
        "total_goodput_gbps": gbps(means.iter().sum()),
        "queue_max_bytes": series.queue_max(Duration::ZERO, to),
        "queue_max_in_window_bytes": series.queue_max(from, to),
        "drops": Series::total(&series.drops),
        "pauses": Series::total(&series.pauses),
        "ce_marks": Series::total(&series.ce_marks),
        "cnps": Series::total(&series.cnps),
        "retransmitted_packets": series.retransmitted_packets,
        "wall_s": wall_s,
        "switched_packets": series.switched_packets,
        // Simulation speed: packets through the switch per wall-clock second.
        "sim_packets_per_s": series.switched_packets as f64 / wall_s.max(1e-9),
    })
}

fn summary_text(loaded: &Loaded, summary: &Value) -> String {
    let s = &loaded.scenario;
    let (from, to) = (ms(loaded.summary_from), ms(s.duration));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "roce sim {}: {} hosts, {} flows, congestion {}, {} ms simulated in {:.2} s \
         ({} packets switched, {:.0} per second)",
        s.name,
        s.hosts,
        s.flows.len(),
        loaded.congestion.as_str(),
        to,
        summary["wall_s"].as_f64().unwrap_or(0.0),
        summary["switched_packets"],
        summary["sim_packets_per_s"].as_f64().unwrap_or(0.0),
    );
    let _ = writeln!(
        out,
        "flow   src -> dst   start ms   goodput Gb/s ({from}-{to} ms)   CNPs received"
    );
    let empty = Vec::new();
    for (i, flow) in summary["flows"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .enumerate()
    {
        let _ = writeln!(
            out,
            "{i:>4}   {:>3} -> {:<3}   {:>8.3}   {:>24.3}   {:>13}",
            flow["src"],
            flow["dst"],
            flow["start_us"].as_f64().unwrap_or(0.0) / 1e3,
            flow["mean_goodput_gbps"].as_f64().unwrap_or(0.0),
            flow["cnps_received"],
        );
    }
    let _ = writeln!(
        out,
        "Jain index {:.4}, total {:.3} Gb/s ({from}-{to} ms)",
        summary["jain_index"].as_f64().unwrap_or(0.0),
        summary["total_goodput_gbps"].as_f64().unwrap_or(0.0)
    );
    let _ = writeln!(
        out,
        "port {} queue max {} B ({} B over {from}-{to} ms); drops {}, pauses {}, CE marks {}, \
         CNPs {}, retransmitted {}",
        s.bottleneck,
        summary["queue_max_bytes"],
        summary["queue_max_in_window_bytes"],
        summary["drops"],
        summary["pauses"],
        summary["ce_marks"],
        summary["cnps"],
        summary["retransmitted_packets"],
    );
    out
}

/// `series.json`: the scenario, the summary and one object per sample.
fn series_json(loaded: &Loaded, series: &Series, summary: &Value) -> Value {
    let s = &loaded.scenario;
    let samples: Vec<Value> = series
        .times
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let flows: Vec<Value> = series
                .flows
                .iter()
                .map(|f| {
                    json!({
                        "goodput_bps": f.goodput_bps.get(k).copied().unwrap_or(0.0),
                        "rate_bps": f.rate_bps.get(k).copied().flatten(),
                    })
                })
                .collect();
            let at = |v: &[u64]| v.get(k).copied().unwrap_or(0);
            json!({
                "t_us": t.as_micros() as u64,
                "flows": flows,
                "queue_bytes": series.queue_bytes.get(k).copied().unwrap_or(0),
                "queue_max_bytes": series.queue_max_bytes.get(k).copied().unwrap_or(0),
                "drops": at(&series.drops),
                "pauses": at(&series.pauses),
                "ce_marks": at(&series.ce_marks),
                "cnps": at(&series.cnps),
            })
        })
        .collect();
    json!({
        "name": s.name,
        "sample_us": s.interval.as_micros() as u64,
        "line_rate_bps": s.switch.bandwidth_bps,
        "bottleneck": s.bottleneck,
        "counters": "drops, pauses, ce_marks and cnps are cumulative; goodput is per interval; \
                     rate_bps is DCQCN's current rate (null without congestion control)",
        "summary": summary,
        "samples": samples,
    })
}

/// `plot.svg`: the flows' goodput (solid) and DCQCN rate (thin) above, the bottleneck queue
/// below, against time.
fn plot(loaded: &Loaded, series: &Series) -> anyhow::Result<String> {
    let s = &loaded.scenario;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 720)).into_drawing_area();
        draw(&root, s, series).map_err(|e| anyhow!("cannot draw the plot: {e}"))?;
        root.present()
            .map_err(|e| anyhow!("cannot draw the plot: {e}"))?;
    }
    Ok(svg)
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn draw(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    s: &Scenario,
    series: &Series,
) -> DrawResult {
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(420);
    let t_max = ms(s.duration).max(1e-3);
    let times: Vec<f64> = series.times.iter().map(|t| ms(*t)).collect();
    let line = s.switch.bandwidth_bps as f64 / 1e9;
    let top = series
        .flows
        .iter()
        .flat_map(|f| f.goodput_bps.iter().copied())
        .map(gbps)
        .fold(line, f64::max)
        * 1.05;

    let mut rates = ChartBuilder::on(&upper)
        .caption(
            format!("{}: flow rates", s.name),
            ("sans-serif", 20).into_font(),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_max, 0f64..top)?;
    rates
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("Gb/s")
        .draw()?;
    for (i, f) in series.flows.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = times
            .iter()
            .zip(&f.goodput_bps)
            .map(|(t, g)| (*t, gbps(*g)))
            .collect();
        let flow = &s.flows[i];
        rates
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(format!("flow {i} ({}->{}) goodput", flow.from, flow.to))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        let rate: Vec<(f64, f64)> = times
            .iter()
            .zip(&f.rate_bps)
            .filter_map(|(t, r)| r.map(|r| (*t, gbps(r as f64))))
            .collect();
        if !rate.is_empty() {
            let faint = color.mix(0.5);
            rates
                .draw_series(LineSeries::new(rate, faint.stroke_width(1)))?
                .label(format!("flow {i} DCQCN rate"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], faint));
        }
    }
    rates
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let q_top = series
        .queue_max_bytes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(1) as f64
        / 1e3
        * 1.1;
    let mut queue = ChartBuilder::on(&lower)
        .caption(
            format!("port {} queue", s.bottleneck),
            ("sans-serif", 20).into_font(),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_max, 0f64..q_top)?;
    queue
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("KB")
        .draw()?;
    let maxima: Vec<(f64, f64)> = times
        .iter()
        .zip(&series.queue_max_bytes)
        .map(|(t, q)| (*t, *q as f64 / 1e3))
        .collect();
    queue
        .draw_series(LineSeries::new(maxima, RED.stroke_width(2)))?
        .label("max in interval")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));
    let now: Vec<(f64, f64)> = times
        .iter()
        .zip(&series.queue_bytes)
        .map(|(t, q)| (*t, *q as f64 / 1e3))
        .collect();
    queue
        .draw_series(LineSeries::new(now, BLUE.stroke_width(1)))?
        .label("at sample")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    if let Some(ecn) = s.switch.ecn {
        for (k, label) in [(ecn.k_min_bytes, "Kmin"), (ecn.k_max_bytes, "Kmax")] {
            let y = k as f64 / 1e3;
            if y <= q_top {
                queue
                    .draw_series(LineSeries::new(
                        [(0.0, y), (t_max, y)],
                        BLACK.mix(0.4).stroke_width(1),
                    ))?
                    .label(label)
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
            }
        }
    }
    queue
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
