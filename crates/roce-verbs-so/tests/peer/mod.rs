//! A C program under the library, and a roce-device NIC in the test that plays its peer on
//! loopback: the program (`tests/c/NAME.c`) says its three QPNs, its PSN and what else it
//! wants known on its first line; the peer connects an RC QP to each, says its own QPNs and
//! PSN back, and writes into the program's memory; the program then checks its memory and
//! says what it found. Shared by hostile.rs and window.rs.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report
#![allow(dead_code)] // each test binary uses its own part of this

use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Duration;

use roce_cabi::testing::skip_or_fail;
use roce_core::{Access, Psn, Qpn, Remote, SendOp, SendWr, Sge, WcStatus};
use roce_device::backend::udp::UdpBackend;
use roce_device::{Connection, Device, DeviceConfig, DeviceHandle, RcEndpoint};

/// The peer's PSN.
const PEER_PSN: u32 = 7;

/// `tests/c/NAME.c` compiled against the library into a temporary file, or `None` (the test
/// skips; under CI=true it fails) without verbs.h or a C compiler.
pub(crate) fn build(name: &str) -> Option<PathBuf> {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        skip_or_fail("no /usr/include/infiniband/verbs.h: apt-get install libibverbs-dev");
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let exe = std::env::temp_dir().join(format!("roce-verbs-{name}-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let Ok(built) = Command::new(&cc)
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(roce_verbs_so::library_path())
        .output()
    else {
        skip_or_fail(&format!("cannot run {cc}"));
        return None;
    };
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    Some(exe)
}

/// The program running on the NIC at `ip`, told its peer's address `peer`.
pub(crate) struct Program {
    pub(crate) child: Child,
    pub(crate) to: ChildStdin,
    pub(crate) from: BufReader<ChildStdout>,
    exe: PathBuf,
}

impl Program {
    pub(crate) fn spawn(exe: &Path, ip: &str, peer: &str) -> Self {
        let mut child = Command::new(exe)
            .arg(peer)
            .env("LD_LIBRARY_PATH", roce_verbs_so::library_dir())
            .env("ROCE_VERBS_IP", ip)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let from = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            to,
            from,
            exe: exe.to_path_buf(),
        }
    }

    /// The `n` numbers of the next line the program writes.
    pub(crate) fn numbers(&mut self, n: usize) -> Vec<u64> {
        let mut line = String::new();
        self.from.read_line(&mut line).unwrap();
        let v: Vec<u64> = line
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(v.len(), n, "the program said {line:?}");
        v
    }

    /// Has the program check its memory: its two-line report and how it ended.
    pub(crate) fn report(mut self) -> (String, ExitStatus) {
        writeln!(self.to, "check").unwrap();
        let mut report = String::new();
        for _ in 0..2 {
            self.from.read_line(&mut report).unwrap();
        }
        let status = self.child.wait().unwrap();
        let _ = std::fs::remove_file(&self.exe);
        (report, status)
    }
}

/// A NIC at `ip` with an RC QP connected to each of `program_qpns` (the program at
/// `program_ip`, its PSN `program_psn`); tells the program the QPNs and PSN, and waits for it
/// to say it is ready.
pub(crate) async fn connect_peer(
    program: &mut Program,
    ip: &str,
    program_ip: &str,
    program_qpns: &[u64],
    program_psn: u32,
) -> (DeviceHandle, Vec<RcEndpoint>) {
    let ip: IpAddr = ip.parse().unwrap();
    let device = Device::spawn(DeviceConfig::new(ip), UdpBackend::bind(ip, 4791).unwrap());
    let mut endpoints = Vec::new();
    for &qpn in program_qpns {
        let ep = RcEndpoint::create(&device, 4).await.unwrap();
        ep.init(Access::LOCAL_WRITE).await.unwrap();
        let conn = Connection::new(
            ip,
            program_ip.parse().unwrap(),
            Qpn::new(qpn as u32),
            Psn::new(program_psn),
            Psn::new(PEER_PSN),
        );
        ep.connect(&conn).await.unwrap();
        endpoints.push(ep);
    }
    let qpns: Vec<String> = endpoints
        .iter()
        .map(|e| e.qpn.value().to_string())
        .collect();
    writeln!(program.to, "{} {PEER_PSN}", qpns.join(" ")).unwrap();
    (device, endpoints)
}

/// Waits for the program's `ready`.
pub(crate) fn ready(program: &mut Program) {
    let mut line = String::new();
    program.from.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
}

/// Each endpoint WRITEs `len` bytes starting "good" to (`rkey`, `addr`) of `writes`, in turn;
/// each completion must have its status.
pub(crate) async fn write_each(
    device: &DeviceHandle,
    endpoints: &[RcEndpoint],
    writes: &[(u32, u64, u32, WcStatus)],
) {
    for (ep, &(key, at, len, expected)) in endpoints.iter().zip(writes) {
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
            Sge {
                addr: mr.addr(),
                length: len,
                lkey: mr.lkey(),
            },
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
}
