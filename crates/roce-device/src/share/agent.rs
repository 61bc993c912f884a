//! The agent of a shared address: binds every member's sockets in the address's `SO_REUSEPORT`
//! group, keeps the group's order, and steers the group's datagrams ([`crate::backend::steer`]).
//! One per address and network namespace, started by the first member; it ends once no member
//! has been left for a moment.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, Backlog, SockFlag, SockType, UnixAddr, accept4, bind, listen, socket,
};

use super::{Layout, Message, agent_name};
use crate::backend::steer::Steering;
use crate::backend::sys::{recv_with_fds, send_with_fds};

/// Serves the address `ip` until no member has been left for `linger`. Returns at once when
/// another agent serves it already (its name is taken).
pub fn run(ip: IpAddr, linger: Duration) -> io::Result<()> {
    let listener = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    match bind(
        listener.as_raw_fd(),
        &UnixAddr::new_abstract(agent_name(ip).as_bytes())?,
    ) {
        Err(Errno::EADDRINUSE) => return Ok(()),
        other => other?,
    }
    listen(&listener, Backlog::new(64)?)?;
    let iface = crate::backend::udp::interface_of(ip);
    let mut agent = Agent::new(Layout::of(ip, iface.as_ref()));
    let mut pending: Vec<OwnedFd> = Vec::new();
    loop {
        let idle = agent.members.is_empty() && pending.is_empty();
        let timeout = if idle {
            PollTimeout::try_from(linger).unwrap_or(PollTimeout::MAX)
        } else {
            PollTimeout::NONE
        };
        let ready = {
            let mut fds: Vec<PollFd<'_>> = std::iter::once(listener.as_fd())
                .chain(pending.iter().map(AsFd::as_fd))
                .chain(agent.members.iter().map(|m| m.conn.as_fd()))
                .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
                .collect();
            match poll(&mut fds, timeout) {
                Ok(0) if idle => return Ok(()),
                Ok(_) | Err(Errno::EINTR) => {}
                Err(err) => return Err(err.into()),
            }
            let ready: Vec<bool> = fds
                .iter()
                .map(|fd| fd.revents().is_some_and(|r| !r.is_empty()))
                .collect();
            ready
        };
        let (listener_ready, rest) = ready.split_first().expect("the listener is polled");
        let (pending_ready, members_ready) = rest.split_at(pending.len());
        // Members first, from the last: a leave moves the last member into its place.
        for index in (0..members_ready.len()).rev() {
            if members_ready[index] {
                agent.hear(index);
            }
        }
        for index in (0..pending_ready.len()).rev() {
            if pending_ready[index] {
                let conn = pending.swap_remove(index);
                agent.admit(conn);
            }
        }
        if *listener_ready {
            match accept4(&listener, SockFlag::SOCK_CLOEXEC) {
                Ok(fd) => pending.push(fd),
                Err(err) => tracing::debug!(error = %err, "accept failed"),
            }
        }
    }
}

/// One process using the address.
#[derive(Debug)]
struct Member {
    slot: u8,
    /// The connection whose end is the member's.
    conn: OwnedFd,
    /// The agent's copies of the member's sockets: the socket stays in the group until these
    /// close, which is when the agent decides.
    sockets: Vec<std::net::UdpSocket>,
    /// The service IDs its CM listens on.
    listening: Vec<u64>,
}

/// The members, in the order of their sockets in the group.
#[derive(Debug)]
struct Agent {
    /// The address's sockets as the host has them; `layout`, those the members get now.
    home: Layout,
    layout: Layout,
    /// Why the layout's link-local socket could not be bound when the first member came
    /// (another NIC on the interface holds it): the NIC goes on without it.
    link_local_errno: Option<i32>,
    members: Vec<Member>,
    /// Where the search for a free slot starts: slots are handed out in turn, so that one is
    /// used again only after every other, long after a peer stopped naming its QPs.
    next_slot: u8,
}

impl Agent {
    fn new(layout: Layout) -> Self {
        Self {
            home: layout.clone(),
            layout,
            link_local_errno: None,
            members: Vec::new(),
            next_slot: 0,
        }
    }

