//! The `#[repr(C)]` structures of `roce_verbs::abi` against Debian's
//! `/usr/include/infiniband/verbs.h`: a C program compiled against the header prints every
//! size and field offset, and each must equal Rust's. Skips (fails under CI=true) where the
//! header (package libibverbs-dev) or a C compiler is missing.

use std::mem::{align_of, offset_of, size_of};

use roce_cabi::offsets;
use roce_cabi::testing::Layouts;

use roce_verbs::abi::*;

/// (C expression, Rust value): `sizeof(struct x)` or `offsetof(struct x, f)`.
fn rust_side() -> Layouts {
    let mut l = Layouts::default();
    l.size::<IbvDevice>("ibv_device");
    offsets!(l, "ibv_device", IbvDevice, node_type => "node_type", transport_type => "transport_type",
        name => "name", dev_name => "dev_name", dev_path => "dev_path", ibdev_path => "ibdev_path");
    l.size::<IbvContextOps>("ibv_context_ops");
    offsets!(l, "ibv_context_ops", IbvContextOps, alloc_mw => "alloc_mw", bind_mw => "bind_mw",
        dealloc_mw => "dealloc_mw", poll_cq => "poll_cq", req_notify_cq => "req_notify_cq",
        post_srq_recv => "post_srq_recv", post_send => "post_send", post_recv => "post_recv",
        _compat4 => "_compat_create_ah");
    l.size::<IbvContext>("ibv_context");
    offsets!(l, "ibv_context", IbvContext, device => "device", ops => "ops", cmd_fd => "cmd_fd",
        async_fd => "async_fd", num_comp_vectors => "num_comp_vectors", mutex => "mutex",
        abi_compat => "abi_compat");
    l.size::<VerbsContext>("verbs_context");
    offsets!(l, "verbs_context", VerbsContext, query_port => "query_port", _ops1 => "advise_mr",
        create_cq_ex => "create_cq_ex", priv_ => "priv", query_device_ex => "query_device_ex",
        _ops2 => "ibv_destroy_flow", open_qp => "open_qp", create_qp_ex => "create_qp_ex",
        _ops3 => "get_srq_num", _abi_placeholder3 => "_ABI_placeholder3", sz => "sz",
        context => "context");
    l.size::<IbvDeviceAttr>("ibv_device_attr");
    offsets!(l, "ibv_device_attr", IbvDeviceAttr, fw_ver => "fw_ver", node_guid => "node_guid",
        sys_image_guid => "sys_image_guid", max_mr_size => "max_mr_size",
        page_size_cap => "page_size_cap", vendor_id => "vendor_id",
        vendor_part_id => "vendor_part_id", hw_ver => "hw_ver", max_qp => "max_qp",
        max_qp_wr => "max_qp_wr", device_cap_flags => "device_cap_flags", max_sge => "max_sge",
        max_sge_rd => "max_sge_rd", max_cq => "max_cq", max_cqe => "max_cqe", max_mr => "max_mr",
        max_pd => "max_pd", max_qp_rd_atom => "max_qp_rd_atom",
        max_ee_rd_atom => "max_ee_rd_atom", max_res_rd_atom => "max_res_rd_atom",
        max_qp_init_rd_atom => "max_qp_init_rd_atom",
        max_ee_init_rd_atom => "max_ee_init_rd_atom", atomic_cap => "atomic_cap",
        max_ee => "max_ee", max_rdd => "max_rdd", max_mw => "max_mw",
        max_raw_ipv6_qp => "max_raw_ipv6_qp", max_raw_ethy_qp => "max_raw_ethy_qp",
        max_mcast_grp => "max_mcast_grp", max_mcast_qp_attach => "max_mcast_qp_attach",
        max_total_mcast_qp_attach => "max_total_mcast_qp_attach", max_ah => "max_ah",
        max_fmr => "max_fmr", max_map_per_fmr => "max_map_per_fmr", max_srq => "max_srq",
        max_srq_wr => "max_srq_wr", max_srq_sge => "max_srq_sge", max_pkeys => "max_pkeys",
        local_ca_ack_delay => "local_ca_ack_delay", phys_port_cnt => "phys_port_cnt");
    l.size::<IbvDeviceAttrEx>("ibv_device_attr_ex");
    offsets!(l, "ibv_device_attr_ex", IbvDeviceAttrEx, orig_attr => "orig_attr",
        comp_mask => "comp_mask", odp_caps => "odp_caps",
        completion_timestamp_mask => "completion_timestamp_mask",
        hca_core_clock => "hca_core_clock", device_cap_flags_ex => "device_cap_flags_ex",
        tso_caps => "tso_caps", rss_caps => "rss_caps", max_wq_type_rq => "max_wq_type_rq",
        packet_pacing_caps => "packet_pacing_caps", raw_packet_caps => "raw_packet_caps",
        tm_caps => "tm_caps", cq_mod_caps => "cq_mod_caps", max_dm_size => "max_dm_size",
        pci_atomic_caps => "pci_atomic_caps", xrc_odp_caps => "xrc_odp_caps",
        phys_port_cnt_ex => "phys_port_cnt_ex");
    l.size::<IbvPortAttr>("ibv_port_attr");
    offsets!(l, "ibv_port_attr", IbvPortAttr, state => "state", max_mtu => "max_mtu",
        active_mtu => "active_mtu", gid_tbl_len => "gid_tbl_len",
        port_cap_flags => "port_cap_flags", max_msg_sz => "max_msg_sz",
        bad_pkey_cntr => "bad_pkey_cntr", qkey_viol_cntr => "qkey_viol_cntr",
        pkey_tbl_len => "pkey_tbl_len", lid => "lid", sm_lid => "sm_lid", lmc => "lmc",
        max_vl_num => "max_vl_num", sm_sl => "sm_sl", subnet_timeout => "subnet_timeout",
        init_type_reply => "init_type_reply", active_width => "active_width",
        active_speed => "active_speed", phys_state => "phys_state", link_layer => "link_layer",
        flags => "flags", port_cap_flags2 => "port_cap_flags2");
    // `struct _compat_ibv_port_attr` is incomplete in the header: the old struct ended at
    // `link_layer` (+ padding to 48, where v44 put `flags`); `port_cap_flags2` was appended.
    l.value(
        "offsetof(struct ibv_port_attr, port_cap_flags2)",
        COMPAT_PORT_ATTR_LEN,
    );
    l.value("sizeof(union ibv_gid)", size_of::<IbvGid>());
    l.value("_Alignof(union ibv_gid)", align_of::<IbvGid>());
    l.size::<IbvGidEntry>("ibv_gid_entry");
    offsets!(l, "ibv_gid_entry", IbvGidEntry, gid => "gid", gid_index => "gid_index",
        port_num => "port_num", gid_type => "gid_type", ndev_ifindex => "ndev_ifindex");
    l.size::<IbvPd>("ibv_pd");
    l.size::<IbvMr>("ibv_mr");
    offsets!(l, "ibv_mr", IbvMr, pd => "pd", addr => "addr", length => "length", handle => "handle",
        lkey => "lkey", rkey => "rkey");
    l.size::<IbvCompChannel>("ibv_comp_channel");
    offsets!(l, "ibv_comp_channel", IbvCompChannel, fd => "fd", refcnt => "refcnt");
    l.size::<IbvCq>("ibv_cq");
    offsets!(l, "ibv_cq", IbvCq, channel => "channel", cq_context => "cq_context", handle => "handle",
        cqe => "cqe", mutex => "mutex", cond => "cond",
        comp_events_completed => "comp_events_completed",
        async_events_completed => "async_events_completed");
    l.size::<IbvCqEx>("ibv_cq_ex");
    offsets!(l, "ibv_cq_ex", IbvCqEx, comp_mask => "comp_mask", status => "status", wr_id => "wr_id",
        start_poll => "start_poll", next_poll => "next_poll", end_poll => "end_poll",
        read_opcode => "read_opcode", read_vendor_err => "read_vendor_err",
        read_byte_len => "read_byte_len", read_imm_data => "read_imm_data",
        read_qp_num => "read_qp_num", read_src_qp => "read_src_qp",
        read_wc_flags => "read_wc_flags", read_slid => "read_slid", read_sl => "read_sl",
        read_dlid_path_bits => "read_dlid_path_bits", read_completion_ts => "read_completion_ts",
        read_cvlan => "read_cvlan", read_flow_tag => "read_flow_tag",
        read_tm_info => "read_tm_info",
        read_completion_wallclock_ns => "read_completion_wallclock_ns");
    l.size::<IbvCqInitAttrEx>("ibv_cq_init_attr_ex");
    offsets!(l, "ibv_cq_init_attr_ex", IbvCqInitAttrEx, cq_context => "cq_context", channel => "channel",
        comp_vector => "comp_vector", wc_flags => "wc_flags", comp_mask => "comp_mask",
        flags => "flags", parent_domain => "parent_domain");
    l.size::<IbvQp>("ibv_qp");
    offsets!(l, "ibv_qp", IbvQp, qp_context => "qp_context", pd => "pd", send_cq => "send_cq",
        recv_cq => "recv_cq", srq => "srq", handle => "handle", qp_num => "qp_num",
        state => "state", qp_type => "qp_type", mutex => "mutex", cond => "cond",
        events_completed => "events_completed");
    l.size::<IbvQpEx>("ibv_qp_ex");
    offsets!(l, "ibv_qp_ex", IbvQpEx, comp_mask => "comp_mask", wr_id => "wr_id", wr_flags => "wr_flags",
        wr_atomic_cmp_swp => "wr_atomic_cmp_swp", wr_atomic_fetch_add => "wr_atomic_fetch_add",
        wr_bind_mw => "wr_bind_mw", wr_local_inv => "wr_local_inv", wr_rdma_read => "wr_rdma_read",
        wr_rdma_write => "wr_rdma_write", wr_rdma_write_imm => "wr_rdma_write_imm",
        wr_send => "wr_send", wr_send_imm => "wr_send_imm", wr_send_inv => "wr_send_inv",
        wr_send_tso => "wr_send_tso", wr_set_ud_addr => "wr_set_ud_addr",
        wr_set_xrc_srqn => "wr_set_xrc_srqn", wr_set_inline_data => "wr_set_inline_data",
        wr_set_inline_data_list => "wr_set_inline_data_list", wr_set_sge => "wr_set_sge",
        wr_set_sge_list => "wr_set_sge_list", wr_start => "wr_start", wr_complete => "wr_complete",
        wr_abort => "wr_abort", wr_atomic_write => "wr_atomic_write");
    l.size::<IbvQpInitAttrEx>("ibv_qp_init_attr_ex");
    offsets!(l, "ibv_qp_init_attr_ex", IbvQpInitAttrEx, comp_mask => "comp_mask", pd => "pd",
        xrcd => "xrcd", create_flags => "create_flags", max_tso_header => "max_tso_header",
        rwq_ind_tbl => "rwq_ind_tbl", rx_hash_conf => "rx_hash_conf", source_qpn => "source_qpn",
        send_ops_flags => "send_ops_flags");
    l.size::<IbvSrq>("ibv_srq");
    offsets!(l, "ibv_srq", IbvSrq, context => "context", srq_context => "srq_context", pd => "pd",
        handle => "handle", mutex => "mutex", cond => "cond",
        events_completed => "events_completed");
    l.size::<IbvSrqAttr>("ibv_srq_attr");
    offsets!(l, "ibv_srq_attr", IbvSrqAttr, max_wr => "max_wr", max_sge => "max_sge",
        srq_limit => "srq_limit");
    l.size::<IbvSrqInitAttr>("ibv_srq_init_attr");
    offsets!(l, "ibv_srq_init_attr", IbvSrqInitAttr, srq_context => "srq_context", attr => "attr");
    l.size::<IbvAsyncEvent>("ibv_async_event");
    offsets!(l, "ibv_async_event", IbvAsyncEvent, element => "element", event_type => "event_type");
    l.size::<IbvAh>("ibv_ah");
    offsets!(l, "ibv_ah", IbvAh, pd => "pd", handle => "handle");
    l.size::<IbvSge>("ibv_sge");
    offsets!(l, "ibv_sge", IbvSge, length => "length", lkey => "lkey");
    l.size::<IbvSendWr>("ibv_send_wr");
    offsets!(l, "ibv_send_wr", IbvSendWr, next => "next", sg_list => "sg_list", num_sge => "num_sge",
        opcode => "opcode", send_flags => "send_flags", imm_data => "imm_data",
        wr_remote_addr => "wr.rdma.remote_addr", wr_word1 => "wr.rdma.rkey",
        wr_swap => "wr.atomic.swap", wr_atomic_rkey => "wr.atomic.rkey", _qp_type => "qp_type",
        bind_mw_mw => "bind_mw.mw", bind_mw_rkey => "bind_mw.rkey", bind_info => "bind_mw.bind_info");
    l.size::<IbvMw>("ibv_mw");
    offsets!(l, "ibv_mw", IbvMw, context => "context", pd => "pd", rkey => "rkey",
        handle => "handle", mw_type => "type");
    l.size::<IbvMwBindInfo>("ibv_mw_bind_info");
    offsets!(l, "ibv_mw_bind_info", IbvMwBindInfo, mr => "mr", addr => "addr", length => "length",
        mw_access_flags => "mw_access_flags");
    l.size::<IbvMwBind>("ibv_mw_bind");
    offsets!(l, "ibv_mw_bind", IbvMwBind, wr_id => "wr_id", send_flags => "send_flags",
        bind_info => "bind_info");
    l.value(
        "offsetof(struct ibv_send_wr, wr.atomic.compare_add)",
        offset_of!(IbvSendWr, wr_word1),
    );
    l.value(
        "offsetof(struct ibv_send_wr, wr.ud.ah)",
        offset_of!(IbvSendWr, wr_remote_addr),
    );
    l.value(
        "offsetof(struct ibv_send_wr, wr.ud.remote_qpn)",
        offset_of!(IbvSendWr, wr_word1),
    );
    l.value(
        "offsetof(struct ibv_send_wr, wr.ud.remote_qkey)",
        offset_of!(IbvSendWr, wr_word1) + 4,
    );
    l.size::<IbvRecvWr>("ibv_recv_wr");
    offsets!(l, "ibv_recv_wr", IbvRecvWr, next => "next", sg_list => "sg_list", num_sge => "num_sge");
    l.size::<IbvWc>("ibv_wc");
    offsets!(l, "ibv_wc", IbvWc, status => "status", opcode => "opcode", vendor_err => "vendor_err",
        byte_len => "byte_len", imm_data => "imm_data", qp_num => "qp_num", src_qp => "src_qp",
        wc_flags => "wc_flags", pkey_index => "pkey_index", slid => "slid", sl => "sl",
        dlid_path_bits => "dlid_path_bits");
    l.size::<IbvQpCap>("ibv_qp_cap");
    offsets!(l, "ibv_qp_cap", IbvQpCap, max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
        max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data");
    l.size::<IbvQpInitAttr>("ibv_qp_init_attr");
    offsets!(l, "ibv_qp_init_attr", IbvQpInitAttr, send_cq => "send_cq", recv_cq => "recv_cq",
        srq => "srq", cap => "cap", qp_type => "qp_type", sq_sig_all => "sq_sig_all");
    l.size::<IbvGlobalRoute>("ibv_global_route");
    offsets!(l, "ibv_global_route", IbvGlobalRoute, flow_label => "flow_label",
        sgid_index => "sgid_index", hop_limit => "hop_limit", traffic_class => "traffic_class");
    l.size::<IbvAhAttr>("ibv_ah_attr");
    offsets!(l, "ibv_ah_attr", IbvAhAttr, dlid => "dlid", sl => "sl", src_path_bits => "src_path_bits",
        static_rate => "static_rate", is_global => "is_global", port_num => "port_num");
    l.size::<IbvQpAttr>("ibv_qp_attr");
    offsets!(l, "ibv_qp_attr", IbvQpAttr, cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
        path_mig_state => "path_mig_state", qkey => "qkey", rq_psn => "rq_psn",
        sq_psn => "sq_psn", dest_qp_num => "dest_qp_num", qp_access_flags => "qp_access_flags",
        cap => "cap", ah_attr => "ah_attr", alt_ah_attr => "alt_ah_attr",
        pkey_index => "pkey_index", alt_pkey_index => "alt_pkey_index",
        en_sqd_async_notify => "en_sqd_async_notify", sq_draining => "sq_draining",
        max_rd_atomic => "max_rd_atomic", max_dest_rd_atomic => "max_dest_rd_atomic",
        min_rnr_timer => "min_rnr_timer", port_num => "port_num", timeout => "timeout",
        retry_cnt => "retry_cnt", rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
        alt_timeout => "alt_timeout", rate_limit => "rate_limit");
    l
}

#[test]
fn rust_layouts_match_debian_verbs_h() {
    rust_side().check("infiniband/verbs.h", "libibverbs-dev");
    // The numbers rdma-core 44's verbs.h gives, as a second check of the harness itself.
    assert_eq!(size_of::<VerbsContext>(), 648);
    assert_eq!(offset_of!(VerbsContext, context), 320);
}
