//! A hostile peer never gets a verbs program's memory outside its registration: a program
//! under the library (`tests/c/victim.c`) registers the middle 4 KiB of a 12 KiB buffer for
//! remote writes, and a roce-device NIC in this test, connected to it on loopback, sends an
//! RDMA WRITE that crosses the registration's end and one with a wrong rkey. Both must come
//! back as remote access errors and leave the canary bytes around the region untouched, while
//! a well-formed WRITE lands. Skips (fails under CI=true) without verbs.h or a C compiler.

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

const VICTIM: &str = "127.0.13.70";
const ATTACKER: &str = "127.0.13.71";

#[tokio::test(flavor = "current_thread")]
async fn out_of_bounds_and_wrong_key_writes_never_land() {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        return skip_or_fail("no /usr/include/infiniband/verbs.h: apt-get install libibverbs-dev");
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/victim.c");
    let exe = std::env::temp_dir().join(format!("roce-verbs-victim-{}", std::process::id()));
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

    let mut victim = Command::new(&exe)
        .arg(ATTACKER)
        .env("LD_LIBRARY_PATH", roce_verbs_so::library_dir())
        .env("ROCE_VERBS_IP", VICTIM)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_victim = victim.stdin.take().unwrap();
    let mut from_victim = BufReader::new(victim.stdout.take().unwrap());
    let mut line = String::new();
    from_victim.read_line(&mut line).unwrap();
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(v.len(), 6, "victim said {line:?}");
    let (victim_qpns, victim_psn, rkey, addr) = (&v[..3], v[3] as u32, v[4] as u32, v[5]);

    let ip: IpAddr = ATTACKER.parse().unwrap();
    let device = Device::spawn(DeviceConfig::new(ip), UdpBackend::bind(ip, 4791).unwrap());
    let mut endpoints = Vec::new();
    for &qpn in victim_qpns {
        let ep = RcEndpoint::create(&device, 4).await.unwrap();
        ep.init(Access::LOCAL_WRITE).await.unwrap();
        let conn = Connection::new(
            ip,
            VICTIM.parse().unwrap(),
            Qpn::new(qpn as u32),
            Psn::new(victim_psn),
            Psn::new(7),
        );
        ep.connect(&conn).await.unwrap();
        endpoints.push(ep);
    }
    let qpns: Vec<String> = endpoints
        .iter()
        .map(|e| e.qpn.value().to_string())
        .collect();
    writeln!(to_victim, "{} 7", qpns.join(" ")).unwrap();
    line.clear();
    from_victim.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    // (rkey, address, length, expected status): a good write, one that crosses the end of the
    // registration by 32 bytes, one with a key that is not the region's.
    let attacks = [
        (rkey, addr, 4, WcStatus::Success),
        (rkey, addr + 4096 - 32, 64, WcStatus::RemAccessErr),
        (rkey ^ 0x100, addr, 64, WcStatus::RemAccessErr),
    ];
    for (ep, (key, at, len, expected)) in endpoints.iter().zip(attacks) {
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

    writeln!(to_victim, "check").unwrap();
    let mut report = String::new();
    for _ in 0..2 {
        from_victim.read_line(&mut report).unwrap();
    }
    let status = victim.wait().unwrap();
    let _ = std::fs::remove_file(&exe);
    assert!(report.contains("canaries intact"), "{report}");
    assert!(
        report.contains("region 676f6f64"),
        "the good write landed: {report}"
    );
    assert!(status.success(), "{report}");
}
