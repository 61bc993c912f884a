//! `roce`: the command line of roce-emu, a software RoCEv2 NIC.
//!
//! Each subcommand is a module that calls the libraries; this file only parses arguments and
//! maps outcomes to exit codes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cm;
mod cm_stream;
mod demo;
mod device;
mod dump;
mod exec;
mod json;
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
    Demo(demo::Args),
    Dump(dump::Args),
    Exec(exec::Args),
    Perf(perf::Args),
    Pingpong(pingpong::Args),
    Sim(sim::Args),
    Switch(switch::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to standard error, filtered by RUST_LOG (e.g. RUST_LOG=roce_core=debug).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let outcome = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Dump(args) => dump::run(&args),
        Command::Exec(args) => exec::run(&args),
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
    use super::describe;
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
