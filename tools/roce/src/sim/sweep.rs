//! `roce sim sweep` and `roce sim merge`: a network scenario's `[sweep]` grid
//! ([`roce_sim::file::grid`]) run point by point, several at once (one per core by default),
//! each point in a `roce sim` process of its own, and the points' results joined into one table.
//!
//! The output directory holds `grid.json` (the scenario file and its axes: shards of one grid
//! must agree on it), and per point `points/NNNNN/` with its `scenario.toml` (the scenario with
//! the point's values) and what the run of it wrote (`summary.json`, `fct.txt`, the slowdown
//! table and plot), then `point.json` (its number, its values, and whether it ran). `merge`
//! reads any number of such directories — the shards of a sweep run as a job array on a
//! cluster — and writes `sweep.json` and `sweep.txt` into one: a row per point, with the
//! slowdown percentiles over all of the point's flows, computed from its `fct.txt` as
//! `fct_analysis.py` computes them per bin (slowdown = FCT / ideal FCT, at least 1). A grid
//! (`"network.congestion" = ["dcqcn", "hpcc", "timely", "dctcp"]`, and perhaps other axes)
//! also gets `compare.txt` and `compare.svg`: the points' slowdown by flow size side by side,
//! along `network.congestion` (else the first axis), in a panel for each combination of the
//! other axes' values ([`super::compare`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use anyhow::{Context, anyhow, bail};
use rayon::prelude::*;
use serde_json::{Value as Json, json};
use toml::Table;

use super::compare;

use roce_sim::SlowdownTable;
use roce_sim::file::grid::{Grid, Shard};
use roce_sim::file::network;
use roce_sim::file::overrides::{self, Set};

