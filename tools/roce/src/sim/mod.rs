//! `roce sim`: a congestion experiment from a TOML file, played in virtual time by
//! `roce_sim::scenario::run_observed`, written out as a JSON time series and an SVG plot, and
//! summed up.
//!
//! [`roce_sim::file::scenario`] reads and checks the file, [`report`] makes the summary and
//! `series.json`, [`plot`] draws `plot.svg`.
//!
//! A file with a `[topology]`, `[workload]` or `[network]` table is a network scenario instead:
//! flows on a multi-switch topology (`roce_sim::network`), read by [`roce_sim::file::network`],
//! run by [`network_run`], written out by [`network_out`] and [`fct_plot`].

mod compare;
mod fct_plot;
mod huge_pages;
mod network_out;
mod network_run;
mod plot;
mod progress;
mod report;
mod sweep;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant as WallClock;

use anyhow::{Context, anyhow, bail};
use roce_core::Duration;
use roce_sim::file::scenario::load;
use roce_sim::file::{grid, network, overrides};
use roce_sim::{Capture, Scenario, Series};
use serde_json::json;

/// Run a congestion experiment (hosts on one switch, RC WRITE flows) in virtual time.
///
/// SCENARIO is a TOML file, or the name of a shipped one (`scenarios/NAME.toml`; `--list`
/// shows them). Writes `series.json` (per sample: each flow's goodput and congestion-control
/// rate, the bottleneck queue, and the switch's drops, PAUSEs and CE marks and the NICs' CNPs,
/// cumulative) and `plot.svg` (goodput and rates, the bottleneck queue, and drops, PAUSEs, CE
/// marks and CNPs per interval, against time) into the output directory, and prints a summary:
/// per-flow mean goodput, Jain's fairness index, queue maximum, drops, pauses, CNPs, and the
/// wall time taken.
///
/// The same file gives the same `series.json` and `plot.svg`, bit for bit (wall-clock figures
/// are only in the printed summary). A run that takes more than two seconds says on standard
/// error how far it has got. Limits: 2 to 254 hosts, at most 60000 ms of simulated time, a
/// million samples, and about 2 GiB of memory by the estimate. Exit status: 0, or 2 when the
/// file cannot be read or is not a valid scenario (the error names the file and the key).
#[derive(Debug, clap::Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "Examples:\n  \
    roce sim --list\n  \
    roce sim incast-dcqcn                 # scenarios/incast-dcqcn.toml -> sim-out/incast-dcqcn/\n  \
    roce sim my.toml --out /tmp/my --json | jq .flows\n  \
    roce sim fairness --set duration_ms=10 --set congestion=dcqcn --pcap /tmp/f.pcap\n\n\
    Required keys: hosts, duration_ms, sample_us, and [[flows]] tables with src and dst.\n\
    File format: see docs/congestion.md (\"roce sim\") and scenarios/*.toml.\n\n\
    Network scenarios ([topology], [workload], [network], [run] tables) run flows on a fat-tree,\n\
    leaf-spine or HPCC topology and write fct.txt (HPCC's layout), slowdown.txt/.json/.svg and\n\
    summary.json:\n  \
    roce sim leafspine-websearch --out /tmp/ls\n  \
    roce sim fattree-fb30 --check                # validate and estimate; makes no flow\n  \
    roce sim fattree-fb30 --topology fat.txt --flows flow.txt --out /tmp/f\n\
    See docs/congestion.md (\"Research-scale runs\").\n\n\
    Sweeps of a scenario's parameters: roce sim sweep --help, roce sim merge --help.\n\n\
    Ctrl-C stops a run where it is and writes its outputs for the simulated time reached\n\
    (\"interrupted_at_ms\" in the summary; a network run's flows finished so far), then exits\n\
    130; a second Ctrl-C ends it at once. In a sweep no point starts after it, and the table\n\
    holds the points that ran.\n\n\
    Environment: on glibc, where transparent huge pages are given on request (madvise),\n\
    roce sim runs itself again with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (about 5 % faster\n\
    at research scale); ROCE_SIM_HUGE_PAGES=0 declines (as valgrind needs, which does not\n\
    follow exec).",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
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
    /// List the shipped scenarios, one line each: name, description, and size (hosts, flows,
    /// simulated time; for a workload, the flows its rates give), then exit.
    #[arg(long, conflicts_with_all = ["scenario", "out", "json"])]
    list: bool,
    /// Say how far the run has got (simulated time reached, percent, wall time; network
    /// scenarios: flows and packet-hops per second too) on standard error every SECONDS of wall
    /// time (default: one-switch scenarios after 2 s, then every 5 s; network scenarios with
    /// --progress or a terminal every 0.5 s).
    #[arg(long, value_name = "SECONDS")]
    progress_every: Option<f64>,
    /// Network scenarios: the topology, an HPCC topology file (replaces `[topology]`).
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Network scenarios: the flows, an HPCC flow file (replaces `[workload]`), so the same
    /// flows can run in HPCC's simulator.
    #[arg(long, value_name = "FILE")]
    flows: Option<PathBuf>,
    /// Network scenarios: run even when the memory estimate is above its limit (4 GiB).
    #[arg(long)]
    allow_large: bool,
    /// Network scenarios: print a progress line on standard error every 0.5 s of wall time
    /// (the default when standard error is a terminal).
    #[arg(long)]
    progress: bool,
    /// Network scenarios: validate the file, estimate the flows and the memory, print the plan,
    /// write nothing. Makes no flow of a workload (its count is the workload's expected one)
    /// and builds no network; a flow file is read and checked. Refused, as the run would be,
    /// when the estimate is above the limit without --allow-large.
    #[arg(long)]
    check: bool,
    /// Set a key of the scenario, as if the file said so: a dotted KEY (workload.load,
    /// network.ecn.kmin_bytes) and a TOML VALUE (0.5, "websearch", true, [1, 2]; a word that is
    /// not one is a string). Repeatable; applied in order before the file is checked, so an
    /// unknown key is refused as in the file.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<overrides::Set>,
    /// Write every packet the hosts send into this pcap file, stamped with simulated time
    /// (`roce dump FILE` decodes it; Wireshark shows RoCEv2).
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    pcap: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<SimCommand>,
}

