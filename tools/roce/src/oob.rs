//! The TCP connection of the out-of-band exchange that `roce pingpong` and `roce perf` share
//! with their peer, as ibv_rc_pingpong and perftest open it: a client connects to the server's
//! port, a server waits for one client on every address.

use std::net::{IpAddr, SocketAddr};

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};

/// Connects to `server`:`port`, or without a server waits for a client on `port`, saying so on
/// standard error as `roce TOOL: waiting…`.
pub(crate) async fn connect_or_accept(
    server: Option<&str>,
    port: u16,
    tool: &str,
) -> anyhow::Result<TcpStream> {
    if let Some(server) = server {
        let target = format!("{server}:{port}");
        return TcpStream::connect(&target)
            .await
            .with_context(|| format!("couldn't connect to {target}"));
    }
    let at = SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port);
    let listener = TcpListener::bind(at)
        .await
        .with_context(|| format!("cannot listen on TCP port {port}"))?;
    eprintln!("roce {tool}: waiting for a client on {at} (TCP, every address)");
    Ok(listener.accept().await?.0)
}