/// `roce sim sweep`: the points of `scenario`'s grid that `shard` takes, into `out`, then the
/// table of what this directory holds.
pub(super) fn run(
    scenario: &Path,
    out: Option<&Path>,
    shard: Shard,
    jobs: Option<usize>,
    allow_large: bool,
    sets: &[Set],
) -> anyhow::Result<ExitCode> {
    let stem = scenario
        .file_stem()
        .map_or_else(|| "sweep".into(), |s| s.to_string_lossy().into_owned());
    let out = out.map_or_else(
        || Path::new("sim-out").join(format!("{stem}-sweep")),
        Path::to_path_buf,
    );
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let exe = std::env::current_exe().context("finding this program, to run the points")?;
    // Ctrl-C: the points running end as a run ends on Ctrl-C (their outputs written for the
    // time they reached), the others are not started, and the table holds what ran.
    let interrupt = crate::interrupt::Interrupt::catch()?;
    let started = std::time::Instant::now();
    let ran = sweep(scenario, &out, shard, jobs, sets, |file, dir| {
        if interrupt.asked() {
            bail!("not run: the sweep was interrupted");
        }
        run_point(&exe, file, dir, allow_large)
    })?;
    let merged = merge(std::slice::from_ref(&out), &out)?;
    eprintln!(
        "roce sim sweep: {} points run ({} failed) in {:.1} s, {} jobs at once; {} of the grid's {} points in {}",
        ran.points,
        ran.failed.len(),
        started.elapsed().as_secs_f64(),
        jobs,
        merged.points,
        merged.of,
        out.display()
    );
    print!("{}", std::fs::read_to_string(out.join("sweep.txt"))?);
    if merged.compared {
        eprintln!("{}", compared_line(&out));
    }
    for (index, error) in &ran.failed {
        eprintln!("point {index}: {error}");
    }
    if interrupt.asked() {
        eprintln!(
            "roce sim sweep: interrupted; the table holds the points that ran: run the same \
             command again to run them all"
        );
        return Ok(ExitCode::from(130));
    }
    Ok(if ran.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs one point as `roce sim FILE --out DIR` in a process of its own. Its simulation then
/// runs on a main thread, whose heap glibc gives huge pages where a worker thread's arena gets
/// none (`huge_pages.rs`; two points of a 10 ms cut held 82 MB of their 273 MB in huge pages on
/// workers, 240 MB of 304 MB in processes); its memory is given back when it ends; and a point
/// that fails, even by a panic, fails alone. The child inherits `GLIBC_TUNABLES` and
/// `ROCE_SIM_HUGE_PAGES` from this process, which asked for them already, so it does not run
/// itself again.
fn run_point(exe: &Path, file: &Path, dir: &Path, allow_large: bool) -> anyhow::Result<()> {
    let mut command = std::process::Command::new(exe);
    command.arg("sim").arg(file).arg("--out").arg(dir);
    if allow_large {
        command.arg("--allow-large");
    }
    let output = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    if output.status.success() {
        // Its warnings, whole, where the points' lines would otherwise interleave.
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        return Ok(());
    }
    bail!(
        "{}",
        child_error(&String::from_utf8_lossy(&output.stderr), output.status)
    )
}

/// What a point's process that failed said: its error line without the program's prefix, or
/// else all it wrote, and how it ended where that was not its error exit.
fn child_error(stderr: &str, status: std::process::ExitStatus) -> String {
    let said = stderr
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(crate::ERROR_PREFIX))
        .map_or_else(|| stderr.trim().to_owned(), str::to_owned);
    match (said.is_empty(), status.code()) {
        (false, Some(code)) if code == i32::from(crate::ERROR_EXIT) => said,
        (false, _) => format!("{said} ({status})"),
        (true, _) => format!("the point's process ended with {status} and said nothing"),
    }
}

/// `roce sim merge`.
pub(super) fn run_merge(dirs: &[PathBuf], out: &Path) -> anyhow::Result<ExitCode> {
    let merged = merge(dirs, out)?;
    eprintln!(
        "roce sim merge: {} of {} points; wrote {} and {}",
        merged.points,
        merged.of,
        out.join("sweep.txt").display(),
        out.join("sweep.json").display()
    );
    if !merged.missing.is_empty() {
        eprintln!("missing points: {:?}", merged.missing);
    }
    if merged.compared {
        eprintln!("{}", compared_line(out));
    }
    print!("{}", std::fs::read_to_string(out.join("sweep.txt"))?);
    Ok(ExitCode::SUCCESS)
}

/// What a compared grid also wrote.
fn compared_line(out: &Path) -> String {
    format!(
        "the points side by side (FCT slowdown by flow size, p50/p95/p99, a column and a curve \
         per point): {} and {}",
        out.join("compare.txt").display(),
        out.join("compare.svg").display()
    )
}

/// What a sweep ran.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Points run, and the numbers of those that failed with their errors.
    pub(crate) points: usize,
    pub(crate) failed: Vec<(usize, String)>,
}

