//! The translations between C structures and the engine's.

use roce_core::{Access, Cqe, Mtu, Qpn, Remote, SendOp, WcOpcode};

use super::EINVAL;
use super::cq::wc;
use super::pd::access;
use super::post::send_wr;
use super::qp::mtu;
use crate::abi::IbvSendWr;

#[test]
fn access_flags_map_to_rights_and_unknown_ones_are_refused() {
    assert_eq!(
        access(1 | 2).unwrap(),
        Access::LOCAL_WRITE | Access::REMOTE_WRITE
    );
    assert_eq!(
        access(1 | (1 << 20)).unwrap(),
        Access::LOCAL_WRITE,
        "relaxed ordering is optional"
    );
    assert_eq!(access(1 << 6), Err(EINVAL), "on-demand paging (rxe 6.1)");
    // ib_check_mr_access: bits outside IB_ACCESS_SUPPORTED (0-7, 20-29) are EINVAL.
    for bit in (8..20).chain(30..32) {
        assert_eq!(access(1 | (1 << bit)), Err(EINVAL), "bit {bit}");
    }
    assert_eq!(
        access(1 | 4 | 16).unwrap(),
        Access::LOCAL_WRITE | Access::REMOTE_READ | Access::MW_BIND,
        "MW_BIND as rxe takes it"
    );
    assert_eq!(
        access(1 | 128).unwrap(),
        Access::LOCAL_WRITE,
        "HUGETLB is a hint"
    );
    assert_eq!(access(32).unwrap(), Access::ZERO_BASED);
}

#[test]
fn send_wrs_translate_opcodes_flags_and_immediates() {
    let mut wr = IbvSendWr {
        wr_id: 9,
        next: std::ptr::null_mut(),
        sg_list: std::ptr::null_mut(),
        num_sge: 0,
        opcode: 3,
        send_flags: 2 | 8,
        imm_data: 0x1234_5678u32.to_be(),
        wr_remote_addr: 0,
        wr_word1: 0,
        wr_swap: 0,
        wr_atomic_rkey: 0,
        _pad: 0,
        _qp_type: 0,
        bind_mw_mw: std::ptr::null_mut(),
        bind_mw_rkey: 0,
        _pad2: 0,
        bind_info: crate::abi::IbvMwBindInfo {
            mr: std::ptr::null_mut(),
            addr: 0,
            length: 0,
            mw_access_flags: 0,
        },
    };
    let w = send_wr(&wr, Vec::new().into(), false, None).unwrap();
    assert_eq!(w.op, SendOp::SendWithImm(0x1234_5678));
    assert!(w.signaled && w.inline && !w.solicited);
    wr.opcode = 0;
    wr.send_flags = 0;
    wr.wr_remote_addr = 0x1000;
    wr.wr_word1 = 0x77;
    let w = send_wr(&wr, Vec::new().into(), true, None).unwrap();
    assert_eq!(
        w.op,
        SendOp::RdmaWrite(Remote {
            addr: 0x1000,
            rkey: 0x77
        })
    );
    assert!(w.signaled, "sq_sig_all");
    wr.opcode = 8;
    assert_eq!(
        send_wr(&wr, Vec::new().into(), false, None).unwrap_err(),
        EINVAL,
        "bind MW"
    );
}

#[test]
fn mtu_enum_values() {
    assert_eq!(mtu(3), Ok(Mtu::Mtu1024));
    assert_eq!(mtu(5), Ok(Mtu::Mtu4096));
    assert_eq!(mtu(0), Err(EINVAL));
    assert_eq!(mtu(6), Err(EINVAL));
}

#[test]
fn wc_of_a_receive_with_immediate() {
    let mut c = Cqe::success(5, WcOpcode::Recv, Qpn::new(0x11));
    c.byte_len = 64;
    c.imm_data = Some(0xaabb_ccdd);
    let w = wc(&c);
    assert_eq!(
        (w.wr_id, w.status, w.opcode, w.byte_len, w.qp_num),
        (5, 0, 128, 64, 0x11)
    );
    assert_eq!(w.wc_flags & 2, 2);
    assert_eq!(u32::from_be(w.imm_data), 0xaabb_ccdd);
}

