//! Socket addresses as librdmacm's structures carry them (`struct sockaddr_in` or
//! `struct sockaddr_in6` inside a `sockaddr_storage`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::Errno;
use crate::abi::SockaddrStorage;

/// `AF_INET` as the `sa_family` field holds it.
pub(crate) const AF_INET: u16 = libc::AF_INET as u16;
/// `AF_INET6` as the `sa_family` field holds it.
pub(crate) const AF_INET6: u16 = libc::AF_INET6 as u16;
/// `sizeof(struct sockaddr_in)`.
pub(crate) const SOCKADDR_IN_LEN: u32 = 16;
/// `sizeof(struct sockaddr_in6)`.
pub(crate) const SOCKADDR_IN6_LEN: u32 = 28;

/// The C length of an address of `a`'s family (`ai_src_len`, `ai_dst_len`).
pub(crate) fn c_len(a: &SocketAddr) -> u32 {
    match a {
        SocketAddr::V4(_) => SOCKADDR_IN_LEN,
        SocketAddr::V6(_) => SOCKADDR_IN6_LEN,
    }
}

/// A socket address in `sockaddr_in` or `sockaddr_in6` form (port, flow info and address in
/// network order, the scope id in host order, as the kernel writes them).
pub(crate) fn to_storage(a: SocketAddr) -> SockaddrStorage {
    let mut s = SockaddrStorage::default();
    match a {
        SocketAddr::V4(a) => {
            s.family = AF_INET;
            s.data[0..2].copy_from_slice(&a.port().to_be_bytes());
            s.data[2..6].copy_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            s.family = AF_INET6;
            s.data[0..2].copy_from_slice(&a.port().to_be_bytes());
            s.data[2..6].copy_from_slice(&a.flowinfo().to_be_bytes());
            s.data[6..22].copy_from_slice(&a.ip().octets());
            s.data[22..26].copy_from_slice(&a.scope_id().to_ne_bytes());
        }
    }
    s
}

/// The address of a `sockaddr_in` or `sockaddr_in6`; `EAFNOSUPPORT` for any other family
/// (IB, unset).
pub(crate) fn from_storage(s: &SockaddrStorage) -> Result<SocketAddr, Errno> {
    let d = &s.data;
    let port = u16::from_be_bytes([d[0], d[1]]);
    match s.family {
        AF_INET => Ok(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::new(d[2], d[3], d[4], d[5]),
            port,
        ))),
        AF_INET6 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&d[6..22]);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                u32::from_be_bytes([d[2], d[3], d[4], d[5]]),
                u32::from_ne_bytes([d[22], d[23], d[24], d[25]]),
            )))
        }
        _ => Err(Errno(libc::EAFNOSUPPORT)),
    }
}

/// The port of a stored address in network order (what `rdma_get_src_port` returns), 0 when
/// it is not an IP address.
pub(crate) fn port_be(s: &SockaddrStorage) -> u16 {
    from_storage(s).map_or(0, |a| a.port().to_be())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_survives_the_c_form_and_the_port_is_network_order() {
        let a: SocketAddr = "198.18.0.7:7174".parse().unwrap();
        let s = to_storage(a);
        assert_eq!(s.family, AF_INET);
        assert_eq!(s.data[0..2], [0x1c, 0x06]);
        assert_eq!(s.data[2..6], [198, 18, 0, 7]);
        assert_eq!(from_storage(&s), Ok(a));
        assert_eq!(u16::from_be(port_be(&s)), 7174);
    }

    #[test]
    fn an_ipv6_address_is_a_sockaddr_in6_with_its_scope() {
        let a = SocketAddr::V6(SocketAddrV6::new(
            "fe80::1".parse().unwrap(),
            7174,
            0x0102_0304,
            5,
        ));
        let s = to_storage(a);
        // struct sockaddr_in6: family, port, flow info (network order), address, scope id.
        assert_eq!(s.family, AF_INET6);
        assert_eq!(s.data[0..2], [0x1c, 0x06]);
        assert_eq!(s.data[2..6], [1, 2, 3, 4]);
        assert_eq!(s.data[6..8], [0xfe, 0x80]);
        assert_eq!(s.data[21], 1);
        assert_eq!(s.data[22..26], 5u32.to_ne_bytes());
        assert_eq!(from_storage(&s), Ok(a));
        assert_eq!(c_len(&a), 28);
    }

    #[test]
    fn other_families_are_refused() {
        let s = SockaddrStorage {
            family: 27, // AF_IB
            ..SockaddrStorage::default()
        };
        assert_eq!(from_storage(&s), Err(Errno(libc::EAFNOSUPPORT)));
        assert_eq!(port_be(&s), 0);
    }
}
