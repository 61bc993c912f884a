//! What the tools say when something is wrong: each cause once, and what to do about it.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::process::Output;

use common::{pair, roce};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_cause_is_printed_once() {
    let out = roce(&["dump", "/nonexistent/roce-emu-test.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.matches("(os error 2)").count(), 1, "{err}");
}

/// A pingpong client (of a server on `server_ip`, port `port`) bound to `ip`, which must fail with
/// exit code 2 before it sets anything up: no address printed, and the server got no peer.
/// Returns the client's stderr.
fn a_client_on(ip: &str, server_ip: &str, port: &str) -> String {
    let (client, server) = pair(
        &["pingpong", "-p", port, "-n", "5"],
        &["pingpong", server_ip, "-p", port, "--ip", ip, "-n", "5"],
    );
    assert_eq!(client.status.code(), Some(2));
    assert!(client.stdout.is_empty(), "{client:?}");
    assert!(!server.status.success());
    stderr(&client)
}

#[test]
fn a_udp_port_in_use_suggests_another_address() {
    // Someone else has 127.0.60.2:4791.
    let _taken = std::net::UdpSocket::bind("127.0.60.2:4791").unwrap();
    let err = a_client_on("127.0.60.2", "127.0.60.1", "18860");
    assert!(err.contains("127.0.60.2:4791: in use"), "{err}");
    assert!(err.contains("another loopback address"), "{err}");
    assert!(err.contains("--ip"), "{err}");
}

#[test]
fn an_address_not_on_this_host_is_named_so() {
    let err = a_client_on("198.18.255.254", "127.0.61.1", "18861");
    assert!(
        err.contains("198.18.255.254 is not an address of this host"),
        "{err}"
    );
    assert!(!err.contains("in use"), "{err}");
}

/// `roce demo | true`: a reader that goes away ends the tool quietly, as SIGPIPE ends a C
/// program (status 141), not with a panic and a backtrace.
#[test]
fn a_closed_pipe_ends_quietly() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "demo",
            "--ip-a",
            "127.0.64.1",
            "--ip-b",
            "127.0.64.2",
            "-n",
            "1",
            "--no-pcap",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before the first line
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Logs written to a pipe or a file carry no colour codes (they do on a terminal, unless
/// NO_COLOR is set: main.rs's unit test).
#[test]
fn logs_to_a_pipe_carry_no_escape_codes() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_roce"))
        .args([
            "demo",
            "--ip-a",
            "127.0.65.1",
            "--ip-b",
            "127.0.65.2",
            "-n",
            "1",
            "--no-pcap",
        ])
        .env("RUST_LOG", "roce_core=debug")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains("DEBUG"), "the run logged: {err}");
    assert!(!err.contains('\u{1b}'), "{err}");
}

/// A test that skips stands out in `cargo test`'s ordinary output (no `--nocapture`): this
/// binary is run again on [`a_test_that_skips`] alone, output captured as cargo captures it,
/// and its standard error must name the test and why it skipped.
#[test]
fn a_skip_is_seen_without_nocapture() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_test_that_skips",
            "--ignored",
            "--test-threads",
            "2",
        ])
        .env("ROCE_TEST_SKIP_PROBE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("*** SKIPPED a_test_that_skips: nothing to run it on here ***"),
        "{err}"
    );
}

/// What [`a_skip_is_seen_without_nocapture`] runs: a test that skips.
#[test]
#[ignore = "run by a_skip_is_seen_without_nocapture"]
fn a_test_that_skips() {
    assert!(std::env::var_os("ROCE_TEST_SKIP_PROBE").is_some());
    common::skipped("nothing to run it on here");
}

/// `roce exec` refuses a congestion-control parameter the algorithm does not take, naming the
/// ones it takes, before the program runs.
#[test]
fn a_cc_param_is_refused_before_the_program_runs() {
    let dir = common::ScratchDir::new("exec-cc-param");
    let ran = dir.join("ran");
    let ran = ran.to_str().unwrap();
    let out = roce(&[
        "exec",
        "--ip",
        "127.0.148.3",
        "--cc",
        "timely",
        "--cc-param",
        "eta=990",
        "--",
        "touch",
        ran,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("timely has no parameter \"eta\"; its parameters: t_low_ns, t_high_ns"),
        "{err}"
    );
    assert!(!std::path::Path::new(ran).exists(), "the program ran");
}
