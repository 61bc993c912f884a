//! The requester's record of the request packets in flight, for the algorithms driven by ACKs
//! (DCTCP's window and bytes acknowledged, TIMELY's RTT): when each packet left and its bytes
//! on the wire and of payload, until an ACK (or NAK, READ response, atomic ACK) covers it. The RTT sample of
//! an ACK is its arrival time minus the departure of the newest packet it covers, the packet
//! whose AckReq asked for it; a packet sent more than once gives no sample (Karn's rule).

use std::collections::VecDeque;

use roce_wire::Psn;

use crate::{Duration, Instant};

/// One request packet in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    /// Its PSN.
    psn: Psn,
    /// The PSN after the ones it uses (a READ request uses one per response).
    end: Psn,
    /// When it left.
    at: Instant,
    /// Its bytes on the wire.
    bytes: u32,
    /// Its bytes of payload (0 for a READ request: its responses carry the data); at most a
    /// path MTU, so 16 bits keep `Sent` at 24 bytes.
    payload: u16,
    /// Sent before: its ACK says nothing of this departure's RTT.
    retransmitted: bool,
}

// A record per packet in flight, so kept small.
const _: () = assert!(size_of::<Sent>() <= 24);

/// The packets in flight, oldest first, and their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Flight {
    packets: VecDeque<Sent>,
    /// Their bytes on the wire.
    bytes: u64,
    /// Their bytes of payload (TCP's and ns-3's `snd_nxt − snd_una`).
    payload: u64,
    /// The window bounds `payload` rather than `bytes` ([`Flight::windowed`]).
    counts_payload: bool,
}

/// What an acknowledgement covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Covered {
    /// Bytes on the wire of the packets newly acknowledged.
    pub(crate) bytes: u64,
    /// The RTT of the newest of them, unless it was a retransmission.
    pub(crate) rtt: Option<Duration>,
}

impl Flight {
    /// Bytes on the wire in flight.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes of payload in flight.
    #[cfg(test)]
    pub(crate) fn payload(&self) -> u64 {
        self.payload
    }

    /// A record whose window counts payload bytes (`true`, ns-3's count) or bytes on the wire.
    pub(crate) fn counting_payload(counts_payload: bool) -> Self {
        Self {
            counts_payload,
            ..Self::default()
        }
    }

    /// What the window bounds: the bytes on the wire in flight, or their payload.
    #[inline]
    pub(crate) fn windowed(&self) -> u64 {
        if self.counts_payload {
            self.payload
        } else {
            self.bytes
        }
    }

    /// A request packet with PSNs `psn..psn + npsn`, `(bytes, payload)` bytes on the wire and
    /// of payload, left at `now`.
    pub(crate) fn sent(
        &mut self,
        now: Instant,
        (psn, npsn): (Psn, u32),
        (bytes, payload): (u32, u32),
        again: bool,
    ) {
        let payload = u16::try_from(payload).unwrap_or(u16::MAX);
        self.packets.push_back(Sent {
            psn,
            end: psn.wrapping_add(npsn),
            at: now,
            bytes,
            payload,
            retransmitted: again,
        });
        self.bytes += u64::from(bytes);
        self.payload += u64::from(payload);
    }

    /// Every PSN before `una` is acknowledged, as seen at `now`: the packets wholly before it
    /// leave the record.
    pub(crate) fn acknowledged(&mut self, una: Psn, now: Instant) -> Covered {
        let mut covered = Covered::default();
        while let Some(front) = self.packets.front() {
            if front.end.distance(una) > 0 {
                break;
            }
            let sent = self.packets.pop_front().expect("front exists");
            self.bytes -= u64::from(sent.bytes);
            self.payload -= u64::from(sent.payload);
            covered.bytes += u64::from(sent.bytes);
            covered.rtt = (!sent.retransmitted).then(|| now.saturating_duration_since(sent.at));
        }
        covered
    }

    /// Go-back-N from `psn`: the packets from it on will be sent again and recorded then.
    pub(crate) fn go_back(&mut self, psn: Psn) {
        while let Some(back) = self.packets.back() {
            if back.psn.distance(psn) < 0 {
                break;
            }
            let sent = self.packets.pop_back().expect("back exists");
            self.bytes -= u64::from(sent.bytes);
            self.payload -= u64::from(sent.payload);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn an_ack_covers_the_packets_before_it_and_samples_the_newest() {
        let mut flight = Flight::default();
        for i in 0..4u32 {
            flight.sent(at(u64::from(i) * 100), (Psn::new(i), 1), (1000, 900), false);
        }
        assert_eq!((flight.bytes(), flight.payload()), (4000, 3600));
        // An ACK of PSN 2 (una 3) arriving at 1000 ns covers three packets; its RTT is the
        // third's, the one that asked for it.
        let covered = flight.acknowledged(Psn::new(3), at(1000));
        assert_eq!(covered.bytes, 3000);
        assert_eq!(covered.rtt, Some(Duration::from_nanos(800)));
        assert_eq!((flight.bytes(), flight.payload()), (1000, 900));
        // Nothing new: no bytes, no sample.
        assert_eq!(
            flight.acknowledged(Psn::new(3), at(1100)),
            Covered::default()
        );
    }

    #[test]
    fn a_retransmitted_packet_gives_no_rtt_sample() {
        let mut flight = Flight::default();
        flight.sent(at(0), (Psn::new(0), 1), (1000, 900), false);
        flight.sent(at(10), (Psn::new(1), 1), (1000, 900), false);
        flight.go_back(Psn::new(1));
        assert_eq!(
            (flight.bytes(), flight.payload()),
            (1000, 900),
            "PSN 1 will be sent again"
        );
        flight.sent(at(500), (Psn::new(1), 1), (1000, 900), true);
        let covered = flight.acknowledged(Psn::new(2), at(900));
        assert_eq!((covered.bytes, covered.rtt), (2000, None));
    }

    #[test]
    fn the_window_counts_the_bytes_on_the_wire_or_their_payload() {
        for (counts_payload, windowed) in [(false, 2000), (true, 1800)] {
            let mut flight = Flight::counting_payload(counts_payload);
            flight.sent(at(0), (Psn::new(0), 1), (1000, 900), false);
            flight.sent(at(10), (Psn::new(1), 1), (1000, 900), false);
            assert_eq!(flight.windowed(), windowed);
            flight.acknowledged(Psn::new(1), at(100));
            assert_eq!(flight.windowed(), windowed / 2);
        }
    }

    #[test]
    fn a_read_request_is_covered_once_all_its_responses_are() {
        let mut flight = Flight::default();
        flight.sent(at(0), (Psn::new(0), 4), (60, 0), false);
        assert_eq!(flight.acknowledged(Psn::new(3), at(50)).bytes, 0);
        assert_eq!(flight.acknowledged(Psn::new(4), at(60)).bytes, 60);
        assert_eq!(flight.payload(), 0);
    }
}
