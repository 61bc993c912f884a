//! Shared by the cross-crate tests: where the fixtures are, how to read them, and how the
//! generated ones (malformed packets, public test vectors) are made.
//!
//! Generated fixtures are derived from real rxe frames with exactly one thing changed, and the
//! ICRC recomputed unless the ICRC is the thing, so each maps to exactly one `ParseError`.
//! `ROCE_BLESS=1 cargo test -p roce-tests --test fixtures` rewrites them.

pub mod sim;
pub mod tshark;

use std::path::{Path, PathBuf};
use std::time::Duration;

use roce_pcap::{Capture, CapturedFrame};
use roce_wire::frame::{Frame, FrameRepr, LinkType};
use roce_wire::{Layer, ParseError, icrc};

/// Says that the running test skips, and why, in cargo's ordinary output
/// ([`roce_cabi::testing::say_skipped`]).
pub fn skipped(why: &str) {
    roce_cabi::testing::say_skipped(why);
}

/// The `pcap-fixtures` folder at the top of the workspace.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcap-fixtures")
}

/// Every `.pcap` in `pcap-fixtures/<sub>`, sorted.
pub fn pcaps(sub: &str) -> Vec<PathBuf> {
    let dir = fixtures_dir().join(sub);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "pcap"))
        .collect();
    files.sort();
    files
}