/// Runs the points of `file`'s grid that `shard` takes into `out`, `jobs` at a time, every
/// point with `sets` applied (`--set`); `run_point(scenario_file, point_dir)` runs one scenario
/// and writes its results into `point_dir`. Refuses an `out` that holds another grid's points;
/// with `sets`, refuses a set of a key the grid varies, and checks the scenario as the sets
/// leave it before anything is written.
pub(crate) fn sweep(
    file: &Path,
    out: &Path,
    shard: Shard,
    jobs: usize,
    sets: &[Set],
    run_point: impl Fn(&Path, &Path) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<Ran> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {name}"))?;
    let mut base: Table = text.parse().with_context(|| format!("{name}: not TOML"))?;
    let Some(toml::Value::Table(axes)) = base.remove("sweep") else {
        bail!(
            "{name}: no [sweep] table: a sweep needs its axes, like \"workload.load\" = [0.3, 0.5]"
        );
    };
    if !sets.is_empty() {
        if let Some(set) = sets.iter().find(|s| axes.contains_key(&s.path.join("."))) {
            bail!(
                "{name}: --set {}: [sweep] varies {}; change its values there",
                set.text,
                set.path.join(".")
            );
        }
        overrides::apply(&mut base, sets).map_err(|e| anyhow!("{name}: {e}"))?;
        network::load_doc(file, base.clone(), sets)?;
    }
    // Each point's scenario.toml lives in its own directory: the files the scenario names
    // relative to itself are named from there absolutely.
    anchor_paths(&mut base, file.parent().unwrap_or(Path::new(".")));
    let grid = Grid::new(&name, &axes, &base)?;
    let header = grid_json(&name, &grid);
    std::fs::create_dir_all(out.join("points"))
        .with_context(|| format!("creating {}", out.display()))?;
    let grid_file = out.join("grid.json");
    match std::fs::read_to_string(&grid_file) {
        Ok(old) if serde_json::from_str::<Json>(&old).ok().as_ref() != Some(&header) => bail!(
            "{} holds the points of another grid ({}); give another --out",
            out.display(),
            grid_file.display()
        ),
        Ok(_) => {}
        Err(_) => std::fs::write(&grid_file, format!("{header:#}\n"))
            .with_context(|| format!("writing {}", grid_file.display()))?,
    }
    let points: Vec<usize> = shard.points(grid.len()).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
        .context("starting the sweep's threads")?;
    // Each point said as it ends: a sweep of the reference run's size takes hours.
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(usize, anyhow::Result<()>)> = pool.install(|| {
        points
            .par_iter()
            .map(|&i| {
                let started = std::time::Instant::now();
                let result = run_one(&grid, &base, i, out, &run_point);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                eprintln!(
                    "roce sim sweep: point {i} {} in {:.1} s ({n} of {})",
                    if result.is_ok() { "ran" } else { "failed" },
                    started.elapsed().as_secs_f64(),
                    points.len()
                );
                (i, result)
            })
            .collect()
    });
    let failed = results
        .into_iter()
        .filter_map(|(i, r)| r.err().map(|e| (i, format!("{e:#}"))))
        .collect();
    Ok(Ran {
        points: points.len(),
        failed,
    })
}

fn run_one(
    grid: &Grid,
    base: &Table,
    index: usize,
    out: &Path,
    run_point: &(impl Fn(&Path, &Path) -> anyhow::Result<()> + Sync),
) -> anyhow::Result<()> {
    let dir = point_dir(out, index);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let scenario = dir.join("scenario.toml");
    let table = grid.scenario(base, index)?;
    std::fs::write(&scenario, toml::to_string(&table)?)
        .with_context(|| format!("writing {}", scenario.display()))?;
    let result = run_point(&scenario, &dir);
    let params: serde_json::Map<String, Json> = grid
        .point(index)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), toml_to_json(v)))
        .collect();
    let record = json!({
        "index": index,
        "params": params,
        "ok": result.is_ok(),
        "error": result.as_ref().err().map(|e| format!("{e:#}")),
    });
    std::fs::write(dir.join("point.json"), format!("{record:#}\n"))?;
    result
}

/// The keys of a network scenario that name a file relative to the scenario's directory
/// (`roce_sim::file::network`); `workload.cdf` may also be a built-in distribution's name.
const PATH_KEYS: [&[&str]; 3] = [&["flows"], &["topology", "file"], &["workload", "cdf"]];

/// Makes the relative file names of `table` (the [`PATH_KEYS`]) relative to `dir` instead, so
/// that they name the same files from anywhere.
fn anchor_paths(table: &mut Table, dir: &Path) {
    for key in PATH_KEYS {
        if let Some(toml::Value::String(name)) = lookup_mut(table, key) {
            let builtin =
                key == ["workload", "cdf"] && matches!(name.as_str(), "fb_hadoop" | "websearch");
            if !builtin && Path::new(name.as_str()).is_relative() {
                *name = dir.join(name.as_str()).display().to_string();
            }
        }
    }
}

/// The value at the dotted `key` of `table`, if every table on the way is there.
fn lookup_mut<'t>(table: &'t mut Table, key: &[&str]) -> Option<&'t mut toml::Value> {
    let (first, rest) = key.split_first()?;
    let value = table.get_mut(*first)?;
    match value {
        _ if rest.is_empty() => Some(value),
        toml::Value::Table(inner) => lookup_mut(inner, rest),
        _ => None,
    }
}

fn point_dir(out: &Path, index: usize) -> PathBuf {
    out.join("points").join(format!("{index:05}"))
}

