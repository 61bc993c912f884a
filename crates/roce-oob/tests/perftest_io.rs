//! perftest's exchange over real sockets and against the captured bytes.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::time::Duration;

use common::{From, PERFTEST, Transcript, play};
use roce_oob::OobError;
use roce_oob::perftest::{
    self, BwReport, Config, Finish, IbvMtu, PeerDone, PerftestDest, Session, Side, SysData, Test,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, duplex};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(10);

const ALL_TESTS: [Test; 8] = [
    Test::WRITE_BW,
    Test::SEND_BW,
    Test::READ_BW,
    Test::ATOMIC_BW,
    Test::WRITE_LAT,
    Test::SEND_LAT,
    Test::READ_LAT,
    Test::ATOMIC_LAT,
];

/// What one side saw.
#[derive(Debug)]
struct Seen {
    mtu: IbvMtu,
    sys: SysData,
    peer_version: String,
    keys: [PerftestDest; 3],
    finish: Finish,
}

/// Runs one side's whole sequence as a perftest tool does it (connecting the QP and posting
/// receives are no-ops here).
async fn run_side<S>(
    stream: S,
    side: Side,
    test: Test,
    config: Config,
    local: PerftestDest,
    report: BwReport,
) -> Result<Seen, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut session = Session::start(stream, side, test, &config).await?;
    let (mtu, sys) = (session.mtu(), session.sys_data());
    let peer_version = session.peer_version().text.clone();
    let before = session.exchange_keys(local).await?;
    // Here the tool moves its QP to RTR and RTS.
    let after = session.connected().await?;
    // Here a send test posts its receives.
    let ready = session.ready().await?;
    // Here the test runs.
    let finish = session.finish(&report).await?;
    Ok(Seen {
        mtu,
        sys,
        peer_version,
        keys: [before, after, ready],
        finish,
    })
}

fn dest(qpn: u32, gid: Option<[u8; 16]>) -> PerftestDest {
    PerftestDest {
        lid: 0,
        out_reads: 1,
        qpn,
        psn: 0x100 + qpn,
        rkey: 0x1000 + qpn,
        vaddr: 0x7f00_0000_0000 + u64::from(qpn) * 0x1000,
        gid,
        srqn: 0,
    }
}

#[tokio::test]
async fn client_and_server_over_loopback_tcp_for_every_test() {
    for test in ALL_TESTS {
        for gid in [None, Some(common::v4_gid(11))] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server_dest = dest(0x11, gid);
            let client_dest = dest(0x12, gid.map(|_| common::v4_gid(12)));
            let client_report = BwReport {
                size: 65536,
                iters: 100,
                bw_peak: 0.12,
                bw_avg: 0.08,
                msg_rate_avg: 0.000_16,
            };
            let server_config = Config {
                version: "6.29".to_owned(),
                sys: SysData {
                    cycle_buffer: 65536,
                    cache_line_size: 64,
                },
                mtu: IbvMtu::Mtu4096,
                params: None,
                duplex: false,
            };
            let server = tokio::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                run_side(
                    stream,
                    Side::Server,
                    test,
                    server_config,
                    server_dest,
                    BwReport::default(),
                )
                .await
            });
            let stream = TcpStream::connect(addr).await.unwrap();
            let client = timeout(
                LIMIT,
                run_side(
                    stream,
                    Side::Client,
                    test,
                    Config::default(),
                    client_dest,
                    client_report,
                ),
            )
            .await
            .unwrap()
            .unwrap();
            let server = timeout(LIMIT, server).await.unwrap().unwrap().unwrap();

            let what = format!("{test:?} gid={}", gid.is_some());
            assert_eq!(client.peer_version, "6.29", "{what}");
            assert_eq!(server.peer_version, "6.06", "{what}");
            for seen in [&client, &server] {
                assert_eq!(seen.mtu, IbvMtu::Mtu1024, "{what}");
                assert_eq!(seen.sys.cycle_buffer, 65536, "{what}");
                assert_eq!(seen.sys.cache_line_size, 64, "{what}");
            }
            assert_eq!(client.keys, [server_dest; 3], "{what}");
            assert_eq!(server.keys, [client_dest; 3], "{what}");
            if test.exchanges_report() {
                assert_eq!(server.finish.remote_report, Some(client_report), "{what}");
                assert_eq!(
                    client.finish.remote_report,
                    Some(BwReport::default()),
                    "{what}"
                );
            } else {
                assert_eq!(server.finish.remote_report, None, "{what}");
            }
            if test.closes_with_done() {
                assert_eq!(client.finish.peer_done, Some(PeerDone::Done), "{what}");
                assert_eq!(server.finish.peer_done, Some(PeerDone::Done), "{what}");
                assert_eq!(client.finish.remote, Some(server_dest), "{what}");
                assert_eq!(server.finish.remote, Some(client_dest), "{what}");
            } else {
                assert_eq!(client.finish.peer_done, None, "{what}");
                assert_eq!(client.finish.remote, None, "{what}");
            }
        }
    }
}

