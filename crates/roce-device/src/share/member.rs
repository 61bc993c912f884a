//! A process's side of a shared address: join through the address's agent (starting it if none
//! runs), get a slot and sockets, and tell it the service IDs the CM listens on.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};

use super::{Message, agent_name};
use crate::backend::sys::{recv_with_fds, send_with_fds};

/// How long a process waits for an agent it started to take the name.
const AGENT_START: Duration = Duration::from_secs(5);

/// How long a listen waits for the agent to steer its REQs.
pub const LISTEN_WAIT: Duration = Duration::from_secs(2);

/// A member of a shared address: its slot, and its connection to the agent, whose end is the
/// member's (drop it after the sockets it was given).
#[derive(Debug)]
pub struct Member {
    slot: u8,
    conn: OwnedFd,
    listening: Vec<u64>,
}

/// What joining gives: the member, its first socket and, for an IPv4 NIC whose GID 0 is its
/// interface's link-local address, the socket of that address.
#[derive(Debug)]
pub struct Joined {
    /// The membership.
    pub member: Member,
    /// The socket of the address (of the interface, for an IPv6 NIC).
    pub first: std::net::UdpSocket,
    /// The link-local socket, where the agent could bind it.
    pub link_local: Option<std::net::UdpSocket>,
    /// Why the agent could not bind the link-local socket, where the address has one.
    pub link_local_error: Option<io::Error>,
}

/// Joins the NIC of `ip`, starting its agent with `agent_program agent --ip IP` (the `roce`
/// program) when none answers. An error of the agent's binding comes back as its `errno`
/// (`EADDRINUSE`: another program holds the port without sharing it).
pub fn join(ip: IpAddr, agent_program: &Path) -> io::Result<Joined> {
    let conn = connect_or_start(ip, agent_program)?;
    send_with_fds(&conn, &Message::Join.encode(), &[])?;
    let mut buf = [0u8; 64];
    let (len, fds) = recv_with_fds(&conn, &mut buf)?;
    match Message::decode(&buf[..len]) {
        Some(Message::Slot(slot, link_local_errno)) => {
            let mut sockets = fds.into_iter().map(std::net::UdpSocket::from);
            let first = sockets
                .next()
                .ok_or_else(|| io::Error::other("the agent sent no socket"))?;
            Ok(Joined {
                member: Member {
                    slot,
                    conn,
                    listening: Vec::new(),
                },
                first,
                link_local: sockets.next(),
                link_local_error: link_local_errno.map(io::Error::from_raw_os_error),
            })
        }
        Some(Message::Refused(errno)) => Err(io::Error::from_raw_os_error(errno)),
        _ if len == 0 => Err(io::Error::other("the address's agent ended")),
        _ => Err(io::Error::other("the address's agent answered nonsense")),
    }
}

/// The service IDs the processes sharing `ip`'s NIC listen on, as its agent steers their REQs;
/// `Ok(None)` when no agent runs.
pub fn services(ip: IpAddr) -> io::Result<Option<Vec<u64>>> {
    let conn = match connect_agent(ip) {
        Ok(conn) => conn,
        Err(Errno::ECONNREFUSED | Errno::ENOENT) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    send_with_fds(&conn, &Message::Services.encode(), &[])?;
    let mut buf = [0u8; 16 * 1024];
    let (len, _) = recv_with_fds(&conn, &mut buf)?;
    match Message::decode(&buf[..len]) {
        Some(Message::Listen(ids)) => Ok(Some(ids)),
        _ => Err(io::Error::other("the address's agent answered nonsense")),
    }
}

/// A connection to the agent of `ip`: the running one, or one this process starts.
fn connect_or_start(ip: IpAddr, agent_program: &Path) -> io::Result<OwnedFd> {
    let attempt = || connect_agent(ip);
    match attempt() {
        Ok(conn) => return Ok(conn),
        Err(Errno::ECONNREFUSED | Errno::ENOENT) => {}
        Err(err) => return Err(err.into()),
    }
    start_agent(ip, agent_program)?;
    let deadline = Instant::now() + AGENT_START;
    loop {
        match attempt() {
            Ok(conn) => return Ok(conn),
            Err(Errno::ECONNREFUSED | Errno::ENOENT) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(err) => {
                return Err(io::Error::other(format!(
                    "the agent of {ip} ({} agent --ip {ip}) did not answer: {err}",
                    agent_program.display()
                )));
            }
        }
    }
}

/// A connection to the agent of `ip`, if one runs (`ECONNREFUSED` or `ENOENT` if none).
fn connect_agent(ip: IpAddr) -> nix::Result<OwnedFd> {
    let addr = UnixAddr::new_abstract(agent_name(ip).as_bytes())?;
    let conn = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    connect(conn.as_raw_fd(), &addr)?;
    Ok(conn)
}

/// Starts the agent of `ip` in a process group of its own (a Ctrl-C meant for the program
/// does not reach it), its output discarded; a thread reaps it when it ends. Two processes
/// that start one at once start two: the second finds the name taken and ends at once.
fn start_agent(ip: IpAddr, agent_program: &Path) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(agent_program)
        .args(["agent", "--ip", &ip.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("cannot start {} agent: {err}", agent_program.display()),
            )
        })?;
    roce_cabi::spawn_settled("roce-agent-reaper", move || child.wait())?;
    Ok(())
}

impl Member {
    /// The slot the engine names its QPs, keys and CM IDs in.
    pub fn slot(&self) -> u8 {
        self.slot
    }

    /// Tells the agent the service IDs the CM listens on, if they changed, and waits (at most
    /// [`LISTEN_WAIT`]) until it steers their REQs here: a REQ that comes right after the
    /// listen finds this member, not the first one.
    pub fn listen(&mut self, mut ids: Vec<u64>) -> io::Result<()> {
        ids.sort_unstable();
        if ids == self.listening {
            return Ok(());
        }
        send_with_fds(&self.conn, &Message::Listen(ids.clone()).encode(), &[])?;
        self.listening = ids;
        let deadline = Instant::now() + LISTEN_WAIT;
        let mut buf = [0u8; 64];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let fd = std::os::fd::AsFd::as_fd(&self.conn);
            let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
            let timeout =
                nix::poll::PollTimeout::try_from(left).unwrap_or(nix::poll::PollTimeout::ZERO);
            match nix::poll::poll(&mut fds, timeout) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the agent did not answer",
                    ));
                }
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
            }
            let (len, _) = recv_with_fds(&self.conn, &mut buf)?;
            match Message::decode(&buf[..len]) {
                Some(Message::Listening) => return Ok(()),
                _ if len == 0 => return Err(io::Error::other("the address's agent ended")),
                _ => {}
            }
        }
    }
}
