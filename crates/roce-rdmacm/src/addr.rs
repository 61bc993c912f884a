//! Socket addresses as librdmacm's structures carry them (`struct sockaddr_in` inside a
//! `sockaddr_storage`).

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::Errno;
use crate::abi::SockaddrStorage;

/// `AF_INET` as the `sa_family` field holds it.
pub(crate) const AF_INET: u16 = libc::AF_INET as u16;
/// `sizeof(struct sockaddr_in)`.
pub(crate) const SOCKADDR_IN_LEN: u32 = 16;

/// An IPv4 socket address in `sockaddr_in` form.
pub(crate) fn to_storage(a: SocketAddrV4) -> SockaddrStorage {
    let mut s = SockaddrStorage {
        family: AF_INET,
        ..SockaddrStorage::default()
    };
    s.data[0..2].copy_from_slice(&a.port().to_be_bytes());
    s.data[2..6].copy_from_slice(&a.ip().octets());
    s
}

/// The address of a `sockaddr_in`; `EAFNOSUPPORT` for any other family (IPv6, IB).
pub(crate) fn from_storage(s: &SockaddrStorage) -> Result<SocketAddrV4, Errno> {
    if s.family != AF_INET {
        return Err(Errno(libc::EAFNOSUPPORT));
    }
    Ok(SocketAddrV4::new(
        Ipv4Addr::new(s.data[2], s.data[3], s.data[4], s.data[5]),
        u16::from_be_bytes([s.data[0], s.data[1]]),
    ))
}

/// The port of a stored address in network order (what `rdma_get_src_port` returns), 0 when
/// it is not an IPv4 address.
pub(crate) fn port_be(s: &SockaddrStorage) -> u16 {
    from_storage(s).map_or(0, |a| a.port().to_be())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_survives_the_c_form_and_the_port_is_network_order() {
        let a = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 7), 7174);
        let s = to_storage(a);
        assert_eq!(s.data[0..2], [0x1c, 0x06]);
        assert_eq!(from_storage(&s), Ok(a));
        assert_eq!(u16::from_be(port_be(&s)), 7174);
    }

    #[test]
    fn other_families_are_refused() {
        let s = SockaddrStorage {
            family: libc::AF_INET6 as u16,
            ..SockaddrStorage::default()
        };
        assert_eq!(from_storage(&s), Err(Errno(libc::EAFNOSUPPORT)));
        assert_eq!(port_be(&s), 0);
    }
}
