//! `roce sim`: a shipped scenario, shortened, writes a time series and a plot; a file with an
//! unknown key is refused with exit status 2; `--list` names every shipped scenario.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn roce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .output()
        .unwrap()
}

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("roce-sim-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The shipped fairness scenario, cut to 3 ms (from 20) to keep a debug build quick.
fn short_fairness(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(scenarios().join("fairness.toml")).unwrap();
    assert!(text.contains("duration_ms = 20\n") && text.contains("summary_from_ms = 5\n"));
    let text = text
        .replace("duration_ms = 20\n", "duration_ms = 3\n")
        .replace("summary_from_ms = 5\n", "summary_from_ms = 1\n");
    let path = dir.join("fairness-short.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_scenario_writes_its_series_and_plot() {
    let dir = temp_dir("run");
    let file = short_fairness(&dir);
    let out = dir.join("out");
    let output = roce(&[
        "sim",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["name"], "fairness");
    assert_eq!(summary["flows"].as_array().unwrap().len(), 2);
    assert!(summary["jain_index"].as_f64().unwrap() > 0.5, "{summary}");
    assert_eq!(summary["drops"], 0, "{summary}");

    let series: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("series.json")).unwrap()).unwrap();
    let samples = series["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 6, "3 ms sampled every 500 µs");
    assert!(samples.iter().all(|s| s["queue_bytes"].is_u64()));
    assert!(
        samples
            .iter()
            .any(|s| s["queue_max_bytes"].as_u64() > Some(0))
    );
    let rate = &samples[0]["flows"][0];
    assert!(rate["rate_bps"].as_u64().unwrap() > 0, "{rate}");
    assert!(rate["goodput_bps"].as_f64().unwrap() > 0.0, "{rate}");

    let svg = std::fs::read_to_string(out.join("plot.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_key_is_an_error_naming_it() {
    let dir = temp_dir("unknown");
    let text = std::fs::read_to_string(scenarios().join("fairness.toml")).unwrap();
    let file = dir.join("typo.toml");
    std::fs::write(
        &file,
        text.replace("buffer_bytes =", "bufer_bytes =")
            .replace("duration_ms = 20", "duration_ms = 1"),
    )
    .unwrap();
    let output = roce(&[
        "sim",
        file.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bufer_bytes"), "{stderr}");
    assert!(stderr.contains("typo.toml"), "{stderr}");
    assert!(!dir.join("series.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_value_is_an_error_not_a_panic() {
    let dir = temp_dir("bad");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "hosts = 2\nduration_ms = 1\nsample_us = 100\nmtu = 1000\n\
         [[flows]]\nsrc = 0\ndst = 1\n",
    )
    .unwrap();
    let output = roce(&["sim", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("mtu = 1000"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn list_names_every_shipped_scenario() {
    let output = roce(&["sim", "--list"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut names = 0;
    for entry in std::fs::read_dir(scenarios()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            assert!(
                stdout
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(&name)),
                "{name} missing from:\n{stdout}"
            );
            assert!(!stdout.contains("not a valid scenario"), "{stdout}");
            names += 1;
        }
    }
    assert!(names >= 5, "{names} scenarios shipped");
}
