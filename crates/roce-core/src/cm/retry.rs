//! The CM's clocks: the IBA time unit as ib_cm rounds it, the response timeouts of REQ, REP
//! and DREQ with their retries (the MAD layer's `timeout_ms` and `retries`), and timewait.

use crate::{Duration, Instant};

/// `CMA_IBOE_PACKET_LIFETIME`: the packet life time rdma_cm gives a RoCE path.
pub(crate) const PACKET_LIFE_TIME: u8 = 16;
/// `CMA_CM_RESPONSE_TIMEOUT`: both response timeouts of rdma_cm's REQ.
pub(crate) const CM_RESPONSE_TIMEOUT: u8 = 20;
/// `CMA_MAX_CM_RETRIES`.
pub(crate) const MAX_CM_RETRIES: u8 = 15;
/// The service timeout of the MRA rdma_cm sends for a REQ its consumer has not answered yet
/// (`CMA_CM_MRA_SETTING`: 24, about 68.7 s).
pub(crate) const MRA_SERVICE_TIMEOUT: u8 = 24;
/// Our CA's ACK delay (rxe's `RXE_LOCAL_CA_ACK_DELAY`): the REP's Target ACK Delay.
pub(crate) const CA_ACK_DELAY: u8 = 15;

/// An IBA time value (4.096 µs × 2^t) in whole milliseconds, as ib_cm rounds it.
//= rxe:cm.c/cm_convert_to_ms
//# ib_cm turns an IBA time value t into 2^(t-8) ms, 1 ms below t = 8
pub(crate) fn iba_ms(t: u8) -> Duration {
    Duration::from_millis(1u64 << t.saturating_sub(8).min(31))
}

/// The local ACK timeout of a path: its packet life time doubled (one more unit), then made
/// to cover the CA's ACK delay, at most 31.
//= rxe:cm.c/cm_ack_timeout
//# the ACK timeout is the packet life time + 1, raised to cover the CA's ACK delay, at most 31
pub(crate) fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let round_trip = packet_life_time.saturating_add(1);
    let timeout = if round_trip >= ca_ack_delay {
        round_trip + u8::from(ca_ack_delay >= round_trip - 1)
    } else {
        ca_ack_delay + u8::from(round_trip >= ca_ack_delay.saturating_sub(1))
    };
    timeout.min(31)
}

/// How long the active side waits for an answer to its REQ: twice the packet life time and
/// the peer's response timeout.
//= rxe:cm.c/ib_send_cm_req
//# a REQ waits 2 × packet life time + the remote CM response timeout, then is sent again
pub(crate) fn req_timeout(packet_life_time: u8, remote_cm_response_timeout: u8) -> Duration {
    iba_ms(packet_life_time) * 2 + iba_ms(remote_cm_response_timeout)
}

/// A message waiting for its answer: sent again at `deadline`, `left` more times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry {
    /// Time between sends.
    pub(crate) every: Duration,
    /// Sends left after the one in flight.
    pub(crate) left: u8,
}

impl Retry {
    /// The deadline of a send at `now`.
    pub(crate) fn deadline(&self, now: Instant) -> Instant {
        now + self.every
    }
}
