//! Memory windows from C, end to end: a program under the library (`tests/c/window.c`)
//! registers a region with `IBV_ACCESS_MW_BIND`, binds a type 1 window onto a KiB of it with
//! `ibv_bind_mw`, and binds then invalidates a type 2 window there with `IBV_WR_BIND_MW` and
//! `IBV_WR_LOCAL_INV`. A roce-device NIC in this test, connected to it on loopback, WRITEs
//! through the type 1 window (lands), across the window's end though inside the region (remote
//! access error), and through the invalidated type 2 window (remote access error). Nothing but
//! the good WRITE's bytes may change. Skips (fails under CI=true) without verbs.h or a C
//! compiler.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod peer;

use roce_core::WcStatus;

use peer::{Program, build, connect_peer, ready, write_each};

const PROGRAM: &str = "127.0.13.72";
const PEER: &str = "127.0.13.73";

#[tokio::test(flavor = "current_thread")]
async fn writes_through_windows_land_inside_them_only_and_not_after_invalidation() {
    let Some(exe) = build("window") else {
        return;
    };
    let mut program = Program::spawn(&exe, PROGRAM, PEER);
    let v = program.numbers(4);
    let (program_qpns, program_psn) = (&v[..3], v[3] as u32);
    let (device, endpoints) =
        connect_peer(&mut program, PEER, PROGRAM, program_qpns, program_psn).await;
    let v = program.numbers(3);
    let (rkey1, rkey2, window) = (v[0] as u32, v[1] as u32, v[2]);
    ready(&mut program);

    // (rkey, address, length, expected status): through the type 1 window; 32 bytes past its
    // end, still inside the region; through the invalidated type 2 window.
    let accesses = [
        (rkey1, window, 4, WcStatus::Success),
        (rkey1, window + 1024 - 32, 64, WcStatus::RemAccessErr),
        (rkey2, window, 64, WcStatus::RemAccessErr),
    ];
    write_each(&device, &endpoints, &accesses).await;

    let (report, status) = program.report();
    assert!(report.contains("untouched outside"), "{report}");
    assert!(
        report.contains("window 676f6f64"),
        "the write through the window landed: {report}"
    );
    assert!(status.success(), "{report}");
}
