//! The interface that holds an address ([`interface_of`]): its name, index and IPv6
//! link-local address.

use std::net::{IpAddr, Ipv6Addr};

/// The interface that holds an address, and its IPv6 link-local address if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name (`veth0`).
    pub name: String,
    /// Its index (the scope of its link-local addresses).
    pub index: u32,
    /// Its first IPv6 link-local address, as rxe's GID 0 is the netdev's (`lo` has none).
    pub link_local: Option<Ipv6Addr>,
}

/// The interface of this network namespace that holds `ip`, if one does.
pub fn interface_of(ip: IpAddr) -> Option<Interface> {
    let addrs: Vec<_> = nix::ifaddrs::getifaddrs().ok()?.collect();
    let addr_of = |a: &nix::ifaddrs::InterfaceAddress| -> Option<IpAddr> {
        let sa = a.address.as_ref()?;
        if let Some(v4) = sa.as_sockaddr_in() {
            return Some(IpAddr::V4(v4.ip()));
        }
        sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
    };
    let name = addrs
        .iter()
        .find(|a| addr_of(a) == Some(ip))?
        .interface_name
        .clone();
    let index = nix::net::if_::if_nametoindex(name.as_str()).ok()?;
    let link_local =
        addrs
            .iter()
            .filter(|a| a.interface_name == name)
            .find_map(|a| match addr_of(a) {
                Some(IpAddr::V6(v6)) if v6.is_unicast_link_local() => Some(v6),
                _ => None,
            });
    Some(Interface {
        name,
        index,
        link_local,
    })
}
