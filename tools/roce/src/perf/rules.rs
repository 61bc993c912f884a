//! perftest's rules for combinations of its options (-e, --run_infinitely, -c), checked before
//! anything is set up, and the sizes a UD test may send.

use anyhow::bail;
use roce_oob::perftest::{IbvMtu, Verb};

use super::{Args, ConnectionArg};

/// perftest's rules for -e (perftest_parameters.c: `case 'e'`, "Events feature not available
/// on WRITE verb"; `force_dependecies`, "Duration mode doesn't work with events."), and ours:
/// events are not polled for.
pub(super) fn check_events(args: &Args, verb: Verb) -> anyhow::Result<()> {
    if !args.events {
        return Ok(());
    }
    if verb == Verb::Write {
        bail!(
            "-e: not for write tests, as perftest (\"Events feature not available on WRITE verb\")"
        );
    }
    if args.duration.is_some() {
        bail!("-e: not with -D, as perftest (\"Duration mode doesn't work with events\")");
    }
    if args.device.busy_poll {
        bail!("-e waits for completion events, --busy-poll polls: give one of them");
    }
    Ok(())
}

/// perftest's rules for --run_infinitely (perftest_parameters.c `force_dependecies`: "run_infinitely
/// does not support events feature yet", "run_infinitely exists only in BW tests for now",
/// "run_infinitely mode is not supported in SEND Bidirectional BW test").
pub(super) fn check_run_infinitely(args: &Args, verb: Verb) -> anyhow::Result<()> {
    if !args.run_infinitely {
        return Ok(());
    }
    if args.events {
        bail!(
            "--run_infinitely: not with -e, as perftest (\"run_infinitely does not support events feature yet\")"
        );
    }
    if args.lat {
        bail!(
            "--run_infinitely: bandwidth tests only, as perftest (\"run_infinitely exists only in BW tests for now\")"
        );
    }
    if args.bidirectional && verb == Verb::Send {
        bail!(
            "--run_infinitely: not with -b in a send test, as perftest (\"run_infinitely mode is not supported in SEND Bidirectional BW test\")"
        );
    }
    Ok(())
}

/// perftest's rules for -c (perftest_parameters.c `change_conn_type`: "UC connection not
/// possible in READ/ATOMIC verbs", "UD connection only possible in SEND verb";
/// `force_dependecies`: "UC is not supported in librdmacm"), and ours.
pub(super) fn check_connection(args: &Args, verb: Verb) -> anyhow::Result<()> {
    match args.connection {
        ConnectionArg::Rc => {}
        ConnectionArg::Uc if matches!(verb, Verb::Read | Verb::Atomic) => {
            bail!(
                "-c UC: write and send only, as perftest (\"UC connection not possible in READ/ATOMIC verbs\")"
            );
        }
        ConnectionArg::Ud if verb != Verb::Send => {
            bail!("-c UD: send only, as perftest (\"UD connection only possible in SEND verb\")");
        }
        ConnectionArg::Uc if args.rdma_cm => {
            bail!("-c UC: not with -R, as perftest (\"UC is not supported in librdmacm\")");
        }
        ConnectionArg::Ud if args.rdma_cm => {
            bail!("-c UD: not with -R (roce perf's CM connects RC QPs)");
        }
        ConnectionArg::Ud if args.check => {
            bail!("--check: not with -c UD");
        }
        _ => {}
    }
    Ok(())
}

/// With -c UD, the sizes that fit one packet of the path MTU (perftest_communication.c
/// `check_mtu`: "Max msg size in UD is MTU" and the size cut to it without -s or with -a;
/// "Max message size in UD cannot be greater than MTU" with a larger -s; send_bw.c runs -a
/// up to the MTU).
pub(super) fn ud_sizes(args: &Args, sizes: Vec<u32>, mtu: IbvMtu) -> anyhow::Result<Vec<u32>> {
    let mtu = mtu.bytes();
    if args.connection != ConnectionArg::Ud || sizes.iter().all(|&s| s <= mtu) {
        return Ok(sizes);
    }
    if args.size.is_some() {
        bail!(
            "-c UD: -s {} is more than the path MTU, {mtu} bytes (\"Max message size in UD cannot be greater than MTU\")",
            sizes[0]
        );
    }
    eprintln!("roce perf: -c UD: a message is one packet: at most the path MTU, {mtu} bytes");
    let mut cut: Vec<u32> = sizes.into_iter().filter(|&s| s <= mtu).collect();
    if !args.all {
        cut = vec![mtu];
    }
    Ok(cut)
}
