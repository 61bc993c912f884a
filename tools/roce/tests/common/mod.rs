//! What the root-only tests share: running commands that set up namespaces and veths.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::process::{Command, Output};

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
    eprintln!("\n*** SKIPPED: {message} ***\n");
    false
}