    /// A new connection's first message: a member joins, or the connection is dropped.
    fn admit(&mut self, conn: OwnedFd) {
        let mut buf = [0u8; 64];
        match recv_with_fds(&conn, &mut buf).map(|(len, _)| Message::decode(&buf[..len])) {
            Ok(Some(Message::Join)) => self.join(conn),
            Ok(Some(Message::Services)) => {
                let ids = self
                    .steering()
                    .listeners
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect();
                let _ = send_with_fds(&conn, &Message::Listen(ids).encode(), &[]);
            }
            _ => tracing::debug!("a connection that neither joined nor asked"),
        }
    }

    fn join(&mut self, conn: OwnedFd) {
        let refuse = |conn: &OwnedFd, errno: i32| {
            let _ = send_with_fds(conn, &Message::Refused(errno).encode(), &[]);
        };
        let taken = |slot: u8| self.members.iter().any(|m| m.slot == slot);
        let Some(slot) = (0..=255u8)
            .map(|i| self.next_slot.wrapping_add(i))
            .find(|&s| !taken(s))
        else {
            refuse(&conn, Errno::EUSERS as i32);
            return;
        };
        if self.members.is_empty() {
            // Another program, or another NIC's agent, holds an address: the first socket's
            // refuses the NIC; the link-local one's, on an IPv4 NIC, leaves the NIC without
            // it, for every member (they must all have the same sockets).
            self.layout = self.home.clone();
            let (first, link_local) = self.layout.probe();
            if let Err(err) = first {
                return refuse(&conn, err.raw_os_error().unwrap_or(0));
            }
            self.link_local_errno = None;
            if let (Some(err), Layout::WithLinkLocal(ip, ..)) = (link_local, &self.layout) {
                self.link_local_errno = Some(err.raw_os_error().unwrap_or(0));
                self.layout = Layout::Address(*ip);
            }
        }
        let sockets = match self.layout.bind() {
            Ok(sockets) => sockets,
            Err(err) => return refuse(&conn, err.raw_os_error().unwrap_or(0)),
        };
        let fds: Vec<_> = sockets.iter().map(AsRawFd::as_raw_fd).collect();
        let slot_message = Message::Slot(slot, self.link_local_errno).encode();
        self.next_slot = slot.wrapping_add(1);
        // Steered before the member hears its slot: its first datagrams find it.
        self.members.push(Member {
            slot,
            conn,
            sockets,
            listening: Vec::new(),
        });
        self.steer();
        let index = self.members.len() - 1;
        if let Err(err) = send_with_fds(&self.members[index].conn, &slot_message, &fds) {
            tracing::debug!(error = %err, "a member left before its slot was sent");
            self.leave(index);
            return;
        }
        tracing::debug!(slot, members = self.members.len(), "member joined");
    }

    /// A member's connection is readable: a message, or its end.
    fn hear(&mut self, index: usize) {
        let mut buf = [0u8; 16 * 1024];
        match recv_with_fds(&self.members[index].conn, &mut buf) {
            Ok((len, _)) if len > 0 => {
                if let Some(Message::Listen(ids)) = Message::decode(&buf[..len]) {
                    self.members[index].listening = ids;
                    self.steer();
                    let conn = &self.members[index].conn;
                    let _ = send_with_fds(conn, &Message::Listening.encode(), &[]);
                }
            }
            _ => self.leave(index),
        }
    }

    /// The member at `index` is gone: its sockets close, and the kernel moves the group's last
    /// socket into their place — as `swap_remove` moves the last member.
    fn leave(&mut self, index: usize) {
        let member = self.members.swap_remove(index);
        tracing::debug!(
            slot = member.slot,
            members = self.members.len(),
            "member left"
        );
        drop(member);
        self.steer();
    }

    /// Who gets what now.
    fn steering(&self) -> Steering {
        let index = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
        Steering {
            members: self
                .members
                .iter()
                .enumerate()
                .map(|(i, m)| (m.slot, index(i)))
                .collect(),
            listeners: self
                .members
                .iter()
                .enumerate()
                .flat_map(|(i, m)| m.listening.iter().map(move |&id| (id, index(i))))
                .collect(),
        }
    }

    /// Attaches the program to each of the address's groups, through the first member's
    /// sockets.
    fn steer(&self) {
        let Some(first) = self.members.first() else {
            return;
        };
        let steering = self.steering();
        for socket in &first.sockets {
            if let Err(err) = steering.attach(socket) {
                tracing::warn!(error = %err, "cannot steer the shared address's datagrams");
            }
        }
    }
}

#[cfg(test)]
mod tests;
