use super::*;

fn model(ip: impl Into<IpAddr>) -> DeviceModel {
    let mut nic = roce_device::DeviceSpec::new(ip.into());
    nic.mtu = Some(roce_core::Mtu::Mtu2048);
    DeviceModel::new(DeviceSpec {
        nic,
        name: "roce0".into(),
        stats: None,
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
    let header = (1 << 10) | (1 << 11) | (1 << 12) | (1 << 13) | (1 << 17) | (1 << 21) | (1 << 24);
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
