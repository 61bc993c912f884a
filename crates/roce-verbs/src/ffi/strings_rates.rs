//! The names of enum values (`ibv_wc_status_str`, ...) and the conversions between rates,
//! multipliers and Mb/s.

use std::ffi::{c_char, c_int};

use crate::strings;

/// `const char *ibv_wc_status_str(enum ibv_wc_status)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    strings::wc_status(status).as_ptr()
}

/// `const char *ibv_node_type_str(enum ibv_node_type)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    strings::node_type(node_type).as_ptr()
}

/// `const char *ibv_port_state_str(enum ibv_port_state)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_port_state_str(state: c_int) -> *const c_char {
    strings::port_state(state).as_ptr()
}

/// `const char *ibv_event_type_str(enum ibv_event_type)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    strings::event_type(event).as_ptr()
}

/// `int ibv_rate_to_mult(enum ibv_rate)`: -1 for an unknown rate.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    strings::rate_to_mult(rate)
}

/// `enum ibv_rate mult_to_ibv_rate(int mult)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    strings::mult_to_rate(mult)
}

/// `int ibv_rate_to_mbps(enum ibv_rate)`: -1 for an unknown rate.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    strings::rate_to_mbps(rate)
}

/// `enum ibv_rate mbps_to_ibv_rate(int mbps)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    strings::mbps_to_rate(mbps)
}
