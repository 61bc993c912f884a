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

use crate::abi::{
    self, IbvDevice, IbvDeviceAttr, IbvDeviceAttrEx, IbvGid, IbvGidEntry, IbvPortAttr,
};
use crate::config::{Backend, DeviceSpec};
pub use roce_device::backend::udp::Interface;

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

/// The capability flags: rxe's (Linux 6.1 rxe_param.h `RXE_DEVICE_CAP_FLAGS`) for what the
/// engine does. rxe's BAD_PKEY_CNTR, BAD_QKEY_CNTR (its port counters stay 0 anyway),
/// AUTO_PATH_MIG and CHANGE_PHY_PORT (alternate paths are refused here) and UD_AV_PORT_ENFORCE
/// are left out.
const DEVICE_CAP_FLAGS: u64 = cap::PORT_ACTIVE_EVENT
    | cap::SYS_IMAGE_GUID
    | cap::RC_RNR_NAK_GEN
    | cap::SRQ_RESIZE
    | cap::MEM_WINDOW
    | cap::MEM_MGT_EXTENSIONS
    | cap::MEM_WINDOW_TYPE_2B;

/// rxe's `max_mw` and `max_mr` on Linux 6.1 (rxe_param.h: `RXE_MAX_MW_INDEX -
/// RXE_MIN_MW_INDEX`); the engine's windows share the 2^24 key indices with regions.
const MAX_MW: i32 = (1 << 19) - 1;

