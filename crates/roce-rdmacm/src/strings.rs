//! `rdma_event_str`'s names (librdmacm's spellings, rdma-core v44 librdmacm/cma.c).

use std::ffi::CStr;

const NAMES: [&CStr; 16] = [
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

/// The name of an event code; `"UNKNOWN EVENT"` for others, as librdmacm.
pub(crate) fn event_str(event: i32) -> &'static CStr {
    usize::try_from(event)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or(c"UNKNOWN EVENT")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::event;

    #[test]
    fn names_follow_the_codes() {
        assert_eq!(
            event_str(event::ADDR_RESOLVED),
            c"RDMA_CM_EVENT_ADDR_RESOLVED"
        );
        assert_eq!(event_str(event::ESTABLISHED), c"RDMA_CM_EVENT_ESTABLISHED");
        assert_eq!(
            event_str(event::TIMEWAIT_EXIT),
            c"RDMA_CM_EVENT_TIMEWAIT_EXIT"
        );
        assert_eq!(event_str(16), c"UNKNOWN EVENT");
        assert_eq!(event_str(-1), c"UNKNOWN EVENT");
    }
}