#[test]
fn a_ud_receive_reports_its_network_header_type_in_sl_as_mlx5_does() {
    let mut c = Cqe::success(7, WcOpcode::Recv, Qpn::new(0x12));
    c.byte_len = 48;
    c.src_qp = Some(Qpn::new(0x34));
    c.network_hdr = Some(roce_core::NetworkHdr::Ipv4);
    let w = wc(&c);
    assert_eq!((w.src_qp, w.wc_flags & 1), (0x34, 1), "IBV_WC_GRH");
    assert_eq!(w.sl, 2, "IPv4");
    c.network_hdr = Some(roce_core::NetworkHdr::Ipv6);
    assert_eq!(wc(&c).sl, 1, "IPv6");
    // Everything else: 0, as an IB service level would be.
    let rc = Cqe::success(8, WcOpcode::Recv, Qpn::new(0x12));
    assert_eq!((wc(&rc).sl, wc(&rc).wc_flags & 1), (0, 0));
}

#[test]
fn a_reply_to_a_ud_sender_is_addressed_from_the_ipv4_header_in_the_grh() {
    let mut grh = [0u8; 40];
    grh[20] = 0x45;
    grh[21] = 0x02; // ECT(0)
    grh[32..36].copy_from_slice(&[198, 18, 0, 7]);
    grh[36..40].copy_from_slice(&[198, 18, 0, 8]);
    let attr = super::ah_attr_from_wc(1, 1, 0, 0, &grh).unwrap();
    assert_eq!(attr.is_global, 1);
    assert_eq!(
        std::net::Ipv6Addr::from(attr.grh.dgid.raw).to_ipv4_mapped(),
        Some(std::net::Ipv4Addr::new(198, 18, 0, 7)),
        "the reply goes to the sender"
    );
    assert_eq!(
        (
            attr.grh.sgid_index,
            attr.grh.hop_limit,
            attr.grh.traffic_class
        ),
        (1, 0xff, 2)
    );
    // Without IBV_WC_GRH there is no GRH to read: a local address handle.
    assert_eq!(
        super::ah_attr_from_wc(1, 0, 0, 0, &grh).unwrap().is_global,
        0
    );
    // IPv6: the header fills the area; a datagram to a link-local address came to GID 0,
    // and the reply leaves from it; one to a global address, from GID 1.
    let mut grh6 = [0u8; 40];
    grh6[0] = 0x60;
    let src: std::net::Ipv6Addr = "fe80::c6ff:fe12:602".parse().unwrap();
    let ll: std::net::Ipv6Addr = "fe80::c6ff:fe12:601".parse().unwrap();
    grh6[8..24].copy_from_slice(&src.octets());
    grh6[24..40].copy_from_slice(&ll.octets());
    let attr = super::ah_attr_from_wc(1, 1, 0, 0, &grh6).unwrap();
    assert_eq!((attr.grh.dgid.raw, attr.grh.sgid_index), (src.octets(), 0));
    let global: std::net::Ipv6Addr = "fd00:198:18:6::1".parse().unwrap();
    grh6[24..40].copy_from_slice(&global.octets());
    assert_eq!(
        super::ah_attr_from_wc(1, 1, 0, 0, &grh6)
            .unwrap()
            .grh
            .sgid_index,
        1
    );
    // An area that is neither IPv6 nor IPv4 is refused.
    assert_eq!(
        super::ah_attr_from_wc(1, 1, 0, 0, &[0; 40]).map(|_| ()),
        Err(crate::state::Errno(libc::EPROTONOSUPPORT))
    );
}

