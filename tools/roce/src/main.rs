//! `roce`: the command line of roce-emu, a software RoCEv2 NIC.
//!
//! Each subcommand is a module that calls the libraries; this file only parses arguments and
//! maps outcomes to exit codes.

use std::ffi::OsStr;
use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent;
mod cm;
mod cm_stream;
mod demo;
mod device;
mod dump;
mod exec;
mod interrupt;
mod json;
mod libs;
mod memory;
mod oob;
mod perf;
mod pingpong;
mod sim;
mod switch;

/// What `roce` writes before its error, on standard error, as it fails.
pub(crate) const ERROR_PREFIX: &str = "roce: error: ";

/// Its exit status then.
pub(crate) const ERROR_EXIT: u8 = 2;

/// roce-emu: a RoCEv2 NIC in software, and the tools around it.
#[derive(Debug, Parser)]
#[command(
    name = "roce",
    version,
    about,
    propagate_version = true,
    long_about = "roce-emu: a RoCEv2 NIC in software, and the tools around it.\n\n\
        The NIC speaks RoCEv2 (RC, UC and UD over UDP port 4791) as the kernel's Soft-RoCE driver \
        (rxe) does. Its UDP backend needs no privileges: every packet leaves from port 4791, and \
        since a UDP socket does not show the IPv4 ID of what it receives, the NIC solves for the ID \
        that makes a packet's ICRC verify (the CRC is linear in it) and drops the packet when \
        none does (rx_icrc_errors): a corrupted packet gets through one time in 65 536, where \
        the raw backend, which sees the ID, checks every ICRC in full. Logs: \
        RUST_LOG=roce_core=debug.",
    after_help = "Start with: roce demo   (two NICs on loopback, every operation checked)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(hide = true)]
    Agent(agent::Args),
    Demo(demo::Args),
    Dump(dump::Args),
    Exec(exec::Args),
    #[command(name = exec::tree::SUBCOMMAND, hide = true)]
    ExecInDeviceTree(exec::tree::Args),
    Perf(perf::Args),
    Pingpong(pingpong::Args),
    Sim(sim::Args),
    Switch(switch::Args),
}

fn main() -> ExitCode {
    quiet_on_a_closed_pipe();
    let cli = Cli::parse();
    // A `--cc-param` the algorithm does not take is a usage error, said before anything runs
    // (a server would otherwise find out when its first client came).
    if let Err(err) = match &cli.command {
        Command::Exec(args) => args.spec().congestion().map(drop),
        Command::Perf(args) => args.device.congestion().map(drop),
        Command::Pingpong(args) => args.device.congestion().map(drop),
        _ => Ok(()),
    } {
        use clap::CommandFactory;
        Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!("--cc-param: {err}"),
            )
            .exit();
    }
    // Logs go to standard error, filtered by RUST_LOG (e.g. RUST_LOG=roce_core=debug).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .init();
    let outcome = match cli.command {
        Command::Agent(args) => agent::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Dump(args) => dump::run(&args),
        Command::Exec(args) => exec::run(&args),
        Command::ExecInDeviceTree(args) => exec::tree::run(&args),
        Command::Perf(args) => perf::run(&args),
        Command::Pingpong(args) => pingpong::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Switch(args) => switch::run(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("{ERROR_PREFIX}{}", describe(&err));
            ExitCode::from(ERROR_EXIT)
        }
    }
}

/// The exit status of a program whose reader went away (`roce demo | head -1`), as a shell
/// reports a process that SIGPIPE ended: 128 + 13.
const CLOSED_PIPE_EXIT: i32 = 141;

/// Ends the process quietly, with [`CLOSED_PIPE_EXIT`], when a `println!` finds standard output
/// closed by its reader, instead of the panic and backtrace that `println!` turns the `EPIPE`
/// into (Rust ignores SIGPIPE, and restoring it would take `unsafe`). Every other panic is
/// reported as before.
fn quiet_on_a_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if message.is_some_and(is_closed_pipe) {
            std::process::exit(CLOSED_PIPE_EXIT);
        }
        report(info);
    }));
}

/// Whether a panic's message is `println!`'s on a closed standard output: `failed printing to
/// stdout: ` and the error, `EPIPE` (32 on Linux).
fn is_closed_pipe(message: &str) -> bool {
    const EPIPE: i32 = 32;
    message.starts_with("failed printing to stdout")
        && message.ends_with(&std::io::Error::from_raw_os_error(EPIPE).to_string())
}

/// Whether the logs on standard error are coloured: only on a terminal, and never when
/// `NO_COLOR` is set to anything but the empty string (no-color.org), so that a log written to
/// a file or a pipe carries no escape codes.
fn colour(stderr_is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(OsStr::is_empty)
}

/// An error and its causes, `: `-separated, each said once: a cause whose text is already in
/// what is printed (a `#[error("{0}")]` or `"{message}: {source}"` that shows its own
/// `#[source]`) is left out, so that `{:#}` does not print `No such file or directory (os
/// error 2)` twice.
fn describe(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{colour, describe};
    use std::ffi::OsStr;

    #[test]
    fn only_printlns_closed_pipe_is_a_quiet_end() {
        assert!(super::is_closed_pipe(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(!super::is_closed_pipe(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!super::is_closed_pipe("index out of bounds"));
    }

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
        assert!(!colour(false, Some(OsStr::new(""))));
    }
    use anyhow::Context;

    /// An error that shows its source in its own text, as `#[error("{0}")]` does.
    #[derive(Debug)]
    struct Shows(std::io::Error);

    impl std::fmt::Display for Shows {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.fmt(f)
        }
    }

    impl std::error::Error for Shows {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn every_cause_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let text = io.to_string();
        let err = Err::<(), _>(Shows(io))
            .context("cannot read x.pcap")
            .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!("cannot read x.pcap: {text}: {text}")
        );
        assert_eq!(describe(&err), format!("cannot read x.pcap: {text}"));
        // Causes that say something new are all kept.
        let err = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(describe(&err), "outer: middle: inner");
    }
}
