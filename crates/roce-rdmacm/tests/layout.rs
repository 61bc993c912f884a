//! The `#[repr(C)]` structures of `roce_rdmacm::abi` against Debian's
//! `/usr/include/rdma/rdma_cma.h` (and the verbs structures it fills, against
//! `<infiniband/verbs.h>` and `<infiniband/sa.h>`): a C program compiled against the headers
//! prints every size and field offset, and each must equal Rust's. Skips (fails under
//! CI=true) where the header (package librdmacm-dev) or a C compiler is missing.

use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

use roce_rdmacm::abi::*;

const HEADER: &str = "/usr/include/rdma/rdma_cma.h";

/// (C expression, Rust value): `sizeof(struct x)` or `offsetof(struct x, f)`.
fn rust_side() -> Vec<(String, usize)> {
    let mut v = Vec::new();
    macro_rules! size {
        ($c:literal, $t:ty) => {
            v.push((format!("sizeof(struct {})", $c), size_of::<$t>()));
            v.push((format!("_Alignof(struct {})", $c), align_of::<$t>()));
        };
    }
    macro_rules! off {
        ($c:literal, $t:ty, $($f:ident => $cf:literal),+ $(,)?) => {
            $( v.push((format!("offsetof(struct {}, {})", $c, $cf), offset_of!($t, $f))); )+
        };
    }
    size!("rdma_event_channel", RdmaEventChannel);
    off!("rdma_event_channel", RdmaEventChannel, fd => "fd");
    size!("rdma_ib_addr", RdmaIbAddr);
    off!("rdma_ib_addr", RdmaIbAddr, sgid => "sgid", dgid => "dgid", pkey => "pkey");
    size!("rdma_addr", RdmaAddr);
    off!("rdma_addr", RdmaAddr, src => "src_storage", dst => "dst_storage", ibaddr => "addr.ibaddr");
    v.push((
        "offsetof(struct rdma_addr, src_sin.sin_port)".into(),
        offset_of!(RdmaAddr, src) + 2,
    ));
    v.push((
        "offsetof(struct rdma_addr, dst_sin.sin_addr)".into(),
        offset_of!(RdmaAddr, dst) + 4,
    ));
    v.push((
        "sizeof(struct sockaddr_storage)".into(),
        size_of::<SockaddrStorage>(),
    ));
    size!("ibv_sa_path_rec", IbvSaPathRec);
    off!("ibv_sa_path_rec", IbvSaPathRec, dgid => "dgid", sgid => "sgid", dlid => "dlid",
        slid => "slid", raw_traffic => "raw_traffic", flow_label => "flow_label",
        hop_limit => "hop_limit", traffic_class => "traffic_class", reversible => "reversible",
        numb_path => "numb_path", pkey => "pkey", sl => "sl", mtu_selector => "mtu_selector",
        mtu => "mtu", rate_selector => "rate_selector", rate => "rate",
        packet_life_time_selector => "packet_life_time_selector",
        packet_life_time => "packet_life_time", preference => "preference");
    size!("rdma_route", RdmaRoute);
    off!("rdma_route", RdmaRoute, addr => "addr", path_rec => "path_rec", num_paths => "num_paths");
    size!("rdma_cm_id", RdmaCmId);
    off!("rdma_cm_id", RdmaCmId, verbs => "verbs", channel => "channel", context => "context",
        qp => "qp", route => "route", ps => "ps", port_num => "port_num", event => "event",
        send_cq_channel => "send_cq_channel", send_cq => "send_cq",
        recv_cq_channel => "recv_cq_channel", recv_cq => "recv_cq", srq => "srq", pd => "pd",
        qp_type => "qp_type");
    size!("rdma_conn_param", RdmaConnParam);
    off!("rdma_conn_param", RdmaConnParam, private_data => "private_data",
        private_data_len => "private_data_len", responder_resources => "responder_resources",
        initiator_depth => "initiator_depth", flow_control => "flow_control",
        retry_count => "retry_count", rnr_retry_count => "rnr_retry_count", srq => "srq",
        qp_num => "qp_num");
    size!("ibv_global_route", IbvGlobalRoute);
    off!("ibv_global_route", IbvGlobalRoute, dgid => "dgid", flow_label => "flow_label",
        sgid_index => "sgid_index", hop_limit => "hop_limit", traffic_class => "traffic_class");
    size!("ibv_ah_attr", IbvAhAttr);
    off!("ibv_ah_attr", IbvAhAttr, grh => "grh", dlid => "dlid", sl => "sl",
        src_path_bits => "src_path_bits", static_rate => "static_rate", is_global => "is_global",
        port_num => "port_num");
    size!("rdma_ud_param", RdmaUdParam);
    off!("rdma_ud_param", RdmaUdParam, private_data => "private_data",
        private_data_len => "private_data_len", ah_attr => "ah_attr", qp_num => "qp_num",
        qkey => "qkey");
    size!("rdma_cm_event", RdmaCmEvent);
    off!("rdma_cm_event", RdmaCmEvent, id => "id", listen_id => "listen_id", event => "event",
        status => "status", param => "param");
    size!("rdma_addrinfo", RdmaAddrinfo);
    off!("rdma_addrinfo", RdmaAddrinfo, ai_flags => "ai_flags", ai_family => "ai_family",
        ai_qp_type => "ai_qp_type", ai_port_space => "ai_port_space",
        ai_src_len => "ai_src_len", ai_dst_len => "ai_dst_len", ai_src_addr => "ai_src_addr",
        ai_dst_addr => "ai_dst_addr", ai_src_canonname => "ai_src_canonname",
        ai_dst_canonname => "ai_dst_canonname", ai_route_len => "ai_route_len",
        ai_route => "ai_route", ai_connect_len => "ai_connect_len", ai_connect => "ai_connect",
        ai_next => "ai_next");
    size!("ibv_qp_cap", IbvQpCap);
    off!("ibv_qp_cap", IbvQpCap, max_send_wr => "max_send_wr", max_recv_wr => "max_recv_wr",
        max_send_sge => "max_send_sge", max_recv_sge => "max_recv_sge",
        max_inline_data => "max_inline_data");
    size!("ibv_qp_init_attr", IbvQpInitAttr);
    off!("ibv_qp_init_attr", IbvQpInitAttr, qp_context => "qp_context", send_cq => "send_cq",
        recv_cq => "recv_cq", srq => "srq", cap => "cap", qp_type => "qp_type",
        sq_sig_all => "sq_sig_all");
    // The head of ibv_qp_init_attr_ex: the base fields, then comp_mask and pd.
    off!("ibv_qp_init_attr_ex", IbvQpInitAttrExHead, qp_context => "qp_context",
        send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", cap => "cap",
        qp_type => "qp_type", sq_sig_all => "sq_sig_all", comp_mask => "comp_mask", pd => "pd");
    size!("ibv_qp_attr", IbvQpAttr);
    off!("ibv_qp_attr", IbvQpAttr, qp_state => "qp_state", cur_qp_state => "cur_qp_state",
        path_mtu => "path_mtu", qkey => "qkey", sq_psn => "sq_psn",
        qp_access_flags => "qp_access_flags", cap => "cap", ah_attr => "ah_attr",
        alt_ah_attr => "alt_ah_attr", pkey_index => "pkey_index", port_num => "port_num",
        timeout => "timeout", rate_limit => "rate_limit");
    off!("ibv_port_attr", IbvPortAttrHead, state => "state", max_mtu => "max_mtu",
        active_mtu => "active_mtu");
    v.push(("sizeof(struct ibv_port_attr) <= 128".into(), 1));
    v.push(("sizeof(union ibv_gid)".into(), size_of::<IbvGid>()));
    v
}

