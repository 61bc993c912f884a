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
    AddressFamily, Backlog, MsgFlags, SockFlag, SockType, UnixAddr, accept4, bind, listen, socket,
};

use super::{Layout, Message, agent_name};
use crate::backend::steer::Steering;
use crate::backend::sys::{recv_with_fds, send_with_fds};

/// Closes the descriptors the agent's process inherited from the program that started it
/// (`close_range(2)` from 3 up): the program's launcher (mpirun) may wait for them to close.
/// For the agent's own process, first thing: never in a process that has descriptors of its
/// own (the tests run [`run`] on a thread).
pub fn close_inherited_descriptors() -> io::Result<()> {
    crate::backend::sys::close_inherited_descriptors()
}

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
        let idle = agent.is_empty() && pending.is_empty();
        // The seats whose members' connections are polled, in the order polled.
        let taken = agent.taken();
        let timeout = if idle {
            PollTimeout::try_from(linger).unwrap_or(PollTimeout::MAX)
        } else {
            PollTimeout::NONE
        };
        let ready = {
            let mut fds: Vec<PollFd<'_>> = std::iter::once(listener.as_fd())
                .chain(pending.iter().map(AsFd::as_fd))
                .chain(taken.iter().map(|&seat| agent.member(seat).conn.as_fd()))
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
        // Members first, from the last seat: a leave may close the last seats.
        for (&seat, _) in taken.iter().zip(members_ready).rev().filter(|(_, r)| **r) {
            agent.hear(seat);
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

/// A place in the address's `SO_REUSEPORT` group: the index of its sockets there.
#[derive(Debug)]
enum Seat {
    Taken(Member),
    /// A member left: the agent keeps its sockets, so that no other socket moves. Closing a
    /// socket makes the kernel move the group's last one into its place, and until the agent
    /// has attached the program that knows it, the moved member's datagrams go to the index
    /// it left (past the group's end: the kernel then picks a socket by hash, another
    /// process's). A DREQ sent as its peer exits was lost that way. The seat is taken again by
    /// the next member to join, or closed once it is the last.
    Vacant(Vec<std::net::UdpSocket>),
}

/// The members, each in its seat: the order of their sockets in the group.
#[derive(Debug)]
struct Agent {
    /// The address's sockets as the host has them; `layout`, those the members get now.
    home: Layout,
    layout: Layout,
    /// Why the layout's link-local socket could not be bound when the first member came
    /// (another NIC on the interface holds it): the NIC goes on without it.
    link_local_errno: Option<i32>,
    /// Never ends with a vacant seat.
    seats: Vec<Seat>,
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
            seats: Vec::new(),
            next_slot: 0,
        }
    }

    /// Whether no member is left (then no seat is either).
    fn is_empty(&self) -> bool {
        self.seats.is_empty()
    }

    /// The taken seats, in order.
    fn taken(&self) -> Vec<usize> {
        (0..self.seats.len())
            .filter(|&i| matches!(self.seats[i], Seat::Taken(_)))
            .collect()
    }

    /// The member in the taken seat `seat`.
    fn member(&self, seat: usize) -> &Member {
        match &self.seats[seat] {
            Seat::Taken(member) => member,
            Seat::Vacant(_) => unreachable!("a taken seat's index"),
        }
    }

    /// The members with their seats.
    fn members(&self) -> impl Iterator<Item = (usize, &Member)> {
        self.seats
            .iter()
            .enumerate()
            .filter_map(|(i, seat)| match seat {
                Seat::Taken(member) => Some((i, member)),
                Seat::Vacant(_) => None,
            })
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
        let taken = |slot: u8| self.members().any(|(_, m)| m.slot == slot);
        let Some(slot) = (0..=255u8)
            .map(|i| self.next_slot.wrapping_add(i))
            .find(|&s| !taken(s))
        else {
            refuse(&conn, Errno::EUSERS as i32);
            return;
        };
        if self.is_empty() {
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
        // The first vacant seat, its sockets emptied of what came for the member that left;
        // else new sockets at the group's end.
        let vacant = self
            .seats
            .iter()
            .position(|seat| matches!(seat, Seat::Vacant(_)));
        let (index, sockets) = match vacant {
            Some(index) => {
                let Seat::Vacant(sockets) =
                    std::mem::replace(&mut self.seats[index], Seat::Vacant(Vec::new()))
                else {
                    unreachable!("found vacant")
                };
                sockets.iter().for_each(drain);
                (index, sockets)
            }
            None => match self.layout.bind() {
                Ok(sockets) => (self.seats.len(), sockets),
                Err(err) => return refuse(&conn, err.raw_os_error().unwrap_or(0)),
            },
        };
        let fds: Vec<_> = sockets.iter().map(AsRawFd::as_raw_fd).collect();
        let slot_message = Message::Slot(slot, self.link_local_errno).encode();
        self.next_slot = slot.wrapping_add(1);
        // Steered before the member hears its slot: its first datagrams find it.
        let member = Seat::Taken(Member {
            slot,
            conn,
            sockets,
            listening: Vec::new(),
        });
        if index == self.seats.len() {
            self.seats.push(member);
        } else {
            self.seats[index] = member;
        }
        self.steer();
        if let Err(err) = send_with_fds(&self.member(index).conn, &slot_message, &fds) {
            tracing::debug!(error = %err, "a member left before its slot was sent");
            self.leave(index);
            return;
        }
        tracing::debug!(slot, seat = index, "member joined");
    }

    /// A member's connection is readable: a message, or its end.
    fn hear(&mut self, index: usize) {
        let mut buf = [0u8; 16 * 1024];
        match recv_with_fds(&self.member(index).conn, &mut buf) {
            Ok((len, _)) if len > 0 => {
                if let Some(Message::Listen(ids)) = Message::decode(&buf[..len]) {
                    if let Seat::Taken(member) = &mut self.seats[index] {
                        member.listening = ids;
                    }
                    self.steer();
                    let conn = &self.member(index).conn;
                    let _ = send_with_fds(conn, &Message::Listening.encode(), &[]);
                }
            }
            _ => self.leave(index),
        }
    }

    /// The member in seat `index` is gone: its seat stays, its sockets with it, unless it is
    /// the last (then it closes, and so do the vacant seats before it that are last in turn:
    /// closing the group's last socket moves none).
    fn leave(&mut self, index: usize) {
        let Seat::Taken(member) = &mut self.seats[index] else {
            return;
        };
        tracing::debug!(slot = member.slot, seat = index, "member left");
        // Its connection closes; its sockets stay in the group.
        self.seats[index] = Seat::Vacant(std::mem::take(&mut member.sockets));
        while matches!(self.seats.last(), Some(Seat::Vacant(_))) {
            self.seats.pop();
        }
        self.steer();
    }

    /// Who gets what now.
    fn steering(&self) -> Steering {
        let index = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
        Steering {
            members: self.members().map(|(i, m)| (m.slot, index(i))).collect(),
            listeners: self
                .members()
                .flat_map(|(i, m)| m.listening.iter().map(move |&id| (id, index(i))))
                .collect(),
        }
    }

    /// Attaches the program to each of the address's groups, through the first seat's
    /// sockets.
    fn steer(&self) {
        let first = match self.seats.first() {
            Some(Seat::Taken(member)) => &member.sockets,
            Some(Seat::Vacant(sockets)) => sockets,
            None => return,
        };
        let steering = self.steering();
        for socket in first {
            if let Err(err) = steering.attach(socket) {
                tracing::warn!(error = %err, "cannot steer the shared address's datagrams");
            }
        }
    }
}

/// Reads and drops what waits in a vacant seat's socket (datagrams steered to the member that
/// left), so that its next member does not read them.
fn drain(socket: &std::net::UdpSocket) {
    let mut buf = [0u8; 64];
    while nix::sys::socket::recv(socket.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT).is_ok() {}
}

#[cfg(test)]
mod tests;
