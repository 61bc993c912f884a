//! Fuzz harnesses. Each takes arbitrary bytes and checks the crate's contract on them: no panic,
//! and whatever parses re-emits to the same `Repr`. The `cargo fuzz` targets call these, and the
//! unit tests run them over a committed corpus and over proptest's inputs, so CI exercises them
//! without a nightly toolchain.

use crate::frame::{Frame, LinkType};
use crate::pretty::FrameLine;
use crate::{RocePacket, RoceRepr};

/// A RoCEv2 UDP payload: parse it, and if it parses, emit it again and parse that.
pub fn parse_packet(data: &[u8]) {
    let Ok(packet) = RocePacket::new_checked(data) else {
        return;
    };
    let repr = RoceRepr::parse(&packet).expect("a checked packet parses");
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut buf, |payload| {
        payload.copy_from_slice(packet.payload())
    })
    .expect("a parsed repr emits");
    let again = RoceRepr::parse(&RocePacket::new_checked(&buf[..]).expect("emitted packets check"))
        .expect("emitted packets parse");
    assert_eq!(repr, again, "re-emitted packet differs");
    assert_eq!(
        RocePacket::new_unchecked(&buf[..]).payload(),
        packet.payload()
    );
}

/// An Ethernet frame (the first byte picks the link type): parse it, check its ICRC and print it.
pub fn parse_frame(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let link = match selector % 4 {
        0 => LinkType::Ethernet,
        1 => LinkType::LinuxSll,
        2 => LinkType::LinuxSll2,
        _ => LinkType::RawIp,
    };
    if let Ok(frame) = Frame::parse(link, bytes) {
        let _ = frame.verify_icrc();
        let _ = frame.pseudo_header();
        if let Some(segments) = frame.gso_segments() {
            for segment in segments.iter() {
                let _ = segment.verify_icrc();
                assert!(!FrameLine::new(&segment).to_string().is_empty());
            }
        }
        let line = FrameLine::new(&frame).to_string();
        assert!(!line.is_empty());
    }
}
