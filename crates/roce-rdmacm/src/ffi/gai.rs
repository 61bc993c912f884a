//! Name resolution for `rdma_getaddrinfo`: libc's getaddrinfo(3), as librdmacm calls it
//! (`ucma_getaddrinfo`, rdma-core librdmacm/addrinfo.c), so host names (`localhost`,
//! `/etc/hosts`, DNS), service names (`/etc/services`) and a NULL node resolve as they do
//! there, in either family.

use std::ffi::{CString, c_int};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// What getaddrinfo(3) is asked.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ask {
    /// `AI_PASSIVE`: a NULL node is the wildcard address (else loopback).
    pub(crate) passive: bool,
    /// `AI_NUMERICHOST`: no name lookups.
    pub(crate) numeric: bool,
    /// `SOCK_STREAM`, `SOCK_DGRAM`, or 0.
    pub(crate) socktype: c_int,
    /// `IPPROTO_TCP`, `IPPROTO_UDP`, or 0.
    pub(crate) protocol: c_int,
    /// `AF_INET`, `AF_INET6`, or 0 (`AF_UNSPEC`): either.
    pub(crate) family: c_int,
    /// With `AF_UNSPEC`, the family whose first answer is taken when there is one (the
    /// device's: `localhost` is `127.0.0.1` for an IPv4 NIC and `::1` for an IPv6 one).
    pub(crate) prefer: c_int,
}

/// What came back first: the address, and its socket type and protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) addr: SocketAddr,
    pub(crate) socktype: c_int,
    pub(crate) protocol: c_int,
}

/// The first answer of getaddrinfo(3) for `node` and `service` (not both `None`) of the
/// family asked for (of [`Ask::prefer`] first, when both may do), or its error code
/// (`EAI_NONAME`, `EAI_SERVICE`, ...). A string with a NUL byte in it is `EAI_NONAME` (C
/// never passes one).
pub(crate) fn lookup(node: Option<&str>, service: Option<&str>, ask: Ask) -> Result<Found, c_int> {
    let c = |s: &str| CString::new(s).map_err(|_| libc::EAI_NONAME);
    let node = node.map(c).transpose()?;
    let service = service.map(c).transpose()?;
    // SAFETY: an all-zero addrinfo is valid hints (no pointers set).
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = ask.family;
    hints.ai_socktype = ask.socktype;
    hints.ai_protocol = ask.protocol;
    if ask.passive {
        hints.ai_flags |= libc::AI_PASSIVE;
    }
    if ask.numeric {
        hints.ai_flags |= libc::AI_NUMERICHOST;
    }
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: the strings are NUL-terminated and live across the call; hints and res are ours.
    let code = unsafe {
        libc::getaddrinfo(
            node.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            service.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            &hints,
            &mut res,
        )
    };
    if code != 0 {
        return Err(code);
    }
    let mut first = None;
    let mut preferred = None;
    let mut p = res;
    while !p.is_null() && preferred.is_none() {
        // SAFETY: p is an entry of the list getaddrinfo returned, not yet freed.
        let ai = unsafe { &*p };
        // SAFETY: as above; the address is of the entry's family and length.
        if let Some(addr) = unsafe { entry_addr(ai) } {
            let f = Found {
                addr,
                socktype: ai.ai_socktype,
                protocol: ai.ai_protocol,
            };
            first.get_or_insert(f);
            if ai.ai_family == ask.prefer {
                preferred = Some(f);
            }
        }
        p = ai.ai_next;
    }
    let found = preferred.or(first).ok_or(libc::EAI_NONAME);
    // SAFETY: res came from a successful getaddrinfo and is freed once.
    unsafe { libc::freeaddrinfo(res) };
    found
}

/// The address of an `AF_INET` or `AF_INET6` entry; `None` for another family.
///
/// # Safety
/// `ai` is an entry of a list getaddrinfo(3) returned, not yet freed.
unsafe fn entry_addr(ai: &libc::addrinfo) -> Option<SocketAddr> {
    if ai.ai_addr.is_null() {
        return None;
    }
    let len = ai.ai_addrlen as usize;
    match ai.ai_family {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: an AF_INET entry's address is a sockaddr_in of ai_addrlen bytes.
            let sin = unsafe { ai.ai_addr.cast::<libc::sockaddr_in>().read_unaligned() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: an AF_INET6 entry's address is a sockaddr_in6 of ai_addrlen bytes.
            let sin6 = unsafe { ai.ai_addr.cast::<libc::sockaddr_in6>().read_unaligned() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As for an IPv4 NIC.
    const V4_FIRST: Ask = Ask {
        passive: false,
        numeric: false,
        socktype: 0,
        protocol: 0,
        family: 0,
        prefer: libc::AF_INET,
    };

    #[test]
    fn names_numbers_and_no_node_resolve_as_getaddrinfo_does() {
        let tcp = Ask {
            socktype: libc::SOCK_STREAM,
            ..V4_FIRST
        };
        let lo = lookup(Some("localhost"), Some("7174"), tcp).unwrap();
        assert_eq!(lo.addr, "127.0.0.1:7174".parse().unwrap());
        assert_eq!(lo.socktype, libc::SOCK_STREAM);
        let passive = Ask {
            passive: true,
            ..V4_FIRST
        };
        assert_eq!(
            lookup(None, Some("7174"), passive).unwrap().addr,
            "0.0.0.0:7174".parse().unwrap()
        );
        assert_eq!(
            lookup(None, Some("7174"), tcp).unwrap().addr,
            "127.0.0.1:7174".parse().unwrap()
        );
        let numeric = Ask {
            numeric: true,
            ..V4_FIRST
        };
        assert_eq!(
            lookup(Some("localhost"), None, numeric),
            Err(libc::EAI_NONAME)
        );
        assert_eq!(
            lookup(Some("198.18.0.1"), None, numeric).unwrap().addr,
            "198.18.0.1:0".parse().unwrap()
        );
        assert_eq!(
            lookup(Some("198.18.0.1"), Some("no-such-service"), tcp),
            Err(libc::EAI_SERVICE)
        );
    }

    #[test]
    fn ipv6_names_resolve_for_an_ipv6_nic_with_their_scope() {
        let v6_first = Ask {
            prefer: libc::AF_INET6,
            ..V4_FIRST
        };
        // For an IPv6 NIC, a NULL passive node is `::` and a name of both families its IPv6
        // answer.
        let passive = Ask {
            passive: true,
            ..v6_first
        };
        assert_eq!(
            lookup(None, Some("7174"), passive).unwrap().addr,
            "[::]:7174".parse().unwrap()
        );
        let ip6 = Ask {
            family: libc::AF_INET6,
            ..v6_first
        };
        assert_eq!(
            lookup(Some("::1"), Some("7174"), ip6).unwrap().addr,
            "[::1]:7174".parse().unwrap()
        );
        // A link-local address keeps its scope (interface 1, `lo`).
        let Ok(found) = lookup(Some("fe80::1%1"), None, ip6) else {
            panic!("fe80::1%1 does not resolve");
        };
        let SocketAddr::V6(a) = found.addr else {
            panic!("not IPv6: {}", found.addr);
        };
        assert_eq!((*a.ip(), a.scope_id()), ("fe80::1".parse().unwrap(), 1));
        // An IPv4-only name asked for as IPv6 has no answer.
        let four = lookup(Some("198.18.0.1"), None, ip6);
        assert!(four.is_err(), "{four:?}");
    }
}
