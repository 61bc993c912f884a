//! `roce agent --ip ADDR`: the agent of an address that several processes share
//! (roce_device::share), started by the first of them; not a command to run by hand.

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

/// How long the agent stays once its last process has left, for the next one to find it.
const LINGER: Duration = Duration::from_millis(500);

/// The agent of a shared address: started on demand by the first process that uses the
/// address under `roce exec`, gone a moment after the last one leaves.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The address it serves.
    #[arg(long, value_name = "ADDR")]
    ip: IpAddr,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    // The process that started it may be an MPI rank, whose launcher waits for the rank's
    // sockets and pipes to close: the agent, which outlives the rank, keeps none of them.
    roce_device::share::agent::close_inherited_descriptors()?;
    roce_device::share::agent::run(args.ip, LINGER)?;
    Ok(ExitCode::SUCCESS)
}
