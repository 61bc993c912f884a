//! `roce`: the command line of roce-emu, a software RoCEv2 NIC.
//!
//! Each subcommand is a module that calls the libraries; this file only parses arguments and
//! maps outcomes to exit codes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;
mod device;
mod dump;
mod exec;
mod json;
mod memory;
mod perf;
mod pingpong;
mod sim;
mod switch;

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
            eprintln!("roce: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
