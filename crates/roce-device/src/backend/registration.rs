//! [`Registration`]: a backend's descriptor and its registration with the runtime's reactor,
//! given up while a program's thread spins on the backend ([`Backend::wake_on_datagrams`]).

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use tokio::io::unix::{AsyncFd, AsyncFdReadyGuard};

#[cfg(doc)]
use super::Backend;
use super::sys::PacketFd;

/// A descriptor that the device's task waits on and, while datagrams are to wake the task,
/// its registration with the runtime's reactor.
///
/// The reactor's `epoll` is edge-triggered: each datagram that arrives on a registered socket
/// wakes the runtime's thread from `epoll_wait`, whether or not a task waits to read it. While
/// a program's thread spins on the socket, the task does not read it, and those wake-ups were
/// one per datagram: `roce exec -- ib_send_lat`'s NIC thread was switched in about once per
/// exchange (20 000 exchanges, 20 500 switches), taking a core from the two spinning programs
/// of a two-core host. Unregistered, an arrival wakes nobody; registered again, the descriptor
/// is reported at once if datagrams wait (`EPOLL_CTL_ADD` looks at its readiness), so nothing
/// is missed.
#[derive(Debug)]
pub(super) struct Registration<T: Registrable> {
    /// The descriptor, kept to be registered again.
    source: T,
    /// Registered: an `AsyncFd` over another handle of `source` ([`Registrable::another`]).
    fd: Option<AsyncFd<T>>,
}

impl<T: Registrable> Registration<T> {
    /// `source`, registered. Must be called inside a tokio runtime.
    pub(super) fn new(source: T) -> io::Result<Self> {
        let mut registration = Self { source, fd: None };
        registration.set(true)?;
        Ok(registration)
    }

    /// Registers the descriptor (`wake`) or takes it out of the reactor; nothing if it
    /// already is so. A registration that fails leaves it as it was, unregistered.
    pub(super) fn set(&mut self, wake: bool) -> io::Result<()> {
        match (wake, self.fd.is_some()) {
            (true, false) => self.fd = Some(self.source.another()?.register()?),
            // Dropping the `AsyncFd` takes the descriptor out of the reactor.
            (false, true) => self.fd = None,
            _ => {}
        }
        Ok(())
    }

    /// Until the descriptor may be readable; never while it is not registered.
    pub(super) async fn readable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        match &self.fd {
            Some(fd) => fd.readable().await,
            None => std::future::pending().await,
        }
    }

    /// The registration, if the descriptor is registered.
    pub(super) fn fd(&self) -> Option<&AsyncFd<T>> {
        self.fd.as_ref()
    }

    /// The descriptor.
    #[cfg(test)]
    pub(super) fn source(&self) -> &T {
        &self.source
    }
}

/// A descriptor a [`Registration`] can hold.
pub(super) trait Registrable: AsRawFd + Sized {
    /// Another handle of the same descriptor, for the `AsyncFd` to own.
    fn another(&self) -> io::Result<Self>;

    /// Registers it with the runtime's reactor, for reading.
    fn register(self) -> io::Result<AsyncFd<Self>>;
}

/// A UDP socket: the `AsyncFd` owns a second descriptor of it (rather than a tokio
/// `UdpSocket`, for the readiness guard's `clear_ready`: `UdpBackend::recv`), closed when it is
/// dropped.
impl Registrable for std::net::UdpSocket {
    fn another(&self) -> io::Result<Self> {
        self.try_clone()
    }

    fn register(self) -> io::Result<AsyncFd<Self>> {
        super::sys::register_udp(self)
    }
}

/// A packet socket, whose ring the device reads in place: the `AsyncFd` shares its
/// descriptor, which stays open as long as the ring's reader has it.
impl Registrable for Arc<PacketFd> {
    fn another(&self) -> io::Result<Self> {
        Ok(Self::clone(self))
    }

    fn register(self) -> io::Result<AsyncFd<Self>> {
        super::sys::register(self)
    }
}