fn skip_or_fail(why: &str) {
    assert!(
        std::env::var_os("CI").is_none_or(|v| v != "true"),
        "{why} (CI=true: not skipping)"
    );
    eprintln!("skipping: {why}");
}

#[test]
fn rust_layouts_match_debian_rdma_cma_h() {
    if !Path::new(HEADER).exists() {
        return skip_or_fail("no /usr/include/rdma/rdma_cma.h: apt-get install librdmacm-dev");
    }
    let rust = rust_side();
    let dir = std::env::temp_dir().join(format!("roce-rdmacm-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <rdma/rdma_cma.h>\nint main(void) {\n",
    );
    for (expr, _) in &rust {
        c.push_str(&format!("  printf(\"%zu\\n\", (size_t)({expr}));\n"));
    }
    c.push_str("  return 0;\n}\n");
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = match Command::new(&cc).arg("-o").arg(&exe).arg(&src).output() {
        Ok(o) => o,
        Err(e) => return skip_or_fail(&format!("cannot run {cc}: {e}")),
    };
    assert!(
        out.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let c_values: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(c_values.len(), rust.len());
    let wrong: Vec<String> = rust
        .iter()
        .zip(&c_values)
        .filter(|((_, r), c)| r != *c)
        .map(|((e, r), c)| format!("{e}: C {c}, Rust {r}"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    // The numbers of rdma-core 44's rdma_cma.h (verbs-facts §B.5), a check of the harness.
    assert_eq!(size_of::<RdmaCmId>(), 416);
    assert_eq!(offset_of!(RdmaCmId, qp_type), 408);
    assert_eq!(size_of::<RdmaCmEvent>(), 80);
    assert_eq!(size_of::<RdmaAddrinfo>(), 96);
}
