//! The TCP connection of the out-of-band exchange that `roce pingpong` and `roce perf` share
//! with their peer, as ibv_rc_pingpong and perftest open it: a client connects to the server's
//! port, a server waits for one client on every address, IPv4 and IPv6.

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
        return TcpStream::connect((server, port))
            .await
            .with_context(|| format!("couldn't connect to {target}"));
    }
    // [::] takes IPv4 clients too (as ::ffff:a.b.c.d: IPV6_V6ONLY cleared on the socket,
    // whatever net.ipv6.bindv6only says), so that an IPv6 client's connection gives the NIC
    // its IPv6 address; 0.0.0.0 where the host has no IPv6.
    let v6 = SocketAddr::new(IpAddr::from([0u16; 8]), port);
    let v4 = SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port);
    let (listener, at) = match dual_stack(v6) {
        Ok(l) => (l, v6),
        Err(_) => (
            TcpListener::bind(v4)
                .await
                .with_context(|| format!("cannot listen on TCP port {port}"))?,
            v4,
        ),
    };
    eprintln!("roce {tool}: waiting for a client on {at} (TCP, every address)");
    Ok(listener.accept().await?.0)
}

/// A listener on `[::]:port` that IPv4 clients reach too: `IPV6_V6ONLY` off on the socket
/// itself, as tokio's `bind` would leave it to the `net.ipv6.bindv6only` sysctl.
fn dual_stack(at: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV6, Type::STREAM, None)?;
    socket.set_only_v6(false)?;
    socket.set_reuse_address(true)?;
    socket.bind(&at.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

/// The address of our end of `stream`, an IPv4 client's on an IPv6 listener as IPv4: the
/// address the NIC takes when no --ip is given.
pub(crate) fn local_ip(stream: &TcpStream) -> std::io::Result<IpAddr> {
    Ok(stream.local_addr()?.ip().to_canonical())
}
