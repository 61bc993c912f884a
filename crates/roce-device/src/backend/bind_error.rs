//! Why the UDP backend could not bind its address, named by its real cause: a port that another
//! socket holds is not an address that this host lacks, and a user fixes the two differently.

use std::io;
use std::net::SocketAddr;

/// A failed `bind(2)` of the UDP backend's socket, sorted by what the kernel said.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// `EADDRINUSE`: another socket holds the port on this address.
    #[error(
        "cannot bind UDP {addr}: in use (by another roce process on this address, or by the \
         kernel's rxe driver)"
    )]
    InUse {
        /// What was asked for.
        addr: SocketAddr,
    },
    /// `EADDRNOTAVAIL`: no interface of this host has the address.
    #[error(
        "cannot bind UDP {addr}: {} is not an address of this host (see `ip address`)",
        addr.ip()
    )]
    NotLocal {
        /// What was asked for.
        addr: SocketAddr,
    },
    /// Anything else (`EACCES` for a privileged port, no memory, ...).
    #[error("cannot bind UDP {addr}: {source}")]
    Other {
        /// What was asked for.
        addr: SocketAddr,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
}

impl BindError {
    /// Sorts the error that binding `addr` returned.
    pub fn new(addr: SocketAddr, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::AddrInUse => Self::InUse { addr },
            io::ErrorKind::AddrNotAvailable => Self::NotLocal { addr },
            _ => Self::Other { addr, source },
        }
    }

    /// What a user does about it, given the option that chooses the address (`--ip`, `--ip-a`):
    /// a sentence to print after the error, or `None` when the cause says it all.
    pub fn advice(&self, option: &str) -> Option<String> {
        match self {
            Self::InUse { addr } if addr.is_ipv6() && addr.ip().is_loopback() => Some(format!(
                "IPv6 has one loopback address, ::1, and one NIC binds it: give this side \
                 another IPv6 address of this host with {option} (two NICs over IPv6 need two \
                 addresses, e.g. on an interface in a network namespace), or an IPv4 one"
            )),
            Self::InUse { addr } if addr.ip().is_loopback() => Some(format!(
                "give this side another loopback address with {option} (any 127.x works without \
                 configuration)"
            )),
            Self::InUse { .. } => Some(format!("give this side another address with {option}")),
            Self::NotLocal { .. } => Some(format!(
                "give {option} one of this host's addresses, or use --backend raw --dev IFACE to \
                 play an address the kernel does not have"
            )),
            Self::Other { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BindError;
    use std::io;
    use std::net::{SocketAddr, UdpSocket};

    fn bind(addr: &str) -> BindError {
        let addr: SocketAddr = addr.parse().unwrap();
        BindError::new(addr, UdpSocket::bind(addr).unwrap_err())
    }

    #[test]
    fn ipv6_loopback_in_use_says_that_a_second_nic_needs_another_address() {
        let Ok(taken) = UdpSocket::bind("[::1]:0") else {
            crate::backend::testing::skipped("no IPv6 loopback address on this host");
            return;
        };
        let addr = taken.local_addr().unwrap();
        let err = BindError::new(addr, UdpSocket::bind(addr).unwrap_err());
        assert!(matches!(err, BindError::InUse { .. }), "{err:?}");
        let advice = err.advice("--ip-b").unwrap();
        assert!(advice.contains("one loopback address, ::1"), "{advice}");
        assert!(advice.contains("with --ip-b"), "{advice}");
    }

    #[test]
    fn a_port_in_use_is_said_so_and_not_called_a_missing_address() {
        let _taken = UdpSocket::bind("127.0.63.1:4791").unwrap();
        let err = bind("127.0.63.1:4791");
        assert!(matches!(err, BindError::InUse { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("127.0.63.1:4791: in use"), "{text}");
        assert!(!text.contains("not an address"), "{text}");
        let advice = err.advice("--ip").unwrap();
        assert!(
            advice.contains("another loopback address with --ip"),
            "{advice}"
        );
    }

    #[test]
    fn an_address_this_host_lacks_is_said_so_and_not_called_in_use() {
        // 198.18.0.0/15 is for benchmarks; no interface of a test host has this one.
        let err = bind("198.18.255.253:4791");
        assert!(matches!(err, BindError::NotLocal { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("198.18.255.253 is not an address of this host"),
            "{text}"
        );
        assert!(!text.contains("in use"), "{text}");
        assert!(err.advice("--ip-a").unwrap().contains("give --ip-a one of"));
    }

    #[test]
    fn another_cause_is_the_kernels_own_words() {
        let addr: SocketAddr = "127.0.0.1:4791".parse().unwrap();
        let err = BindError::new(addr, io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(matches!(err, BindError::Other { .. }));
        assert!(err.advice("--ip").is_none());
        assert!(
            err.to_string()
                .starts_with("cannot bind UDP 127.0.0.1:4791: ")
        );
    }
}