fn test_of(t: &Transcript) -> Test {
    match t.file {
        "mtu1500-write_bw.pcap" => Test::WRITE_BW,
        "mtu1500-send_bw.pcap" => Test::SEND_BW,
        "mtu1500-read_bw.pcap" => Test::READ_BW,
        other => panic!("no test for {other}"),
    }
}

fn report_of(t: &Transcript, from: From) -> BwReport {
    let parts = t.report(from);
    if parts.is_empty() {
        return BwReport::default();
    }
    BwReport::decode(&parts.try_into().unwrap())
}

fn keys_of(t: &Transcript, from: From) -> PerftestDest {
    perftest::decode_keys(t.first_of_len(from, perftest::KEY_MSG_SIZE_GID), true).unwrap()
}

/// Plays the captured bytes of one side against our other side, which is given the real
/// tool's keys (and, for the server, the garbage it sent as a report, so that every byte is
/// deterministic) and must write exactly what the real tool wrote.
async fn replay(t: &'static Transcript, ours: From) {
    let (stream, peer) = duplex(4096);
    let peer_side = if ours == From::Client {
        From::Server
    } else {
        From::Client
    };
    let player = tokio::spawn(play(peer, t, peer_side));
    let side = if ours == From::Client {
        Side::Client
    } else {
        Side::Server
    };
    let seen = timeout(
        LIMIT,
        run_side(
            stream,
            side,
            test_of(t),
            Config::default(),
            keys_of(t, ours),
            report_of(t, ours),
        ),
    )
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{} as {ours:?}: {e}", t.file));
    timeout(LIMIT, player).await.unwrap().unwrap();

    assert_eq!(seen.peer_version, "6.06");
    assert_eq!(seen.mtu, IbvMtu::Mtu1024);
    assert_eq!(seen.sys, SysData::default());
    assert_eq!(seen.keys, [keys_of(t, peer_side); 3], "{}", t.file);
    assert_eq!(seen.finish.peer_done, Some(PeerDone::Done));
    if test_of(t).exchanges_report() {
        let got = seen.finish.remote_report.unwrap();
        let want = report_of(t, peer_side);
        assert_eq!(got.encode(), want.encode(), "{}", t.file);
    }
}

#[tokio::test]
async fn our_server_replays_every_capture() {
    for t in PERFTEST {
        replay(t, From::Server).await;
    }
}

#[tokio::test]
async fn our_client_replays_every_capture() {
    for t in PERFTEST {
        replay(t, From::Client).await;
    }
}

/// The client's report in mtu1500-write_bw.pcap, as the server reads it.
#[test]
fn captured_client_report_values() {
    let r = report_of(&common::WRITE_BW, From::Client);
    assert_eq!((r.size, r.iters), (65536, 100));
    assert!((r.bw_peak - 0.1215).abs() < 1e-3, "{r:?}");
    assert!((r.bw_avg - 0.0858).abs() < 1e-3, "{r:?}");
    assert!(r.msg_rate_avg > 0.0 && r.msg_rate_avg < 1e-3, "{r:?}");
}

#[tokio::test]
async fn a_peer_older_than_5_70_is_refused() {
    let (stream, mut peer) = duplex(4096);
    peer.write_all(b"5.60\0\0\0\0\0\0\0\0\0\0\0\0")
        .await
        .unwrap();
    let err = Session::start(stream, Side::Server, Test::WRITE_BW, &Config::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OobError::VersionTooOld(v) if v == "5.60"),
        "{err}"
    );
}

#[tokio::test]
async fn an_mtu_out_of_range_is_an_error() {
    let (stream, mut peer) = duplex(4096);
    let mut script = common::WRITE_BW.first(From::Client).to_vec();
    script.extend_from_slice(b"\0\0\x10\0\0\0\0\x40");
    script.extend_from_slice(b"7\0");
    peer.write_all(&script).await.unwrap();
    let err = Session::start(stream, Side::Server, Test::WRITE_BW, &Config::default())
        .await
        .unwrap_err();
    assert!(matches!(err, OobError::Mtu([b'7', 0])), "{err}");
}

