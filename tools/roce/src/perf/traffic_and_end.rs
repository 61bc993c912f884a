//! The traffic of every size of a test, then the end of the out-of-band exchange and the
//! result printed.

use std::cell::RefCell;
use std::process::ExitCode;
use std::time::Duration;

use roce_core::{Qpn, RecvWr, Sge};
use roce_oob::perftest::{BwReport, Kind, Session, Side, Test, Verb};

use super::report::{Measured, Part, print_result};
use super::traffic::{Live, Plan, RECV, Runner};
use super::{Args, ConnectionArg, Current, DEFAULT_INTERVAL_SECS, GRH, check, setup, traffic};

/// The traffic of every size, then the end of the exchange and the result.
#[allow(clippy::too_many_arguments)]
pub(super) async fn traffic_and_end<S>(
    args: &Args,
    test: Test,
    sizes: &[u32],
    plan: Plan,
    mut session: Session<S>,
    set_up: setup::SetUp,
    live: &RefCell<Live>,
    current: &RefCell<Option<Current>>,
) -> anyhow::Result<ExitCode>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let lat = test.kind == Kind::Latency;
    let side = session.side();
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let size = sizes.first().copied().unwrap_or(1);
    let setup::SetUp {
        device,
        endpoints,
        mr,
        half,
        remotes,
        ..
    } = &set_up;
    let (device, endpoints, mr, half) = (device, endpoints.as_slice(), mr, *half);
    let qps = args.qps as usize;
    let ours: Vec<Qpn> = endpoints.iter().map(|qp| qp.qpn).collect();
    check::fill(mr, &ours, half);
    // Who receives checks: the server what a client WRITEs or SENDs, the client what it READs.
    let checker = args.check.then(|| {
        let half_seen = match test.verb {
            Verb::Read => check::Half::Receive,
            _ => check::Half::Send,
        };
        RefCell::new(check::Checker::new(
            &ours,
            &set_up.peer_qpns,
            half_seen,
            largest as usize,
        ))
    });
    let checks_here = match test.verb {
        Verb::Read => side == Side::Client,
        _ => side == Side::Server,
    };
    let checker = checker.filter(|_| checks_here);
    let slot = |i: usize, size: u32| Sge {
        addr: mr.addr() + (i * half) as u64,
        length: size,
        lkey: mr.lkey(),
    };
    let duplex = args.bidirectional;
    let receives = test.verb == Verb::Send && (lat || side == Side::Server || duplex);
    let posted = if receives {
        args.rx_depth()
            .min(u32::try_from(plan.iters()).unwrap_or(u32::MAX))
            .max(1)
    } else {
        0
    };
    let one_way_server = side == Side::Server && test.verb != Verb::Send && !duplex;
    let qpn = endpoints[0].qpn;
    let index: std::collections::BTreeMap<Qpn, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, qp)| (qp.qpn, i))
        .collect();
    let cas = args.atomic_type == "CMP_AND_SWAP";
    // -e: the CQ armed once before the traffic, as perftest arms it after connecting.
    let channel = if args.events {
        Some(traffic::events::Channel::new(device, endpoints[0].cq)?)
    } else {
        None
    };
    // --run_infinitely: the runner's rows, printed as they come.
    let (rows_out, mut rows_in) = tokio::sync::mpsc::unbounded_channel();
    let rows = args.run_infinitely.then(|| {
        let secs = args.duration.unwrap_or(DEFAULT_INTERVAL_SECS);
        RefCell::new(traffic::rows::Rows::new(
            Duration::from_secs(secs.into()),
            rows_out,
        ))
    });
    let mut last = (size, Measured::default());
    for (k, &size) in sizes.iter().enumerate() {
        // With one QP receives land in the send half, where ib_send_lat's answer is sent
        // from; with several, each QP's in its receive half (perftest_resources.c
        // `ctx_set_recv_wqes`: `buf[0] + (num_of_qps + k) * send_qp_buff_size`).
        // A UD receive has the GRH's 40 bytes before the message.
        let grh = if args.connection == ConnectionArg::Ud {
            GRH
        } else {
            0
        };
        let recv_sges: Vec<Sge> = (0..qps)
            .map(|i| slot(if qps == 1 { 0 } else { qps + i }, size + grh))
            .collect();
        for (qp, sge) in endpoints.iter().zip(&recv_sges) {
            for _ in 0..posted {
                device
                    .post_recv(
                        qp.qpn,
                        RecvWr {
                            wr_id: RECV,
                            sgl: [*sge].into(),
                        },
                    )
                    .await?;
            }
        }
        // send_bw.c with -a: a handshake once each size's receives are posted.
        if k == 0 {
            session.ready().await?;
        } else if test.verb == Verb::Send {
            session.sync().await?;
        }
        // write_bw.c, read_bw.c, atomic_bw.c with -b: a handshake before each run.
        // (Not with --run_infinitely, whose branch of those mains has none.)
        if duplex && test.verb != Verb::Send && !args.run_infinitely {
            session.sync().await?;
        }
        *current.borrow_mut() = Some(Current {
            device: device.clone(),
            qpn,
            size,
            header: k == 0,
        });
        let runner = Runner {
            device,
            qps: endpoints,
            index: index.clone(),
            sges: (0..qps).map(|i| slot(i, size)).collect(),
            recv_sges,
            remotes: remotes.clone(),
            limit: Duration::from_secs(args.timeout),
            plan,
            live,
            check: checker.as_ref().map(|c| (mr, c)),
            events: channel.as_ref(),
            rows: rows.as_ref(),
            ud: set_up.ud.as_deref(),
        };
        let run = async {
            match (test.kind, test.verb, side) {
                (Kind::Bandwidth, Verb::Send, side) if duplex => {
                    runner
                        .bidirectional(
                            (args.tx_depth, args.cq_mod(Verb::Send, size)),
                            posted,
                            side == Side::Client,
                        )
                        .await
                }
                (Kind::Bandwidth, verb, _) if duplex => {
                    runner
                        .bandwidth(verb, (args.tx_depth, args.cq_mod(verb, size)), cas)
                        .await
                }
                (Kind::Bandwidth, Verb::Send, Side::Server) => runner.receive_all(posted).await,
                (Kind::Bandwidth, _, Side::Server) => Ok(Measured::default()),
                (Kind::Bandwidth, verb, Side::Client) => {
                    runner
                        .bandwidth(verb, (args.tx_depth, args.cq_mod(verb, size)), cas)
                        .await
                }
                (Kind::Latency, Verb::Send, side) => {
                    runner.send_latency(side == Side::Client).await
                }
                (Kind::Latency, Verb::Write, side) => {
                    runner.write_latency(mr, half, side == Side::Server).await
                }
                (Kind::Latency, _, Side::Server) => Ok(Measured::default()),
                (Kind::Latency, verb, Side::Client) => runner.latency(verb, cas).await,
            }
        };
        // The rows of --run_infinitely, printed while the traffic runs (the printer waits
        // for ever: the run ends first, on an error, or Ctrl-C ends both).
        let print_rows = async {
            let mut first = true;
            while let Some(row) = rows_in.recv().await {
                let row = Measured {
                    // perftest's `run_inf_bi_factor`: -b counts twice this side's traffic.
                    remote: duplex.then(|| row.report(size, args.unit())),
                    ..row
                };
                let part = Part {
                    header: first,
                    footer: false,
                    interrupted: false,
                };
                print_result(args, test, size, &row, device, qpn, part).await?;
                if let Some(now) = current.borrow_mut().as_mut() {
                    now.header = false;
                }
                first = false;
            }
            std::future::pending::<()>().await;
            anyhow::Ok(())
        };
        let outcome = tokio::select! {
            outcome = run => outcome,
            Err(why) = print_rows => return Err(why),
        };
        let measured = match outcome {
            Ok(measured) => Measured {
                cq_events: channel.as_ref().map(traffic::events::Channel::events),
                ..measured
            },
            Err(traffic::TrafficError::Silence { secs, .. }) if args.run_infinitely => {
                // A run without end ends when the peer stops sending (Ctrl-C there).
                if !args.json {
                    println!("{}", "-".repeat(87));
                }
                eprintln!("roce perf: nothing came for {secs} s: the peer ended the run");
                return Ok(ExitCode::SUCCESS);
            }
            Err(why) => {
                eprintln!("roce perf: {why}");
                return Ok(ExitCode::from(1));
            }
        };
        // write_bw.c and read_bw.c with -b -a: a handshake after each run (perftest >= 4.6).
        if duplex && args.all && test.verb != Verb::Send {
            session.sync().await?;
        }
        // -b: the reports swapped, and each side shows the sum of both (not a send test's
        // with -D: send_bw.c `if (user_param.duplex && user_param.test_type != DURATION)`).
        let measured = if duplex && !lat && !(test.verb == Verb::Send && args.duration.is_some()) {
            let remote = session
                .exchange_reports(&measured.report(size, args.unit()))
                .await?;
            Measured {
                remote: Some(remote),
                ..measured
            }
        } else {
            measured
        };
        // ... and one after its run.
        if args.all && test.verb == Verb::Send {
            session.sync().await?;
        }
        // A bandwidth row as soon as its size is done, on the sides that measure.
        if !lat && !one_way_server {
            let part = Part {
                header: k == 0,
                footer: k + 1 == sizes.len(),
                interrupted: false,
            };
            print_result(args, test, size, &measured, device, qpn, part).await?;
        }
        last = (size, measured);
    }
    *current.borrow_mut() = None;
    let (size, measured) = last;
    let report: BwReport = measured.report(size, args.unit());
    if args.run_infinitely && one_way_server {
        // Its client runs until Ctrl-C there, and then closes the exchange: the end.
        if session.finish(&report).await.is_err() {
            eprintln!("roce perf: the client ended the run (--run_infinitely)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let finish = session.finish(&report).await.map_err(|e| {
        anyhow::Error::new(e)
            .context("the peer stopped before the end of the test (see its output)")
    })?;
    if let Some(checker) = &checker {
        let mut checker = checker.borrow_mut();
        // A WRITE's target sees no completion: its last message, whole, once the test is over.
        if test.verb == Verb::Write {
            for (qp, _) in endpoints.iter().enumerate() {
                let target = slot(qps + qp, size);
                let message = measured.per_qp.as_ref().map_or(0, |p| p.done[qp]);
                if let Err(mismatch) = checker.check(mr, target, qp, message) {
                    eprintln!("roce perf: {mismatch}");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        eprintln!(
            "roce perf: --check: {} messages ({} bytes) checked, every byte as sent",
            checker.checked.messages, checker.checked.bytes
        );
    }
    let whole = Part {
        header: true,
        footer: true,
        interrupted: false,
    };
    if lat {
        print_result(args, test, size, &measured, device, qpn, whole).await?;
    } else if one_way_server {
        // A one-way test's server prints what the client measured, as perftest does.
        let shown = finish
            .remote_report
            .map(|r| Measured::from_report(&r))
            .unwrap_or(measured);
        print_result(args, test, size, &shown, device, qpn, whole).await?;
    }
    Ok(ExitCode::SUCCESS)
}
