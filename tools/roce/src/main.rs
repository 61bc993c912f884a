//! `roce`: the command line of roce-emu, a software RoCEv2 NIC.
//!
//! Each subcommand is a module that calls the libraries; this file only parses arguments and
//! maps outcomes to exit codes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod dump;
mod json;

/// roce-emu: a RoCEv2 NIC in software, and the tools around it.
#[derive(Debug, Parser)]
#[command(name = "roce", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Dump(dump::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Dump(args) => dump::run(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("roce: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