/// `roce sim sweep` and `roce sim merge`.
#[derive(Debug, clap::Subcommand)]
enum SimCommand {
    /// Run every point of a network scenario's `[sweep]` grid, several at once.
    ///
    /// The `[sweep]` table gives the axes: a dotted key of the scenario and its values, e.g.
    /// `"workload.load" = [0.3, 0.5]` and `"workload.seed" = [1, 2, 3]`: 6 points, numbered with
    /// the last axis varying fastest. Each point runs as `roce sim OUT/points/NNNNN/scenario.toml
    /// --out OUT/points/NNNNN/`, in a process of its own (a point that fails fails alone), and is
    /// said on standard error as it ends; then OUT/sweep.txt and OUT/sweep.json hold a row per
    /// point (its values, flows finished, goodput, PAUSEs, drops, and the p50/p95/p99 FCT
    /// slowdown over all its flows).
    ///
    /// A grid such as `"network.congestion" = ["dcqcn", "hpcc", "timely", "dctcp"]` also gets
    /// OUT/compare.txt and OUT/compare.svg: the points side by side, FCT slowdown by flow size
    /// as the HPCC paper's Fig. 11 draws it (each point's 5 % bins of its flows by size, as its
    /// slowdown.txt; a p50, p95 and p99 column per point, and a chart per percentile with a
    /// curve per point). With other axes too (`"network.pfc.enabled" = [true, false]`), the
    /// points are compared along network.congestion (else the grid's first axis) in a panel
    /// for each combination of the others' values: a table each in compare.txt, a row of three
    /// charts each in compare.svg; a grid of more than 8 panels is not compared. A scenario may carry the tables of several
    /// algorithms ([network.dcqcn], [network.hpcc], ...): each point uses the one its
    /// network.congestion names.
    #[command(after_help = "Examples:
          roce sim sweep sweep-leafspine-load --out /tmp/sw   # a shipped one, by name
          roce sim sweep fattree-fb30-compare --out /tmp/cmp  # DCQCN, HPCC, TIMELY, DCTCP, and +win: compare.svg
          roce sim sweep fattree-fb30-pfc --out /tmp/pfc      # the same four, PFC on/off x recovery x window
          roce sim sweep my.toml --shard 3/16 --out shard-3   # one task of a job array
          roce sim merge shard-* --out all

