//! One NIC per address, shared by every process that uses the address (the UDP backend).
//!
//! Only RoCEv2's destination port is fixed, so each process sends from a socket of its own; the
//! receiving is shared through the kernel: every process's socket is bound to `ADDR:4791` with
//! `SO_REUSEPORT`, and a classic BPF program attached to the group ([`crate::backend::steer`])
//! hands each datagram to the socket of the process whose engine owns what it names — each
//! engine names its QPs, keys and CM IDs in a slot of its own ([`roce_core::share`]). No byte
//! takes another hop or copy.
//!
//! The program returns a socket's index in the group, which is its place in the order the
//! sockets joined, the kernel moving the last one into the place of one that leaves. One
//! process knows that order for sure only if it is the one that binds and closes every socket:
//! the address's agent ([`agent`]), a small process that the first user starts
//! (`roce agent --ip ADDR`, [`member::join`]) and that ends a moment after the last one leaves.
//! It binds each member's sockets, keeps a copy of each, and hands the member its own copies and
//! its slot over a Unix socket (abstract, so one per network namespace, named after the
//! address). When a member's connection ends — it left, or died, SIGKILL included — the agent
//! keeps its copies: closing them would make the kernel move the group's last socket into
//! their place, and the moved member's datagrams would go astray until the agent attached the
//! program that knows the move. The seat waits for the next member to join (its sockets
//! emptied first), and closes once it is the group's last, which moves nothing. The agent
//! attaches the new program at each change. A member also tells the
//! agent the service IDs its CM listens on, for the REQs.

pub mod agent;
pub mod member;

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};

use roce_wire::ROCE_V2_UDP_PORT as PORT;

use crate::backend::udp::Interface;

/// The abstract Unix socket name of the agent of `ip` (in the caller's network namespace).
pub fn agent_name(ip: IpAddr) -> String {
    format!("roce-emu/agent/{ip}")
}

/// The sockets one member of a shared NIC at an address gets, as the agent binds them: those
/// of [`crate::DeviceSpec::open`]'s UDP backend, each in the address's `SO_REUSEPORT` group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `ip:4791` alone.
    Address(IpAddr),
    /// An IPv4 `ip:4791`, and its interface's link-local address for GID 0.
    WithLinkLocal(IpAddr, Ipv6Addr, u32),
    /// An IPv6 NIC: `[::]:4791` on its interface (both its GIDs), sending with the index.
    Interface(String, u32),
}

impl Layout {
    /// The layout of a NIC at `ip` whose interface is `iface` (if it has a link-local address).
    pub(crate) fn of(ip: IpAddr, iface: Option<&Interface>) -> Self {
        match iface.and_then(|i| Some((i, i.link_local?))) {
            Some((i, _)) if ip.is_ipv6() => Self::Interface(i.name.clone(), i.index),
            Some((i, ll)) => Self::WithLinkLocal(ip, ll, i.index),
            None => Self::Address(ip),
        }
    }

    /// Binds a member's sockets: the first, and the link-local one where the layout has it.
    pub(crate) fn bind(&self) -> io::Result<Vec<std::net::UdpSocket>> {
        self.addresses()
            .into_iter()
            .map(|(addr, device)| bind(addr, device, true))
            .collect()
    }

    /// Before the first member: whether something else holds the layout's addresses — another
    /// program, or another NIC's agent (an IPv4 NIC's link-local address is its interface's, and
    /// so is an IPv6 NIC's `[::]`) — by binding each for a moment without `SO_REUSEPORT`,
    /// which fails wherever another socket is. The first socket's error, and the link-local
    /// one's.
    pub(crate) fn probe(&self) -> (io::Result<()>, Option<io::Error>) {
        let mut results = self
            .addresses()
            .into_iter()
            .map(|(addr, device)| bind(addr, device, false).map(drop));
        let first = results.next().unwrap_or(Ok(()));
        (first, results.next().and_then(Result::err))
    }

    /// Each socket's address, and the interface it is bound to.
    fn addresses(&self) -> Vec<(SocketAddr, Option<&str>)> {
        match self {
            Self::Address(ip) => vec![(SocketAddr::new(*ip, PORT), None)],
            Self::WithLinkLocal(ip, ll, index) => vec![
                (SocketAddr::new(*ip, PORT), None),
                (SocketAddrV6::new(*ll, PORT, 0, *index).into(), None),
            ],
            Self::Interface(name, _) => vec![(
                SocketAddr::from((Ipv6Addr::UNSPECIFIED, PORT)),
                Some(name.as_str()),
            )],
        }
    }

    /// The interface index the first socket sends with, if it needs one.
    pub(crate) fn first_ifindex(&self) -> Option<u32> {
        match self {
            Self::Interface(_, index) => Some(*index),
            _ => None,
        }
    }

    /// The link-local socket's scope (the interface's index), where the layout has one.
    pub(crate) fn link_local_scope(&self) -> Option<u32> {
        match self {
            Self::WithLinkLocal(_, _, index) => Some(*index),
            _ => None,
        }
    }
}

/// A UDP socket bound to `addr` (on `device` alone, if given), in its `SO_REUSEPORT` group if
/// `shared`.
fn bind(addr: SocketAddr, device: Option<&str>, shared: bool) -> io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let socket = Socket::new(domain, Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    if let Some(device) = device {
        socket.bind_device(Some(device.as_bytes()))?;
    }
    socket.set_reuse_port(shared)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// What a member says to the agent, and the agent's answers: one datagram each on the
/// `SOCK_SEQPACKET` connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// Member: give me a slot and my sockets.
    Join,
    /// Anyone, on a connection of its own: which service IDs are listened on (the answer is a
    /// `Listen` of all of them).
    Services,
    /// Member: the service IDs my CM listens on (all of them; none ends the last).
    Listen(Vec<u64>),
    /// Agent: the REQs for those are steered to you now.
    Listening,
    /// Agent: your slot; your sockets are attached (the first, then the link-local one), and,
    /// where the layout has a link-local socket that could not be bound, the `errno` why.
    Slot(u8, Option<i32>),
    /// Agent: no sockets, because of this `errno` (`EADDRINUSE` for an address another
    /// program holds without `SO_REUSEPORT`), or every slot is taken (`EUSERS`).
    Refused(i32),
}

impl Message {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Self::Join => b"join".to_vec(),
            Self::Services => b"services".to_vec(),
            Self::Listen(ids) => {
                let ids: Vec<String> = ids.iter().map(|id| format!("{id:x}")).collect();
                format!("listen {}", ids.join(",")).into_bytes()
            }
            Self::Listening => b"listening".to_vec(),
            Self::Slot(slot, None) => format!("slot {slot}").into_bytes(),
            Self::Slot(slot, Some(errno)) => format!("slot {slot} {errno}").into_bytes(),
            Self::Refused(errno) => format!("refused {errno}").into_bytes(),
        }
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (word, rest) = text.split_once(' ').unwrap_or((text, ""));
        Some(match word {
            "join" => Self::Join,
            "services" => Self::Services,
            "listen" => Self::Listen(
                rest.split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| u64::from_str_radix(s, 16).ok())
                    .collect::<Option<_>>()?,
            ),
            "listening" => Self::Listening,
            "slot" => match rest.split_once(' ') {
                Some((slot, errno)) => Self::Slot(slot.parse().ok()?, Some(errno.parse().ok()?)),
                None => Self::Slot(rest.parse().ok()?, None),
            },
            "refused" => Self::Refused(rest.parse().ok()?),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
