//! The pinned transcripts in common/mod.rs are exactly the TCP port-18515 payloads of the
//! captures in pcap-fixtures/rxe/ (read here with roce-pcap and a minimal Ethernet/IPv4/TCP
//! parser), frame numbers and directions included.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use std::path::PathBuf;

use common::{From, PERFTEST, PINGPONG, Transcript};
use roce_oob::DEFAULT_PORT;
use roce_pcap::Capture;

/// (frame number, sender, payload) of every TCP segment with data to or from port 18515.
fn oob_payloads(file: &str) -> Vec<(u32, From, Vec<u8>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcap-fixtures/rxe")
        .join(file);
    let capture = Capture::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for (index, frame) in capture.enumerate() {
        let frame = frame.unwrap();
        let data = &frame.data;
        // Ethernet II, IPv4, TCP.
        if data.len() < 14 || data[12..14] != [0x08, 0x00] {
            continue;
        }
        let ip = &data[14..];
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 6 {
            continue;
        }
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let tcp = &ip[ihl..total];
        let src = u16::from_be_bytes([tcp[0], tcp[1]]);
        let dst = u16::from_be_bytes([tcp[2], tcp[3]]);
        let offset = usize::from(tcp[12] >> 4) * 4;
        let payload = &tcp[offset..];
        if payload.is_empty() || (src != DEFAULT_PORT && dst != DEFAULT_PORT) {
            continue;
        }
        let from = if src == DEFAULT_PORT {
            From::Server
        } else {
            From::Client
        };
        out.push((index as u32 + 1, from, payload.to_vec()));
    }
    out
}

fn check(t: &Transcript) {
    let real = oob_payloads(t.file);
    let pinned: Vec<(u32, From, Vec<u8>)> = t
        .msgs
        .iter()
        .map(|m| (m.frame, m.from, m.bytes.to_vec()))
        .collect();
    assert_eq!(real.len(), pinned.len(), "{}: number of messages", t.file);
    for (r, p) in real.iter().zip(&pinned) {
        assert_eq!(
            (r.0, r.1, r.2.escape_ascii().to_string()),
            (p.0, p.1, p.2.escape_ascii().to_string()),
            "{}",
            t.file
        );
    }
}

#[test]
fn pingpong_transcripts_are_the_captured_bytes() {
    for t in PINGPONG {
        check(t);
    }
}

#[test]
fn perftest_transcripts_are_the_captured_bytes() {
    for t in PERFTEST {
        check(t);
    }
}
