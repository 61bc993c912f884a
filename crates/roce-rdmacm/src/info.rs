//! `rdma_getaddrinfo` as librdmacm's (rdma-core librdmacm/addrinfo.c): the node and service
//! go through getaddrinfo(3) (`crate::ffi::gai`), so host names (`localhost`, `/etc/hosts`),
//! service names and a NULL node (the wildcard with `RAI_PASSIVE`, loopback without) resolve;
//! the first answer is the one kept, IPv4 or IPv6 as the hints' family asks. With
//! `AF_UNSPEC` the first answer of the device's family is kept where there is one (so that
//! `localhost` is `127.0.0.1` for an IPv4 NIC, `::1` for an IPv6 one); librdmacm keeps the very
//! first, which on a host with both is the IPv6 one, an address an IPv4 rxe cannot bind.
//! `AF_IB` is `EAI_FAMILY`. Route resolution through ACM (`ucma_ib_resolve`) is not done (no
//! `ai_route`).

use std::ffi::c_int;
use std::net::SocketAddr;

use crate::abi::{self, RdmaAddrinfo};
use crate::addr;
use crate::ffi::gai;
use crate::state::{AddrInfo, with};
use roce_cabi::CBox;

/// What the program asked for (the fields of `hints` that matter, or their defaults).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hints {
    pub(crate) flags: c_int,
    pub(crate) family: c_int,
    pub(crate) qp_type: c_int,
    pub(crate) port_space: c_int,
    /// `hints->ai_src_addr`, copied to a result that has no source address.
    pub(crate) src: Option<SocketAddr>,
    /// `hints->ai_dst_addr`, copied when neither node nor service is given.
    pub(crate) dst: Option<SocketAddr>,
    /// The device's family (`AF_INET`, `AF_INET6`; 0 without a device): which answer of a
    /// lookup of either family is kept.
    pub(crate) prefer: c_int,
}

/// `IBV_QPT_XRC_SEND`, `IBV_QPT_XRC_RECV`.
const IBV_QPT_XRC_SEND: c_int = 9;
const IBV_QPT_XRC_RECV: c_int = 10;

/// What getaddrinfo(3) is asked for these hints (`ucma_convert_to_ai`).
fn ask(hints: &Hints) -> gai::Ask {
    let socktype = match hints.qp_type {
        abi::IBV_QPT_RC | abi::IBV_QPT_UC | IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV => {
            libc::SOCK_STREAM
        }
        abi::IBV_QPT_UD => libc::SOCK_DGRAM,
        _ => 0,
    };
    let protocol = match (hints.port_space, socktype) {
        (abi::RDMA_PS_TCP, _) | (abi::RDMA_PS_IB, libc::SOCK_STREAM) => libc::IPPROTO_TCP,
        (abi::RDMA_PS_UDP | abi::RDMA_PS_IPOIB, _) | (abi::RDMA_PS_IB, libc::SOCK_DGRAM) => {
            libc::IPPROTO_UDP
        }
        _ => 0,
    };
    gai::Ask {
        passive: hints.flags & abi::RAI_PASSIVE != 0,
        numeric: hints.flags & abi::RAI_NUMERICHOST != 0,
        socktype,
        protocol,
        family: hints.family,
        prefer: if hints.prefer == 0 {
            libc::AF_INET
        } else {
            hints.prefer
        },
    }
}

