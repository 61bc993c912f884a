//! `roce sim` on network scenarios: the shipped leaf-spine scenario runs and writes fct.txt, the
//! slowdown table, plot and summary with sane contents; `--topology`/`--flows` run exactly the
//! flows of HPCC files; bad input (unknown or missing key, a CDF that is not monotone, a
//! topology that is not connected, a flow to a switch, a run too large for memory) is refused
//! with a message naming file, line or key, and nothing is written; the shipped HPCC-scale
//! scenarios validate.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::roce;
use roce_sim::NodeId;
use roce_sim::fct::parse_fct_file;

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn temp_dir(tag: &str) -> common::ScratchDir {
    common::ScratchDir::new(&format!("roce-simnet-{tag}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn the_small_leaf_spine_scenario_writes_every_output() {
    let dir = temp_dir("ls");
    let out = dir.join("out");
    let file = scenarios().join("leafspine-websearch.toml");
    let o = roce(&[
        "sim",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
        "--progress-every",
        "0.001",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Progress lines: simulated time reached, never past the target, never going back.
    let err = stderr(&o);
    common::progress_reached(
        &err,
        "roce sim leafspine-websearch: ",
        "setting up",
        0.021,
        |l| {
            assert!(
                l.contains(" of at most 0.021000000 s simulated (") || l.contains("run ended"),
                "{l}"
            );
            assert!(l.contains(" M packet-hops/s, "), "{l}");
        },
    );
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Every flow finishes well before the configured end: the last line says where the run
    // really ended, as 100 %.
    let last = err.lines().rfind(|l| l.starts_with("roce sim ")).unwrap();
    let ended = format!(
        "{:.6} of {:.9} s simulated (100 %)",
        summary["simulated_s"].as_f64().unwrap(),
        summary["simulated_s"].as_f64().unwrap()
    );
    assert!(last.contains(&ended), "{ended:?} not in {last}");
    assert!(
        last.ends_with(
            "the run ended: every flow finished, before the configured end of 0.021000000 s"
        ),
        "{last}"
    );
    // Queue lengths: every switch port sampled every 10 us, in qlen.txt and the summary.
    let q = &summary["queue_kb"];
    assert_eq!(q["every_ns"], 10_000, "{summary}");
    let samples = q["samples"].as_u64().unwrap();
    let qlen = read(&out.join("qlen.txt"));
    let rows: Vec<&str> = qlen.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(rows[0].starts_with("time: "), "{qlen}");
    // 4 leaves of 8 hosts and 2 spines: 4 x 10 + 2 x 4 switch ports.
    assert_eq!(rows.len() - 1, 48, "{qlen}");
    assert_eq!(q["ports"], 48);
    for row in &rows[1..] {
        let counts: Vec<u64> = row.split(' ').skip(2).map(|n| n.parse().unwrap()).collect();
        assert_eq!(counts.iter().sum::<u64>(), samples, "{row}");
    }
    assert!(q["max"].as_u64().unwrap() >= q["p50"].as_u64().unwrap());
    let on_disk: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(summary["flows_finished"], on_disk["flows_finished"]);
    let started = summary["flows_started"].as_u64().unwrap();
    assert!(started >= 20, "{summary}");
    assert_eq!(summary["flows_finished"].as_u64().unwrap(), started);
    assert_eq!(summary["flows_unfinished"], 0);
    assert_eq!(summary["flows_failed"], 0);
    assert!(summary["packet_hops"].as_u64().unwrap() > 1000, "{summary}");
    assert!(summary["packet_hops_per_s"].as_f64().unwrap() > 0.0);
    assert!(summary["goodput_gbps"].as_f64().unwrap() > 1.0, "{summary}");

    let records = parse_fct_file("fct.txt", &read(&out.join("fct.txt"))).unwrap();
    assert_eq!(records.len() as u64, started);
    assert!(records.iter().all(|r| r.slowdown() >= 1.0));
    assert!(
        records.iter().any(|r| r.slowdown() > 1.05),
        "no flow was slowed at 50 % load"
    );
    assert!(records.iter().all(|r| r.src.0 < 32 && r.dst.0 < 32));

    let table = read(&out.join("slowdown.txt"));
    assert!(table.starts_with("# FCT slowdown"), "{table}");
    let rows: Vec<&str> = table.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 20, "{table}");
    for row in &rows {
        let fields: Vec<f64> = row.split_whitespace().map(|f| f.parse().unwrap()).collect();
        assert_eq!(fields.len(), 5, "{row}");
        assert!(fields[2] >= 1.0 && fields[2] <= fields[3] && fields[3] <= fields[4]);
    }
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("slowdown.json"))).unwrap();
    assert_eq!(json["step_percent"], 5);
    assert_eq!(json["flows"].as_u64().unwrap(), started);
    let flows =
        roce_sim::workload::parse_flow_file("flow.txt", &read(&out.join("flow.txt"))).unwrap();
    assert_eq!(flows.len() as u64, started);
    let svg = read(&out.join("slowdown.svg"));
    assert!(svg.starts_with("<svg") && svg.contains("p99"), "{svg:.200}");
}

/// Three hosts on one switch in HPCC's topology format.
const STAR: &str = "4 1 3\n3\n0 3 100Gbps 1us 0\n1 3 100Gbps 1us 0\n2 3 100Gbps 1us 0\n";

/// `roce sim` of a scenario that runs `congestion` on the star of [`STAR`] with the flows of
/// `flows` (HPCC's flow-file format), in `dir`, with `sets` (`--set`s); its output and where it
/// wrote its files.
fn sim_on_the_star(dir: &Path, congestion: &str, flows: &str, sets: &[&str]) -> (Output, PathBuf) {
    let scenario = dir.join("s.toml");
    let text = format!("[network]\ncongestion = \"{congestion}\"\n[run]\ndrain_us = 5000\n");
    std::fs::write(&scenario, text).unwrap();
    let topo = dir.join("topo.txt");
    std::fs::write(&topo, STAR).unwrap();
    let flow_file = dir.join("flow.txt");
    std::fs::write(&flow_file, flows).unwrap();
    let out = dir.join(format!("out-{congestion}-{}", sets.len()));
    let mut args = vec![
        "sim",
        scenario.to_str().unwrap(),
        "--topology",
        topo.to_str().unwrap(),
        "--flows",
        flow_file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    (roce(&args), out)
}

/// The flows of a run's `fct.txt` in `out`: source, destination and size, sorted.
fn flows_finished(out: &Path) -> Vec<(NodeId, NodeId, u64)> {
    let mut got: Vec<(NodeId, NodeId, u64)> =
        parse_fct_file("fct.txt", &read(&out.join("fct.txt")))
            .unwrap()
            .iter()
            .map(|r| (r.src, r.dst, r.size))
            .collect();
    got.sort();
    got
}

#[test]
fn hpcc_topology_and_flow_files_run_exactly_their_flows() {
    let dir = temp_dir("files");
    let text = "3\n0 1 3 100 20000 0.000001\n2 1 3 100 50000 0.000002\n1 0 3 100 3000 0.000010\n";
    let (o, out) = sim_on_the_star(&dir, "none", text, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = flows_finished(&out);
    let want = vec![
        (NodeId(0), NodeId(1), 20000),
        (NodeId(1), NodeId(0), 3000),
        (NodeId(2), NodeId(1), 50000),
    ];
    assert_eq!(got, want);
}

/// `network.verb = "read"`: the flow file's flows run as READs by their receivers, every one
/// finishes with its size, and the summary says so (`verb`, and the first line). Under HPCC,
/// which hears nothing of a READ's data, the run says that too; under DCQCN it does not.
#[test]
fn read_flows_run_and_the_summary_says_so() {
    let dir = temp_dir("read");
    let text = "2\n0 1 3 100 20000 0.000001\n2 1 3 100 50000 0.000002\n";
    let (o, out) = sim_on_the_star(&dir, "dcqcn", text, &["network.verb=read"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(summary["verb"], "read");
    assert_eq!(summary["flows_finished"], 2);
    assert!(String::from_utf8_lossy(&o.stdout).contains("congestion dcqcn, READ flows;"));
    assert!(!stderr(&o).contains("hears nothing"), "{}", stderr(&o));
    let got = flows_finished(&out);
    assert_eq!(
        got,
        [(NodeId(0), NodeId(1), 20000), (NodeId(2), NodeId(1), 50000)]
    );
    let (o, out) = sim_on_the_star(&dir, "none", text, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(summary["verb"], "write");
    // Under HPCC the run is made, and the user is told what HPCC makes of READs.
    let (o, _) = sim_on_the_star(&dir, "hpcc", text, &["network.verb=read"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("READ flows under HPCC: HPCC hears nothing of a READ's data"),
        "{}",
        stderr(&o)
    );
}

/// HPCC's T left at its 13 µs default on a star whose hosts are 4.16 µs apart (two 1 µs links,
/// a 1 024-byte packet's 81 ns on each): `roce sim` says before the run that ns-3 would take
/// the topology's, with the `--set` that does; set so, or with no algorithm, it says nothing.
#[test]
fn hpcc_with_a_t_far_from_the_topologys_rtt_is_told_what_ns3_would_take() {
    let dir = temp_dir("rtt");
    let run = |congestion: &str, sets: &[&str]| {
        let (o, _) = sim_on_the_star(&dir, congestion, "1\n0 1 3 100 20000 0.000001\n", sets);
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let told = run("hpcc", &[]);
    assert!(
        told.contains("HPCC's T (network.hpcc.base_rtt_ns) is 13.0 µs")
            && told.contains("between two hosts of this topology is 4.2 µs")
            && told.contains("`--set network.hpcc.base_rtt_ns=4162`"),
        "{told}"
    );
    let set = run("hpcc", &["network.hpcc.base_rtt_ns=4162"]);
    assert!(!set.contains("base_rtt_ns"), "{set}");
    let none = run("none", &[]);
    assert!(!none.contains("base_rtt_ns"), "{none}");
}

/// Runs `roce sim` with `extra` arguments and an out dir that exists and is empty, and checks
/// it fails with exit status 2, says every one of `needles`, and left the directory empty.
fn refused(tag: &str, scenario: &str, extra: &[(&str, &str)], needles: &[&str]) {
    let dir = temp_dir(tag);
    let file = dir.join("bad.toml");
    std::fs::write(&file, scenario).unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut args = vec![
        "sim".to_owned(),
        file.to_str().unwrap().to_owned(),
        "--out".to_owned(),
        out.to_str().unwrap().to_owned(),
    ];
    // `extra` paths are absolute (joining keeps them as they are).
    for (flag, name) in extra {
        let path = dir.join(name);
        args.push((*flag).to_owned());
        args.push(path.to_str().unwrap().to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = roce(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "{err}");
}

const SMALL: &str = "[topology]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 1\nhosts_per_leaf = 2\n\
    [workload]\ncdf = \"websearch\"\nload = 0.3\nduration_us = 100\n";

#[test]
fn an_unknown_key_is_refused_with_its_line() {
    let text = SMALL.replace("load = 0.3", "load = 0.3\nlaod = 0.5");
    refused(
        "unknown",
        &text,
        &[],
        &["bad.toml", "line 9", "unknown field `laod`"],
    );
}

#[test]
fn a_missing_key_is_refused() {
    let text = SMALL.replace("load = 0.3\n", "");
    refused("missing", &text, &[], &["bad.toml", "missing field `load`"]);
    let text = SMALL.replace("spines = 1\n", "");
    refused(
        "missing-spines",
        &text,
        &[],
        &["bad.toml", "missing key `spines`"],
    );
}

#[test]
fn a_cdf_that_is_not_monotone_is_refused_with_its_file_and_line() {
    let dir = temp_dir("cdf-file");
    let cdf = dir.join("bad.cdf");
    std::fs::write(&cdf, "0 0\n1000 50\n500 60\n2000 100\n").unwrap();
    let text = SMALL.replace("\"websearch\"", &format!("{:?}", cdf.to_str().unwrap()));
    refused("cdf", &text, &[], &["bad.cdf:3"]);
}

#[test]
fn a_topology_that_is_not_connected_is_refused() {
    let dir = temp_dir("cut-files");
    // Host 2 has no link.
    let topo = dir.join("cut.txt");
    std::fs::write(&topo, "4 1 2\n3\n0 3 100Gbps 1us 0\n1 3 100Gbps 1us 0\n").unwrap();
    let text = format!(
        "[topology]\nfile = {:?}\n[workload]\ncdf = \"websearch\"\nload = 0.3\nduration_us = 100\n",
        topo.to_str().unwrap()
    );
    refused("cut", &text, &[], &["cut.txt", "host 2 cannot reach"]);
}

#[test]
fn a_flow_to_a_switch_is_refused_with_its_file_and_line() {
    let dir = temp_dir("flow-files");
    let topo = dir.join("star.txt");
    std::fs::write(&topo, STAR).unwrap();
    let flows = dir.join("flows.txt");
    std::fs::write(
        &flows,
        "2\n0 1 3 100 1000 0.000001\n0 3 3 100 1000 0.000002\n",
    )
    .unwrap();
    let text = "[network]\ncongestion = \"none\"\n";
    let d = dir.to_str().unwrap();
    let extra = [
        ("--topology", &*format!("{d}/star.txt")),
        ("--flows", &*format!("{d}/flows.txt")),
    ];
    refused(
        "flow",
        text,
        &extra,
        &["flows.txt:3", "dst 3 is a switch", "hosts 0-2"],
    );
}

/// A fat-tree of 1024 hosts with buffers so large that the hosts' windows bound the packets.
const LARGE: &str = "[topology]\nkind = \"fat-tree\"\nk = 16\n\
    [workload]\ncdf = \"fb_hadoop\"\nload = 0.3\nduration_us = 2\n\
    [network]\nbuffer_bytes = 1000000000\n";

#[test]
fn a_scenario_too_large_for_memory_is_refused_unless_allowed() {
    refused(
        "large",
        LARGE,
        &[],
        &[
            "too large for memory",
            "GiB",
            "packets in flight",
            "--allow-large",
        ],
    );
    let dir = temp_dir("large-ok");
    let file = dir.join("large.toml");
    std::fs::write(&file, LARGE).unwrap();
    let o = roce(&["sim", file.to_str().unwrap(), "--allow-large", "--check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("valid"));
}

#[test]
fn static_thresholds_on_a_shared_buffer_are_refused() {
    let text = format!(
        "{SMALL}[network]\nshared_buffer = true\n[network.pfc]\nxoff_bytes = 65536\n\
         xon_bytes = 32768\n"
    );
    refused(
        "shared-xoff",
        &text,
        &[],
        &["network.pfc", "dynamic", "alpha_shift"],
    );
    let text =
        format!("{SMALL}[network.pfc]\nxoff_bytes = 65536\nxon_bytes = 32768\nalpha_shift = 2\n");
    refused(
        "alpha-per-port",
        &text,
        &[],
        &["network.pfc.alpha_shift", "only with a shared buffer"],
    );
    let text = format!("{SMALL}[network.pfc]\nxon_bytes = 32768\n");
    refused("no-xoff", &text, &[], &["network.pfc: needs xoff_bytes"]);
}

#[test]
fn the_shipped_hpcc_scale_scenarios_validate() {
    for (name, incast) in [("fattree-fb30", false), ("fattree-fb30-incast", true)] {
        let o = roce(&["sim", name, "--check"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(text.contains("320 hosts, 56 switches"), "{text}");
        // HPCC's buffer: 32 MB per switch, shared, with dynamic PFC thresholds.
        assert!(
            text.contains("buffer 33554432 B per switch, shared, dynamic PFC thresholds (1/8"),
            "{text}"
        );
        // About a million FB_Hadoop flows in 0.1 s (sim-facts §3.2), more with incast: by the
        // workload's rates, since --check makes none of them.
        let flows = expected_flows(&text);
        assert!((900_000..1_100_000).contains(&flows), "{text}");
        assert_eq!(incast, flows > 1_005_000, "{text}");
    }
}

/// The flow count `--check` gives by the workload's rates ("about N flows by the workload's
/// rates, not made").
fn expected_flows(text: &str) -> u64 {
    text.split("about ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .filter(|_| text.contains(" flows by the workload's rates, not made"))
        .unwrap_or_else(|| panic!("no expected flow count in {text}"))
}

/// `sh -c 'ulimit -v KIB; exec roce ARGS…'`: `roce` under an address-space limit, so that what
/// it could allocate is bounded whatever it tries.
fn roce_capped(kib: u64, args: &[&str]) -> Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .output()
        .unwrap()
}

/// The HPCC fat-tree of fattree-fb30.toml with its workload 500 times longer (50 s): about
/// 500 million flows, far beyond memory.
fn huge_scenario(dir: &Path) -> PathBuf {
    let text = read(&scenarios().join("fattree-fb30.toml"));
    let huge = text.replacen("duration_us = 100000\n", "duration_us = 50000000\n", 1);
    assert_ne!(huge, text);
    let file = dir.join("huge.toml");
    std::fs::write(&file, huge).unwrap();
    file
}

/// A workload too long for memory is refused by its estimate before any flow is made: under a
/// 4 GiB address-space limit (which the flows alone, 16 GB of them, would break) it ends with
/// the estimate, the limit and how to pass it, no panic, and nothing written.
#[test]
fn a_workload_too_long_for_memory_is_refused_before_its_flows_are_made() {
    let dir = temp_dir("huge");
    let file = huge_scenario(&dir);
    let out = dir.join("out");
    let o = roce_capped(
        4 << 20,
        &[
            "sim",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for needle in [
        "huge.toml: too large for memory by the estimate: ",
        "flows x 256 B",
        "above the limit of 4 GiB",
        "--allow-large",
    ] {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "{err}");
    // `--check` refuses it by the same estimate.
    let o = roce_capped(4 << 20, &["sim", file.to_str().unwrap(), "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("too large for memory"),
        "{}",
        stderr(&o)
    );
}

/// `--check` only validates and estimates: of the 500-million-flow scenario, allowed to be
/// large, it says how many flows there would be (by the workload's rates) and the estimate,
/// within a 1 GiB address space that the flows could not fit in.
#[test]
fn check_of_a_huge_scenario_makes_no_flows() {
    let dir = temp_dir("huge-check");
    let file = huge_scenario(&dir);
    let o = roce_capped(
        1 << 20,
        &["sim", file.to_str().unwrap(), "--check", "--allow-large"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let flows = expected_flows(&text);
    // 500 times fattree-fb30's million, made they would be 16 GB as specs alone.
    assert!((450_000_000..550_000_000).contains(&flows), "{text}");
    let estimate: f64 = text
        .split("memory estimate ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(estimate > 100.0, "{text}");
}

/// The small leaf-spine scenario written into `dir` twice, with `network.payload` "bytes" and
/// "lengths": each mode and its file.
fn payload_variants(dir: &Path) -> [(&'static str, PathBuf); 2] {
    let base = read(&scenarios().join("leafspine-websearch.toml"));
    ["bytes", "lengths"].map(|mode| {
        let file = dir.join(format!("{mode}.toml"));
        let text = base.replacen(
            "[network]\n",
            &format!("[network]\npayload = \"{mode}\"\n"),
            1,
        );
        assert!(text.contains(&format!("payload = \"{mode}\"")));
        std::fs::write(&file, text).unwrap();
        (mode, file)
    })
}

/// `network.payload = "lengths"` (headers only, for speed) gives the very records of the full
/// bytes: the same flows, the same FCTs to the nanosecond.
#[test]
fn lengths_mode_gives_the_fct_records_of_bytes_mode() {
    let dir = temp_dir("payload");
    let mut fcts = Vec::new();
    for (mode, file) in payload_variants(&dir) {
        let out = dir.join(mode);
        let o = roce(&[
            "sim",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        fcts.push(read(&out.join("fct.txt")));
    }
    assert!(fcts[0].lines().count() >= 20, "{}", fcts[0]);
    assert_eq!(fcts[0], fcts[1], "the two modes' fct.txt differ");
}

/// With `network.payload = "lengths"` the memory estimate counts no payload bytes: packets in
/// flight keep their first 64 bytes, and the hosts' regions store nothing (the reference run's
/// estimate was 2.4 GB where it peaked at 0.6 GB). The same scenario with full bytes is
/// estimated above it by at least its 32 hosts' two 1 MiB regions.
#[test]
fn the_memory_estimate_of_lengths_mode_counts_no_payload_bytes() {
    let dir = temp_dir("estimate");
    let mut gib = Vec::new();
    for (mode, file) in payload_variants(&dir) {
        let o = roce(&["sim", file.to_str().unwrap(), "--check"]);
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let estimate: f64 = text
            .split("memory estimate ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{mode}: no estimate in {text}"));
        gib.push(estimate);
    }
    let regions = 32.0 * 2.0 / 1024.0;
    assert!(gib[1] > 0.0, "{gib:?}");
    assert!(gib[0] - gib[1] >= regions, "{gib:?}");
}

/// Without `run.until_us` the run lasts as long as its workload, which is held to the minute
/// that `until_us` is held to.
#[test]
fn a_workload_longer_than_a_minute_needs_until() {
    let text = SMALL.replace("duration_us = 100", "duration_us = 61000000");
    refused(
        "minute",
        &text,
        &[],
        &[
            "workload.duration_us = 61000000",
            "past 60000000 us",
            "run.until_us",
        ],
    );
}

/// A flow file's declared count is held to the memory limit before the file is parsed.
#[test]
fn a_flow_file_declaring_too_many_flows_is_refused_before_it_is_read() {
    let dir = temp_dir("declared-files");
    std::fs::write(dir.join("star.txt"), STAR).unwrap();
    std::fs::write(
        dir.join("flows.txt"),
        "# many\n100000000\n0 1 3 100 1000 0.000001\n",
    )
    .unwrap();
    let d = dir.to_str().unwrap();
    let extra = [
        ("--topology", &*format!("{d}/star.txt")),
        ("--flows", &*format!("{d}/flows.txt")),
    ];
    refused(
        "declared",
        "[network]\ncongestion = \"none\"\n",
        &extra,
        &["too large for memory", "100000000 flows x 256 B"],
    );
}

/// `--pcap` of a network run: what the hosts' NICs sent, stamped with simulated time (within
/// the run's simulated time, in order), every frame decoded by `roce dump --strict`; `--set`
/// shortens the workload to 100 µs.
#[test]
fn pcap_of_a_network_run_decodes_strictly() {
    let dir = temp_dir("pcap");
    let pcap = dir.join("net.pcap");
    let out = dir.join("out");
    let o = roce(&[
        "sim",
        "leafspine-websearch",
        "--set",
        "workload.duration_us=100",
        "--out",
        out.to_str().unwrap(),
        "--json",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(summary["until_s"].as_f64().unwrap() <= 100e-6, "{summary}");
    let mut capture = roce_pcap::Capture::open(&pcap).unwrap();
    let mut times = Vec::new();
    while let Some(frame) = capture.next_frame() {
        times.push(frame.unwrap().time.as_secs_f64());
    }
    assert!(times.len() > 100, "{} frames", times.len());
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let simulated = summary["simulated_s"].as_f64().unwrap();
    assert!(*times.last().unwrap() <= simulated, "{times:?} {simulated}");
    let dump = roce(&["dump", "--strict", pcap.to_str().unwrap()]);
    assert!(dump.status.success(), "{}", stderr(&dump));
    assert!(
        stderr(&dump).contains(&format!("{0} frames, {0} RoCE", times.len())),
        "{}",
        stderr(&dump)
    );
}

/// `--set` on a network scenario: a value changes what is planned (the expected flows grow
/// with the load), and a key the schema does not know is refused with the valid ones, exit
/// status 2, nothing written.
#[test]
fn set_changes_a_network_scenario_or_is_refused_by_key() {
    let count = |extra: &[&str]| {
        let mut args = vec!["sim", "leafspine-websearch", "--check"];
        args.extend_from_slice(extra);
        let o = roce(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        expected_flows(&String::from_utf8_lossy(&o.stdout)) as f64
    };
    let base = count(&[]);
    let more = count(&["--set", "workload.load=1.0"]);
    assert!((more / base - 2.0).abs() < 0.05, "{base} -> {more}");
    let dir = temp_dir("set-bad");
    let out = dir.join("out");
    let o = roce(&[
        "sim",
        "leafspine-websearch",
        "--set",
        "workload.laod=0.5",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "with --set workload.laod=0.5: unknown field `laod`, expected one of `cdf`, `load`"
        ),
        "{err}"
    );
    assert!(!out.exists(), "{err}");
    // A key through a value that is not a table.
    let o = roce(&["sim", "leafspine-websearch", "--set", "name.x=1", "--check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--set name.x=1: name is not a table"),
        "{}",
        stderr(&o)
    );
}

/// Ctrl-C in a network run stops it where it is: the flows finished until then are written,
/// the last progress line says why the run ended, and it exits 130.
#[test]
fn ctrl_c_writes_the_flows_finished_so_far() {
    let dir = temp_dir("interrupt");
    let out = dir.join("out");
    // Interrupted once a progress line shows the run under way (not "setting up").
    let (o, said) = common::interrupted_when(
        &[
            "sim",
            "leafspine-websearch",
            "--set",
            "workload.duration_us=50000",
            "--set",
            "run.drain_us=0",
            "--progress-every",
            "0.05",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
        |line| line.contains(" started and "),
    );
    assert_eq!(o.status.code(), Some(130), "{said}");
    assert!(
        said.contains("the run ended: interrupted (Ctrl-C)"),
        "{said}"
    );
    assert!(
        said.contains("roce sim leafspine-websearch: interrupted at "),
        "{said}"
    );
    assert!(out.is_dir(), "the outputs were written");
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(summary.is_object(), "{summary}");
}
