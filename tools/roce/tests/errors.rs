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

#[test]
fn a_udp_port_in_use_suggests_another_address() {
    // Someone else has 127.0.60.2:4791.
    let _taken = std::net::UdpSocket::bind("127.0.60.2:4791").unwrap();
    let (client, server) = pair(
        &["pingpong", "-p", "18860", "-n", "5"],
        &[
            "pingpong",
            "127.0.60.1",
            "-p",
            "18860",
            "--ip",
            "127.0.60.2",
            "-n",
            "5",
        ],
    );
    assert_eq!(client.status.code(), Some(2));
    let err = stderr(&client);
    assert!(err.contains("127.0.60.2:4791: in use"), "{err}");
    assert!(err.contains("another loopback address"), "{err}");
    assert!(err.contains("--ip"), "{err}");
    // Nothing was set up: no address was printed, and the server got no peer.
    assert!(client.stdout.is_empty(), "{client:?}");
    assert!(!server.status.success());
}

#[test]
fn an_address_not_on_this_host_is_named_so() {
    let (client, server) = pair(
        &["pingpong", "-p", "18861", "-n", "5"],
        &[
            "pingpong",
            "127.0.61.1",
            "-p",
            "18861",
            "--ip",
            "198.18.255.254",
            "-n",
            "5",
        ],
    );
    assert_eq!(client.status.code(), Some(2));
    let err = stderr(&client);
    assert!(
        err.contains("198.18.255.254 is not an address of this host"),
        "{err}"
    );
    assert!(!err.contains("in use"), "{err}");
    assert!(client.stdout.is_empty(), "{client:?}");
    assert!(!server.status.success());
}