/// One `rdma_addrinfo`. With a node or a service, getaddrinfo(3) answers: for `RAI_PASSIVE`
/// the address is the source (the wildcard without a node), otherwise the destination
/// (loopback without a node); the QP type and port space are the hints' or follow the
/// answer's socket type and protocol (`ucma_convert_to_rai`), and the flags are
/// `RAI_PASSIVE` or none. With neither, the hints are copied. Errors are getaddrinfo's codes
/// (`EAI_NONAME`, `EAI_SERVICE`, `EAI_FAMILY`, ...); nothing is kept then.
pub(crate) fn getaddrinfo(
    node: Option<&str>,
    service: Option<&str>,
    hints: Hints,
) -> Result<*mut RdmaAddrinfo, c_int> {
    if !matches!(hints.family, 0 | libc::AF_INET | libc::AF_INET6) {
        return Err(libc::EAI_FAMILY);
    }
    let (flags, family, qp_type, port_space, src, dst);
    if node.is_some() || service.is_some() {
        let ask = ask(&hints);
        let found = gai::lookup(node, service, ask)?;
        flags = if ask.passive { abi::RAI_PASSIVE } else { 0 };
        family = match found.addr {
            SocketAddr::V4(_) => libc::AF_INET,
            SocketAddr::V6(_) => libc::AF_INET6,
        };
        qp_type = match (hints.qp_type, found.socktype) {
            (0, libc::SOCK_STREAM) => abi::IBV_QPT_RC,
            (0, libc::SOCK_DGRAM) => abi::IBV_QPT_UD,
            (t, _) => t,
        };
        port_space = match (hints.port_space, found.protocol) {
            (0, libc::IPPROTO_TCP) => abi::RDMA_PS_TCP,
            (0, libc::IPPROTO_UDP) => abi::RDMA_PS_UDP,
            (p, _) => p,
        };
        (src, dst) = if ask.passive {
            (Some(found.addr), None)
        } else {
            (hints.src, Some(found.addr))
        };
    } else {
        (flags, family, qp_type, port_space) =
            (hints.flags, hints.family, hints.qp_type, hints.port_space);
        (src, dst) = (hints.src, hints.dst);
    }
    let (src_len, dst_len) = (
        src.as_ref().map_or(0, addr::c_len),
        dst.as_ref().map_or(0, addr::c_len),
    );
    let src = src.map(|a| CBox::new(addr::to_storage(a)));
    let dst = dst.map(|a| CBox::new(addr::to_storage(a)));
    let info = CBox::new(RdmaAddrinfo {
        ai_flags: flags,
        ai_family: family,
        ai_qp_type: qp_type,
        ai_port_space: port_space,
        ai_src_len: src_len,
        ai_dst_len: dst_len,
        ai_src_addr: src.as_ref().map_or(std::ptr::null_mut(), CBox::ptr),
        ai_dst_addr: dst.as_ref().map_or(std::ptr::null_mut(), CBox::ptr),
        ai_src_canonname: std::ptr::null_mut(),
        ai_dst_canonname: std::ptr::null_mut(),
        ai_route_len: 0,
        ai_route: std::ptr::null_mut(),
        ai_connect_len: 0,
        ai_connect: std::ptr::null_mut(),
        ai_next: std::ptr::null_mut(),
    });
    let ptr = info.ptr();
    with(|t| t.addrinfos.insert(info.addr(), AddrInfo { info, src, dst }));
    Ok(ptr)
}

