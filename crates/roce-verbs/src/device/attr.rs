//! The attributes the device and its port report (`ibv_query_device`, `ibv_query_device_ex`,
//! `ibv_query_port`): rxe's, or the engine's limit where it is tighter.

use super::{DeviceModel, GID_TABLE_LEN, cap, copy_c_str};
use crate::abi::{self, IbvDeviceAttr, IbvDeviceAttrEx, IbvPortAttr};

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

impl DeviceModel {
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
            active_mtu: i32::from(self.spec.mtu().enum_value()),
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
