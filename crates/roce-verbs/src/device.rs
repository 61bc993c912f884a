//! The one device and its port, as rxe shows them (safe code: values only).
//!
//! rxe's choices, followed here so that scripts written for rxe keep working:
//! - node GUID: the EUI-64 of the netdev's MAC (`addrconf_addr_eui48`). The UDP backend has no
//!   MAC, so the MAC is taken as `02:00:a:b:c:d` from the IPv4 address `a.b.c.d` (for an IPv6
//!   address, its last four bytes), a locally administered address, which gives the GUID bytes
//!   `00 00 a ff fe b c d` (127.0.0.1: `0000:7fff:fe00:0001`): distinct per address and stable
//!   across runs.
//! - GID table of port 1: index 0 is the netdev's IPv6 link-local address, index 1 the NIC's
//!   address: an IPv4 one as `::ffff:a.b.c.d`, an IPv6 one as itself (rxe lists a netdev's
//!   addresses after the link-local one, so an interface with one address has it at index 1),
//!   both RoCE v2 (rxe is RoCE v2 only). That is why rxe users pass `-g 1` / `-x 1`, and the
//!   same index works here.
//! - GID 0 carries traffic where rxe's would: on the UDP backend, when the interface that
//!   holds the NIC's address has a link-local address, GID 0 is that address (the netdev's, as
//!   rxe's) and QPs and AHs may use it ([`DeviceModel::for_host`]), whichever the family of the
//!   NIC's address: an IPv4 NIC then speaks RoCEv2 over IPv6 from GID 0 (a second socket, on
//!   that address alone), as libfabric's verbs provider, which uses GID 0, expects. If that
//!   socket cannot be bound (another NIC holds the port on that address or on the whole
//!   interface), the IPv4 NIC still starts, and GID 0, still that address, is refused
//!   ([`DeviceModel::gid0_refusal`] says why). Where the interface has no link-local address
//!   (`lo`), or on the raw backend, GID 0 is `fe80::` + the EUI-64 of the node GUID and a QP
//!   or AH on it is refused with `EINVAL`.
//! - port: ACTIVE, link layer Ethernet, max MTU 4096, active MTU the configured path MTU.
//! - limits: rxe's (`rxe_param.h`) where the engine has no tighter one, the engine's
//!   ([`NicConfig`]) where it has; features the engine lacks (multicast)
//!   report 0.

use std::ffi::c_char;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::OnceLock;

use roce_core::NicConfig;

use crate::abi::{self, IbvDevice, IbvGid, IbvGidEntry};
use roce_device::BackendKind;

use crate::config::DeviceSpec;
pub use roce_device::backend::udp::Interface;

mod attr;
#[cfg(test)]
mod tests;

/// Entries of the GID table that are set (the table has [`GID_TABLE_LEN`] slots).
pub const GID_COUNT: u32 = 2;
/// Index of the NIC's address as a GID (`::ffff:a.b.c.d`, or the IPv6 address).
pub const GID_INDEX_IP: u32 = 1;
/// rxe `RXE_PORT_GID_TBL_LEN`.
pub const GID_TABLE_LEN: i32 = 1024;
/// The only port.
pub const PORT: u8 = 1;
/// The only P_Key: the default, full-membership one.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// `enum ibv_device_cap_flags` bits (verbs.h; the kernel's `IB_DEVICE_*` have the same values).
pub mod cap {
    /// `IBV_DEVICE_PORT_ACTIVE_EVENT`.
    pub const PORT_ACTIVE_EVENT: u64 = 1 << 10;
    /// `IBV_DEVICE_SYS_IMAGE_GUID`.
    pub const SYS_IMAGE_GUID: u64 = 1 << 11;
    /// `IBV_DEVICE_RC_RNR_NAK_GEN`.
    pub const RC_RNR_NAK_GEN: u64 = 1 << 12;
    /// `IBV_DEVICE_SRQ_RESIZE`.
    pub const SRQ_RESIZE: u64 = 1 << 13;
    /// `IBV_DEVICE_MEM_WINDOW`.
    pub const MEM_WINDOW: u64 = 1 << 17;
    /// `IBV_DEVICE_MEM_MGT_EXTENSIONS`: local invalidation, SEND with invalidate, binds by
    /// work request.
    pub const MEM_MGT_EXTENSIONS: u64 = 1 << 21;
    /// `IBV_DEVICE_MEM_WINDOW_TYPE_2B`.
    pub const MEM_WINDOW_TYPE_2B: u64 = 1 << 24;
}

/// The device: its settings and what follows from them.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    /// The settings it was made from.
    pub spec: DeviceSpec,
    /// The engine limits it reports.
    pub nic: NicConfig,
    /// The interface holding the address on the UDP backend: its link-local address, if it
    /// has one, is GID 0 and carries traffic.
    pub iface: Option<Interface>,
    /// Why the NIC could not bind GID 0's link-local address, once it found out
    /// ([`DeviceModel::link_local_unbound`]): GID 0 then carries no traffic.
    gid0_unbound: OnceLock<String>,
}

impl DeviceModel {
    /// The device for these settings.
    pub fn new(spec: DeviceSpec) -> Self {
        let nic = NicConfig {
            max_mtu: spec.mtu(),
            ..spec.nic.nic_config()
        };
        Self {
            spec,
            nic,
            iface: None,
            gid0_unbound: OnceLock::new(),
        }
    }