/// `rdma_freeaddrinfo`: a list this library did not make is left alone.
pub(crate) fn freeaddrinfo(res: usize) {
    with(|t| t.addrinfos.remove(&res));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address table is the process's: these tests take turns with it, so that one's
    /// entries never show in the other's count.
    static TABLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn read(p: *mut RdmaAddrinfo) -> RdmaAddrinfo {
        with(|t| t.addrinfos[&(p as usize)].info.get())
    }

    #[test]
    fn passive_names_the_source_and_active_the_destination() {
        let _turn = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let hints = Hints {
            flags: abi::RAI_PASSIVE,
            ..Hints::default()
        };
        let p = getaddrinfo(Some("198.18.0.1"), Some("7174"), hints).unwrap();
        let i = read(p);
        assert!(i.ai_dst_addr.is_null());
        assert_eq!(i.ai_src_len, 16);
        assert_eq!(
            (i.ai_qp_type, i.ai_port_space),
            (abi::IBV_QPT_RC, abi::RDMA_PS_TCP)
        );
        let src = with(|t| t.addrinfos[&(p as usize)].src.as_ref().map(CBox::get)).unwrap();
        assert_eq!(
            addr::from_storage(&src),
            Ok("198.18.0.1:7174".parse().unwrap())
        );
        freeaddrinfo(p as usize);
        assert!(!with(|t| t.addrinfos.contains_key(&(p as usize))));

        let udp = Hints {
            port_space: abi::RDMA_PS_UDP,
            ..Hints::default()
        };
        let p = getaddrinfo(Some("198.18.0.2"), None, udp).unwrap();
        let i = read(p);
        assert!(i.ai_src_addr.is_null());
        assert_eq!(i.ai_qp_type, abi::IBV_QPT_UD);
        freeaddrinfo(p as usize);
    }

    #[test]
    fn ipv6_answers_are_sockaddr_in6_of_the_family_af_inet6() {
        let _turn = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        // An IPv6 NIC: a NULL passive node is `::` (getaddrinfo gives both wildcards).
        let passive = Hints {
            flags: abi::RAI_PASSIVE,
            prefer: libc::AF_INET6,
            ..Hints::default()
        };
        for (node, want) in [(Some("::1"), "[::1]:7174"), (None, "[::]:7174")] {
            let p = getaddrinfo(node, Some("7174"), passive).unwrap();
            let i = read(p);
            assert_eq!(
                (i.ai_family, i.ai_src_len),
                (libc::AF_INET6, 28),
                "{node:?}"
            );
            let src = with(|t| t.addrinfos[&(p as usize)].src.as_ref().map(CBox::get)).unwrap();
            assert_eq!(addr::from_storage(&src), Ok(want.parse().unwrap()));
            freeaddrinfo(p as usize);
        }
        // An active lookup of a global IPv6 address: the destination.
        let p = getaddrinfo(Some("2001:db8::7"), Some("7174"), Hints::default()).unwrap();
        let i = read(p);
        assert_eq!((i.ai_family, i.ai_dst_len), (libc::AF_INET6, 28));
        assert!(i.ai_src_addr.is_null());
        freeaddrinfo(p as usize);
    }

    #[test]
    fn host_names_and_a_null_node_resolve_as_librdmacms_do() {
        let _turn = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        // libfabric's verbs provider: rdma_getaddrinfo("localhost", NULL, RAI_PASSIVE).
        let passive = Hints {
            flags: abi::RAI_PASSIVE,
            ..Hints::default()
        };
        let p = getaddrinfo(Some("localhost"), None, passive).unwrap();
        let i = read(p);
        let src = with(|t| t.addrinfos[&(p as usize)].src.as_ref().map(CBox::get)).unwrap();
        assert_eq!(addr::from_storage(&src), Ok("127.0.0.1:0".parse().unwrap()));
        assert!(i.ai_dst_addr.is_null());
        assert_eq!((i.ai_flags, i.ai_family), (abi::RAI_PASSIVE, libc::AF_INET));
        freeaddrinfo(p as usize);
        // A NULL node with RAI_PASSIVE: the wildcard address.
        let p = getaddrinfo(None, Some("7471"), passive).unwrap();
        let src = with(|t| t.addrinfos[&(p as usize)].src.as_ref().map(CBox::get)).unwrap();
        assert_eq!(
            addr::from_storage(&src),
            Ok("0.0.0.0:7471".parse().unwrap())
        );
        freeaddrinfo(p as usize);
        // Without it, loopback is the destination; the hints' flags are not copied.
        let active = Hints {
            flags: abi::RAI_NOROUTE,
            ..Hints::default()
        };
        let p = getaddrinfo(None, Some("7471"), active).unwrap();
        let i = read(p);
        let dst = with(|t| t.addrinfos[&(p as usize)].dst.as_ref().map(CBox::get)).unwrap();
        assert_eq!(
            addr::from_storage(&dst),
            Ok("127.0.0.1:7471".parse().unwrap())
        );
        assert!(i.ai_src_addr.is_null());
        assert_eq!(i.ai_flags, 0);
        freeaddrinfo(p as usize);
        // Neither node nor service: the hints, copied.
        let bare = Hints {
            flags: abi::RAI_PASSIVE,
            port_space: abi::RDMA_PS_IB,
            ..Hints::default()
        };
        let p = getaddrinfo(None, None, bare).unwrap();
        let i = read(p);
        assert!(i.ai_src_addr.is_null() && i.ai_dst_addr.is_null());
        assert_eq!(
            (i.ai_flags, i.ai_port_space, i.ai_qp_type),
            (abi::RAI_PASSIVE, abi::RDMA_PS_IB, 0)
        );
        freeaddrinfo(p as usize);
    }

    #[test]
    fn names_ports_and_families_that_do_not_resolve_are_refused_and_nothing_is_kept() {
        let _turn = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let before = with(|t| t.addrinfos.len());
        // (No lookup of an unknown name: it would go to DNS, off this machine.)
        let numeric = Hints {
            flags: abi::RAI_NUMERICHOST,
            ..Hints::default()
        };
        assert_eq!(
            getaddrinfo(Some("localhost"), None, numeric),
            Err(libc::EAI_NONAME)
        );
        assert_eq!(
            getaddrinfo(
                Some("198.18.0.1"),
                Some("no-such-service"),
                Hints::default()
            ),
            Err(libc::EAI_SERVICE)
        );
        let v6 = Hints {
            family: libc::AF_INET6,
            ..Hints::default()
        };
        assert!(getaddrinfo(Some("198.18.0.1"), None, v6).is_err());
        let ib = Hints {
            family: 27, // AF_IB
            ..Hints::default()
        };
        assert_eq!(
            getaddrinfo(Some("198.18.0.1"), None, ib),
            Err(libc::EAI_FAMILY)
        );
        assert_eq!(with(|t| t.addrinfos.len()), before);
    }
}