fn grid_json(file: &str, grid: &Grid) -> Json {
    let axes: Vec<Json> = grid
        .axes
        .iter()
        .map(|(k, v)| json!({"key": k, "values": v.iter().map(toml_to_json).collect::<Vec<_>>()}))
        .collect();
    json!({"scenario": file, "points": grid.len(), "axes": axes})
}

fn toml_to_json(v: &toml::Value) -> Json {
    serde_json::to_value(v).unwrap_or(Json::Null)
}

/// What `merge` found.
#[derive(Debug)]
pub(crate) struct Merged {
    pub(crate) points: usize,
    pub(crate) of: usize,
    pub(crate) missing: Vec<usize>,
    /// Whether it wrote `compare.txt` and `compare.svg` (a grid of at most
    /// [`compare::MAX_PANELS`] panels).
    pub(crate) compared: bool,
}

/// Joins the points of `dirs` (one sweep's shards, or one directory) into `into`'s
/// `sweep.json` and `sweep.txt`.
pub(crate) fn merge(dirs: &[PathBuf], into: &Path) -> anyhow::Result<Merged> {
    let mut grid: Option<Json> = None;
    let mut rows: std::collections::BTreeMap<u64, Json> = Default::default();
    let mut tables: std::collections::BTreeMap<u64, SlowdownTable> = Default::default();
    for dir in dirs {
        let file = dir.join("grid.json");
        let text = std::fs::read_to_string(&file).with_context(|| {
            format!(
                "reading {} (is {} a sweep's output?)",
                file.display(),
                dir.display()
            )
        })?;
        let this: Json =
            serde_json::from_str(&text).with_context(|| format!("{}", file.display()))?;
        match &grid {
            Some(g) if *g != this => bail!(
                "{} is of another grid than {}: only shards of one sweep merge",
                file.display(),
                dirs[0].join("grid.json").display()
            ),
            Some(_) => {}
            None => grid = Some(this),
        }
        let Ok(entries) = std::fs::read_dir(dir.join("points")) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Some((row, table)) = read_point(&entry.path())? {
                let index = row["index"].as_u64().unwrap_or(u64::MAX);
                rows.insert(index, row);
                if let Some(table) = table {
                    tables.insert(index, table);
                }
            }
        }
    }
    let Some(grid) = grid else {
        bail!("nothing to merge: give sweep output directories")
    };
    let of = grid["points"].as_u64().unwrap_or(0) as usize;
    let missing: Vec<usize> = (0..of)
        .filter(|i| !rows.contains_key(&(*i as u64)))
        .collect();
    std::fs::create_dir_all(into).with_context(|| format!("creating {}", into.display()))?;
    let rows: Vec<Json> = rows.into_values().collect();
    let doc = json!({"grid": grid, "missing": missing, "points": rows});
    std::fs::write(into.join("sweep.json"), format!("{doc:#}\n"))?;
    std::fs::write(into.join("sweep.txt"), table(&grid, &rows))?;
    let keys: Vec<&str> = grid["axes"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|a| a["key"].as_str())
        .collect();
    let compared = match panels(&keys, &rows, &mut tables) {
        Some((key, panels)) => {
            let name = grid["scenario"]
                .as_str()
                .and_then(|s| Path::new(s).file_stem())
                .map_or_else(|| "sweep".into(), |s| s.to_string_lossy().into_owned());
            std::fs::write(into.join("compare.txt"), compare::text_panels(key, &panels))?;
            std::fs::write(
                into.join("compare.svg"),
                compare::svg_panels(&name, key, &panels)?,
            )?;
            true
        }
        None => false,
    };
    Ok(Merged {
        points: rows.len(),
        of,
        missing,
        compared,
    })
}

