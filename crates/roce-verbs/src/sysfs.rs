//! The device as the kernel presents an RDMA device outside libibverbs: its files under
//! `/sys/class/infiniband/<name>/` and `/sys/class/infiniband_verbs/uverbsN/`
//! (drivers/infiniband/core/sysfs.c, uverbs_main.c) and its nodes under `/dev/infiniband/`
//! (safe code: values only).
//!
//! Programs that look past libibverbs read these: UCX keeps a device only if
//! `/dev/infiniband/<dev_name>` is a read-writable character device and reads each GID's type
//! from `gid_attrs/types/N` (it takes an unreadable one for RoCE v1), NCCL reads the GID type too,
//! `ibdev2netdev` lists `device/net/`. `roce exec` writes these trees into private mounts for the
//! program it runs. The values are the ones the library reports through verbs: same GUIDs, same
//! GIDs (`ibv_query_gid`), same port.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use crate::device::{DEFAULT_PKEY, DeviceModel, GID_COUNT, GID_TABLE_LEN, PORT};

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory. `merge`: a directory of the same name that the host already has keeps its
    /// entries next to these (a host with a real RNIC keeps it visible); otherwise this one
    /// replaces the host's.
    Dir {
        /// Keep the host's entries next to these.
        merge: bool,
        /// The entries, by name.
        entries: Tree,
    },
    /// A file with this content.
    File(String),
    /// A symbolic link to this target.
    Link(String),
    /// A character device that reads as empty and takes every write (the host's `/dev/null`,
    /// bound there): what a program may `stat`, `access` and open, but never `ioctl`.
    NullDevice,
}

/// A directory's entries, by name.
pub type Tree = BTreeMap<String, Node>;

fn dir(entries: impl IntoIterator<Item = (impl Into<String>, Node)>) -> Node {
    Node::Dir {
        merge: false,
        entries: entries.into_iter().map(|(k, v)| (k.into(), v)).collect(),
    }
}

fn merged(entries: impl IntoIterator<Item = (impl Into<String>, Node)>) -> Node {
    match dir(entries) {
        Node::Dir { entries, .. } => Node::Dir {
            merge: true,
            entries,
        },
        other => other,
    }
}

fn file(text: impl std::fmt::Display) -> Node {
    Node::File(format!("{text}\n"))
}

/// `IB_USER_VERBS_ABI_VERSION`: `/sys/class/infiniband_verbs/abi_version`.
const UVERBS_ABI_VERSION: u32 = 6;
/// rxe's `RXE_UVERBS_ABI_VERSION`: `uverbsN/abi_version`, the driver's ABI.
const DRIVER_ABI_VERSION: u32 = 2;
/// The uverbs character devices' major number, and the minor of `uverbs0`.
const UVERBS_MAJOR: u32 = 231;
const UVERBS_BASE_MINOR: u32 = 192;