/// What the CM gives `rdma_init_qp_attr` (`c_qp_attr`) is an `ibv_qp_attr` that `ibv_modify_qp`
/// reads back as the same attributes (`qp_attr`), with the source named by its GID index: 1
/// for the NIC's address, 0 for its interface's link-local one.
#[test]
fn the_cms_qp_attributes_read_back_the_same_through_the_c_form() {
    use super::qp::{c_qp_attr, qp_attr};
    use roce_core::{AddressVector, Psn, QpAttr, QpState};
    use std::net::{IpAddr, Ipv6Addr};
    let ip = "198.18.0.1";
    let mut model = crate::device::DeviceModel::new(
        crate::config::DeviceSpec::from_env(|k| (k == crate::config::ENV_IP).then(|| ip.into()))
            .unwrap()
            .unwrap(),
    );
    let ll: Ipv6Addr = "fe80::c6ff:fe12:701".parse().unwrap();
    model.iface = Some(crate::device::Interface {
        name: "va".into(),
        index: 7,
        link_local: Some(ll),
    });
    let peer_ll: Ipv6Addr = "fe80::c6ff:fe12:702".parse().unwrap();
    let paths = [
        (
            IpAddr::from([198, 18, 0, 1]),
            IpAddr::from([198, 18, 0, 2]),
            1,
        ),
        (IpAddr::V6(ll), IpAddr::V6(peer_ll), 0),
    ];
    for (src, dst, sgid_index) in paths {
        let rtr = QpAttr {
            qp_state: Some(QpState::Rtr),
            av: Some(AddressVector {
                src,
                dst,
                dscp: 0,
                hop_limit: 64,
            }),
            path_mtu: Some(Mtu::Mtu1024),
            dest_qpn: Some(Qpn::new(0x635)),
            rq_psn: Some(Psn::new(0x11)),
            max_dest_rd_atomic: Some(1),
            min_rnr_timer: Some(0),
            ..QpAttr::default()
        };
        let (c, mask) = c_qp_attr(&rtr, &model);
        // IBV_QP_STATE, AV, PATH_MTU, RQ_PSN, MIN_RNR_TIMER, MAX_DEST_RD_ATOMIC, DEST_QPN.
        let want = 1 | (1 << 7) | (1 << 8) | (1 << 12) | (1 << 15) | (1 << 17) | (1 << 20);
        assert_eq!(mask, want, "{src}");
        assert_eq!((c.qp_state, c.path_mtu, c.dest_qp_num), (2, 3, 0x635));
        assert_eq!(c.ah_attr.grh.sgid_index, sgid_index, "{src}");
        assert_eq!(c.ah_attr.is_global, 1);
        assert_eq!(qp_attr(&c, mask, &model).unwrap(), rtr, "{src}");
    }
    let rts = QpAttr {
        qp_state: Some(QpState::Rts),
        sq_psn: Some(Psn::new(0x22)),
        timeout: Some(17),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(1),
        ..QpAttr::default()
    };
    let (c, mask) = c_qp_attr(&rts, &model);
    assert_eq!(
        mask,
        1 | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 13) | (1 << 16)
    );
    assert_eq!(qp_attr(&c, mask, &model).unwrap(), rts);
    let init = QpAttr {
        qp_state: Some(QpState::Init),
        access_flags: Some(Access::REMOTE_WRITE | Access::REMOTE_READ),
        pkey_index: Some(0),
        port_num: Some(1),
        qkey: Some(0x1234),
        ..QpAttr::default()
    };
    let (c, mask) = c_qp_attr(&init, &model);
    // IBV_QP_STATE, ACCESS_FLAGS, PKEY_INDEX, PORT, QKEY.
    assert_eq!(mask, 1 | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6));
    assert_eq!((c.qp_state, c.qp_access_flags, c.qkey), (1, 2 | 4, 0x1234));
    assert_eq!(qp_attr(&c, mask, &model).unwrap(), init);
}

/// Every right reads back the same through its `ibv_access_flags` bits.
#[test]
fn access_flags_are_the_inverse_of_access() {
    use super::pd::access_flags;
    for right in [
        Access::LOCAL_WRITE,
        Access::REMOTE_WRITE,
        Access::REMOTE_READ,
        Access::REMOTE_ATOMIC,
        Access::MW_BIND,
        Access::ZERO_BASED,
        Access::ALL,
    ] {
        assert_eq!(access(access_flags(right)).unwrap(), right, "{right:?}");
    }
}
