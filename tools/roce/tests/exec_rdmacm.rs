//! `roce exec` gives RDMA CM programs roce-emu's librdmacm.so.1 next to its libibverbs.so.1:
//! Debian's rping and ib_send_bw -R load it, resolve, create their QPs and listen on it, and
//! fail cleanly where the connection manager is needed (not there yet). The evidence that our
//! library was used is its own stderr note: the system's librdmacm has no such text, and it
//! would not find a device at all. Addresses of their own in 127.0.13.0/24. Skips, naming the
//! package, where the programs are not installed; under CI=true that fails.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::have;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs `roce exec ARGS` in a process group of its own and returns (exit status or `None` if
/// it was still running after `limit` and was killed, stderr).
fn exec(args: &[&str], limit: Duration, stop_at: Option<&str>) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roce"))
        .arg("exec")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + limit;
    let mut text = String::new();
    let mut exited = false;
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                text.push_str(&line);
                text.push('\n');
                if stop_at.is_some_and(|s| line.contains(s)) {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // stderr closed: the program is done.
                exited = true;
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    if !exited {
        // The group holds roce and the program it started: end both.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", child.id())])
            .status();
    }
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (exited.then_some(code), text)
}

#[test]
fn rping_server_loads_our_librdmacm_and_listens_on_it() {
    if !have("rping", "rdmacm-utils") {
        return;
    }
    let note = "roce-rdmacm: rdma_listen records the listener on 127.0.13.81:7174";
    let (status, stderr) = exec(
        &[
            "--ip",
            "127.0.13.81",
            "--",
            "rping",
            "-s",
            "-V",
            "-C",
            "1",
            "-a",
            "127.0.13.81",
        ],
        Duration::from_secs(20),
        Some(note),
    );
    assert!(
        stderr.contains(note),
        "no note from our librdmacm:\n{stderr}"
    );
    // rping -s waits for a connection request: it was still running when the note came.
    assert_eq!(status, None, "rping -s exited:\n{stderr}");
}

#[test]
fn rping_client_resolves_and_fails_cleanly_at_rdma_connect() {
    if !have("rping", "rdmacm-utils") {
        return;
    }
    let (status, stderr) = exec(
        &[
            "--ip",
            "127.0.13.82",
            "--",
            "rping",
            "-c",
            "-V",
            "-C",
            "1",
            "-a",
            "127.0.13.83",
        ],
        Duration::from_secs(20),
        None,
    );
    let status = status.unwrap_or_else(|| panic!("rping -c did not exit:\n{stderr}"));
    assert_ne!(status, 0, "{stderr}");
    // rping got as far as rdma_connect: the address and route resolved, its QP was made.
    assert!(
        stderr.contains("roce-rdmacm: rdma_connect needs the connection manager, not there yet"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rdma_connect: Function not implemented"),
        "{stderr}"
    );
}

#[test]
fn perftest_with_rdma_cm_fails_cleanly_at_rdma_connect() {
    if !have("ib_send_bw", "perftest") {
        return;
    }
    let (status, stderr) = exec(
        &[
            "--ip",
            "127.0.13.84",
            "--",
            "ib_send_bw",
            "-R",
            "127.0.13.85",
        ],
        Duration::from_secs(20),
        None,
    );
    let status = status.unwrap_or_else(|| panic!("ib_send_bw -R did not exit:\n{stderr}"));
    assert_ne!(status, 0, "{stderr}");
    assert!(
        stderr.contains("roce-rdmacm: rdma_connect needs the connection manager"),
        "{stderr}"
    );
}
