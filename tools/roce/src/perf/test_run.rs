//! A test from start to end: the connection to the peer (over TCP or through the CM), the QPs
//! set up, and what a Ctrl-C prints.

use std::cell::RefCell;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use roce_oob::perftest::{
    Amount, Config, Exchange, IbvMtu, Kind, Modes, RunParams, Session, Side, Test, Verb,
};

use super::params::check_params;
use super::report::{Measured, Part, print_result};
use super::rules::ud_sizes;
use super::traffic::{Live, Plan};
use super::traffic_and_end::traffic_and_end;
use super::{Args, Current, DEFAULT_INTERVAL_SECS, all_sizes, rdma_cm, setup};

/// Runs the test; Ctrl-C stops it, prints what was measured until then and exits 130.
pub(super) async fn perf(args: &Args, test: Test, mtu: IbvMtu) -> anyhow::Result<ExitCode> {
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot catch Ctrl-C")?;
    let live = RefCell::new(Live::default());
    let current = RefCell::new(None);
    tokio::select! {
        outcome = test_run(args, test, mtu, &live, &current) => outcome,
        _ = interrupt.recv() => {
            let Some(now) = current.borrow_mut().take() else {
                eprintln!("roce perf: interrupted before the test started");
                return Ok(ExitCode::from(130));
            };
            let live = live.take();
            let elapsed = live.started.map_or(Duration::ZERO, |s| s.elapsed());
            let since = if args.run_infinitely { " since the last row" } else { "" };
            eprintln!(
                "roce perf: interrupted after {} iterations, {:.1} s{since}; what was measured so far:",
                live.completed,
                elapsed.as_secs_f64()
            );
            let mut measured = Measured {
                elapsed,
                iterations: live.completed,
                samples: live.samples,
                ..Measured::default()
            };
            if args.run_infinitely && args.bidirectional {
                // As the rows: both directions, as twice this side's.
                measured.remote = Some(measured.report(now.size, args.unit()));
            }
            let part = Part { header: now.header, footer: true, interrupted: true };
            print_result(args, test, now.size, &measured, &now.device, now.qpn, part).await?;
            Ok(ExitCode::from(130))
        }
    }
}

async fn test_run(
    args: &Args,
    test: Test,
    mtu: IbvMtu,
    live: &RefCell<Live>,
    current: &RefCell<Option<Current>>,
) -> anyhow::Result<ExitCode> {
    let lat = test.kind == Kind::Latency;
    let size = match test.verb {
        Verb::Atomic => 8,
        _ => args.size.unwrap_or(if lat { 2 } else { 65536 }),
    };
    let sizes = if args.all { all_sizes() } else { vec![size] };
    let iters = args.iters.unwrap_or(if lat { 1000 } else { 5000 });
    let plan = match args.duration {
        // --run_infinitely: no end; rows every -D seconds.
        _ if args.run_infinitely => Plan::Iterations(u32::MAX),
        // perftest_parameters.c: `margin = duration / 4` unless --margin is given.
        Some(secs) => Plan::Duration {
            total: Duration::from_secs(secs.into()),
            margin: Duration::from_secs((secs / 4).into()),
        },
        None => Plan::Iterations(iters),
    };
    let params = RunParams {
        amount: match args.duration {
            _ if args.run_infinitely => {
                Amount::Seconds(args.duration.unwrap_or(DEFAULT_INTERVAL_SECS))
            }
            Some(secs) => Amount::Seconds(secs),
            None => Amount::Iterations(iters),
        },
        size: (!args.all).then_some(size),
        qps: u16::try_from(args.qps).unwrap_or(u16::MAX),
        modes: Modes {
            duplex: args.bidirectional,
            run_infinitely: args.run_infinitely,
            connection: args.connection.oob(),
        },
    };
    let side = if args.server.is_some() {
        Side::Client
    } else {
        Side::Server
    };
    let config = Config {
        mtu,
        params: Some(params),
        duplex: args.bidirectional,
        ..Config::default()
    };
    let largest = sizes.iter().copied().max().unwrap_or(size);
    if args.rdma_cm {
        let (device, local_ip) = rdma_cm::spawn_device(args)?;
        let (stream, control) = rdma_cm::control(args, &device, local_ip, side).await?;
        let mut session =
            Session::start_over(stream, side, test, &config, Exchange::RdmaCm).await?;
        check_params(&session, &params)?;
        let qps = setup::Qps::create(args, device.clone(), local_ip).await?;
        // create_rdma_cm_connection: a handshake, the data QPs' connections, a handshake.
        let listen = rdma_cm::listen_for_data(args, &device, side)?;
        session.rdma_cm_sync().await?;
        let path_mtu =
            roce_core::Mtu::from_bytes(session.mtu().bytes()).context("the negotiated MTU")?;
        let mut conns =
            rdma_cm::connect_data(args, &qps, side, test.verb, path_mtu, listen).await?;
        session.rdma_cm_sync().await?;
        conns.push(control);
        let set_up = setup::set_up(args, &mut session, qps, largest, true).await?;
        let outcome =
            traffic_and_end(args, test, &sizes, plan, session, set_up, live, current).await;
        rdma_cm::disconnect_all(&device, &conns).await;
        return outcome;
    }
    let stream = crate::oob::connect_or_accept(args.server.as_deref(), args.port, "perf").await?;
    let default_ip = crate::oob::local_ip(&stream)?;
    let mut session = Session::start(stream, side, test, &config).await?;
    check_params(&session, &params)?;
    let sizes = ud_sizes(args, sizes, session.mtu())?;
    let largest = sizes.iter().copied().max().unwrap_or(size);
    let (device, local_ip) = args.device.spawn(default_ip)?;
    let qps = setup::Qps::create(args, device, local_ip).await?;
    let set_up = setup::set_up(args, &mut session, qps, largest, false).await?;
    traffic_and_end(args, test, &sizes, plan, session, set_up, live, current).await
}
