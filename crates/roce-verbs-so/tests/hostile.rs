//! A hostile peer never gets a verbs program's memory outside its registration: a program
//! under the library (`tests/c/victim.c`) registers the middle 4 KiB of a 12 KiB buffer for
//! remote writes, and a roce-device NIC in this test, connected to it on loopback, sends an
//! RDMA WRITE that crosses the registration's end and one with a wrong rkey. Both must come
//! back as remote access errors and leave the canary bytes around the region untouched, while
//! a well-formed WRITE lands. Skips (fails under CI=true) without verbs.h or a C compiler.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod peer;

use roce_core::WcStatus;

use peer::{Program, build, connect_peer, ready, write_each};

const VICTIM: &str = "127.0.13.70";
const ATTACKER: &str = "127.0.13.71";

#[tokio::test(flavor = "current_thread")]
async fn out_of_bounds_and_wrong_key_writes_never_land() {
    let Some(exe) = build("victim") else {
        return;
    };
    let mut victim = Program::spawn(&exe, VICTIM, ATTACKER);
    let v = victim.numbers(6);
    let (victim_qpns, victim_psn, rkey, addr) = (&v[..3], v[3] as u32, v[4] as u32, v[5]);
    let (device, endpoints) =
        connect_peer(&mut victim, ATTACKER, VICTIM, victim_qpns, victim_psn).await;
    ready(&mut victim);

    // (rkey, address, length, expected status): a good write, one that crosses the end of the
    // registration by 32 bytes, one with a key that is not the region's.
    let attacks = [
        (rkey, addr, 4, WcStatus::Success),
        (rkey, addr + 4096 - 32, 64, WcStatus::RemAccessErr),
        (rkey ^ 0x100, addr, 64, WcStatus::RemAccessErr),
    ];
    write_each(&device, &endpoints, &attacks).await;

    let (report, status) = victim.report();
    assert!(report.contains("canaries intact"), "{report}");
    assert!(
        report.contains("region 676f6f64"),
        "the good write landed: {report}"
    );
    assert!(status.success(), "{report}");
}
