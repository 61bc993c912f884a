//! [`Registration`]: a socket's registration with the runtime's reactor, given up while a
//! program's thread spins on the socket ([`crate::backend::Backend::wake_on_datagrams`]).

use std::io;

use tokio::io::unix::AsyncFd;

/// A socket of a [`super::UdpBackend`] and, while datagrams are to wake the device's task, its
/// registration with the runtime's reactor.
///
/// The reactor's `epoll` is edge-triggered: each datagram that arrives on a registered socket
/// wakes the runtime's thread from `epoll_wait`, whether or not a task waits to read it. While
/// a program's thread spins on the socket, the task does not read it, and those wake-ups were
/// one per datagram: `roce exec -- ib_send_lat`'s NIC thread was switched in about once per
/// exchange (20 000 exchanges, 20 500 switches), taking a core from the two spinning programs
/// of a two-core host. Unregistered, an arrival wakes nobody; registered again, the socket is
/// reported at once if datagrams wait (`EPOLL_CTL_ADD` looks at its readiness), so nothing is
/// missed.
#[derive(Debug)]
pub(super) struct Registration {
    /// The socket (a descriptor of its own), kept to be registered again.
    socket: std::net::UdpSocket,
    /// Registered: an `AsyncFd` over a second descriptor of `socket` (rather than a tokio
    /// `UdpSocket`, for the readiness guard's `clear_ready`: `UdpBackend::recv`).
    fd: Option<AsyncFd<std::net::UdpSocket>>,
}

impl Registration {
    /// `socket`, registered. Must be called inside a tokio runtime.
    pub(super) fn new(socket: std::net::UdpSocket) -> io::Result<Self> {
        let mut registration = Self { socket, fd: None };
        registration.set(true)?;
        Ok(registration)
    }

    /// Registers the socket (`wake`) or takes it out of the reactor; nothing if it already is
    /// so. A registration that fails leaves the socket as it was, unregistered.
    pub(super) fn set(&mut self, wake: bool) -> io::Result<()> {
        match (wake, self.fd.is_some()) {
            (true, false) => {
                self.fd = Some(crate::backend::sys::register_udp(self.socket.try_clone()?)?);
            }
            // Dropping the `AsyncFd` takes the descriptor out of the reactor and closes it.
            (false, true) => self.fd = None,
            _ => {}
        }
        Ok(())
    }

    /// The registration, if the socket is registered.
    pub(super) fn fd(&self) -> Option<&AsyncFd<std::net::UdpSocket>> {
        self.fd.as_ref()
    }

    /// The socket.
    #[cfg(test)]
    pub(super) fn socket(&self) -> &std::net::UdpSocket {
        &self.socket
    }
}
