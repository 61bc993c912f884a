//! Two `roce perf`s compare the parameters that must agree (-n/-D, -s/-a, -q, -b, -c,
//! --run_infinitely) before any
//! traffic, through the version exchange of the out-of-band protocol, and both stop naming the
//! difference (perftest 4.5 does not send them).

use anyhow::bail;
use roce_oob::perftest::{Amount, RunParams, Session};

/// What differs between this side's parameters and the peer's, as a sentence.
fn mismatch(mine: &RunParams, theirs: &RunParams) -> Option<String> {
    let amount = |a: Amount| match a {
        Amount::Iterations(n) => format!("-n {n}"),
        Amount::Seconds(s) => format!("-D {s}"),
    };
    let size = |s: Option<u32>| s.map_or_else(|| "-a".to_owned(), |s| format!("-s {s}"));
    let mut diffs = Vec::new();
    if mine.amount != theirs.amount {
        diffs.push(format!(
            "{} here, {} there",
            amount(mine.amount),
            amount(theirs.amount)
        ));
    }
    if mine.size != theirs.size {
        diffs.push(format!(
            "{} here, {} there",
            size(mine.size),
            size(theirs.size)
        ));
    }
    if mine.qps != theirs.qps {
        diffs.push(format!("-q {} here, -q {} there", mine.qps, theirs.qps));
    }
    let flag = |on: bool, name: &str| {
        if on {
            name.to_owned()
        } else {
            format!("no {name}")
        }
    };
    let (m, t) = (mine.modes, theirs.modes);
    if m.duplex != t.duplex {
        diffs.push(format!(
            "{} here, {} there",
            flag(m.duplex, "-b"),
            flag(t.duplex, "-b")
        ));
    }
    if m.run_infinitely != t.run_infinitely {
        diffs.push(format!(
            "{} here, {} there",
            flag(m.run_infinitely, "--run_infinitely"),
            flag(t.run_infinitely, "--run_infinitely")
        ));
    }
    if m.connection != t.connection {
        diffs.push(format!(
            "-c {} here, -c {} there",
            m.connection.name(),
            t.connection.name()
        ));
    }
    (!diffs.is_empty()).then(|| {
        format!(
            "the peer was given other parameters ({}): give both sides the same -n/-D, -s/-a, -q, -b, -c and --run_infinitely",
            diffs.join("; ")
        )
    })
}

/// Two `roce perf`s stop before any traffic when they were given different parameters.
pub(super) fn check_params<S>(session: &Session<S>, params: &RunParams) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Some(theirs) = &session.peer_version().params
        && let Some(why) = mismatch(params, theirs)
    {
        bail!(why);
    }
    Ok(())
}
