//! The blast over loopback: what the receiver counts is what the sender's batches carried,
//! datagram by datagram, whether or not the kernel coalesced them.

use std::process::{Command, Stdio};

fn blast() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roce-blast"))
}

/// A receiver on a port of its own (`salt` apart from the other tests'), then a sender to it:
/// both runs' JSON reports, each side's extra arguments given.
fn blast_pair(salt: u32, recv: &[&str], send: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let port = 40_000 + ((std::process::id() + salt) % 20_000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let receiver = blast()
        .args(["recv", "--bind", &addr, "--seconds", "0.5", "--wait", "10"])
        .args(recv)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the receiver");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let sender = blast()
        .args(["send", "--to", &addr, "--seconds", "0.3"])
        .args(send)
        .output()
        .expect("run the sender");
    assert!(
        sender.status.success(),
        "{}",
        String::from_utf8_lossy(&sender.stderr)
    );
    let sent = serde_json::from_slice(&sender.stdout).expect("sender JSON");
    let received = receiver.wait_with_output().expect("receiver");
    assert!(
        received.status.success(),
        "{}",
        String::from_utf8_lossy(&received.stderr)
    );
    let got = serde_json::from_slice(&received.stdout).expect("receiver JSON");
    (sent, got)
}

#[test]
fn the_receiver_counts_the_datagrams_of_each_coalesced_batch() {
    let (sent, got) = blast_pair(0, &[], &["--size", "1000"]);
    let bytes = got["bytes"].as_u64().expect("bytes");
    let datagrams = got["datagrams"].as_u64().expect("datagrams");
    assert!(datagrams > 0);
    // Every datagram is 1000 bytes, so the count follows from the bytes exactly.
    assert_eq!(bytes, datagrams * 1000);
    // 65 507 / 1000 would be 65 datagrams: the kernel's cap of 64 segments per send holds.
    assert_eq!(sent["datagrams_per_send"], 64, "{sent}");
    assert!(datagrams <= sent["datagrams"].as_u64().expect("sent"));
}

#[test]
fn a_receiver_that_hears_nothing_says_so() {
    let out = blast()
        .args(["recv", "--bind", "127.0.0.1:0", "--wait", "1.5"])
        .output()
        .expect("run the receiver");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no datagram arrived within 1.5 s"));
}

#[test]
fn many_buffers_move_the_same_datagrams_and_say_how_many_they_were() {
    let (sent, got) = blast_pair(
        7,
        &["--buffers", "3"],
        &["--size", "4112", "--buffers", "5"],
    );
    assert_eq!(
        (sent["buffers"].as_u64(), got["buffers"].as_u64()),
        (Some(5), Some(3))
    );
    let datagrams = got["datagrams"].as_u64().expect("datagrams");
    assert!(datagrams > 0);
    assert_eq!(got["bytes"].as_u64(), Some(datagrams * 4112), "{got}");
    // 65 507 / 4112: 15 datagrams of one buffer per send.
    assert_eq!(sent["datagrams_per_send"], 15, "{sent}");
}

#[test]
fn no_buffers_is_refused() {
    let out = blast()
        .args(["send", "--to", "127.0.0.1:9", "--buffers", "0"])
        .output()
        .expect("run the sender");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--buffers"));
    assert!(out.stdout.is_empty(), "nothing was sent or reported");
}
