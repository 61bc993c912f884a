//! The `<infiniband/verbs.h>` structures (rdma-core 44, x86_64) that both libraries fill or
//! read: roce-verbs exports them in `roce_verbs::abi`, roce-rdmacm hands them to roce-emu's
//! `ibv_*` functions. Each library's `tests/layout.rs` checks them against the installed
//! header.

use std::ffi::{c_int, c_uint};

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
