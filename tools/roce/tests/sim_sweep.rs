//! `roce sim sweep` and `roce sim merge`: a grid's points run, each as `roce sim` runs its
//! scenario; shards of one grid merge into the table of the whole; a key the scenario lacks is
//! refused before any point runs; a point that fails fails alone.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::roce;

/// A 4-point sweep (load × seed) of a tiny leaf-spine for 300 µs of WebSearch.
const SWEEP: &str = r#"name = "tiny-sweep"
[topology]
kind = "leaf-spine"
leaves = 2
spines = 2
hosts_per_leaf = 4
host_rate_gbps = 100.0
fabric_rate_gbps = 100.0
delay_us = 1.0
[workload]
cdf = "websearch"
load = 0.3
duration_us = 300
seed = 1
[network]
congestion = "none"
[run]
drain_us = 5000
[sweep]
"workload.load" = [0.3, 0.6]
"workload.seed" = [1, 2]
"#;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("roce-sweep-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(args: &[&str]) -> Output {
    let o = roce(args);
    assert!(
        o.status.success(),
        "roce {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn rows(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("sweep.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// `roce sim sweep` of [`SWEEP`] with `edit.0` replaced by `edit.1`, into `DIR/out`, with
/// `args` after: the directory, the out directory and what the run did.
fn sweep_of(tag: &str, edit: (&str, &str), args: &[&str]) -> (PathBuf, PathBuf, Output) {
    let dir = temp_dir(tag);
    let file = dir.join("sweep.toml");
    std::fs::write(&file, SWEEP.replace(edit.0, edit.1)).unwrap();
    let out = dir.join("out");
    let mut all = vec![
        "sim",
        "sweep",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = roce(&all);
    (dir, out, o)
}

/// `roce sim sweep` of the scenario `text` (written into a directory of its own, `tag`'s)
/// into `DIR/out`, two points at once, which must succeed: the directory, the out directory
/// and what the run said.
fn sweep_text(tag: &str, text: &str) -> (PathBuf, PathBuf, Output) {
    let dir = temp_dir(tag);
    let file = dir.join("sweep.toml");
    std::fs::write(&file, text).unwrap();
    let out = dir.join("out");
    let o = run(&[
        "sim",
        "sweep",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    (dir, out, o)
}

#[test]
fn shards_of_a_sweep_merge_into_the_whole_grid() {
    let dir = temp_dir("shards");
    let file = dir.join("sweep.toml");
    std::fs::write(&file, SWEEP).unwrap();
    let f = file.to_str().unwrap();
    let whole = dir.join("whole");
    run(&[
        "sim",
        "sweep",
        f,
        "--out",
        whole.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    let all = rows(&whole);
    assert_eq!(all.len(), 4, "{all:?}");
    // Every point ran its own scenario and wrote what `roce sim` writes.
    for i in 0..4 {
        let point = whole.join(format!("points/{i:05}"));
        for name in ["scenario.toml", "summary.json", "fct.txt", "point.json"] {
            assert!(
                point.join(name).is_file(),
                "{} has no {name}",
                point.display()
            );
        }
    }
    let load_of_point_2 =
        std::fs::read_to_string(whole.join("points/00002/scenario.toml")).unwrap();
    assert!(load_of_point_2.contains("load = 0.6"), "{load_of_point_2}");
    // Two shards, merged, give the same table.
    let (a, b) = (dir.join("a"), dir.join("b"));
    run(&[
        "sim",
        "sweep",
        f,
        "--shard",
        "0/2",
        "--out",
        a.to_str().unwrap(),
    ]);
    run(&[
        "sim",
        "sweep",
        f,
        "--shard",
        "1/2",
        "--out",
        b.to_str().unwrap(),
    ]);
    assert_eq!(rows(&a).len(), 2);
    let merged = dir.join("merged");
    let o = run(&[
        "sim",
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("4 of 4 points"));
    // The same rows, but for the wall-clock figures nothing in the table holds.
    assert_eq!(rows(&merged), all);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_key_the_scenario_lacks_is_refused_before_any_point_runs() {
    let (dir, out, o) = sweep_of("typo", ("\"workload.seed\"", "\"workload.sed\""), &[]);
    let file = dir.join("sweep.toml");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("[sweep] workload.sed: the scenario has no such key"),
        "{err}"
    );
    assert!(!out.exists(), "the refused sweep wrote {}", out.display());
    let bad_shard = roce(&["sim", "sweep", file.to_str().unwrap(), "--shard", "2/2"]);
    assert!(!bad_shard.status.success());
    assert!(String::from_utf8_lossy(&bad_shard.stderr).contains("expected i/N"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_point_that_fails_fails_alone() {
    let load = (
        "\"workload.load\" = [0.3, 0.6]",
        "\"workload.load\" = [0.3, 7.0]",
    );
    let (dir, out, o) = sweep_of("fails", load, &["--jobs", "2"]);
    assert_eq!(o.status.code(), Some(1), "a failed point fails the sweep");
    let err = String::from_utf8_lossy(&o.stderr);
    // Points 2 and 3 have the load of 7: each is refused, in its own words, and wrote nothing
    // but its scenario and its record.
    for i in [2, 3] {
        let point = out.join(format!("points/{i:05}"));
        let record = std::fs::read_to_string(point.join("point.json")).unwrap();
        let record: serde_json::Value = serde_json::from_str(&record).unwrap();
        assert_eq!(record["ok"], false, "{record}");
        let error = record["error"].as_str().unwrap();
        assert!(
            error.contains("workload.load = 7: more than 0, at most 1")
                && !error.contains("roce: error"),
            "{error}"
        );
        assert!(err.contains(&format!("point {i}: {error}")), "{err}");
        assert!(!point.join("summary.json").exists());
        assert!(!point.join("fct.txt").exists());
    }
    // The others ran to the end, and the table has a row for each point.
    for i in [0, 1] {
        let point = out.join(format!("points/{i:05}"));
        assert!(
            point.join("fct.txt").is_file(),
            "{} has no fct.txt",
            point.display()
        );
    }
    // Each point was said as it ended.
    assert!(
        err.contains("point 2 failed in") && err.contains("point 0 ran in"),
        "{err}"
    );
    assert_eq!(err.matches(" of 4)").count(), 4, "{err}");
    let rows = rows(&out);
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(
        rows.iter().filter(|r| r.ends_with("FAILED")).count(),
        2,
        "{rows:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep over `network.congestion` of a scenario that carries the tables of two
/// algorithms: a point per algorithm, each run with its own (its scenario.toml and summary say
/// which), and `compare.txt`, whose columns are each point's own `slowdown.txt`.
#[test]
fn a_sweep_over_algorithms_runs_each_and_compares_them() {
    let text = SWEEP
        .replace(
            "congestion = \"none\"\n",
            "congestion = \"dcqcn\"\nmark_at = \"dequeue\"\n\
             [network.dcqcn]\nrpg_ai_rate = 20\n[network.hpcc]\neta = 990\n\
             [network.ecn]\nkmin_bytes = 20000\nkmax_bytes = 80000\npmax = 0.2\n",
        )
        .replace(
            "\"workload.load\" = [0.3, 0.6]\n\"workload.seed\" = [1, 2]\n",
            "\"network.congestion\" = [\"dcqcn\", \"hpcc\"]\n",
        )
        // Enough flows for every bin: FB_Hadoop's, most of them small.
        .replace(
            "cdf = \"websearch\"\nload = 0.3",
            "cdf = \"fb_hadoop\"\nload = 0.6",
        );
    assert!(
        text.contains("[network.hpcc]")
            && text.contains("\"network.congestion\"")
            && text.contains("fb_hadoop")
    );
    let (dir, out, o) = sweep_text("algorithms", &text);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("compare.txt") && said.contains("compare.svg"),
        "{said}"
    );
    assert_eq!(rows(&out).len(), 2, "{:?}", rows(&out));
    let compare = std::fs::read_to_string(out.join("compare.txt")).unwrap();
    let header = compare.lines().find(|l| l.starts_with("# bin")).unwrap();
    assert_eq!(
        header,
        "# bin\tmax_size\tdcqcn:p50\tdcqcn:p95\tdcqcn:p99\thpcc:p50\thpcc:p95\thpcc:p99"
    );
    let table: Vec<Vec<&str>> = compare
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').collect())
        .collect();
    let mut fcts = Vec::new();
    for (i, cc) in ["dcqcn", "hpcc"].into_iter().enumerate() {
        let point = out.join(format!("points/{i:05}"));
        let scenario = std::fs::read_to_string(point.join("scenario.toml")).unwrap();
        assert!(
            scenario.contains(&format!("congestion = \"{cc}\"")),
            "{scenario}"
        );
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(point.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["congestion"], cc, "{summary}");
        // The point's own table, `0.000 300\t1.000 1.500 2.000` a bin, is its columns.
        let own: Vec<Vec<String>> = std::fs::read_to_string(point.join("slowdown.txt"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect();
        assert_eq!(own.len(), table.len(), "{compare}");
        assert_eq!(own.len(), 20, "{own:?}");
        for (bin, row) in own.iter().zip(&table) {
            assert_eq!(&row[..2], &bin[..2], "{compare}");
            assert_eq!(&row[2 + 3 * i..5 + 3 * i], &bin[2..5], "{cc}: {compare}");
        }
        fcts.push(std::fs::read_to_string(point.join("fct.txt")).unwrap());
    }
    assert_ne!(fcts[0], fcts[1], "the two algorithms ran the same");
    let svg = std::fs::read_to_string(out.join("compare.svg")).unwrap();
    for cc in ["dcqcn", "hpcc"] {
        let entries = svg.lines().filter(|l| l.trim() == cc).count();
        assert_eq!(entries, 3, "{cc}'s legend entries, one per chart");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `roce sim sweep` takes a shipped scenario by name, as `roce sim` does (one shard of one
/// point, to be quick), and refuses a name that is neither a file nor a shipped scenario.
#[test]
fn a_shipped_sweep_runs_by_name() {
    let dir = temp_dir("by-name");
    let out = dir.join("out");
    let args = [
        "sim",
        "sweep",
        "sweep-leafspine-load",
        "--shard",
        "0/12",
        "--out",
        out.to_str().unwrap(),
    ];
    run(&args);
    let grid: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("grid.json")).unwrap()).unwrap();
    assert!(
        grid["scenario"]
            .as_str()
            .unwrap()
            .ends_with("scenarios/sweep-leafspine-load.toml"),
        "{grid}"
    );
    assert_eq!(grid["points"], 12);
    assert_eq!(rows(&out).len(), 1, "{:?}", rows(&out));
    let o = roce(&[
        "sim",
        "sweep",
        "no-such-sweep",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no file no-such-sweep and no shipped scenario called no-such-sweep"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `roce sim sweep --set`: every point's scenario has the set value; a set of a key the grid
/// varies, or of a key the scenario cannot have, is refused before anything is written.
#[test]
fn sweep_set_applies_to_every_point_or_is_refused_first() {
    let (dir, out, o) = sweep_of(
        "set",
        ("", ""),
        &["--set", "run.drain_us=4000", "--shard", "0/4"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let point = std::fs::read_to_string(out.join("points/00000/scenario.toml")).unwrap();
    assert!(point.contains("drain_us = 4000"), "{point}");
    let _ = std::fs::remove_dir_all(&dir);
    for (set, needle) in [
        ("workload.seed=5", "[sweep] varies workload.seed"),
        (
            "workload.laod=0.5",
            "with --set workload.laod=0.5: unknown field `laod`, expected one of",
        ),
    ] {
        let (dir, out, o) = sweep_of("set-bad", ("", ""), &["--set", set]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{needle:?} not in {err}");
        assert!(!out.exists(), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A sweep of a scenario that names its topology and flow files relative to itself runs every
/// point, though each point's scenario.toml is written in a directory of its own.
#[test]
fn a_sweep_finds_the_files_its_scenario_names_relatively() {
    let dir = temp_dir("relative");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    for file in ["ring5-flows.txt", "ring5-topology.txt"] {
        std::fs::copy(shipped.join(file), dir.join(file)).unwrap();
    }
    let text = std::fs::read_to_string(shipped.join("ring5-deadlock.toml")).unwrap();
    assert!(text.contains("flows = \"ring5-flows.txt\""));
    let file = dir.join("ring5-sweep.toml");
    std::fs::write(
        &file,
        format!("{text}\n[sweep]\n\"network.pfc.xoff_bytes\" = [65536, 131072]\n"),
    )
    .unwrap();
    let out = dir.join("out");
    let o = roce(&[
        "sim",
        "sweep",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("2 points run (0 failed)"), "{err}");
    assert_eq!(rows(&out).len(), 2, "{:?}", rows(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C in a sweep: the point running ends, no other starts, the table holds what ran, and
/// the sweep says so and exits 130.
#[test]
fn ctrl_c_stops_a_sweep_between_its_points() {
    let dir = temp_dir("interrupt");
    let out = dir.join("out");
    let (o, said) = common::interrupted_when(
        &[
            "sim",
            "sweep",
            "sweep-leafspine-load",
            "--jobs",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        |line| line.starts_with("roce sim sweep: point "),
    );
    assert_eq!(o.status.code(), Some(130), "{said}");
    assert!(said.contains("roce sim sweep: interrupted;"), "{said}");
    assert!(
        said.contains("not run: the sweep was interrupted"),
        "{said}"
    );
    assert_eq!(rows(&out).len(), 12, "every point has its row");
    let ran = std::fs::read_dir(out.join("points"))
        .unwrap()
        .filter(|d| {
            let text = std::fs::read_to_string(d.as_ref().unwrap().path().join("point.json"));
            text.is_ok_and(|t| t.contains("\"ok\": true"))
        })
        .count();
    assert!((1..12).contains(&ran), "{ran} of 12 points ran: {said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// PFC as an axis (`[network.pfc] enabled`): a tiny leaf-spine loaded past its thresholds, each
/// algorithm with PFC on and off. With it the switches pause, drop nothing and every flow
/// finishes; without it they never pause and drop. The comparison has a panel for each: the
/// algorithms side by side, PFC on, then off.
#[test]
fn pfc_on_and_off_as_an_axis_pause_or_drop_and_compare_in_a_panel_each() {
    let text = SWEEP
        .replace(
            "cdf = \"websearch\"\nload = 0.3\nduration_us = 300",
            "cdf = \"fb_hadoop\"\nload = 0.9\nduration_us = 500",
        )
        .replace(
            "congestion = \"none\"\n",
            "congestion = \"none\"\nbuffer_bytes = 200000\n[network.dcqcn]\nrpg_ai_rate = 20\n\
             [network.ecn]\nkmin_bytes = 10000\nkmax_bytes = 40000\npmax = 0.2\n\
             [network.pfc]\nenabled = true\nxoff_bytes = 20000\nxon_bytes = 10000\n",
        )
        .replace(
            "\"workload.load\" = [0.3, 0.6]\n\"workload.seed\" = [1, 2]\n",
            "\"network.congestion\" = [\"none\", \"dcqcn\"]\n\"network.pfc.enabled\" = [true, false]\n",
        );
    assert!(text.contains("\"network.pfc.enabled\"") && text.contains("fb_hadoop"));
    let (dir, out, _) = sweep_text("pfc-axis", &text);
    // Points in the grid's order: (none, on), (none, off), (dcqcn, on), (dcqcn, off).
    let summary = |i: usize| -> serde_json::Value {
        let path = out.join(format!("points/{i:05}/summary.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    for (on, off) in [(0, 1), (2, 3)] {
        let (on, off) = (summary(on), summary(off));
        let count = |s: &serde_json::Value, key: &str| s[key].as_u64().unwrap();
        assert!(count(&on, "pfc_pauses") > 0, "PFC on pauses: {on}");
        assert_eq!(count(&off, "pfc_pauses"), 0, "PFC off never pauses: {off}");
        assert!(
            count(&off, "drops") > 0,
            "without PFC the buffers overflow: {off}"
        );
        assert_eq!(count(&on, "drops"), 0, "PFC holds every packet: {on}");
        assert_eq!(
            count(&on, "flows_finished"),
            count(&on, "flows_started"),
            "with PFC every flow finishes: {on}"
        );
    }
    let compare = std::fs::read_to_string(out.join("compare.txt")).unwrap();
    let panels: Vec<&str> = compare
        .lines()
        .filter_map(|l| l.strip_prefix("# panel: "))
        .collect();
    assert_eq!(
        panels,
        ["network.pfc.enabled = true", "network.pfc.enabled = false"]
    );
    let headers = compare.lines().filter(|l| l.starts_with("# bin")).count();
    assert_eq!(headers, 2, "a table per panel: {compare}");
    let _ = std::fs::remove_dir_all(&dir);
}