/// rxe `RXE_VENDOR_ID`: not a PCI vendor, so perftest treats the device as unknown and uses
/// the classic `ibv_post_send` path (perftest 4.5's verify_params_with_device_context).
const VENDOR_ID: u32 = 0x00ff_ffff;

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
            addrs: vec![spec.ip],
            max_mtu: spec.mtu,
            line_rate_bps: spec.line_rate_bps,
            congestion: match spec.cc {
                crate::config::Cc::None => roce_core::Congestion::None,
                crate::config::Cc::Dcqcn => {
                    roce_core::Congestion::Dcqcn(roce_core::DcqcnConfig::default())
                }
                crate::config::Cc::DcqcnPaper => {
                    roce_core::Congestion::Dcqcn(roce_core::DcqcnConfig::paper())
                }
            },
            ..NicConfig::default()
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
        let iface = match spec.backend {
            Backend::Udp => roce_device::backend::udp::interface_of(spec.ip),
            Backend::Raw => None,
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
        Some(match (&self.iface, self.spec.ip, self.spec.backend) {
            (_, _, Backend::Raw) => "the raw backend sends from its --ip address alone".to_owned(),
            (Some(i), ..) => format!(
                "{}, which holds {}, has no IPv6 link-local address",
                i.name, self.spec.ip
            ),
            (None, ip, _) => format!("no interface of this host holds {ip}"),
        })
    }

    /// The address a QP or AH whose source is GID `index` sends from: GID 1's, or GID 0's
    /// where it carries traffic.
    pub fn source(&self, index: u32) -> Option<IpAddr> {
        match index {
            GID_INDEX_IP => Some(self.spec.ip),
            0 => self.link_local().map(IpAddr::V6),
            _ => None,
        }
    }

    /// The node GUID in host order (`ibv_get_device_guid` returns it big-endian).
    pub fn node_guid(&self) -> u64 {
        let [a, b, c, d] = match self.spec.ip {
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
            GID_INDEX_IP => Ipv6Addr::from(roce_wire::Gid::from_ip(self.spec.ip).0),
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
        self.spec.ip
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

    /// `struct ibv_device_attr`.
    pub fn device_attr(&self) -> IbvDeviceAttr {
        let clamp = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
        let mut fw_ver = [0; 64];
        copy_c_str(&mut fw_ver, env!("CARGO_PKG_VERSION"));
        let guid = self.node_guid().to_be();
        IbvDeviceAttr {
            fw_ver,
            node_guid: guid,
            sys_image_guid: guid,
            max_mr_size: self.nic.max_mr_size as u64,
            page_size_cap: 0xffff_f000,
            vendor_id: VENDOR_ID,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: clamp(self.nic.max_qp),
            max_qp_wr: 0x4000,
            device_cap_flags: DEVICE_CAP_FLAGS as u32,
            max_sge: clamp(self.nic.max_sge),
            max_sge_rd: clamp(self.nic.max_sge),
            max_cq: 0x4000,
            max_cqe: crate::verbs::MAX_CQE,
            max_mr: 0x4000,
            max_pd: 0x7ff0,
            max_qp_rd_atom: 128,
            max_ee_rd_atom: 0,
            max_res_rd_atom: 0x3f000,
            max_qp_init_rd_atom: 128,
            max_ee_init_rd_atom: 0,
            atomic_cap: abi::ATOMIC_HCA,
            max_ee: 0,
            max_rdd: 0,
            max_mw: MAX_MW,
            max_raw_ipv6_qp: 0,
            max_raw_ethy_qp: 0,
            max_mcast_grp: 0,
            max_mcast_qp_attach: 0,
            max_total_mcast_qp_attach: 0,
            max_ah: 0x7fff,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: clamp(self.nic.max_srq),
            max_srq_wr: clamp(self.nic.max_srq_wr).min(0x4000),
            // rxe_param.h RXE_MAX_SRQ_SGE: what fits rxe's receive WQE.
            max_srq_sge: clamp(self.nic.max_sge).min(27),
            max_pkeys: 64,
            local_ca_ack_delay: 15,
            phys_port_cnt: 1,
        }
    }

    /// `struct ibv_device_attr_ex`, as rxe's provider gets it from the kernel
    /// (`ibv_cmd_query_device_any`, rdma-core v44 libibverbs/cmd_device.c): the extended
    /// capabilities rxe lacks (ODP before 6.15, timestamps, TSO, RSS, packet pacing, tag
    /// matching, CQ moderation, device memory, PCI atomics) are 0, `device_cap_flags_ex` is
    /// the whole 64-bit set (uverbs' `ib_uverbs_ex_query_device` copies `attr.device_cap_flags`),
    /// and `phys_port_cnt_ex` the port count (the sysfs port count, else `phys_port_cnt`).
    pub fn device_attr_ex(&self) -> IbvDeviceAttrEx {
        let orig_attr = self.device_attr();
        IbvDeviceAttrEx {
            orig_attr,
            comp_mask: 0,
            _pad0: 0,
            odp_caps: [0; 3],
            completion_timestamp_mask: 0,
            hca_core_clock: 0,
            device_cap_flags_ex: DEVICE_CAP_FLAGS,
            tso_caps: [0; 2],
            rss_caps: [0; 4],
            max_wq_type_rq: 0,
            packet_pacing_caps: [0; 3],
            raw_packet_caps: 0,
            tm_caps: [0; 5],
            cq_mod_caps: [0; 2],
            _pad1: 0,
            max_dm_size: 0,
            pci_atomic_caps: [0; 3],
            _pad2: 0,
            xrc_odp_caps: 0,
            phys_port_cnt_ex: u32::from(orig_attr.phys_port_cnt),
        }
    }

    /// `struct ibv_port_attr` of port 1.
    pub fn port_attr(&self) -> IbvPortAttr {
        IbvPortAttr {
            state: abi::PORT_ACTIVE,
            max_mtu: i32::from(roce_core::Mtu::Mtu4096.enum_value()),
            active_mtu: i32::from(self.spec.mtu.enum_value()),
            gid_tbl_len: GID_TABLE_LEN,
            // IB_PORT_CM_SUP | IB_PORT_IP_BASED_GIDS, as rxe's port shows.
            port_cap_flags: (1 << 16) | (1 << 26),
            max_msg_sz: self.nic.max_msg_size,
            bad_pkey_cntr: 0,
            qkey_viol_cntr: 0,
            pkey_tbl_len: 1,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            max_vl_num: 1,
            sm_sl: 0,
            subnet_timeout: 0,
            init_type_reply: 0,
            // 4X EDR: 100 Gb/s, the engine's default line rate.
            active_width: 2,
            active_speed: 32,
            phys_state: 5, // LinkUp
            link_layer: abi::LINK_LAYER_ETHERNET,
            flags: 0,
            port_cap_flags2: 0,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Backend;

    fn model(ip: impl Into<IpAddr>) -> DeviceModel {
        DeviceModel::new(DeviceSpec {
            name: "roce0".into(),
            ip: ip.into(),
            backend: Backend::Udp,
            dev: None,
            mtu: roce_core::Mtu::Mtu2048,
            pcap: None,
            snaplen: 0,
            stats: None,
            cc: crate::config::Cc::None,
            line_rate_bps: 100_000_000_000,
            loss: 0.0,
            busy_poll: false,
            no_gso: false,
            uverbs: "uverbs0".into(),
        })
    }

    #[test]
    fn guid_is_the_eui64_of_the_address_mac() {
        assert_eq!(model([127, 0, 0, 1]).node_guid(), 0x0000_7fff_fe00_0001);
        assert_eq!(model([198, 18, 0, 12]).node_guid(), 0x0000_c6ff_fe12_000c);
    }

    #[test]
    fn gid_1_is_ipv4_mapped_and_gid_0_link_local() {
        let m = model([198, 18, 0, 1]);
        let v4: Ipv6Addr = "::ffff:198.18.0.1".parse().unwrap();
        assert_eq!(m.gid(1).unwrap().raw, v4.octets());
        let ll: Ipv6Addr = "fe80::c6ff:fe12:1".parse().unwrap();
        assert_eq!(m.gid(0).unwrap().raw, ll.octets());
        assert_eq!(m.gid(2), None);
        assert_eq!(m.gid_entry(1).unwrap().gid_type, abi::GID_TYPE_ROCE_V2);
    }

    /// `model(ip)` on the interface `name` (index 7) with the link-local address `ll`.
    fn on_interface(ip: impl Into<IpAddr>, name: &str, ll: Option<Ipv6Addr>) -> DeviceModel {
        let mut m = model(ip);
        m.iface = Some(Interface {
            name: name.into(),
            index: 7,
            link_local: ll,
        });
        m
    }

    #[test]
    fn gid_0_carries_traffic_only_as_an_interfaces_link_local_address() {
        // No interface (the raw backend, or an address of no interface): GID 0 is the EUI-64
        // form and no QP or AH may send from it.
        let m = model([198, 18, 0, 1]);
        assert_eq!(m.source(0), None);
        assert_eq!(m.source(1), Some(IpAddr::from([198, 18, 0, 1])));
        assert_eq!(m.source(2), None);
        let why = m.gid0_refusal().unwrap();
        assert!(
            why.contains("no interface of this host holds 198.18.0.1"),
            "{why}"
        );
        // An address on an interface without a link-local address (lo), either family:
        // refused, the interface named; GID 0 the EUI-64 form.
        for ip in [
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            IpAddr::from([127, 0, 13, 1]),
        ] {
            let lo = on_interface(ip, "lo", None);
            assert_eq!(lo.source(0), None);
            assert_eq!(lo.gid(0), model(ip).gid(0));
            let why = lo.gid0_refusal().unwrap();
            let want = format!("lo, which holds {ip}, has no IPv6 link-local");
            assert!(why.contains(&want), "{why}");
        }
        // An IPv6 address on an interface with a link-local address: GID 0 is that address.
        let ip: Ipv6Addr = "fd00:198:18:6::1".parse().unwrap();
        let ll: Ipv6Addr = "fe80::c6ff:fe12:601".parse().unwrap();
        let m = on_interface(ip, "va", Some(ll));
        assert_eq!(m.gid(0).unwrap().raw, ll.octets());
        assert_eq!(m.source(0), Some(IpAddr::V6(ll)));
        assert_eq!(m.source(1), Some(IpAddr::V6(ip)));
        assert_eq!(m.gid0_refusal(), None);
    }

    /// An IPv4 NIC on an interface with a link-local address: GID 0 is that address and
    /// carries traffic, over IPv6, next to GID 1's IPv4; until the NIC says it could not bind
    /// it, after which GID 0 is still the address but refused, with the NIC's reason.
    #[test]
    fn gid_0_of_an_ipv4_nic_is_its_interfaces_link_local_address() {
        let ll: Ipv6Addr = "fe80::c6ff:fe12:301".parse().unwrap();
        let m = on_interface([198, 18, 3, 1], "va", Some(ll));
        let mapped: Ipv6Addr = "::ffff:198.18.3.1".parse().unwrap();
        assert_eq!(m.gid(0).unwrap().raw, ll.octets());
        assert_eq!(m.gid(1).unwrap().raw, mapped.octets());
        assert_eq!(m.source(0), Some(IpAddr::V6(ll)));
        assert_eq!(m.source(1), Some(IpAddr::from([198, 18, 3, 1])));
        assert_eq!(m.link_local(), Some(ll));
        assert_eq!(m.gid0_refusal(), None);
        m.link_local_unbound("in use".into());
        assert_eq!(m.gid(0).unwrap().raw, ll.octets());
        assert_eq!(m.source(0), None);
        assert_eq!(m.link_local(), None);
        assert_eq!(m.gid0_refusal().as_deref(), Some("in use"));
        assert_eq!(m.source(1), Some(IpAddr::from([198, 18, 3, 1])));
    }

    #[test]
    fn gid_1_of_an_ipv6_address_is_the_address() {
        let ip: Ipv6Addr = "fd00:198:18::2:7".parse().unwrap();
        let m = model(ip);
        assert_eq!(m.gid(1).unwrap().raw, ip.octets());
        // The GUID and link-local GID from the address's last four bytes.
        assert_eq!(m.node_guid(), 0x0000_00ff_fe02_0007);
        let ll: Ipv6Addr = "fe80::ff:fe02:7".parse().unwrap();
        assert_eq!(m.gid(0).unwrap().raw, ll.octets());
        assert_eq!(m.gid(2), None);
    }

    #[test]
    fn port_shows_the_path_mtu_and_ethernet() {
        let p = model([127, 0, 0, 1]).port_attr();
        assert_eq!((p.state, p.active_mtu, p.max_mtu), (4, 4, 5));
        assert_eq!(p.link_layer, abi::LINK_LAYER_ETHERNET);
    }

    #[test]
    fn limits_are_no_larger_than_the_engine() {
        let m = model([127, 0, 0, 1]);
        let a = m.device_attr();
        assert!(a.max_sge as usize <= m.nic.max_sge);
        assert!(a.max_qp as usize <= m.nic.max_qp);
        assert!(a.max_mr_size <= m.nic.max_mr_size as u64);
        assert!(a.max_srq as usize <= m.nic.max_srq && a.max_srq > 0);
        assert!(a.max_srq_wr as usize <= m.nic.max_srq_wr);
        assert!(a.max_srq_sge as usize <= m.nic.max_sge);
        assert!(m.port_attr().max_msg_sz <= m.nic.max_msg_size);
    }

    /// How a field compares with rxe's.
    #[derive(Debug)]
    enum Rxe {
        /// The value rxe reports.
        Same(u64),
        /// rxe's value is larger; ours is the engine's own limit, given here.
        EngineLimit { rxe: u64, engine: u64 },
        /// rxe has the feature, the engine does not (yet): 0, and why.
        Absent { rxe: u64, why: &'static str },
    }

    /// What rxe reports through `ibv_query_device_ex` on Debian 12's kernel (Linux 6.1 and its
    /// stable fixes): drivers/infiniband/sw/rxe/rxe.c `rxe_init_device_param` from rxe_param.h
    /// (`DEFAULT_MAX_VALUE` = 1 << 20; `RXE_MAX_MR` = `RXE_MAX_MW` = (1 << 19) - 1 since the
    /// 6.1 stable "RDMA/rxe: Prevent faulty rkey generation"), then uverbs'
    /// `ib_uverbs_ex_query_device` and rdma-core v44's `ibv_cmd_query_device_any`.
    fn rxe_device_table(m: &DeviceModel) -> Vec<(&'static str, u64, Rxe)> {
        use Rxe::*;
        let a = m.device_attr_ex();
        let o = a.orig_attr;
        let n = &m.nic;
        vec![
            ("vendor_id", u64::from(o.vendor_id), Same(0x00ff_ffff)),
            ("vendor_part_id", u64::from(o.vendor_part_id), Same(0)),
            ("hw_ver", u64::from(o.hw_ver), Same(0)),
            ("page_size_cap", o.page_size_cap, Same(0xffff_f000)),
            (
                "max_mr_size",
                o.max_mr_size,
                EngineLimit {
                    rxe: u64::MAX,
                    engine: n.max_mr_size as u64,
                },
            ),
            (
                "max_qp",
                o.max_qp as u64,
                EngineLimit {
                    rxe: (1 << 20) - 16,
                    engine: n.max_qp as u64,
                },
            ),
            // The send/receive queues of roce-verbs hold at most 0x4000 WRs (verbs/qp.rs).
            (
                "max_qp_wr",
                o.max_qp_wr as u64,
                EngineLimit {
                    rxe: 1 << 20,
                    engine: 0x4000,
                },
            ),
            ("max_sge", o.max_sge as u64, Same(32)),
            ("max_sge_rd", o.max_sge_rd as u64, Same(32)),
            (
                "max_cq",
                o.max_cq as u64,
                EngineLimit {
                    rxe: 1 << 20,
                    engine: 0x4000,
                },
            ),
            ("max_cqe", o.max_cqe as u64, Same((1 << 15) - 1)),
            (
                "max_mr",
                o.max_mr as u64,
                EngineLimit {
                    rxe: (1 << 19) - 1,
                    engine: 0x4000,
                },
            ),
            (
                "max_pd",
                o.max_pd as u64,
                EngineLimit {
                    rxe: 1 << 20,
                    engine: 0x7ff0,
                },
            ),
            ("max_qp_rd_atom", o.max_qp_rd_atom as u64, Same(128)),
            ("max_ee_rd_atom", o.max_ee_rd_atom as u64, Same(0)),
            ("max_res_rd_atom", o.max_res_rd_atom as u64, Same(0x3f000)),
            (
                "max_qp_init_rd_atom",
                o.max_qp_init_rd_atom as u64,
                Same(128),
            ),
            ("max_ee_init_rd_atom", o.max_ee_init_rd_atom as u64, Same(0)),
            (
                "atomic_cap",
                o.atomic_cap as u64,
                Same(abi::ATOMIC_HCA as u64),
            ),
            ("max_ee", o.max_ee as u64, Same(0)),
            ("max_rdd", o.max_rdd as u64, Same(0)),
            ("max_mw", o.max_mw as u64, Same((1 << 19) - 1)),
            ("max_raw_ipv6_qp", o.max_raw_ipv6_qp as u64, Same(0)),
            ("max_raw_ethy_qp", o.max_raw_ethy_qp as u64, Same(0)),
            (
                "max_mcast_grp",
                o.max_mcast_grp as u64,
                Absent {
                    rxe: 8192,
                    why: "no multicast",
                },
            ),
            (
                "max_mcast_qp_attach",
                o.max_mcast_qp_attach as u64,
                Absent {
                    rxe: 56,
                    why: "no multicast",
                },
            ),
            (
                "max_total_mcast_qp_attach",
                o.max_total_mcast_qp_attach as u64,
                Absent {
                    rxe: 0x70000,
                    why: "no multicast",
                },
            ),
            ("max_ah", o.max_ah as u64, Same((1 << 15) - 1)),
            ("max_fmr", o.max_fmr as u64, Same(0)),
            ("max_map_per_fmr", o.max_map_per_fmr as u64, Same(0)),
            (
                "max_srq",
                o.max_srq as u64,
                EngineLimit {
                    rxe: (1 << 20) - 0x2_0001,
                    engine: n.max_srq as u64,
                },
            ),
            (
                "max_srq_wr",
                o.max_srq_wr as u64,
                EngineLimit {
                    rxe: 1 << 20,
                    engine: (n.max_srq_wr as u64).min(0x4000),
                },
            ),
            (
                "max_srq_sge",
                o.max_srq_sge as u64,
                EngineLimit {
                    rxe: 27,
                    engine: n.max_sge as u64,
                },
            ),
            ("max_pkeys", u64::from(o.max_pkeys), Same(64)),
            (
                "local_ca_ack_delay",
                u64::from(o.local_ca_ack_delay),
                Same(15),
            ),
            ("phys_port_cnt", u64::from(o.phys_port_cnt), Same(1)),
            ("comp_mask", u64::from(a.comp_mask), Same(0)),
            ("odp_caps.general_caps", a.odp_caps[0], Same(0)),
            (
                "completion_timestamp_mask",
                a.completion_timestamp_mask,
                Same(0),
            ),
            ("hca_core_clock", a.hca_core_clock, Same(0)),
            ("max_wq_type_rq", u64::from(a.max_wq_type_rq), Same(0)),
            ("raw_packet_caps", u64::from(a.raw_packet_caps), Same(0)),
            ("max_dm_size", a.max_dm_size, Same(0)),
            ("xrc_odp_caps", u64::from(a.xrc_odp_caps), Same(0)),
            ("phys_port_cnt_ex", u64::from(a.phys_port_cnt_ex), Same(1)),
        ]
    }

    #[test]
    fn device_attributes_are_rxes_or_the_engines_limit() {
        let m = model([127, 0, 0, 1]);
        for (field, ours, rxe) in rxe_device_table(&m) {
            match rxe {
                Rxe::Same(v) => assert_eq!(ours, v, "{field}: rxe reports {v:#x}"),
                Rxe::EngineLimit { rxe, engine } => {
                    assert_eq!(ours, engine.min(rxe), "{field}: the engine's limit");
                    assert!(ours <= rxe, "{field}: above rxe's {rxe:#x}");
                }
                Rxe::Absent { rxe, why } => {
                    assert_eq!(ours, 0, "{field}: rxe has {rxe:#x}; 0 here: {why}")
                }
            }
        }
    }

    #[test]
    fn capability_flags_are_a_subset_of_rxes_and_the_same_in_both_queries() {
        // Linux 6.1 rxe_param.h RXE_DEVICE_CAP_FLAGS: BAD_PKEY_CNTR | BAD_QKEY_CNTR |
        // AUTO_PATH_MIG | CHANGE_PHY_PORT | UD_AV_PORT_ENFORCE | PORT_ACTIVE_EVENT |
        // SYS_IMAGE_GUID | RC_RNR_NAK_GEN | SRQ_RESIZE | MEM_MGT_EXTENSIONS | MEM_WINDOW |
        // MEM_WINDOW_TYPE_2B.
        const RXE_6_1: u64 = (1 << 1)
            | (1 << 2)
            | (1 << 4)
            | (1 << 5)
            | (1 << 6)
            | (1 << 10)
            | (1 << 11)
            | (1 << 12)
            | (1 << 13)
            | (1 << 21)
            | (1 << 17)
            | (1 << 24);
        let a = model([127, 0, 0, 1]).device_attr_ex();
        assert_eq!(
            a.device_cap_flags_ex & !RXE_6_1,
            0,
            "a flag rxe does not set"
        );
        assert_eq!(
            a.device_cap_flags_ex,
            u64::from(a.orig_attr.device_cap_flags)
        );
        // The flags as <infiniband/verbs.h> numbers them (not through `cap`, which the device
        // is built from): PORT_ACTIVE_EVENT 1 << 10, SYS_IMAGE_GUID 1 << 11, RC_RNR_NAK_GEN
        // 1 << 12, SRQ_RESIZE 1 << 13, MEM_WINDOW 1 << 17, MEM_MGT_EXTENSIONS 1 << 21,
        // MEM_WINDOW_TYPE_2B 1 << 24.
        let header =
            (1 << 10) | (1 << 11) | (1 << 12) | (1 << 13) | (1 << 17) | (1 << 21) | (1 << 24);
        assert_eq!(a.device_cap_flags_ex, header);
    }

    /// rxe 6.1's port (rxe_param.h `rxe_port_param`, rxe_verbs.c `rxe_query_port`: LinkUp when
    /// active; uverbs' `make_port_cap_flags` adds IP_BASED_GIDS for a RoCE port).
    #[test]
    fn port_attributes_are_rxes() {
        let m = model([127, 0, 0, 1]);
        let p = m.port_attr();
        let same: [(&str, u64, u64); 16] = [
            ("state", p.state as u64, abi::PORT_ACTIVE as u64),
            ("max_mtu", p.max_mtu as u64, 5),
            ("gid_tbl_len", p.gid_tbl_len as u64, 1024),
            (
                "port_cap_flags",
                u64::from(p.port_cap_flags),
                (1 << 16) | (1 << 26),
            ),
            ("bad_pkey_cntr", u64::from(p.bad_pkey_cntr), 0),
            ("qkey_viol_cntr", u64::from(p.qkey_viol_cntr), 0),
            ("pkey_tbl_len", u64::from(p.pkey_tbl_len), 1),
            ("lid", u64::from(p.lid), 0),
            ("sm_lid", u64::from(p.sm_lid), 0),
            ("lmc", u64::from(p.lmc), 0),
            ("max_vl_num", u64::from(p.max_vl_num), 1),
            ("sm_sl", u64::from(p.sm_sl), 0),
            ("subnet_timeout", u64::from(p.subnet_timeout), 0),
            ("phys_state", u64::from(p.phys_state), 5),
            (
                "link_layer",
                u64::from(p.link_layer),
                u64::from(abi::LINK_LAYER_ETHERNET),
            ),
            ("port_cap_flags2", u64::from(p.port_cap_flags2), 0),
        ];
        for (field, ours, rxe) in same {
            assert_eq!(ours, rxe, "{field}: rxe reports {rxe:#x}");
        }
        // rxe_param.h RXE_PORT_MAX_MSG_SZ: 0x800000 in 6.1, 1 << 31 upstream since; here the
        // engine's largest message (1 << 31 by default).
        assert_eq!(p.max_msg_sz, m.nic.max_msg_size);
    }

    #[test]
    fn long_names_are_truncated_with_a_nul() {
        let mut buf = [1 as c_char; 4];
        copy_c_str(&mut buf, "abcdef");
        assert_eq!(buf, [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]);
    }
}
