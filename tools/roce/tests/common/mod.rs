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
