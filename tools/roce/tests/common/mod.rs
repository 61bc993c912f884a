//! What the tests share: running `roce` itself, and (for the root-only tests) running commands
//! that set up namespaces and veths.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report
#![allow(dead_code)] // each test binary uses its own part of this

pub(crate) mod exec;
pub(crate) mod netns;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// A directory of the test's own under the system's temporary directory, made empty when taken
/// and removed with everything in it when dropped, so that no run leaves files behind.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    /// `<tmp>/<name>-<pid>`, empty.
    pub(crate) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `roce` with `args` to its end.
pub(crate) fn roce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .output()
        .unwrap()
}

/// Starts `roce` with `args`, its output piped.
pub(crate) fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a server, killing it if it is still up after a minute.
pub(crate) fn finish(mut server: Child) -> Output {
    for _ in 0..600 {
        if server.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = server.kill();
    server.wait_with_output().unwrap()
}

/// Runs a server with `server` arguments, then a client with `client` arguments.
pub(crate) fn pair(server: &[&str], client: &[&str]) -> (Output, Output) {
    let server = spawn(server);
    std::thread::sleep(Duration::from_millis(300));
    let client = roce(client);
    (client, server.wait_with_output().unwrap())
}

/// Starts a server with `server` arguments, lets it listen, then starts a client with `client`
/// arguments.
pub(crate) fn spawn_pair(server: &[&str], client: &[&str]) -> (Child, Child) {
    let server = spawn(server);
    std::thread::sleep(Duration::from_millis(300));
    (server, spawn(client))
}

/// `roce TOOL…` as a server on `port` and as its client, both with `shared` and the client then
/// with `client_only`, started as [`spawn_pair`] does. The client connects to `net`.1 and plays
/// `net`.2 (each test its own `net`: two servers cannot share an address's UDP port 4791).
pub(crate) fn spawn_tool_pair(
    tool: &[&str],
    port: &str,
    net: &str,
    shared: &[&str],
    client_only: &[&str],
) -> (Child, Child) {
    let (server_ip, ip) = (format!("{net}.1"), format!("{net}.2"));
    let server: Vec<&str> = tool
        .iter()
        .chain(&["-p", port])
        .chain(shared)
        .copied()
        .collect();
    let client: Vec<&str> = tool
        .iter()
        .chain(&[server_ip.as_str(), "-p", port, "--ip", ip.as_str()])
        .chain(shared)
        .chain(client_only)
        .copied()
        .collect();
    spawn_pair(&server, &client)
}

/// Sends SIGINT to a child, as Ctrl-C in its terminal would.
pub(crate) fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Starts `roce` with `args`, reads its standard error until a line for which `ready` holds,
/// then sends it Ctrl-C; its output, and all it said on standard error (which the output does
/// not hold).
pub(crate) fn interrupted_when(args: &[&str], ready: impl Fn(&str) -> bool) -> (Output, String) {
    use std::io::{BufRead as _, Read as _};
    let mut child = spawn(args);
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "ended before it was ready: {said}"
        );
        said.push_str(&line);
        if ready(&line) {
            break;
        }
    }
    interrupt(&child);
    stderr.read_to_string(&mut said).unwrap();
    (child.wait_with_output().unwrap(), said)
}

/// `roce` with `args`, to run in the network namespace `ns`.
pub(crate) fn roce_in(ns: &str, args: &[&str]) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_roce")])
        .args(args);
    command
}

/// Says that the running test skips, and why, in cargo's ordinary output
/// ([`roce_cabi::testing::say_skipped`]).
pub(crate) fn skipped(why: &str) {
    roce_cabi::testing::say_skipped(why);
}

/// Runs a command and returns its output.
pub(crate) fn sh(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().unwrap()
}

/// Runs a command that must succeed.
pub(crate) fn run_ok(args: &[&str]) {
    let out = sh(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether every program in `tools` is on the PATH. Where one is missing the test skips and
/// says which and how to install it, except in CI (`CI=true`), which installs them all
/// (`.ci/run`): there a missing tool is a failure, not a skip.
pub(crate) fn have_tools(test: &str, tools: &[&str]) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|tool| !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let message = format!(
        "{test}: {} not installed (apt-get install iproute2 ethtool nftables tshark)",
        missing.join(", ")
    );
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{message}: CI installs them"
    );
    skipped(&message);
    false
}

/// The simulated times that `roce sim`'s progress lines on `stderr` say they reached: the
/// lines after `prefix` (skipping those that start with `skip`), each checked by `check`,
/// whose first word is the time. Asserts there is one at least, that they never go back, and
/// that none passes `target` (in the lines' unit).
pub(crate) fn progress_reached(
    stderr: &str,
    prefix: &str,
    skip: &str,
    target: f64,
    check: impl Fn(&str),
) -> Vec<f64> {
    let reached: Vec<f64> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter(|l| skip.is_empty() || !l.starts_with(skip))
        .map(|l| {
            check(l);
            l.split(' ').next().unwrap().parse().unwrap()
        })
        .collect();
    assert!(!reached.is_empty(), "no progress line: {stderr}");
    assert!(reached.windows(2).all(|w| w[0] <= w[1]), "{reached:?}");
    assert!(
        reached.iter().all(|r| (0.0..=target).contains(r)),
        "{reached:?}"
    );
    reached
}