/// Every frame of a capture.
pub fn frames(path: &Path) -> Vec<CapturedFrame> {
    Capture::open(path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .map(|frame| frame.unwrap_or_else(|err| panic!("{}: {err}", path.display())))
        .collect()
}

/// A generated capture: its file name, the frame, and for malformed ones the one error its RoCE
/// packet must produce (`None` for a valid one).
#[derive(Debug)]
pub struct Generated {
    /// File name under `pcap-fixtures/`.
    pub name: &'static str,
    /// The Ethernet frame.
    pub frame: Vec<u8>,
    /// The error, for malformed fixtures.
    pub error: Option<ParseError>,
    /// What the fixture shows, for the README.
    pub about: &'static str,
}

/// All generated fixtures, derived from the rxe captures and the public ICRC vectors.
pub fn generated() -> Vec<Generated> {
    let rc = frames(&fixtures_dir().join("rxe/mtu1500-rc_s64_m1024.pcap"));
    let write = frames(&fixtures_dir().join("rxe/mtu1500-write_bw.pcap"));
    let send_only = first_roce(&rc, 0x04);
    let ack = first_roce(&rc, 0x11);
    let write_first = first_roce(&write, 0x06);

    let mut out = vec![
        Generated {
            name: "vectors/connectx4lx-cnp.pcap",
            frame: roce_wire::cnp::CONNECTX_FRAME.to_vec(),
            error: None,
            about: "A CNP captured on a ConnectX-4 Lx (scapy test/contrib/roce.uts): hardware's ICRC",
        },
        Generated {
            name: "vectors/uc-send-only.pcap",
            frame: uc_send_only(),
            error: None,
            about: "scapy's UC SEND_ONLY vector (MigReq, pad 2, TOS 1) in an Ethernet frame",
        },
    ];
    let mut malformed = |name, base: &[u8], error, about, change: &dyn Fn(&mut Vec<u8>)| {
        out.push(Generated {
            name,
            frame: rebuild(base, change, true),
            error: Some(error),
            about,
        });
    };
    malformed(
        "malformed/truncated-bth.pcap",
        &send_only,
        ParseError::Truncated {
            layer: Layer::Bth,
            need: 12,
            got: 8,
        },
        "a SEND_ONLY whose UDP payload is the first 8 bytes of its BTH",
        &|roce| roce.truncate(8),
    );
    malformed(
        "malformed/truncated-icrc.pcap",
        &ack,
        ParseError::Truncated {
            layer: Layer::Icrc,
            need: 16,
            got: 14,
        },
        "an ACK cut after the BTH and 2 bytes: no room for the ICRC",
        &|roce| roce.truncate(14),
    );
    malformed(
        "malformed/truncated-aeth.pcap",
        &ack,
        ParseError::Truncated {
            layer: Layer::Aeth,
            need: 20,
            got: 18,
        },
        "an ACK with 2 of its 4 AETH bytes, then an ICRC",
        &|roce| drop(roce.drain(14..16)),
    );
    malformed(
        "malformed/truncated-reth.pcap",
        &write_first,
        ParseError::Truncated {
            layer: Layer::Reth,
            need: 32,
            got: 26,
        },
        "a WRITE_FIRST with 10 of its 16 RETH bytes, then an ICRC",
        &|roce| drop(roce.drain(22..roce.len() - 4)),
    );
    malformed(
        "malformed/bad-tver.pcap",
        &send_only,
        ParseError::BadTver(1),
        "a SEND_ONLY with transport version 1",
        &|roce| roce[1] |= 0x01,
    );
    malformed(
        "malformed/unknown-opcode.pcap",
        &send_only,
        ParseError::UnsupportedOpcode(0x15),
        "a SEND_ONLY relabelled with the reserved RC opcode 0x15",
        &|roce| roce[0] = 0x15,
    );
    malformed(
        "malformed/bad-pad.pcap",
        &ack,
        ParseError::BadPad {
            pad: 3,
            available: 0,
        },
        "an ACK (no payload) claiming 3 pad bytes",
        &|roce| roce[1] |= 0x30,
    );
    malformed(
        "malformed/ack-with-payload.pcap",
        &ack,
        ParseError::BadPayloadLength {
            opcode: 0x11,
            expected: 0,
            got: 4,
        },
        "an ACK carrying 4 bytes of payload",
        &|roce| {
            let at = roce.len() - 4;
            roce.splice(at..at, [0xde, 0xad, 0xbe, 0xef]);
        },
    );
    let bad_icrc = rebuild(&send_only, &|roce| roce[20] ^= 0x01, false);
    let expected = Frame::parse(LinkType::Ethernet, &bad_icrc)
        .expect("the base frame parses")
        .verify_icrc()
        .expect_err("one payload bit flipped after the ICRC was computed");
    out.push(Generated {
        name: "malformed/bad-icrc.pcap",
        frame: bad_icrc,
        error: Some(expected),
        about: "a SEND_ONLY with one payload bit flipped after its ICRC was computed",
    });
    out
}

/// The first RoCE frame with this opcode.
fn first_roce(frames: &[CapturedFrame], opcode: u8) -> Vec<u8> {
    frames
        .iter()
        .find(|f| {
            let frame = Frame::parse(f.link, &f.data).expect("rxe frames parse");
            frame
                .roce_payload()
                .is_some_and(|p| p.first() == Some(&opcode))
        })
        .unwrap_or_else(|| panic!("no opcode {opcode:#04x} in the capture"))
        .data
        .clone()
}

/// The frame with its RoCE payload changed, IP and UDP lengths (and the IPv4 checksum) made
/// consistent again, and, if `reseal`, a fresh ICRC.
fn rebuild(base: &[u8], change: &dyn Fn(&mut Vec<u8>), reseal: bool) -> Vec<u8> {
    let frame = Frame::parse(LinkType::Ethernet, base).expect("the base frame parses");
    let mut roce = frame
        .roce_payload()
        .expect("the base frame is RoCE")
        .to_vec();
    let Some(roce_wire::frame::Transport::Udp(udp, _)) = frame.transport else {
        unreachable!("RoCE is UDP")
    };
    let repr = FrameRepr {
        ethernet: frame.ethernet.expect("an Ethernet frame"),
        ip: frame.ip.expect("an IP frame"),
        src_port: udp.src_port,
        dst_port: udp.dst_port,
    };
    if !reseal {
        change(&mut roce);
    }
    let header = repr.pseudo_header().expect("IPv4 on both ends");
    if reseal {
        change(&mut roce);
        icrc::seal(&header, &mut roce);
    }
    let mut out = vec![0; repr.header_len() + roce.len()];
    let at = repr
        .emit_headers(&mut out, roce.len())
        .expect("the headers fit");
    out[at..].copy_from_slice(&roce);
    out
}

/// scapy's UC SEND_ONLY vector, with locally administered MACs around it.
fn uc_send_only() -> Vec<u8> {
    let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    frame.extend_from_slice(&[
        0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, // IPv4
        192, 168, 0, 7, 192, 168, 0, 7, //
        0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2, // UDP
        0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, // BTH
        b'F', b'0', 0x81, 0x8b, 0xe2, 0x89, b'5', 0xd9, 0x0e, 0x9a, 0x95, b'P', b'T', 0x01, 0xbe,
        0x88, b'^', b'P', 0x00, 0x00, // payload and pad
        0x78, 0xf3, 0x53, 0xf3, // ICRC
    ]);
    frame
}

/// Writes a one-frame capture.
pub fn write_capture(path: &Path, frame: &[u8]) {
    let mut writer = roce_pcap::Writer::create(path).expect("fixture file can be created");
    writer
        .write(Duration::ZERO, frame)
        .expect("fixture file can be written");
    drop(writer.into_inner());
}

/// Whether `ROCE_BLESS=1`: rewrite generated fixtures and golden files instead of comparing.
pub fn blessing() -> bool {
    std::env::var_os("ROCE_BLESS").is_some_and(|v| v == "1")
}