/// The grid's points (`rows`, in their order) as the panels of its comparison, each point's
/// column taking its table out of `tables`, and the key compared along; `None` for a grid
/// without axes or of more than [`compare::MAX_PANELS`] panels.
fn panels<'k>(
    keys: &[&'k str],
    rows: &[Json],
    tables: &mut std::collections::BTreeMap<u64, SlowdownTable>,
) -> Option<(&'k str, Vec<compare::Panel>)> {
    if keys.is_empty() {
        return None;
    }
    let by = compare::compared_axis(keys);
    let mut panels: Vec<compare::Panel> = Vec::new();
    for row in rows {
        let values: Vec<(String, String)> = keys
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != by)
            .map(|(_, k)| (k.to_string(), compare::label(&row["params"][*k])))
            .collect();
        let index = row["index"].as_u64().unwrap_or(u64::MAX);
        let column = compare::Column {
            index,
            label: compare::label(&row["params"][keys[by]]),
            table: tables.remove(&index),
        };
        match panels.iter_mut().find(|p| p.values == values) {
            Some(panel) => panel.columns.push(column),
            None => panels.push(compare::Panel {
                values,
                columns: vec![column],
            }),
        }
    }
    (panels.len() <= compare::MAX_PANELS).then_some((keys[by], panels))
}

/// A point's row: its `point.json`, its summary's totals, and the slowdown percentiles over its
/// `fct.txt`; and the slowdown table of its `fct.txt` by flow size (as its `slowdown.txt`), if
/// it has one. `None` for a directory that is not a point.
fn read_point(dir: &Path) -> anyhow::Result<Option<(Json, Option<SlowdownTable>)>> {
    let Ok(text) = std::fs::read_to_string(dir.join("point.json")) else {
        return Ok(None);
    };
    let mut row: Json =
        serde_json::from_str(&text).with_context(|| format!("{}", dir.display()))?;
    if let Ok(summary) = std::fs::read_to_string(dir.join("summary.json")) {
        let summary: Json = serde_json::from_str(&summary).unwrap_or(Json::Null);
        for key in [
            "flows_started",
            "flows_finished",
            "goodput_gbps",
            "pfc_pauses",
            "drops",
            "packet_hops_per_s",
        ] {
            row[key] = summary[key].clone();
        }
    }
    let mut by_size = None;
    if let Ok(fct) = std::fs::read_to_string(dir.join("fct.txt")) {
        let name = dir.join("fct.txt").display().to_string();
        let records = roce_sim::fct::parse_fct_file(&name, &fct)?;
        // One bin of all the flows: fct_analysis.py's percentiles over the whole point.
        let table = SlowdownTable::new(&records, 100)?;
        if let Some(all) = table.bins.first() {
            row["slowdown_p50"] = json!(all.p50);
            row["slowdown_p95"] = json!(all.p95);
            row["slowdown_p99"] = json!(all.p99);
        }
        by_size = Some(SlowdownTable::new(
            &records,
            super::network_out::STEP_PERCENT,
        )?);
    }
    Ok(Some((row, by_size)))
}