/// Two sessions on one pipe, started.
async fn started_pair(
    test: Test,
) -> (
    Session<tokio::io::DuplexStream>,
    Session<tokio::io::DuplexStream>,
) {
    let (a, b) = duplex(4096);
    let config = Config::default();
    let client = Session::start(a, Side::Client, test, &config);
    let server = Session::start(b, Side::Server, test, &config);
    let (client, server) = tokio::join!(client, server);
    (client.unwrap(), server.unwrap())
}

/// Both sides of a pair say "connected", then "ready".
async fn connected_and_ready(
    client: &mut Session<tokio::io::DuplexStream>,
    server: &mut Session<tokio::io::DuplexStream>,
) {
    let (c, s) = tokio::join!(client.connected(), server.connected());
    c.unwrap();
    s.unwrap();
    let (c, s) = tokio::join!(client.ready(), server.ready());
    c.unwrap();
    s.unwrap();
}

#[tokio::test]
async fn steps_out_of_order_are_refused() {
    let (_client, mut server) = started_pair(Test::SEND_BW).await;
    let err = server.connected().await.unwrap_err();
    assert!(
        matches!(
            err,
            OobError::Sequence {
                called: "connected",
                after: "start"
            }
        ),
        "{err}"
    );
    assert!(matches!(
        server.ready().await,
        Err(OobError::Sequence {
            called: "ready",
            ..
        })
    ));
    assert!(matches!(
        server.finish(&BwReport::default()).await,
        Err(OobError::Sequence {
            called: "finish",
            after: "start"
        })
    ));
}

/// One side with `-x`, the other without: the side without reads 59 of the 108 bytes and
/// finds a GID byte where the SRQN should be.
#[tokio::test]
async fn gid_and_no_gid_sides_do_not_mix() {
    let (mut client, mut server) = started_pair(Test::WRITE_BW).await;
    let with_gid = dest(1, Some(common::v4_gid(12)));
    let without = dest(2, None);
    let client = tokio::spawn(async move { client.exchange_keys(with_gid).await });
    let err = timeout(LIMIT, server.exchange_keys(without))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            err,
            OobError::Hex {
                field: "SRQN",
                offset: 50,
                ..
            }
        ),
        "{err}"
    );
    // The client got its 59 bytes and cannot read the 108 it expects.
    drop(server);
    let c = timeout(LIMIT, client).await.unwrap().unwrap();
    assert!(matches!(
        c.unwrap_err(),
        OobError::Closed {
            got: 59,
            expected: 108,
            ..
        }
    ));
}