/// A GUID as sysfs prints it (`%04x:%04x:%04x:%04x` of its big-endian bytes), as
/// `ibv_devinfo` prints it too.
fn guid_text(guid: u64) -> String {
    let b = guid.to_be_bytes();
    format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// A GID as sysfs prints it (`%pI6`: eight groups of four hex digits, not compressed).
fn gid_text(raw: [u8; 16]) -> String {
    Ipv6Addr::from(raw)
        .segments()
        .iter()
        .map(|s| format!("{s:04x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `ports/N/rate` (`rate_show`): "100 Gb/sec (4X EDR)".
fn rate_text(width: u8, speed: u8) -> String {
    let lanes = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 1,
    };
    // Tenths of Gb/s per lane, and the name.
    let (tenths, name) = match speed {
        2 => (50, " DDR"),
        4 => (100, " QDR"),
        8 => (100, " FDR10"),
        16 => (140, " FDR"),
        32 => (250, " EDR"),
        64 => (500, " HDR"),
        128 => (1000, " NDR"),
        _ => (25, ""),
    };
    let rate = lanes * tenths;
    let half = if rate % 10 != 0 { ".5" } else { "" };
    format!("{}{half} Gb/sec ({lanes}X{name})", rate / 10)
}

/// The entries to add to `/sys/class`: `infiniband/<name>/` and `infiniband_verbs/<uverbs>/`.
/// `ndev`: the network interface that holds the device's address (`gid_attrs/ndevs/N`,
/// `device/net/<ndev>`); `None` leaves them out, as the kernel has no netdev to show.
pub fn sys_class(model: &DeviceModel, ndev: Option<&str>) -> Tree {
    let spec = &model.spec;
    let attr = model.device_attr();
    let port_attr = model.port_attr();
    let fw: Vec<u8> = attr
        .fw_ver
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    let gids = (0..GID_TABLE_LEN.max(0) as u32).map(|i| {
        let raw = model.gid(i).map_or([0; 16], |g| g.raw);
        (i.to_string(), file(gid_text(raw)))
    });
    let set_gids = || 0..GID_COUNT;
    let mut gid_attrs = vec![(
        "types",
        dir(set_gids().map(|i| (i.to_string(), file("RoCE v2")))),
    )];
    if let Some(ndev) = ndev {
        gid_attrs.push((
            "ndevs",
            dir(set_gids().map(|i| (i.to_string(), file(ndev)))),
        ));
    }
    let port = dir([
        ("state", file("4: ACTIVE")),
        ("phys_state", file("5: LinkUp")),
        ("link_layer", file("Ethernet")),
        (
            "rate",
            file(rate_text(port_attr.active_width, port_attr.active_speed)),
        ),
        ("lid", file("0x0")),
        ("sm_lid", file("0x0")),
        ("lid_mask_count", file("0")),
        ("sm_sl", file("0")),
        (
            "cap_mask",
            file(format!("0x{:08x}", port_attr.port_cap_flags)),
        ),
        ("gids", dir(gids)),
        ("gid_attrs", dir(gid_attrs)),
        ("pkeys", dir([("0", file(format!("0x{DEFAULT_PKEY:04x}")))])),
    ]);
    // UCX reads numa_node (no NUMA node: -1, as a virtual device's).
    let mut device = vec![("numa_node", file(-1))];
    if let Some(ndev) = ndev {
        device.push((
            "net",
            dir([(ndev, Node::Link(format!("/sys/class/net/{ndev}")))]),
        ));
    }
    let ibdev = dir([
        ("node_type", file("1: CA")),
        ("node_guid", file(guid_text(model.node_guid()))),
        ("sys_image_guid", file(guid_text(model.node_guid()))),
        ("node_desc", file("roce-emu")),
        ("fw_ver", file(String::from_utf8_lossy(&fw))),
        ("hca_type", file("roce-emu")),
        ("hw_rev", file(attr.hw_ver)),
        ("ports", dir([(PORT.to_string(), port)])),
        ("device", dir(device)),
    ]);
    let minor = UVERBS_BASE_MINOR
        + spec
            .uverbs
            .trim_start_matches("uverbs")
            .parse::<u32>()
            .unwrap_or(0);
    let uverbs = dir([
        ("ibdev", file(&spec.name)),
        ("abi_version", file(DRIVER_ABI_VERSION)),
        ("dev", file(format!("{UVERBS_MAJOR}:{minor}"))),
        (
            "device",
            Node::Link(format!("/sys/class/infiniband/{}/device", spec.name)),
        ),
    ]);
    Tree::from([
        ("infiniband".into(), merged([(spec.name.clone(), ibdev)])),
        (
            "infiniband_verbs".into(),
            merged([
                ("abi_version".to_owned(), file(UVERBS_ABI_VERSION)),
                (spec.uverbs.clone(), uverbs),
            ]),
        ),
    ])
}

/// The entries to add to `/dev`: `infiniband/<uverbs>` and `infiniband/rdma_cm`.
pub fn dev(model: &DeviceModel) -> Tree {
    Tree::from([(
        "infiniband".into(),
        merged([
            (model.spec.uverbs.clone(), Node::NullDevice),
            ("rdma_cm".to_owned(), Node::NullDevice),
        ]),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceSpec;

    fn model(ip: &str) -> DeviceModel {
        DeviceModel::new(
            DeviceSpec::from_env(|k| (k == crate::config::ENV_IP).then(|| ip.to_owned()))
                .unwrap()
                .unwrap(),
        )
    }

    /// The node at `path` ("a/b/c") of `tree`.
    fn at<'a>(tree: &'a Tree, path: &str) -> &'a Node {
        let mut parts = path.split('/');
        let mut node = &tree[parts.next().unwrap()];
        for part in parts {
            match node {
                Node::Dir { entries, .. } => {
                    node = entries
                        .get(part)
                        .unwrap_or_else(|| panic!("no {part} in {path}"));
                }
                _ => panic!("{path}: not a directory before {part}"),
            }
        }
        node
    }

    fn text<'a>(tree: &'a Tree, path: &str) -> &'a str {
        match at(tree, path) {
            Node::File(t) => t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn gids_and_guids_are_the_ones_verbs_report() {
        let m = model("198.18.0.1");
        let t = sys_class(&m, Some("veth0"));
        let p = "infiniband/roce0/ports/1";
        assert_eq!(
            text(&t, &format!("{p}/gids/1")),
            "0000:0000:0000:0000:0000:ffff:c612:0001\n"
        );
        let gid0: Ipv6Addr = text(&t, &format!("{p}/gids/0")).trim().parse().unwrap();
        assert_eq!(gid0.octets(), m.gid(0).unwrap().raw);
        assert_eq!(
            text(&t, &format!("{p}/gids/2")),
            "0000:0000:0000:0000:0000:0000:0000:0000\n"
        );
        assert_eq!(text(&t, &format!("{p}/gid_attrs/types/1")), "RoCE v2\n");
        assert_eq!(text(&t, &format!("{p}/gid_attrs/ndevs/0")), "veth0\n");
        assert_eq!(
            text(&t, "infiniband/roce0/node_guid"),
            "0000:c6ff:fe12:0001\n"
        );
        assert_eq!(
            at(&t, "infiniband/roce0/device/net/veth0"),
            &Node::Link("/sys/class/net/veth0".into())
        );
        assert_eq!(text(&t, "infiniband_verbs/uverbs0/ibdev"), "roce0\n");
    }

    #[test]
    fn the_port_reads_as_rxe_s() {
        let t = sys_class(&model("127.0.0.1"), None);
        let p = "infiniband/roce0/ports/1";
        assert_eq!(text(&t, &format!("{p}/state")), "4: ACTIVE\n");
        assert_eq!(text(&t, &format!("{p}/link_layer")), "Ethernet\n");
        assert_eq!(text(&t, &format!("{p}/rate")), "100 Gb/sec (4X EDR)\n");
        assert_eq!(text(&t, &format!("{p}/pkeys/0")), "0xffff\n");
        assert_eq!(text(&t, "infiniband/roce0/node_type"), "1: CA\n");
        // No interface: no ndevs, no device/net.
        assert!(matches!(
            at(&t, &format!("{p}/gid_attrs")),
            Node::Dir { entries, .. } if !entries.contains_key("ndevs")
        ));
        assert!(matches!(
            at(&t, "infiniband/roce0/device"),
            Node::Dir { entries, .. } if !entries.contains_key("net")
        ));
    }

    #[test]
    fn rates_read_as_the_kernel_prints_them() {
        assert_eq!(rate_text(1, 1), "2.5 Gb/sec (1X)");
        assert_eq!(rate_text(2, 64), "200 Gb/sec (4X HDR)");
    }

    #[test]
    fn the_node_is_named_as_the_device_s_dev_name() {
        let m = model("127.0.0.1");
        let d = dev(&m);
        let name = m
            .ibv_device()
            .dev_name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8 as char)
            .collect::<String>();
        assert_eq!(name, "uverbs0");
        assert_eq!(at(&d, &format!("infiniband/{name}")), &Node::NullDevice);
        assert!(matches!(
            at(&d, "infiniband"),
            Node::Dir { merge: true, .. }
        ));
    }
}
