//! What the `roce exec` tests share (exec.rs on loopback, exec_veth.rs over a veth,
//! exec_rdmacm.rs): whether a Debian program is installed, a pair of `roce exec` processes
//! (server, then client once the server listens), and perftest's result rows.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Whether Debian's `program` (from `package`) is on the PATH; where not, the test says that it
/// skips, except under CI=true, which installs it: there that is a failure.
pub(crate) fn have(program: &str, package: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()));
    if !found {
        let why = format!("{program} not found: apt-get install {package}");
        assert!(
            std::env::var_os("CI").is_none_or(|v| v != "true"),
            "{why} (CI=true: not skipping)"
        );
        super::skipped(&why);
    }
    found
}

/// The program's stdout, after checking that it exited 0 (`what` names it in the failure).
pub(crate) fn ok_as(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// rping's stdout once it exited 0 — or exited 255 with, as its last words, its DISCONNECT
/// EVENT and then `rdma_get_cm_event: ...`. rping before rdma-core pull request #1622 ("rping:
/// Fix spurious failure return codes", 2025; Debian's rping is 44.0) destroys its event channel
/// as it ends while its event thread, done with the last event, may not yet be waiting for the
/// next: that thread's next `rdma_get_cm_event` fails on the destroyed channel and exits the
/// process with 255 though every ping was done (against the kernel's librdmacm as against
/// ours). Any other ending fails; the caller checks the pings either way.
pub(crate) fn rping_done(what: &str, out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let raced = out.status.code() == Some(255)
        && matches!(
            lines.as_slice(),
            [.., disconnect, last]
                if disconnect.ends_with("DISCONNECT EVENT...")
                    && last.starts_with("rdma_get_cm_event: ")
        );
    if raced {
        eprintln!("{what}: rping's own end-of-run race (rdma-core #1622), its pings checked");
        return String::from_utf8_lossy(&out.stdout).into_owned();
    }
    ok_as(what, out)
}

/// [`ok_as`] for a single program.
pub(crate) fn ok(out: &Output) -> String {
    ok_as("the program", out)
}

/// Waits (at most 20 s) until something listens on TCP `port` in the network namespace of
/// process `pid`: the servers of ibv_*_pingpong and perftest accept one connection only, so
/// the test cannot probe by connecting. Reads /proc/PID/net/tcp{,6} (state 0A is LISTEN),
/// which shows the sockets of that process's namespace.
pub(crate) fn wait_listening(pid: u32, port: &str) {
    let port: u16 = port.parse().unwrap();
    let suffix = format!(":{port:04X}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let listening = ["tcp", "tcp6"].iter().any(|f| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
                t.lines().skip(1).any(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    cols.len() > 3 && cols[1].ends_with(&suffix) && cols[3] == "0A"
                })
            })
        });
        if listening {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on TCP port {port} after 20 s");
}