/// The text table: a row per point, its values, then what it gave.
fn table(grid: &Json, rows: &[Json]) -> String {
    let keys: Vec<String> = grid["axes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["key"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let results = [
        "flows_finished",
        "goodput_gbps",
        "pfc_pauses",
        "drops",
        "slowdown_p50",
        "slowdown_p95",
        "slowdown_p99",
    ];
    let mut out = String::from(
        "# roce sim sweep: one row per point; slowdown = FCT / ideal FCT over all its flows\n# point",
    );
    for k in keys.iter().map(String::as_str).chain(results) {
        let _ = write!(out, "\t{k}");
    }
    out.push('\n');
    for row in rows {
        let _ = write!(out, "{}", row["index"]);
        for k in &keys {
            let _ = write!(out, "\t{}", row["params"][k]);
        }
        for k in results {
            let _ = match &row[k] {
                Json::Number(n) if n.is_f64() => write!(out, "\t{:.3}", n.as_f64().unwrap_or(0.0)),
                Json::Null => write!(out, "\t-"),
                v => write!(out, "\t{v}"),
            };
        }
        if row["ok"] == Json::Bool(false) {
            out.push_str("\tFAILED");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = "name = \"s\"\n[workload]\nload = 0.3\nseed = 1\n\n[sweep]\n\"workload.load\" = [0.3, 0.5]\n\"workload.seed\" = [1, 2]\n";

    /// A stand-in for a run: reads the point's scenario and writes a summary and an fct.txt
    /// whose slowdowns follow from its values (load 0.5 doubles every FCT).
    fn fake_run(scenario: &Path, dir: &Path) -> anyhow::Result<()> {
        let t: Table = std::fs::read_to_string(scenario)?.parse()?;
        let load = t["workload"]["load"].as_float().unwrap();
        let seed = t["workload"]["seed"].as_integer().unwrap();
        if seed == 2 && load > 0.4 {
            bail!("this point fails");
        }
        std::fs::write(
            dir.join("summary.json"),
            json!({"flows_started": 2, "flows_finished": 2}).to_string(),
        )?;
        let fct = if load > 0.4 { 2000 } else { 1000 };
        let lines = format!(
            "0b000001 0b000101 10000 100 1000 0 {fct} 1000\n0b000001 0b000201 10001 100 1000 0 {fct} 1000\n"
        );
        std::fs::write(dir.join("fct.txt"), lines)?;
        Ok(())
    }

    /// A directory of the test's own, removed when dropped.
    struct TempDir(PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn setup() -> (TempDir, PathBuf) {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let root = std::env::temp_dir().join(format!("roce-sweep-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("s.toml"), SCENARIO).unwrap();
        (TempDir(root.clone()), root)
    }

    #[test]
    fn shards_run_their_points_and_merge_into_one_table() {
        let (_keep, root) = setup();
        let file = root.join("s.toml");
        let (a, b) = (root.join("a"), root.join("b"));
        let ran = sweep(&file, &a, Shard { index: 0, count: 2 }, 2, &[], fake_run).unwrap();
        assert_eq!((ran.points, ran.failed.len()), (2, 0)); // points 0 and 2
        let ran = sweep(&file, &b, Shard { index: 1, count: 2 }, 1, &[], fake_run).unwrap();
        assert_eq!(ran.points, 2); // points 1 and 3; point 3 (load 0.5, seed 2) fails
        assert_eq!(ran.failed.iter().map(|f| f.0).collect::<Vec<_>>(), [3]);
        assert!(ran.failed[0].1.contains("this point fails"));
        // Shard a alone is missing points 1 and 3.
        let half = merge(std::slice::from_ref(&a), &root.join("half")).unwrap();
        assert_eq!((half.points, half.of, half.missing), (2, 4, vec![1, 3]));
        let all = merge(&[a, b], &root.join("all")).unwrap();
        assert_eq!((all.points, all.of, all.missing.len()), (4, 4, 0));
        let doc: Json =
            serde_json::from_str(&std::fs::read_to_string(root.join("all/sweep.json")).unwrap())
                .unwrap();
        let points = doc["points"].as_array().unwrap();
        let slowdowns: Vec<Json> = points.iter().map(|p| p["slowdown_p99"].clone()).collect();
        assert_eq!(slowdowns, [json!(1.0), json!(1.0), json!(2.0), Json::Null]);
        assert_eq!(points[2]["params"]["workload.load"], json!(0.5));
        assert_eq!(points[3]["ok"], json!(false));
        let text = std::fs::read_to_string(root.join("all/sweep.txt")).unwrap();
        assert!(text.contains("\tworkload.load\tworkload.seed\t"), "{text}");
        assert!(text.lines().last().unwrap().ends_with("FAILED"), "{text}");
    }

    /// An `fct.txt` of 40 flows of 100 to 4 000 bytes, each taking `times` its ideal FCT.
    fn write_fcts(dir: &Path, times: u64) -> anyhow::Result<()> {
        let lines: String = (0..40u64)
            .map(|i| {
                let size = 100 * (i + 1);
                format!(
                    "0b000001 0b000101 10000 100 {size} 0 {} 1000\n",
                    times * 1000
                )
            })
            .collect();
        std::fs::write(dir.join("fct.txt"), lines)?;
        Ok(())
    }

    /// A grid of one axis: `compare.txt` has a column group per point, each point's values
    /// those of its own `fct.txt` (here DCQCN's flows take three times their ideal FCT, HPCC's
    /// their ideal), and `compare.svg` a curve per point.
    #[test]
    fn a_grid_of_one_axis_sets_its_points_side_by_side() {
        let (_keep, root) = setup();
        let file = root.join("c.toml");
        std::fs::write(
            &file,
            "name = \"c\"\n[network]\ncongestion = \"none\"\n\n[sweep]\n\
             \"network.congestion\" = [\"dcqcn\", \"hpcc\"]\n",
        )
        .unwrap();
        let run = |scenario: &Path, dir: &Path| -> anyhow::Result<()> {
            let t: Table = std::fs::read_to_string(scenario)?.parse()?;
            let times = match t["network"]["congestion"].as_str() {
                Some("dcqcn") => 3,
                _ => 1,
            };
            write_fcts(dir, times)
        };
        let out = root.join("out");
        sweep(&file, &out, Shard::ALL, 1, &[], run).unwrap();
        let merged = merge(std::slice::from_ref(&out), &out).unwrap();
        assert!(merged.compared);
        let text = std::fs::read_to_string(out.join("compare.txt")).unwrap();
        let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(rows.len(), 20, "{text}");
        assert_eq!(
            rows[0], "0.000\t200\t3.000\t3.000\t3.000\t1.000\t1.000\t1.000",
            "{text}"
        );
        assert!(text.contains("# point 0: network.congestion = dcqcn, 40 flows"));
        assert!(text.contains("\tdcqcn:p50\tdcqcn:p95\tdcqcn:p99\thpcc:p50\t"));
        let svg = std::fs::read_to_string(out.join("compare.svg")).unwrap();
        assert!(svg.contains("roce sim sweep c: FCT slowdown by flow size, by network.congestion"));
    }

    /// A grid of several axes compares along `network.congestion` in a panel for each value of
    /// the others: here DCQCN's flows take three times their ideal FCT with PFC and five
    /// times without, HPCC's once and twice.
    #[test]
    fn a_grid_of_two_axes_compares_along_congestion_in_a_panel_per_value_of_the_other() {
        let (_keep, root) = setup();
        let file = root.join("c.toml");
        std::fs::write(
            &file,
            "name = \"c\"\n[network]\ncongestion = \"none\"\n[network.pfc]\nenabled = true\n\n\
             [sweep]\n\"network.congestion\" = [\"dcqcn\", \"hpcc\"]\n\
             \"network.pfc.enabled\" = [true, false]\n",
        )
        .unwrap();
        let run = |scenario: &Path, dir: &Path| -> anyhow::Result<()> {
            let t: Table = std::fs::read_to_string(scenario)?.parse()?;
            let pfc = t["network"]["pfc"]["enabled"].as_bool() == Some(true);
            let times = match (t["network"]["congestion"].as_str(), pfc) {
                (Some("dcqcn"), true) => 3,
                (Some("dcqcn"), false) => 5,
                (_, true) => 1,
                (_, false) => 2,
            };
            write_fcts(dir, times)
        };
        let out = root.join("out");
        sweep(&file, &out, Shard::ALL, 1, &[], run).unwrap();
        assert!(merge(std::slice::from_ref(&out), &out).unwrap().compared);
        let text = std::fs::read_to_string(out.join("compare.txt")).unwrap();
        let panels: Vec<&str> = text.split("# panel: ").skip(1).collect();
        assert_eq!(panels.len(), 2, "{text}");
        let first_row = |panel: &str| {
            panel
                .lines()
                .find(|l| !l.starts_with('#') && !l.contains("network.pfc.enabled ="))
                .unwrap()
                .to_owned()
        };
        assert!(
            panels[0].starts_with("network.pfc.enabled = true\n"),
            "{text}"
        );
        assert_eq!(
            first_row(panels[0]),
            "0.000\t200\t3.000\t3.000\t3.000\t1.000\t1.000\t1.000"
        );
        assert!(
            panels[1].starts_with("network.pfc.enabled = false\n"),
            "{text}"
        );
        assert_eq!(
            first_row(panels[1]),
            "0.000\t200\t5.000\t5.000\t5.000\t2.000\t2.000\t2.000"
        );
        assert!(panels[1].contains("\tdcqcn:p50\tdcqcn:p95\tdcqcn:p99\thpcc:p50\t"));
        let svg = std::fs::read_to_string(out.join("compare.svg")).unwrap();
        for title in [
            "p50 FCT slowdown, pfc.enabled = true",
            "p99 FCT slowdown, pfc.enabled = false",
        ] {
            assert!(svg.contains(title), "{title}");
        }
    }

    #[test]
    fn a_grid_of_more_panels_than_a_page_holds_is_not_compared() {
        let (_keep, root) = setup();
        let file = root.join("many.toml");
        let seeds: Vec<String> = (1..=compare::MAX_PANELS + 1)
            .map(|s| s.to_string())
            .collect();
        std::fs::write(
            &file,
            SCENARIO.replace("[1, 2]", &format!("[{}]", seeds.join(", "))),
        )
        .unwrap();
        let out = root.join("out");
        sweep(&file, &out, Shard::ALL, 2, &[], fake_run).unwrap();
        assert!(!merge(std::slice::from_ref(&out), &out).unwrap().compared);
        assert!(!out.join("compare.txt").exists());
    }

    #[test]
    fn an_out_dir_of_another_grid_is_refused_and_left_as_it_was() {
        let (_keep, root) = setup();
        let file = root.join("s.toml");
        let out = root.join("out");
        sweep(&file, &out, Shard::ALL, 1, &[], fake_run).unwrap();
        let before = std::fs::read_to_string(out.join("grid.json")).unwrap();
        let other = root.join("t.toml");
        std::fs::write(&other, SCENARIO.replace("[0.3, 0.5]", "[0.3, 0.7]")).unwrap();
        let ran = std::sync::atomic::AtomicUsize::new(0);
        let err = sweep(&other, &out, Shard::ALL, 1, &[], |_, _| {
            ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("holds the points of another grid"),
            "{err}"
        );
        assert_eq!(ran.into_inner(), 0, "a point ran before the refusal");
        assert_eq!(
            std::fs::read_to_string(out.join("grid.json")).unwrap(),
            before
        );
        // Nor do two grids merge.
        let other_out = root.join("other");
        sweep(&other, &other_out, Shard::ALL, 1, &[], fake_run).unwrap();
        let err = merge(&[out, other_out], &root.join("m")).unwrap_err();
        assert!(
            err.to_string().contains("only shards of one sweep merge"),
            "{err}"
        );
        assert!(!root.join("m").exists());
    }

    #[test]
    fn a_scenario_without_a_sweep_table_is_refused() {
        let (_keep, root) = setup();
        let file = root.join("plain.toml");
        std::fs::write(&file, "name = \"s\"\n").unwrap();
        let err = sweep(&file, &root.join("o"), Shard::ALL, 1, &[], fake_run).unwrap_err();
        assert!(err.to_string().contains("no [sweep] table"), "{err}");
        assert!(!root.join("o").exists());
    }

    #[test]
    fn a_failed_point_says_its_error_and_how_its_process_ended() {
        use std::os::unix::process::ExitStatusExt;
        let exit = |code: i32| std::process::ExitStatus::from_raw(code << 8);
        let stderr = "WARN something\nroce: error: s.toml: workload.load = 7: at most 1\n";
        // `roce`'s own error exit: its error line, as the point's error.
        assert_eq!(
            child_error(stderr, exit(2)),
            "s.toml: workload.load = 7: at most 1"
        );
        // A panic (exit 101) or a signal: all it said, and how it ended.
        let panic = "thread 'main' panicked at src/x.rs:1:1:\noops\n";
        assert_eq!(
            child_error(panic, exit(101)),
            "thread 'main' panicked at src/x.rs:1:1:\noops (exit status: 101)"
        );
        let killed = child_error("", std::process::ExitStatus::from_raw(9));
        assert!(
            killed.contains("signal: 9") && killed.contains("said nothing"),
            "{killed}"
        );
    }
}
