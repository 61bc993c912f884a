//! ibv_rc_pingpong's exchange over real sockets and against the captured bytes.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::time::Duration;

use common::{From, PINGPONG, play};
use roce_oob::OobError;
use roce_oob::pingpong::{self, Dest};
use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(10);

fn dest(msg: &[u8]) -> Dest {
    pingpong::decode(msg).unwrap()
}

#[tokio::test]
async fn client_and_server_over_loopback_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server_dest = Dest {
        lid: 0,
        qpn: 0x11,
        psn: 0x765543,
        gid: common::v4_gid(11),
    };
    let client_dest = Dest {
        lid: 0,
        qpn: 0x12,
        psn: 0x42577c,
        gid: common::v4_gid(12),
    };
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut connected_to = None;
        let remote = pingpong::server_exchange(&mut stream, &server_dest, |remote| {
            connected_to = Some(remote);
            async { Ok::<(), std::io::Error>(()) }
        })
        .await
        .unwrap();
        assert_eq!(connected_to, Some(remote));
        remote
    });
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let from_server = timeout(LIMIT, pingpong::client_exchange(&mut stream, &client_dest))
        .await
        .unwrap()
        .unwrap();
    let from_client = timeout(LIMIT, server).await.unwrap().unwrap();
    assert_eq!(from_server, server_dest);
    assert_eq!(from_client, client_dest);
}

/// Our `side` against the other side's captured bytes: given the captured QPN, PSN and GID of
/// `side`, it must send exactly what the real tool sent and learn the other side's.
async fn replay_every_capture(side: From) {
    let other = match side {
        From::Server => From::Client,
        From::Client => From::Server,
    };
    for t in PINGPONG {
        let (mut ours, peer) = duplex(4096);
        let player = tokio::spawn(play(peer, t, other));
        let local = dest(t.first(side));
        let exchange = async {
            match side {
                From::Server => {
                    let connect = |_| async { Ok::<(), std::io::Error>(()) };
                    pingpong::server_exchange(&mut ours, &local, connect).await
                }
                From::Client => pingpong::client_exchange(&mut ours, &local).await,
            }
        };
        let remote = timeout(LIMIT, exchange).await.unwrap().unwrap();
        drop(ours);
        timeout(LIMIT, player).await.unwrap().unwrap();
        assert_eq!(remote, dest(t.first(other)), "{}", t.file);
    }
}

/// Our server against the real client's bytes: it must reply with exactly what the real
/// server sent, given the real server's QPN, PSN and GID.
#[tokio::test]
async fn our_server_replays_every_capture() {
    replay_every_capture(From::Server).await;
}

/// Our client against the real server's bytes.
#[tokio::test]
async fn our_client_replays_every_capture() {
    replay_every_capture(From::Client).await;
}

/// The server replies only after the caller's connect step, and not at all if it fails.
#[tokio::test]
async fn server_replies_after_connect_and_not_on_failure() {
    let client_msg = common::RC_S64.first(From::Client);

    let (mut ours, mut peer) = duplex(4096);
    peer.write_all(client_msg).await.unwrap();
    let err = pingpong::server_exchange(&mut ours, &Dest::default(), |_| async {
        Err::<(), _>(std::io::Error::other("modify QP to RTR failed"))
    })
    .await
    .unwrap_err();
    assert!(matches!(err, OobError::Connect(_)), "{err}");
    assert!(err.to_string().contains("RTR"));
    drop(ours);
    let mut written = Vec::new();
    peer.read_to_end(&mut written).await.unwrap();
    assert!(written.is_empty());

    // Split steps: nothing is written between server_read and server_reply.
    let (mut ours, mut peer) = duplex(4096);
    peer.write_all(client_msg).await.unwrap();
    let remote = pingpong::server_read(&mut ours).await.unwrap();
    assert_eq!(remote, dest(client_msg));
    let mut probe = [0u8; 1];
    assert!(
        timeout(Duration::from_millis(50), peer.read(&mut probe))
            .await
            .is_err(),
        "the server wrote before its reply"
    );
}

#[tokio::test]
async fn wrong_done_and_early_close_are_errors() {
    let t = &common::RC_S64;
    // "DONE\0" instead of "done\0".
    let (mut ours, mut peer) = duplex(4096);
    peer.write_all(t.first(From::Client)).await.unwrap();
    peer.write_all(b"DONE\0").await.unwrap();
    let err = pingpong::server_exchange(&mut ours, &Dest::default(), |_| async {
        Ok::<(), std::io::Error>(())
    })
    .await
    .unwrap_err();
    assert!(
        matches!(&err, OobError::NotDone(s) if s == "DONE\\x00"),
        "{err}"
    );

    // The client closes half way through its message.
    let (mut ours, mut peer) = duplex(4096);
    peer.write_all(&t.first(From::Client)[..20]).await.unwrap();
    drop(peer);
    let err = pingpong::server_read(&mut ours).await.unwrap_err();
    assert!(
        matches!(
            err,
            OobError::Closed {
                got: 20,
                expected: 52,
                ..
            }
        ),
        "{err}"
    );

    // The server sends garbage.
    let (mut ours, mut peer) = duplex(4096);
    let mut bad = t.first(From::Server).to_vec();
    bad[4] = b' ';
    peer.write_all(&bad).await.unwrap();
    let err = pingpong::client_exchange(&mut ours, &Dest::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OobError::Delimiter {
                after: "LID",
                offset: 4,
                ..
            }
        ),
        "{err}"
    );
}