        A Slurm job array: see docs/congestion.md (\"Sweeps\"); comparing algorithms:
        docs/congestion.md (\"Comparing algorithms\", \"PFC or not\").")]
    Sweep {
        /// The network scenario, with a [sweep] table: a TOML file, or the name of a shipped
        /// one (as `roce sim NAME`).
        #[arg(value_name = "SCENARIO")]
        scenario: String,
        /// Output directory (default: sim-out/NAME-sweep).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Run only shard I of N (0 <= I < N): the points I, I + N, I + 2N, … Merge the
        /// shards' directories with `roce sim merge`.
        #[arg(long, value_name = "I/N", default_value = "0/1")]
        shard: grid::Shard,
        /// Points run at once (default: one per core).
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        /// Run even when a point's memory estimate is above its limit.
        #[arg(long)]
        allow_large: bool,
        /// Set a key of the scenario in every point, as `roce sim --set` does (not a key the
        /// [sweep] varies).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<overrides::Set>,
    },
    /// Join the points of sweep directories (the shards of one sweep) into one table.
    ///
    /// Writes OUT/sweep.txt and OUT/sweep.json, and OUT/compare.txt and OUT/compare.svg (as
    /// `roce sim sweep` does).
    Merge {
        /// Sweep output directories.
        #[arg(value_name = "DIR", required = true)]
        dirs: Vec<PathBuf>,
        /// Where to write sweep.txt and sweep.json (and compare.txt, compare.svg).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
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
    if !args.list && !args.check {
        huge_pages::ask();
    }
    match &args.command {
        Some(SimCommand::Sweep {
            scenario,
            out,
            shard,
            jobs,
            allow_large,
            set,
        }) => {
            let file = resolve(scenario)?;
            return sweep::run(&file, out.as_deref(), *shard, *jobs, *allow_large, set);
        }
        Some(SimCommand::Merge { dirs, out }) => return sweep::run_merge(dirs, out),
        None => {}
    }
    if args.list {
        return list();
    }
    let Some(arg) = &args.scenario else {
        bail!("no scenario given (roce sim --list shows the shipped ones)");
    };
    let path = resolve(arg)?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let network = match toml::from_str::<toml::Table>(&text) {
        Ok(mut doc) => {
            overrides::apply(&mut doc, &args.set)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            network::is_network(&doc)
        }
        Err(_) => false,
    };
    if network || args.topology.is_some() || args.flows.is_some() {
        return network_run::run(args, &path, &text);
    }
    if args.check || args.allow_large {
        bail!("--check and --allow-large are for network scenarios ([topology], [workload])");
    }
    let loaded = load(&path, &args.set)?;
    let name = loaded.scenario.name.clone();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("sim-out").join(&name));

    let every = progress_every(args)?;
    let capture = args.pcap.as_deref().map(create_capture).transpose()?;
    let interrupt = crate::interrupt::Interrupt::catch()?;
    let started = WallClock::now();
    let series = run_with_progress(&loaded.scenario, capture.clone(), every, &interrupt)?;
    let wall = started.elapsed();
    let captured = capture
        .map(|c| finish_capture(&c, args.pcap.as_deref().unwrap_or(Path::new(""))))
        .transpose()?;

    let summary = report::summarise(&loaded, &series);
    std::fs::create_dir_all(&out)
        .with_context(|| format!("cannot create the directory {}", out.display()))?;
    let series_path = out.join("series.json");
    let plot_path = out.join("plot.svg");
    let document = report::series_json(&loaded, &series, &summary);
    let text = serde_json::to_string_pretty(&document).context("cannot encode series.json")?;
    std::fs::write(&series_path, text + "\n")
        .with_context(|| format!("cannot write {}", series_path.display()))?;
    let svg = plot::plot(&loaded, &series)?;
    std::fs::write(&plot_path, svg)
        .with_context(|| format!("cannot write {}", plot_path.display()))?;

