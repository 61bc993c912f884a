//! Name resolution for `rdma_getaddrinfo`: libc's getaddrinfo(3), as librdmacm calls it
//! (`ucma_getaddrinfo`, rdma-core librdmacm/addrinfo.c), so host names (`localhost`,
//! `/etc/hosts`, DNS), service names (`/etc/services`) and a NULL node resolve as they do
//! there. IPv4 only (`AF_INET`): the device has no IPv6 address yet.

use std::ffi::{CString, c_int};
use std::net::{Ipv4Addr, SocketAddrV4};

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
}

/// What came back first: the address, and its socket type and protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) addr: SocketAddrV4,
    pub(crate) socktype: c_int,
    pub(crate) protocol: c_int,
}

/// The first IPv4 answer of getaddrinfo(3) for `node` and `service` (not both `None`), or
/// its error code (`EAI_NONAME`, `EAI_SERVICE`, ...). A string with a NUL byte in it is
/// `EAI_NONAME` (C never passes one).
pub(crate) fn lookup(node: Option<&str>, service: Option<&str>, ask: Ask) -> Result<Found, c_int> {
    let c = |s: &str| CString::new(s).map_err(|_| libc::EAI_NONAME);
    let node = node.map(c).transpose()?;
    let service = service.map(c).transpose()?;
    // SAFETY: an all-zero addrinfo is valid hints (no pointers set).
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = libc::AF_INET;
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
    let mut found = Err(libc::EAI_NONAME);
    let mut p = res;
    while !p.is_null() {
        // SAFETY: p is an entry of the list getaddrinfo returned, not yet freed.
        let ai = unsafe { &*p };
        if ai.ai_family == libc::AF_INET
            && !ai.ai_addr.is_null()
            && ai.ai_addrlen as usize >= size_of::<libc::sockaddr_in>()
        {
            // SAFETY: an AF_INET entry's address is a sockaddr_in of ai_addrlen bytes.
            let sin = unsafe { ai.ai_addr.cast::<libc::sockaddr_in>().read_unaligned() };
            found = Ok(Found {
                addr: SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                    u16::from_be(sin.sin_port),
                ),
                socktype: ai.ai_socktype,
                protocol: ai.ai_protocol,
            });
            break;
        }
        p = ai.ai_next;
    }
    // SAFETY: res came from a successful getaddrinfo and is freed once.
    unsafe { libc::freeaddrinfo(res) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_no_node_resolve_as_getaddrinfo_does() {
        let tcp = Ask {
            socktype: libc::SOCK_STREAM,
            ..Ask::default()
        };
        let lo = lookup(Some("localhost"), Some("7174"), tcp).unwrap();
        assert_eq!(lo.addr, "127.0.0.1:7174".parse().unwrap());
        assert_eq!(lo.socktype, libc::SOCK_STREAM);
        let passive = Ask {
            passive: true,
            ..Ask::default()
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
            ..Ask::default()
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
}
