//! The `#[repr(C)]` structures of `roce_rdmacm::abi` against Debian's
//! `/usr/include/rdma/rdma_cma.h` (and the verbs structures it fills, against
//! `<infiniband/verbs.h>` and `<infiniband/sa.h>`): a C program compiled against the headers
//! prints every size and field offset, and each must equal Rust's. Skips (fails under
//! CI=true) where the header (package librdmacm-dev) or a C compiler is missing.

use std::mem::{offset_of, size_of};

use roce_cabi::offsets;
use roce_cabi::testing::Layouts;

use roce_rdmacm::abi::*;

/// (C expression, Rust value): `sizeof(struct x)` or `offsetof(struct x, f)`.
fn rust_side() -> Layouts {
    let mut l = Layouts::default();
    l.size_align::<RdmaEventChannel>("rdma_event_channel");
    offsets!(l, "rdma_event_channel", RdmaEventChannel, fd => "fd");
    l.size_align::<RdmaIbAddr>("rdma_ib_addr");
    offsets!(l, "rdma_ib_addr", RdmaIbAddr, sgid => "sgid", dgid => "dgid", pkey => "pkey");
    l.size_align::<RdmaAddr>("rdma_addr");
    offsets!(l, "rdma_addr", RdmaAddr, src => "src_storage", dst => "dst_storage", ibaddr => "addr.ibaddr");
    l.value(
        "offsetof(struct rdma_addr, src_sin.sin_port)",
        offset_of!(RdmaAddr, src) + 2,
    );
    l.value(
        "offsetof(struct rdma_addr, dst_sin.sin_addr)",
        offset_of!(RdmaAddr, dst) + 4,
    );
    l.value(
        "sizeof(struct sockaddr_storage)",
        size_of::<SockaddrStorage>(),
    );
    l.size_align::<IbvSaPathRec>("ibv_sa_path_rec");
    offsets!(l, "ibv_sa_path_rec", IbvSaPathRec, dgid => "dgid", sgid => "sgid", dlid => "dlid",
        slid => "slid", raw_traffic => "raw_traffic", flow_label => "flow_label",
        hop_limit => "hop_limit", traffic_class => "traffic_class", reversible => "reversible",
        numb_path => "numb_path", pkey => "pkey", sl => "sl", mtu_selector => "mtu_selector",
        mtu => "mtu", rate_selector => "rate_selector", rate => "rate",
        packet_life_time_selector => "packet_life_time_selector",
        packet_life_time => "packet_life_time", preference => "preference");
    l.size_align::<RdmaRoute>("rdma_route");
    offsets!(l, "rdma_route", RdmaRoute, addr => "addr", path_rec => "path_rec", num_paths => "num_paths");
    l.size_align::<RdmaCmId>("rdma_cm_id");
    offsets!(l, "rdma_cm_id", RdmaCmId, verbs => "verbs", channel => "channel", context => "context",
        qp => "qp", route => "route", ps => "ps", port_num => "port_num", event => "event",
        send_cq_channel => "send_cq_channel", send_cq => "send_cq",
        recv_cq_channel => "recv_cq_channel", recv_cq => "recv_cq", srq => "srq", pd => "pd",
        qp_type => "qp_type");
    l.size_align::<RdmaConnParam>("rdma_conn_param");
    offsets!(l, "rdma_conn_param", RdmaConnParam, private_data => "private_data",
        private_data_len => "private_data_len", responder_resources => "responder_resources",
        initiator_depth => "initiator_depth", flow_control => "flow_control",
        retry_count => "retry_count", rnr_retry_count => "rnr_retry_count", srq => "srq",
        qp_num => "qp_num");
    l.size_align::<IbvGlobalRoute>("ibv_global_route");
    offsets!(l, "ibv_global_route", IbvGlobalRoute, dgid => "dgid", flow_label => "flow_label",
        sgid_index => "sgid_index", hop_limit => "hop_limit", traffic_class => "traffic_class");
    l.size_align::<IbvAhAttr>("ibv_ah_attr");
    offsets!(l, "ibv_ah_attr", IbvAhAttr, grh => "grh", dlid => "dlid", sl => "sl",
        src_path_bits => "src_path_bits", static_rate => "static_rate", is_global => "is_global",
        port_num => "port_num");
    l.size_align::<RdmaUdParam>("rdma_ud_param");
    offsets!(l, "rdma_ud_param", RdmaUdParam, private_data => "private_data",
        private_data_len => "private_data_len", ah_attr => "ah_attr", qp_num => "qp_num",
        qkey => "qkey");
    l.size_align::<RdmaCmEvent>("rdma_cm_event");
    offsets!(l, "rdma_cm_event", RdmaCmEvent, id => "id", listen_id => "listen_id", event => "event",
        status => "status", param => "param");
    l.size_align::<RdmaAddrinfo>("rdma_addrinfo");
    offsets!(l, "rdma_addrinfo", RdmaAddrinfo, ai_flags => "ai_flags", ai_family => "ai_family",
        ai_qp_type => "ai_qp_type", ai_port_space => "ai_port_space",
        ai_src_len => "ai_src_len", ai_dst_len => "ai_dst_len", ai_src_addr => "ai_src_addr",
        ai_dst_addr => "ai_dst_addr", ai_src_canonname => "ai_src_canonname",
        ai_dst_canonname => "ai_dst_canonname", ai_route_len => "ai_route_len",
        ai_route => "ai_route", ai_connect_len => "ai_connect_len", ai_connect => "ai_connect",
        ai_next => "ai_next");
    l.size_align::<IbvQpCap>("ibv_qp_cap");
    offsets!(l, "ibv_qp_cap", IbvQpCap, max_send_wr => "max_send_wr", max_recv_wr => "max_recv_wr",
        max_send_sge => "max_send_sge", max_recv_sge => "max_recv_sge",
        max_inline_data => "max_inline_data");
    l.size_align::<IbvQpInitAttr>("ibv_qp_init_attr");
    offsets!(l, "ibv_qp_init_attr", IbvQpInitAttr, qp_context => "qp_context", send_cq => "send_cq",
        recv_cq => "recv_cq", srq => "srq", cap => "cap", qp_type => "qp_type",
        sq_sig_all => "sq_sig_all");
    // The head of ibv_qp_init_attr_ex: the base fields, then comp_mask and pd.
    offsets!(l, "ibv_qp_init_attr_ex", IbvQpInitAttrEx, qp_context => "qp_context",
        send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", cap => "cap",
        qp_type => "qp_type", sq_sig_all => "sq_sig_all", comp_mask => "comp_mask", pd => "pd");
    l.size_align::<IbvQpAttr>("ibv_qp_attr");
    offsets!(l, "ibv_qp_attr", IbvQpAttr, qp_state => "qp_state", cur_qp_state => "cur_qp_state",
        path_mtu => "path_mtu", qkey => "qkey", sq_psn => "sq_psn",
        qp_access_flags => "qp_access_flags", cap => "cap", ah_attr => "ah_attr",
        alt_ah_attr => "alt_ah_attr", pkey_index => "pkey_index", port_num => "port_num",
        timeout => "timeout", rate_limit => "rate_limit");
    offsets!(l, "ibv_port_attr", IbvPortAttrHead, state => "state", max_mtu => "max_mtu",
        active_mtu => "active_mtu");
    l.value("sizeof(struct ibv_port_attr) <= 128", 1);
    l.value("sizeof(union ibv_gid)", size_of::<IbvGid>());
    l
}

#[test]
fn rust_layouts_match_debian_rdma_cma_h() {
    rust_side().check("rdma/rdma_cma.h", "librdmacm-dev");
    // The numbers of rdma-core 44's rdma_cma.h (verbs-facts §B.5), a check of the harness.
    assert_eq!(size_of::<RdmaCmId>(), 416);
    assert_eq!(offset_of!(RdmaCmId, qp_type), 408);
    assert_eq!(size_of::<RdmaCmEvent>(), 80);
    assert_eq!(size_of::<RdmaAddrinfo>(), 96);
}
