//! The `*_str` helpers and rate conversions of libibverbs (rdma-core v44 `libibverbs/enum_strs.c`
//! and `verbs.c`; the strings were compared with those in Debian's libibverbs.so.1).

use std::ffi::{CStr, c_int};

fn pick(table: &[&'static CStr], i: c_int) -> &'static CStr {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i).copied())
        .unwrap_or(c"unknown")
}

/// `ibv_wc_status_str`.
pub(crate) fn wc_status(status: c_int) -> &'static CStr {
    pick(
        &[
            c"success",
            c"local length error",
            c"local QP operation error",
            c"local EE context operation error",
            c"local protection error",
            c"Work Request Flushed Error",
            c"memory management operation error",
            c"bad response error",
            c"local access error",
            c"remote invalid request error",
            c"remote access error",
            c"remote operation error",
            c"transport retry counter exceeded",
            c"RNR retry counter exceeded",
            c"local RDD violation error",
            c"remote invalid RD request",
            c"aborted error",
            c"invalid EE context number",
            c"invalid EE context state",
            c"fatal error",
            c"response timeout error",
            c"general error",
            c"TM error",
            c"TM software rendezvous",
        ],
        status,
    )
}

/// `ibv_node_type_str` (index 0 is `IBV_NODE_UNKNOWN` = -1 shifted).
pub(crate) fn node_type(node_type: c_int) -> &'static CStr {
    match node_type {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    }
}

/// `ibv_port_state_str`.
pub(crate) fn port_state(state: c_int) -> &'static CStr {
    pick(
        &[
            c"no state change (NOP)",
            c"down",
            c"init",
            c"armed",
            c"active",
            c"active defer",
        ],
        state,
    )
}

/// `ibv_event_type_str`.
pub(crate) fn event_type(event: c_int) -> &'static CStr {
    pick(
        &[
            c"CQ error",
            c"local work queue catastrophic error",
            c"invalid request local work queue error",
            c"local access violation work queue error",
            c"communication established",
            c"send queue drained",
            c"path migrated",
            c"path migration request error",
            c"local catastrophic error",
            c"port active",
            c"port error",
            c"LID change",
            c"P_Key change",
            c"SM change",
            c"SRQ catastrophic error",
            c"SRQ limit reached",
            c"last WQE reached",
            c"client reregistration",
            c"GID table change",
            c"WQ fatal",
        ],
        event,
    )
}

/// `enum ibv_rate` value, multiple of 2.5 Gb/s, Mb/s.
const RATES: [(c_int, c_int, c_int); 21] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, -1, 14062),
    (12, -1, 56250),
    (13, -1, 112500),
    (14, -1, 168750),
    (15, -1, 25781),
    (16, -1, 103125),
    (17, -1, 206250),
    (18, -1, 309375),
    (19, -1, 28125),
    (20, -1, 53125),
    (21, -1, 425000),
    (22, -1, 637500),
];

/// `ibv_rate_to_mult`: -1 for rates that are not a multiple of 2.5 Gb/s or unknown.
pub(crate) fn rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

/// `mult_to_ibv_rate`: `IBV_RATE_MAX` (0) for an unknown multiple.
pub(crate) fn mult_to_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && mult > 0)
        .map_or(0, |r| r.0)
}

/// `ibv_rate_to_mbps`: -1 for an unknown rate.
pub(crate) fn rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

/// `mbps_to_ibv_rate`: `IBV_RATE_MAX` (0) for an unknown rate.
pub(crate) fn mbps_to_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_index_as_the_enums() {
        assert_eq!(wc_status(0), c"success");
        assert_eq!(wc_status(12), c"transport retry counter exceeded");
        assert_eq!(wc_status(5), c"Work Request Flushed Error");
        assert_eq!(wc_status(99), c"unknown");
        assert_eq!(wc_status(-1), c"unknown");
        assert_eq!(port_state(4), c"active");
        assert_eq!(node_type(1), c"InfiniBand channel adapter");
        assert_eq!(event_type(9), c"port active");
    }

    #[test]
    fn rates_round_trip() {
        for (rate, mult, mbps) in RATES {
            assert_eq!(rate_to_mbps(rate), mbps);
            assert_eq!(mbps_to_rate(mbps), rate);
            if mult > 0 {
                assert_eq!(mult_to_rate(mult), rate);
            }
        }
        assert_eq!(rate_to_mult(1), -1);
    }
}