    /// The device for these settings on this host: as [`DeviceModel::new`], and on the UDP
    /// backend, GID 0 is the link-local address of the interface that holds the address, if
    /// it has one.
    pub fn for_host(spec: DeviceSpec) -> Self {
        let iface = match spec.nic.backend {
            BackendKind::Udp => roce_device::backend::udp::interface_of(spec.nic.ip),
            BackendKind::Raw => None,
        };
        Self {
            iface,
            ..Self::new(spec)
        }
    }

    /// The interface's link-local address, GID 0, if it has one.
    fn gid0_address(&self) -> Option<Ipv6Addr> {
        self.iface.as_ref().and_then(|i| i.link_local)
    }

    /// The link-local address GID 0 is and carries traffic from, if it does.
    pub fn link_local(&self) -> Option<Ipv6Addr> {
        self.gid0_address()
            .filter(|_| self.gid0_unbound.get().is_none())
    }

    /// Records that the NIC could not bind GID 0's address, and why (`why` ends the sentence
    /// "GID 0 carries no traffic here: ..."): from then on GID 0 carries no traffic, and
    /// [`DeviceModel::gid0_refusal`] says `why`. For an IPv4 NIC, which starts without it.
    pub fn link_local_unbound(&self, why: String) {
        let _ = self.gid0_unbound.set(why);
    }

    /// Why GID 0 carries no traffic, for the message a program gets when it asks for it;
    /// `None` when it does.
    pub fn gid0_refusal(&self) -> Option<String> {
        if let Some(why) = self.gid0_unbound.get() {
            return Some(why.clone());
        }
        if self.link_local().is_some() {
            return None;
        }
        Some(
            match (&self.iface, self.spec.nic.ip, self.spec.nic.backend) {
                (_, _, BackendKind::Raw) => {
                    "the raw backend sends from its --ip address alone".to_owned()
                }
                (Some(i), ..) => format!(
                    "{}, which holds {}, has no IPv6 link-local address",
                    i.name, self.spec.nic.ip
                ),
                (None, ip, _) => format!("no interface of this host holds {ip}"),
            },
        )
    }

    /// The address a QP or AH whose source is GID `index` sends from: GID 1's, or GID 0's
    /// where it carries traffic.
    pub fn source(&self, index: u32) -> Option<IpAddr> {
        match index {
            GID_INDEX_IP => Some(self.spec.nic.ip),
            0 => self.link_local().map(IpAddr::V6),
            _ => None,
        }
    }

    /// The node GUID in host order (`ibv_get_device_guid` returns it big-endian).
    pub fn node_guid(&self) -> u64 {
        let [a, b, c, d] = match self.spec.nic.ip {
            IpAddr::V4(v4) => v4.octets(),
            IpAddr::V6(v6) => {
                let o = v6.octets();
                [o[12], o[13], o[14], o[15]]
            }
        };
        // EUI-48 02:00:a:b:c:d -> EUI-64 (ff:fe in the middle) with the universal/local bit
        // (0x02 of the first byte) flipped: 00 00 a ff fe b c d.
        u64::from_be_bytes([0x00, 0x00, a, 0xff, 0xfe, b, c, d])
    }

    /// The GID at `index`, or `None` past the set entries.
    pub fn gid(&self, index: u32) -> Option<IbvGid> {
        let addr: Ipv6Addr = match index {
            0 => self.gid0_address().unwrap_or_else(|| {
                let mut raw = [0u8; 16];
                raw[0] = 0xfe;
                raw[1] = 0x80;
                raw[8..].copy_from_slice(&self.node_guid().to_be_bytes());
                Ipv6Addr::from(raw)
            }),
            GID_INDEX_IP => Ipv6Addr::from(roce_wire::Gid::from_ip(self.spec.nic.ip).0),
            _ => return None,
        };
        Some(IbvGid { raw: addr.octets() })
    }

    /// The `ibv_gid_entry` at `index`.
    pub fn gid_entry(&self, index: u32) -> Option<IbvGidEntry> {
        self.gid(index).map(|gid| IbvGidEntry {
            gid,
            gid_index: index,
            port_num: u32::from(PORT),
            gid_type: abi::GID_TYPE_ROCE_V2,
            ndev_ifindex: 0,
        })
    }

    /// The NIC's address: GID 1's, the one that carries traffic.
    pub fn ip(&self) -> IpAddr {
        self.spec.nic.ip
    }

    /// `struct ibv_device`.
    pub fn ibv_device(&self) -> IbvDevice {
        let mut dev = IbvDevice {
            _ops: [std::ptr::null(); 2],
            node_type: abi::NODE_CA,
            transport_type: abi::TRANSPORT_IB,
            name: [0; abi::SYSFS_NAME_MAX],
            dev_name: [0; abi::SYSFS_NAME_MAX],
            dev_path: [0; abi::SYSFS_PATH_MAX],
            ibdev_path: [0; abi::SYSFS_PATH_MAX],
        };
        // The kernel's names and paths. `roce exec` puts a node and a sysfs tree there (see
        // `sysfs`) for the programs that look past libibverbs (UCX wants the node to be a
        // read-writable character device); without them, reads under the paths fail, which
        // ibv_devinfo handles (it then prints no board_id).
        copy_c_str(&mut dev.name, &self.spec.name);
        copy_c_str(&mut dev.dev_name, &self.spec.uverbs);
        copy_c_str(
            &mut dev.dev_path,
            &format!("/sys/class/infiniband_verbs/{}", self.spec.uverbs),
        );
        copy_c_str(
            &mut dev.ibdev_path,
            &format!("/sys/class/infiniband/{}", self.spec.name),
        );
        dev
    }
}

/// Copies `s` into a C char array, truncated to leave a NUL.
fn copy_c_str(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = *b as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}
