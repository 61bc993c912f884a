//! Exported names that are not implemented yet: each sets `errno = EOPNOTSUPP`, says so once
//! on stderr (`roce-verbs: ibv_alloc_pd is not supported yet`), and returns what its C
//! signature uses for failure: NULL, an errno value, -1, 0 or nothing. They exist because the
//! dynamic linker resolves every imported name at load time (BIND_NOW): a program must load
//! even if it calls only some verbs. The `IBVERBS_PRIVATE_34` names (`ibv_cmd_*`, ...) are
//! the interface of rdma-core's providers (libmlx5, libefa), which perftest's binaries load
//! but never use on a non-Mellanox device; they stay stubs for good.
//!
//! The functions take no parameters whatever their C signature: on x86_64 and aarch64 the
//! caller owns its arguments (registers, and stack slots it pops itself), so a callee that
//! ignores them is called correctly.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_uint, c_void};

use crate::ffi::set_errno;
use roce_cabi::{FirstTime, stubs};

static SAID: FirstTime = FirstTime::new();

fn unsupported(name: &'static str) {
    if SAID.first(name) {
        eprintln!("roce-verbs: {name} is not supported yet");
    }
    set_errno(libc::EOPNOTSUPP);
}

stubs! {
    unsupported -> *mut c_void = std::ptr::null_mut(), "NULL, errno `EOPNOTSUPP`";
    _verbs_init_and_alloc_context,
    ibv_import_device,
    ibv_import_dm,
    ibv_import_mr,
    ibv_import_pd,
    ibv_reg_dmabuf_mr,
    verbs_open_device,
}
stubs! {
    unsupported -> c_int = libc::EOPNOTSUPP, "returns `EOPNOTSUPP`";
    execute_ioctl,
    ibv_attach_mcast,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_poll_cq,
    ibv_cmd_post_recv,
    ibv_cmd_post_send,
    ibv_cmd_post_srq_recv,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_req_notify_cq,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
    ibv_detach_mcast,
    ibv_query_ece,
    ibv_rereg_mr,
    ibv_set_ece,
    verbs_init_cq,
}
stubs! {
    unsupported -> c_int = -1, "-1, errno `EOPNOTSUPP`";
    ibv_read_ibdev_sysfs_file,
    ibv_resolve_eth_l2_from_gid,
}
stubs! {
    unsupported -> c_uint = 0, "0";
    __ioctl_final_num_attrs,
    ibv_query_qp_data_in_order,
}
stubs! {
    unsupported, "does nothing";
    ibv_copy_ah_attr_from_kern,
    ibv_copy_path_rec_from_kern,
    ibv_copy_path_rec_to_kern,
    ibv_copy_qp_attr_from_kern,
    ibv_unimport_dm,
    ibv_unimport_mr,
    ibv_unimport_pd,
    verbs_set_ops,
    verbs_uninit_context,
}

/// `void __verbs_log(struct verbs_context *ctx, uint32_t level, char *format, ...)`: where
/// rdma-core's providers log (`verbs_err`, `verbs_debug`). libibverbs prints a line only at or
/// below `VERBS_LOG_LEVEL`, which is 0 unless the environment sets it: nothing, by default. So
/// this one is quiet, as the real one is, for the providers that libfabric and Open MPI load
/// (libefa, libhns, ...) call it as they look for their devices. Variadic in C: a callee that
/// ignores its arguments is called correctly (above).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn __verbs_log() {}
