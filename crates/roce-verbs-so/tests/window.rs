//! Memory windows from C, end to end: a program under the library (`tests/c/window.c`)
//! registers a region with `IBV_ACCESS_MW_BIND`, binds a type 1 window onto a KiB of it with
//! `ibv_bind_mw`, and binds then invalidates a type 2 window there with `IBV_WR_BIND_MW` and
//! `IBV_WR_LOCAL_INV`. A roce-device NIC in this test, connected to it on loopback, WRITEs
//! through the type 1 window (lands), across the window's end though inside the region (remote
//! access error), and through the invalidated type 2 window (remote access error). Nothing but
//! the good WRITE's bytes may change. Skips (fails under CI=true) without verbs.h or a C
//! compiler.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_cabi::testing::skip_or_fail;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use roce_core::{Access, Psn, Qpn, Remote, SendOp, SendWr, Sge, WcStatus};
use roce_device::backend::udp::UdpBackend;
use roce_device::{Connection, Device, DeviceConfig, RcEndpoint};

const PROGRAM: &str = "127.0.13.72";
const PEER: &str = "127.0.13.73";

/// The numbers of one line the program wrote.
fn numbers(from: &mut impl BufRead, n: usize) -> Vec<u64> {
    let mut line = String::new();
    from.read_line(&mut line).unwrap();
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(v.len(), n, "the program said {line:?}");
    v
}

#[tokio::test(flavor = "current_thread")]
async fn writes_through_windows_land_inside_them_only_and_not_after_invalidation() {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        return skip_or_fail("no /usr/include/infiniband/verbs.h: apt-get install libibverbs-dev");
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/window.c");
    let exe = std::env::temp_dir().join(format!("roce-verbs-window-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let Ok(built) = Command::new(&cc)
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(roce_verbs_so::library_path())
        .output()
    else {
        return skip_or_fail(&format!("cannot run {cc}"));
    };
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let mut program = Command::new(&exe)
        .arg(PEER)
        .env("LD_LIBRARY_PATH", roce_verbs_so::library_dir())
        .env("ROCE_VERBS_IP", PROGRAM)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_program = program.stdin.take().unwrap();
    let mut from_program = BufReader::new(program.stdout.take().unwrap());
    let v = numbers(&mut from_program, 4);
    let (program_qpns, program_psn) = (&v[..3], v[3] as u32);

    let ip: IpAddr = PEER.parse().unwrap();
    let device = Device::spawn(DeviceConfig::new(ip), UdpBackend::bind(ip, 4791).unwrap());
    let mut endpoints = Vec::new();
    for &qpn in program_qpns {
        let ep = RcEndpoint::create(&device, 4).await.unwrap();
        ep.init(Access::LOCAL_WRITE).await.unwrap();
        let conn = Connection::new(
            ip,
            PROGRAM.parse().unwrap(),
            Qpn::new(qpn as u32),
            Psn::new(program_psn),
            Psn::new(7),
        );
        ep.connect(&conn).await.unwrap();
        endpoints.push(ep);
    }
    let qpns: Vec<String> = endpoints
        .iter()
        .map(|e| e.qpn.value().to_string())
        .collect();
    writeln!(to_program, "{} 7", qpns.join(" ")).unwrap();
    let v = numbers(&mut from_program, 3);
    let (rkey1, rkey2, window) = (v[0] as u32, v[1] as u32, v[2]);
    let mut line = String::new();
    from_program.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    // (rkey, address, length, expected status): through the type 1 window; 32 bytes past its
    // end, still inside the region; through the invalidated type 2 window.
    let accesses = [
        (rkey1, window, 4, WcStatus::Success),
        (rkey1, window + 1024 - 32, 64, WcStatus::RemAccessErr),
        (rkey2, window, 64, WcStatus::RemAccessErr),
    ];
    for (ep, (key, at, len, expected)) in endpoints.iter().zip(accesses) {
        let mr = device
            .reg_mr(ep.pd, 4096, Access::LOCAL_WRITE)
            .await
            .unwrap();
        assert!(mr.write(0, b"good"));
        let wr = SendWr::new(
            1,
            SendOp::RdmaWrite(Remote {
                addr: at,
                rkey: key,
            }),
            vec![Sge {
                addr: mr.addr(),
                length: len,
                lkey: mr.lkey(),
            }],
        );
        device.post_send(ep.qpn, wr).await.unwrap();
        let cqe = device
            .next_completion_within(ep.cq, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(
            cqe.status, expected,
            "write of {len} bytes at {at:#x} with rkey {key:#x}"
        );
    }

    writeln!(to_program, "check").unwrap();
    let mut report = String::new();
    for _ in 0..2 {
        from_program.read_line(&mut report).unwrap();
    }
    let status = program.wait().unwrap();
    let _ = std::fs::remove_file(&exe);
    assert!(report.contains("untouched outside"), "{report}");
    assert!(
        report.contains("window 676f6f64"),
        "the write through the window landed: {report}"
    );
    assert!(status.success(), "{report}");
}