/// A peer that stops before the end: the error names the end-of-test sync, not the keys.
#[tokio::test]
async fn a_peer_gone_at_the_end_is_named_so() {
    let (mut client, mut server) = started_pair(Test::SEND_BW).await;
    let (c, s) = tokio::join!(
        client.exchange_keys(dest(1, None)),
        server.exchange_keys(dest(2, None))
    );
    c.unwrap();
    s.unwrap();
    connected_and_ready(&mut client, &mut server).await;
    drop(server);
    let err = client.finish(&BwReport::default()).await.unwrap_err();
    // (Writing to a closed pipe fails before the read would see the end.)
    assert!(
        matches!(err, OobError::Closed { .. } | OobError::Io { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("end-of-test sync"), "{text}");
    assert!(!text.contains("keys"), "{text}");
}

/// `ib_send_bw -a`: a handshake after each size's receives and one after its run, then the
/// usual end; `sync` is refused before "ready".
#[tokio::test]
async fn send_bw_with_all_sizes_syncs_around_each_size() {
    let (mut client, mut server) = started_pair(Test::SEND_BW).await;
    assert!(matches!(
        server.sync().await,
        Err(OobError::Sequence {
            called: "sync",
            after: "start"
        })
    ));
    let (c, s) = tokio::join!(
        client.exchange_keys(dest(1, None)),
        server.exchange_keys(dest(2, None))
    );
    assert_eq!((c.unwrap().qpn, s.unwrap().qpn), (2, 1));
    connected_and_ready(&mut client, &mut server).await;
    for _ in 0..2 * 22 + 1 {
        let (c, s) = tokio::join!(client.sync(), server.sync());
        assert_eq!((c.unwrap().qpn, s.unwrap().qpn), (2, 1));
    }
    let report = BwReport::default();
    let (c, s) = tokio::join!(client.finish(&report), server.finish(&report));
    assert!(c.unwrap().peer_done.is_some());
    assert!(s.unwrap().peer_done.is_some());
}

/// Two roce-emu sides see each other's parameters in the version exchange; perftest's
/// padding carries none.
#[tokio::test]
async fn run_params_are_exchanged() {
    use roce_oob::perftest::{Amount, Modes, RunParams};
    let (a, b) = duplex(4096);
    let mine = RunParams {
        amount: Amount::Iterations(100),
        size: Some(4096),
        qps: 1,
        modes: Modes::default(),
    };
    let theirs = RunParams {
        amount: Amount::Iterations(50),
        ..mine
    };
    let config = |p| Config {
        params: Some(p),
        ..Config::default()
    };
    let (client_config, server_config) = (config(mine), config(theirs));
    let (client, server) = tokio::join!(
        Session::start(a, Side::Client, Test::SEND_BW, &client_config),
        Session::start(b, Side::Server, Test::SEND_BW, &server_config)
    );
    assert_eq!(client.unwrap().peer_version().params, Some(theirs));
    assert_eq!(server.unwrap().peer_version().params, Some(mine));
    let (client, server) = started_pair(Test::SEND_BW).await;
    assert_eq!(client.peer_version().params, None);
    assert_eq!(server.peer_version().params, None);
}

/// perftest closes right after writing "done"; a close without it is reported, not an error.
#[tokio::test]
async fn close_without_done_is_reported() {
    let local = dest(3, None);
    let (mut ours, mut peer) = duplex(4096);
    peer.write_all(&perftest::encode_keys(&dest(4, None)))
        .await
        .unwrap();
    let closer = tokio::spawn(async move {
        // Read our keys and "done", then close without a "done".
        let mut buf = vec![0u8; perftest::KEY_MSG_SIZE + 5];
        tokio::io::AsyncReadExt::read_exact(&mut peer, &mut buf)
            .await
            .unwrap();
        buf
    });
    let (remote, done) = perftest::close_connection(&mut ours, Side::Server, &local)
        .await
        .unwrap();
    assert_eq!(remote, dest(4, None));
    assert_eq!(done, PeerDone::Closed);
    let written = closer.await.unwrap();
    assert_eq!(
        &written[..perftest::KEY_MSG_SIZE],
        perftest::encode_keys(&local)
    );
    assert_eq!(&written[perftest::KEY_MSG_SIZE..], b"done\0");

    // Anything else than "done\0" is an error.
    let (mut ours, mut peer) = duplex(4096);
    peer.write_all(&perftest::encode_keys(&dest(4, None)))
        .await
        .unwrap();
    peer.write_all(b"bye!\0").await.unwrap();
    let err = perftest::close_connection(&mut ours, Side::Server, &local)
        .await
        .unwrap_err();
    assert!(matches!(err, OobError::NotDone(_)), "{err}");
}

/// What a perftest tool with `-q n` does after the first three steps, transcribed from the
/// `main`s of write_bw.c and send_bw.c at v4.5-0.17 with the single steps: the per-QP loop of
/// handshakes before `ctx_connect`, send_bw's handshake with `my_dest[0]` right after it, the
/// per-QP loop again, the "additional handshake" with `my_dest[0]`, the end with `my_dest[0]`.
/// Returns the keys it received, in order.
async fn perftest_main_with_qps<S>(
    stream: &mut S,
    side: Side,
    test: Test,
    mine: &[PerftestDest],
) -> Vec<PerftestDest>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut seen = Vec::new();
    for dest in mine {
        seen.push(perftest::hand_shake(stream, side, dest).await.unwrap());
    }
    if test == Test::SEND_BW {
        seen.push(perftest::hand_shake(stream, side, &mine[0]).await.unwrap());
    }
    for dest in mine {
        seen.push(perftest::hand_shake(stream, side, dest).await.unwrap());
    }
    seen.push(perftest::hand_shake(stream, side, &mine[0]).await.unwrap());
    if test.exchanges_report() {
        seen.push(perftest::hand_shake(stream, side, &mine[0]).await.unwrap());
        perftest::exchange_bw_reports(stream, side, &BwReport::default())
            .await
            .unwrap();
    }
    let (remote, done) = perftest::close_connection(stream, side, &mine[0])
        .await
        .unwrap();
    assert_eq!(done, PeerDone::Done);
    seen.push(remote);
    seen
}

#[tokio::test]
async fn several_qps_shake_hands_once_per_qp_in_qp_order() {
    const QPS: u32 = 3;
    for test in [Test::WRITE_BW, Test::SEND_BW, Test::READ_BW] {
        for ours in [Side::Client, Side::Server] {
            let theirs = match ours {
                Side::Client => Side::Server,
                Side::Server => Side::Client,
            };
            let gid = Some(common::v4_gid(11));
            let our_keys: Vec<_> = (0..QPS).map(|i| dest(0x20 + i, gid)).collect();
            let their_keys: Vec<_> = (0..QPS).map(|i| dest(0x40 + i, gid)).collect();
            let (a, b) = duplex(4096);
            let expected = their_keys.clone();
            let ours_keys = our_keys.clone();
            let session = tokio::spawn(async move {
                let mut session = Session::start(a, ours, test, &Config::default()).await?;
                let before = session.exchange_qp_keys(ours_keys).await?;
                let after = session.connected().await?;
                let ready = session.ready().await?;
                session.finish(&BwReport::default()).await?;
                Ok::<_, OobError>((before, after, ready))
            });
            let mut b = b;
            let config = Config::default();
            perftest::exchange_versions(&mut b, theirs, &config.version)
                .await
                .unwrap();
            perftest::exchange_sys_data(&mut b, theirs, config.sys)
                .await
                .unwrap();
            perftest::exchange_mtu(&mut b, theirs, config.mtu)
                .await
                .unwrap();
            let seen = timeout(
                LIMIT,
                perftest_main_with_qps(&mut b, theirs, test, &their_keys),
            )
            .await
            .unwrap();
            let (before, after, ready) = timeout(LIMIT, session).await.unwrap().unwrap().unwrap();

            let what = format!("{test:?} ours={ours:?}");
            assert_eq!(before, expected, "{what}");
            assert_eq!(after, expected[QPS as usize - 1], "{what}");
            assert_eq!(ready, expected[0], "{what}");
            // What perftest received from us: each QP's keys in the loops, QP 0's elsewhere.
            let q = QPS as usize;
            let mut want: Vec<PerftestDest> = our_keys.clone();
            if test == Test::SEND_BW {
                want.push(our_keys[0]);
            }
            want.extend(our_keys.iter().copied());
            want.push(our_keys[0]);
            if test.exchanges_report() {
                want.push(our_keys[0]);
            }
            want.push(our_keys[0]);
            assert_eq!(seen, want, "{what}");
            assert_eq!(seen[..q], our_keys[..], "{what}");
        }
    }
}

#[tokio::test]
async fn qp_counts_perftest_refuses_are_refused() {
    let (_client, mut server) = started_pair(Test::WRITE_LAT).await;
    let two = vec![dest(0x11, None), dest(0x12, None)];
    assert!(matches!(
        server.exchange_qp_keys(two).await,
        Err(OobError::QpCount { qps: 2, .. })
    ));
    assert!(matches!(
        perftest::check_qps(Test::WRITE_BW, 0),
        Err(OobError::QpCount { qps: 0, .. })
    ));
    assert!(perftest::check_qps(Test::WRITE_BW, perftest::MAX_QPS).is_ok());
    assert!(matches!(
        perftest::check_qps(Test::SEND_BW, perftest::MAX_QPS + 1),
        Err(OobError::QpCount { .. })
    ));
    assert!(perftest::check_qps(Test::SEND_LAT, 1).is_ok());
}

/// With `-b` a write test's sides both run, sync once before the run (write_bw.c: `if
/// (user_param.duplex) ctx_hand_shake(...)`), swap their reports right after it and close
/// without the one-way end's handshake and report: the streams end with nothing left unread.
#[tokio::test]
async fn a_duplex_write_test_swaps_reports_after_its_run() {
    let (a, b) = duplex(4096);
    let config = Config {
        duplex: true,
        ..Config::default()
    };
    let side = |stream, side, qpn: u32, bw: f64| {
        let config = config.clone();
        async move {
            let mut session = Session::start(stream, side, Test::WRITE_BW, &config).await?;
            session.exchange_keys(dest(qpn, None)).await?;
            session.connected().await?;
            session.ready().await?;
            session.sync().await?;
            let report = BwReport {
                size: 65536,
                iters: 5000,
                bw_peak: bw,
                bw_avg: bw,
                msg_rate_avg: 0.01,
            };
            let theirs = session.exchange_reports(&report).await?;
            let finish = session.finish(&report).await?;
            Ok::<_, OobError>((theirs, finish))
        }
    };
    let (c, s) = timeout(LIMIT, async {
        tokio::join!(
            side(a, Side::Client, 1, 100.0),
            side(b, Side::Server, 2, 200.0)
        )
    })
    .await
    .unwrap();
    let ((client_saw, client_end), (server_saw, server_end)) = (c.unwrap(), s.unwrap());
    assert_eq!((client_saw.bw_avg, server_saw.bw_avg), (200.0, 100.0));
    for end in [client_end, server_end] {
        assert_eq!(end.remote_report, None);
        assert!(end.peer_done.is_some());
    }
}
