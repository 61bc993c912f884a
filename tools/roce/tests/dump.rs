//! `roce dump` as a user runs it: the golden text of every fixture, `--strict` exit codes, JSON
//! output, filtering and errors. `ROCE_BLESS=1` rewrites the golden `.txt` files.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcap-fixtures")
        .join(sub);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn roce(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn every_fixture_prints_its_golden_text() {
    let bless = std::env::var_os("ROCE_BLESS").is_some_and(|v| v == "1");
    for sub in ["rxe", "vectors", "interop", "malformed"] {
        for pcap in fixtures(sub) {
            let output = roce(&["dump"], &pcap);
            assert!(output.status.success(), "{}: {output:?}", pcap.display());
            let golden = pcap.with_extension("txt");
            if bless {
                std::fs::write(&golden, &output.stdout).unwrap();
                continue;
            }
            let expected = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e} (ROCE_BLESS=1 writes it)", golden.display()));
            assert_eq!(
                stdout(&output),
                expected,
                "{} differs from its golden text",
                pcap.display()
            );
        }
    }
}

#[test]
fn strict_is_clean_on_valid_captures_and_fails_on_each_malformed_one() {
    for sub in ["rxe", "vectors", "interop"] {
        for pcap in fixtures(sub) {
            let output = roce(&["dump", "--strict", "-q"], &pcap);
            assert_eq!(
                output.status.code(),
                Some(0),
                "{}: {output:?}",
                pcap.display()
            );
        }
    }
    for pcap in fixtures("malformed") {
        let output = roce(&["dump", "--strict"], &pcap);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{}: {output:?}",
            pcap.display()
        );
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains("--strict: 1 problems"),
            "{}: {stderr}",
            pcap.display()
        );
    }
}

#[test]
fn text_lines_name_the_headers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pcap-fixtures/rxe");
    let read = stdout(&roce(&["dump", "-q"], &dir.join("mtu1500-read_bw.pcap")));
    let first = read.lines().next().unwrap();
    assert_eq!(
        first,
        "0.086187 198.18.0.12:49681 > 198.18.0.11:4791 RC_RDMA_READ_REQUEST qp=0x000017 \
         psn=0x920946 ack_req reth(va=0x7f72b0852000 rkey=0x854 len=65536) len=0 icrc=ok"
    );
    let malformed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pcap-fixtures/malformed");
    let bad = stdout(&roce(&["dump"], &malformed.join("bad-icrc.pcap")));
    assert!(bad.trim_end().ends_with("icrc=BAD"), "{bad}");
    let unchecked = stdout(&roce(
        &["dump", "--no-icrc"],
        &malformed.join("bad-icrc.pcap"),
    ));
    assert!(
        unchecked.trim_end().ends_with("icrc=unchecked"),
        "{unchecked}"
    );
    let tver = stdout(&roce(&["dump"], &malformed.join("bad-tver.pcap")));
    assert!(
        tver.contains("RoCE malformed: transport version 1, expected 0"),
        "{tver}"
    );
}

#[test]
fn json_is_one_object_per_frame() {
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcap-fixtures/rxe/mtu1500-rc_s64_m1024.pcap");
    let all = stdout(&roce(&["dump", "--json"], &pcap));
    let values: Vec<serde_json::Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), 53);
    let roce_only = stdout(&roce(&["dump", "--json", "-q"], &pcap));
    let roce_values: Vec<serde_json::Value> = roce_only
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(roce_values.len(), 40);
    let ack = roce_values
        .iter()
        .find(|v| v["roce"]["opcode"] == "RC_ACKNOWLEDGE")
        .unwrap();
    assert_eq!(ack["roce"]["aeth"]["type"], "ACK");
    assert_eq!(ack["roce"]["aeth"]["credits"], serde_json::Value::Null);
    assert_eq!(ack["icrc"], "ok");
    assert_eq!(ack["dst_port"], 4791);
    let first_frames = stdout(&roce(&["dump", "--json", "-c", "3"], &pcap));
    assert_eq!(first_frames.lines().count(), 3);
}

#[test]
fn unreadable_files_are_a_clear_error() {
    let output = roce(&["dump"], Path::new("/nonexistent/capture.pcap"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("roce: error: cannot read /nonexistent/capture.pcap"),
        "{stderr}"
    );
    let output = roce(
        &["dump"],
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("Cargo.toml")
            .as_path(),
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("not a readable pcap or pcapng capture"),
        "{stderr}"
    );
}