    let summary = report::with_timing(&summary, &series, wall.as_secs_f64());
    if args.json {
        let mut value = summary;
        value["series"] = json!(series_path.display().to_string());
        value["plot"] = json!(plot_path.display().to_string());
        println!("{value}");
    } else {
        print!("{}", report::summary_text(&loaded, &summary));
        println!(
            "wrote {} and {}",
            series_path.display(),
            plot_path.display()
        );
    }
    if let Some(said) = captured {
        eprintln!("{said}");
    }
    if let Some(at) = series.stopped_at {
        eprintln!(
            "roce sim {name}: interrupted at {} of {} ms simulated; what is above and what was \
             written covers the run until then",
            report::ms(at),
            report::ms(loaded.scenario.duration)
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--pcap FILE`, created once the scenario has been checked.
fn create_capture(path: &Path) -> anyhow::Result<Capture> {
    Capture::create(path).map_err(|e| anyhow!("--pcap {}: cannot create it: {e}", path.display()))
}

/// Flushes the capture: "wrote FILE: N packets, stamped with simulated time".
fn finish_capture(capture: &Capture, path: &Path) -> anyhow::Result<String> {
    capture
        .flush()
        .with_context(|| format!("--pcap {}: cannot write it", path.display()))?;
    let skipped = match capture.skipped() {
        0 => String::new(),
        n => format!(" ({n} that could not be framed left out)"),
    };
    Ok(format!(
        "wrote {}: {} packets as the hosts sent them, stamped with simulated time{skipped}",
        path.display(),
        capture.frames()
    ))
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
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let doc = toml::from_str::<toml::Table>(&text).ok();
        let network = doc.as_ref().is_some_and(network::is_network);
        let about = if network {
            match network::load(file, &text, None, false, &[]) {
                Ok(s) => {
                    let size = network_run::size_text(file, &text)
                        .unwrap_or_else(|err| format!("not a valid scenario: {err:#}"));
                    let points = doc
                        .as_ref()
                        .and_then(|d| d.get("sweep"))
                        .and_then(toml::Value::as_table)
                        .map(|axes| {
                            axes.values()
                                .filter_map(toml::Value::as_array)
                                .map(Vec::len)
                                .product::<usize>()
                        })
                        .map_or_else(String::new, |n| {
                            format!("a sweep of {n} points; the base: ")
                        });
                    format!("{} [{points}{size}]", s.description.unwrap_or_default())
                }
                Err(err) => format!("(not a valid scenario: {err:#})"),
            }
        } else {
            match load(file, &[]) {
                Ok(loaded) => {
                    let s = &loaded.scenario;
                    format!(
                        "{} [{} hosts, {} flows, {} ms simulated]",
                        loaded.description.as_deref().unwrap_or_default(),
                        s.hosts,
                        s.flows.len(),
                        millis(s.duration.as_secs_f64() * 1e3)
                    )
                }
                Err(err) => format!("(not a valid scenario: {err:#})"),
            }
        };
        println!("{stem:<width$}  {about}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Milliseconds to at most three decimals, without trailing zeros: "20", "20.001".
fn millis(ms: f64) -> String {
    let text = format!("{ms:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Runs the scenario on this thread (see [`progress`] for why not on another) and, when it
/// takes more than two seconds, says on standard error how far it has got: simulated time
/// reached out of the run's, and the wall time so far.
fn run_with_progress(
    scenario: &Scenario,
    capture: Option<Capture>,
    every: Option<Duration>,
    interrupt: &crate::interrupt::Interrupt,
) -> anyhow::Result<Series> {
    let reached = AtomicU64::new(0);
    let target = scenario.duration.as_secs_f64() * 1e3;
    let every = progress::Every {
        first: every.unwrap_or(Duration::from_secs(2)),
        then: every.unwrap_or(Duration::from_secs(5)),
    };
    let report = |wall| {
        let done = reached.load(Ordering::Relaxed) as f64 / 1e6;
        eprintln!("{}", progress_line(&scenario.name, done, target, wall));
    };
    let result = progress::run_reporting(Some(every), report, || {
        roce_sim::scenario::run_captured(scenario, capture, |t| {
            let nanos = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
            reached.store(nanos, Ordering::Relaxed);
            interrupt.control()
        })
    })
    .map_err(|_| anyhow!("{}: the simulation panicked", scenario.name))?;
    result.map_err(|e| anyhow!("{}: the run failed: {e}", scenario.name))
}

/// "roce sim NAME: 12.5 of 20 ms simulated (62 %), 4.1 s of wall time so far".
fn progress_line(name: &str, done_ms: f64, target_ms: f64, wall: Duration) -> String {
    let percent = if target_ms > 0.0 {
        100.0 * done_ms / target_ms
    } else {
        100.0
    };
    format!(
        "roce sim {name}: {done_ms:.1} of {target_ms} ms simulated ({percent:.0} %), \
         {:.1} s of wall time so far",
        wall.as_secs_f64()
    )
}

/// `--progress-every SECONDS`, checked: more than 0 and at most an hour.
fn progress_every(args: &Args) -> anyhow::Result<Option<Duration>> {
    match args.progress_every {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => bail!("--progress-every {s}: seconds, more than 0 and at most 3600"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_says_how_far_the_run_has_got() {
        let line = progress_line("incast", 12.5, 20.0, Duration::from_millis(4100));
        assert_eq!(
            line,
            "roce sim incast: 12.5 of 20 ms simulated (62 %), 4.1 s of wall time so far"
        );
    }
}
