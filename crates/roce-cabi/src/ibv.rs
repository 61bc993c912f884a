//! The `<infiniband/verbs.h>` structures (rdma-core 44, x86_64) that both libraries fill or
//! read: roce-verbs exports them in `roce_verbs::abi`, roce-rdmacm hands them to roce-emu's
//! `ibv_*` functions. Each library's `tests/layout.rs` checks them against the installed
//! header.

use std::ffi::{c_int, c_uint, c_void};

/// `union ibv_gid`: 16 bytes, network order; aligned as its `__be64` halves.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvGid {
    /// The GID as an IPv6 address.
    pub raw: [u8; 16],
}

impl IbvGid {
    /// `::ffff:a.b.c.d`, the RoCEv2 GID of an IPv4 address.
    pub fn from_ipv4(ip: std::net::Ipv4Addr) -> Self {
        Self {
            raw: ip.to_ipv6_mapped().octets(),
        }
    }

    /// The RoCEv2 GID of an IP address: `::ffff:a.b.c.d` for IPv4, the IPv6 address itself.
    pub fn from_ip(ip: std::net::IpAddr) -> Self {
        Self {
            raw: crate::cm::ip_to_bytes(ip),
        }
    }

    /// The IP address a RoCEv2 GID is: IPv4 when mapped, else IPv6.
    pub fn to_ip(&self) -> std::net::IpAddr {
        crate::cm::ip_from_bytes(self.raw)
    }

    /// The IPv4 address of a `::ffff:a.b.c.d` GID.
    pub fn to_ipv4(&self) -> Option<std::net::Ipv4Addr> {
        std::net::Ipv6Addr::from(self.raw).to_ipv4_mapped()
    }
}

/// `struct ibv_qp_cap` (20 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_global_route` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr` (144 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct IbvQpAttr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_gid_round_trips_and_sizes_are_the_headers() {
        let ip = std::net::Ipv4Addr::new(198, 18, 0, 1);
        let gid = IbvGid::from_ipv4(ip);
        assert_eq!(gid.raw[10..12], [0xff, 0xff]);
        assert_eq!(gid.to_ipv4(), Some(ip));
        assert_eq!(IbvGid::default().to_ipv4(), None);
        assert_eq!(size_of::<IbvQpCap>(), 20);
        assert_eq!(size_of::<IbvGlobalRoute>(), 24);
        assert_eq!(size_of::<IbvAhAttr>(), 32);
        assert_eq!(size_of::<IbvQpAttr>(), 144);
    }
}

/// `struct ibv_qp_init_attr` (64 bytes). The verbs objects it names (CQs, SRQ) are opaque
/// here: roce-verbs looks them up by address.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

/// `struct ibv_qp_init_attr_ex`. The fields of `ibv_qp_init_attr` come first but without its
/// tail padding: `comp_mask` is at 60.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct IbvQpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    /// `enum ibv_qp_init_attr_mask`.
    pub comp_mask: u32,
    pub pd: *mut c_void,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    /// `struct ibv_rx_hash_conf`: unused.
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    /// `enum ibv_qp_create_send_ops_flags`.
    pub send_ops_flags: u64,
}

/// `IBV_QP_INIT_ATTR_PD`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1;

impl IbvQpInitAttrEx {
    /// The `ibv_qp_init_attr` part.
    pub fn base(&self) -> IbvQpInitAttr {
        IbvQpInitAttr {
            qp_context: self.qp_context,
            send_cq: self.send_cq,
            recv_cq: self.recv_cq,
            srq: self.srq,
            cap: self.cap,
            qp_type: self.qp_type,
            sq_sig_all: self.sq_sig_all,
        }
    }

    /// Takes the `ibv_qp_init_attr` part from `base` (the rest stays).
    pub fn set_base(&mut self, base: &IbvQpInitAttr) {
        self.qp_context = base.qp_context;
        self.send_cq = base.send_cq;
        self.recv_cq = base.recv_cq;
        self.srq = base.srq;
        self.cap = base.cap;
        self.qp_type = base.qp_type;
        self.sq_sig_all = base.sq_sig_all;
    }
}