/// Waits (at most 20 s) until a NIC's UDP socket is bound to `ip`:4791 in the network
/// namespace of process `pid` (/proc/PID/net/udp): an RDMA CM server opens its device just
/// before it listens, and listens on no socket the test could see. An IPv6 NIC binds
/// `[::]:4791` on its interface (/proc/PID/net/udp6).
pub(crate) fn wait_nic(pid: u32, ip: &str) {
    let ip: std::net::IpAddr = ip.parse().unwrap();
    // /proc shows the address as the bytes in memory, printed as little-endian words.
    let (table, want) = match ip {
        std::net::IpAddr::V4(v4) => (
            "udp",
            format!("{:08X}:12B7", u32::from_le_bytes(v4.octets())),
        ),
        std::net::IpAddr::V6(_) => ("udp6", format!("{:032X}:12B7", 0)),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let bound = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).is_ok_and(|t| {
            t.lines()
                .skip(1)
                .any(|l| l.split_whitespace().nth(1) == Some(&want))
        });
        if bound {
            // The program listens right after it opens the device.
            std::thread::sleep(Duration::from_millis(300));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no NIC bound to {ip}:4791 after 20 s");
}

/// Runs `server` (ARGV) and then, once its NIC is up, `client` (ARGV), each under its `roce
/// exec`: for RDMA CM programs, whose client names the server itself. Returns (client,
/// server) once both have ended.
pub(crate) fn exec_cm_pair(
    server: Side<'_>,
    client: Side<'_>,
    server_argv: &[&str],
    client_argv: &[&str],
) -> (Output, Output) {
    let server_child = spawn_exec(server, server_argv);
    wait_nic(server_child.id(), server.ip);
    let client = spawn_exec(client, client_argv).wait_with_output().unwrap();
    if rejected_for_no_listener(&client) {
        // The server waits for a connection that will not come, until its wrapper's timeout
        // (two minutes): end it, and its process group with it, now; the caller fails on the
        // client's exit status.
        return (client, end_group(server_child));
    }
    (client, server_child.wait_with_output().unwrap())
}

/// Ends `child`, a program started in a process group of its own ([`spawn_exec`]), with its
/// whole group (SIGTERM), and waits for it: for servers that serve until they are ended.
pub(crate) fn end_group(child: Child) -> Output {
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
    child.wait_with_output().unwrap()
}

/// Whether a client failed on a REJ with reason 8 (invalid service ID: nobody listened for
/// its REQ). perftest `-R`'s client sends its REQ as soon as its first handshake is done,
/// while its server listens again only once its own side of that handshake has completed: a
/// server kept off the processor meanwhile rejects it, and perftest does not try again.
fn rejected_for_no_listener(client: &Output) -> bool {
    !client.status.success()
        && String::from_utf8_lossy(&client.stderr).contains("RDMA_CM_EVENT_REJECTED; error: 8")
}

/// Where one side of an [`exec_pair`] runs: under `wrapper` (`ip netns exec NS timeout 120`,
/// or nothing), with the NIC at `ip` and `roce exec`'s options `exec_args`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side<'a> {
    pub(crate) wrapper: &'a [&'a str],
    pub(crate) ip: &'a str,
    pub(crate) exec_args: &'a [&'a str],
}

impl<'a> Side<'a> {
    /// `roce exec --ip IP EXEC_ARGS` in the test's own namespace.
    pub(crate) fn local(ip: &'a str, exec_args: &'a [&'a str]) -> Self {
        Self {
            wrapper: &[],
            ip,
            exec_args,
        }
    }
}

/// Starts `[WRAPPER] roce exec --ip IP EXEC_ARGS -- ARGV`, its output piped, in a process
/// group of its own (so that the whole of it can be ended at once).
pub(crate) fn spawn_exec(side: Side<'_>, argv: &[&str]) -> Child {
    let roce = env!("CARGO_BIN_EXE_roce");
    let mut cmd = match side.wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(roce);
            c
        }
        None => Command::new(roce),
    };
    cmd.args(["exec", "--ip", side.ip])
        .args(side.exec_args)
        .arg("--")
        .args(argv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Runs `ARGV` as the server and `ARGV SERVER_IP` as the client, each under its `roce exec`,
/// the client once the server listens on TCP `port`; returns (client, server) once both have
/// ended.
pub(crate) fn exec_pair(
    server: Side<'_>,
    client: Side<'_>,
    port: &str,
    argv: &[&str],
) -> (Output, Output) {
    let server_child = spawn_exec(server, argv);
    wait_listening(server_child.id(), port);
    let client_argv = [argv, &[server.ip]].concat();
    let client = spawn_exec(client, &client_argv).wait_with_output().unwrap();
    (client, server_child.wait_with_output().unwrap())
}

/// perftest's result rows, as numbers: the lines after the `#bytes` header that start with a
/// size (both sides print them for SEND, the client alone for WRITE, READ and atomics).
pub(crate) fn result_rows(text: &str) -> Vec<Vec<f64>> {
    text.lines()
        .skip_while(|l| !l.contains("#bytes"))
        .skip(1)
        .take_while(|l| !l.starts_with("---"))
        .map(|l| {
            l.split_whitespace()
                .map_while(|c| c.parse::<f64>().ok())
                .collect::<Vec<f64>>()
        })
        .filter(|cols| !cols.is_empty())
        .collect()
}

/// Checks a run of one of librdmacm's cmatose-family examples (ucmatose, udaddy): both sides
/// exit 0 and end with their own "data transfers complete" and "return status 0".
pub(crate) fn transfers_complete(program: &str, (client, server): &(Output, Output)) {
    for (who, out) in [("client", client), ("server", server)] {
        let text = ok_as(&format!("{program} {who}"), out);
        assert!(
            text.contains("data transfers complete"),
            "{program} {who}: {text}"
        );
        assert!(text.contains("return status 0"), "{program} {who}: {text}");
    }
}
