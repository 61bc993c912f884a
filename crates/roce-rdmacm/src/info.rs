//! `rdma_getaddrinfo` for numeric IPv4 hosts and ports (librdmacm's own resolves names and
//! routes too; programs that pass addresses, as rping and perftest do, see the same result).

use std::ffi::c_int;
use std::net::{Ipv4Addr, SocketAddrV4};

use crate::abi::{self, RdmaAddrinfo};
use crate::addr;
use crate::state::{AddrInfo, with};
use roce_cabi::CBox;

/// What the program asked for (the fields of `hints` that matter, or their defaults).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hints {
    pub(crate) flags: c_int,
    pub(crate) family: c_int,
    pub(crate) qp_type: c_int,
    pub(crate) port_space: c_int,
    /// `hints->ai_src_addr` of an active lookup, copied to the result.
    pub(crate) src: Option<SocketAddrV4>,
}

/// One `rdma_addrinfo`: for `RAI_PASSIVE` the node is the source address (wildcard without a
/// node), otherwise the destination (loopback without one, as getaddrinfo(3)). Errors are
/// getaddrinfo's codes: `EAI_NONAME` (a name, not an address), `EAI_SERVICE`, `EAI_FAMILY`.
pub(crate) fn getaddrinfo(
    node: Option<&str>,
    service: Option<&str>,
    hints: Hints,
) -> Result<*mut RdmaAddrinfo, c_int> {
    if !matches!(hints.family, 0 | libc::AF_INET) {
        return Err(libc::EAI_FAMILY);
    }
    let port = service.map(addr::parse_port).transpose()?.unwrap_or(0);
    let ip = node.map(addr::parse_host).transpose()?;
    let passive = hints.flags & abi::RAI_PASSIVE != 0;
    let (src, dst) = if passive {
        (
            Some(SocketAddrV4::new(ip.unwrap_or(Ipv4Addr::UNSPECIFIED), port)),
            None,
        )
    } else {
        (
            hints.src,
            Some(SocketAddrV4::new(ip.unwrap_or(Ipv4Addr::LOCALHOST), port)),
        )
    };
    let port_space = if hints.port_space == 0 {
        if hints.qp_type == abi::IBV_QPT_UD {
            abi::RDMA_PS_UDP
        } else {
            abi::RDMA_PS_TCP
        }
    } else {
        hints.port_space
    };
    let qp_type = match (hints.qp_type, port_space) {
        (0, abi::RDMA_PS_UDP | abi::RDMA_PS_IPOIB) => abi::IBV_QPT_UD,
        (0, _) => abi::IBV_QPT_RC,
        (t, _) => t,
    };
    let src = src.map(|a| CBox::new(addr::to_storage(a)));
    let dst = dst.map(|a| CBox::new(addr::to_storage(a)));
    let info = CBox::new(RdmaAddrinfo {
        ai_flags: hints.flags,
        ai_family: libc::AF_INET,
        ai_qp_type: qp_type,
        ai_port_space: port_space,
        ai_src_len: if src.is_some() {
            addr::SOCKADDR_IN_LEN
        } else {
            0
        },
        ai_dst_len: if dst.is_some() {
            addr::SOCKADDR_IN_LEN
        } else {
            0
        },
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
    fn names_ports_and_families_it_cannot_do_are_refused_and_nothing_is_kept() {
        let _turn = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let before = with(|t| t.addrinfos.len());
        assert_eq!(
            getaddrinfo(Some("example.org"), None, Hints::default()),
            Err(libc::EAI_NONAME)
        );
        assert_eq!(
            getaddrinfo(Some("198.18.0.1"), Some("ssh"), Hints::default()),
            Err(libc::EAI_SERVICE)
        );
        let v6 = Hints {
            family: libc::AF_INET6,
            ..Hints::default()
        };
        assert_eq!(
            getaddrinfo(Some("198.18.0.1"), None, v6),
            Err(libc::EAI_FAMILY)
        );
        assert_eq!(with(|t| t.addrinfos.len()), before);
    }
}
