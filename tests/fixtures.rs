//! Every capture in `pcap-fixtures/` against the wire crate: real rxe traffic and the public
//! vectors parse, re-emit byte for byte and carry a good ICRC; each malformed capture fails with
//! exactly its one error; the generated captures are what the generator makes today.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::BTreeMap;

use roce_tests::{blessing, fixtures_dir, frames, generated, pcaps, write_capture};
use roce_wire::frame::Frame;
use roce_wire::{RocePacket, RoceRepr, fuzzing, icrc};

#[test]
fn every_roce_packet_parses_reemits_identically_and_has_a_good_icrc() {
    let mut opcodes = BTreeMap::new();
    for sub in ["rxe", "vectors", "interop"] {
        for path in pcaps(sub) {
            let mut roce = 0;
            for (n, captured) in frames(&path).iter().enumerate() {
                let at = format!("{} frame {}", path.display(), n + 1);
                let frame = Frame::parse(captured.link, &captured.data).expect(&at);
                let Some(packet) = frame.roce() else { continue };
                let packet = packet.unwrap_or_else(|err| panic!("{at}: {err}"));
                roce += 1;
                assert_eq!(frame.verify_icrc(), Ok(()), "{at}");

                // Re-emit from the Repr alone, then seal with the pseudo header: the same bytes.
                let repr = RoceRepr::parse(&packet).unwrap_or_else(|err| panic!("{at}: {err}"));
                let mut again = vec![0; repr.buffer_len()];
                repr.emit(&mut again, |p| p.copy_from_slice(packet.payload()))
                    .expect(&at);
                icrc::seal(&frame.pseudo_header().expect(&at), &mut again);
                assert_eq!(again, packet.as_bytes(), "{at}: re-emitted bytes differ");
                *opcodes.entry(repr.bth.opcode.name()).or_insert(0) += 1;
            }
            assert!(roce > 0, "{}: no RoCE packet", path.display());
        }
    }
    // The fixtures cover what rxe sends for pingpong and the three bandwidth tests.
    for opcode in [
        "RC_SEND_FIRST",
        "RC_SEND_MIDDLE",
        "RC_SEND_LAST",
        "RC_SEND_ONLY",
        "RC_RDMA_WRITE_FIRST",
        "RC_RDMA_WRITE_MIDDLE",
        "RC_RDMA_WRITE_LAST",
        "RC_RDMA_READ_REQUEST",
        "RC_RDMA_READ_RESPONSE_FIRST",
        "RC_RDMA_READ_RESPONSE_MIDDLE",
        "RC_RDMA_READ_RESPONSE_LAST",
        "RC_ACKNOWLEDGE",
        "UD_SEND_ONLY",
        "UC_SEND_ONLY",
        "CNP",
    ] {
        assert!(
            opcodes.contains_key(opcode),
            "no {opcode} in the fixtures: {opcodes:?}"
        );
    }
}

/// The captures on loopback hold GSO batches: each frame is one good RoCE packet or cuts into
/// packets that each parse, re-emit identically and verify with their own IPv4 ID and lengths.
#[test]
fn loopback_captures_cut_into_good_packets() {
    for path in pcaps("loopback") {
        let (mut packets, mut batches) = (0, 0);
        for (n, captured) in frames(&path).iter().enumerate() {
            let at = format!("{} frame {}", path.display(), n + 1);
            let whole = Frame::parse(captured.link, &captured.data).expect(&at);
            let segments: Vec<_> = match whole.gso_segments() {
                Some(batch) => {
                    batches += 1;
                    batch.iter().collect()
                }
                None => vec![whole],
            };
            for (i, frame) in segments.iter().enumerate() {
                let at = format!("{at} segment {}", i + 1);
                let packet = frame.roce().expect(&at).expect(&at);
                assert_eq!(frame.verify_icrc(), Ok(()), "{at}");
                let repr = RoceRepr::parse(&packet).expect(&at);
                let mut again = vec![0; repr.buffer_len()];
                repr.emit(&mut again, |p| p.copy_from_slice(packet.payload()))
                    .expect(&at);
                icrc::seal(&frame.pseudo_header().expect(&at), &mut again);
                assert_eq!(again, packet.as_bytes(), "{at}: re-emitted bytes differ");
                packets += 1;
            }
        }
        assert_eq!((batches, packets), (16, 98), "{}", path.display());
    }
    assert_eq!(pcaps("loopback").len(), 3);
}

#[test]
fn each_malformed_capture_maps_to_exactly_its_error() {
    let expected: BTreeMap<_, _> = generated()
        .into_iter()
        .filter_map(|g| g.error.map(|err| (fixtures_dir().join(g.name), err)))
        .collect();
    let files = pcaps("malformed");
    assert_eq!(
        files,
        expected.keys().cloned().collect::<Vec<_>>(),
        "manifest and files differ"
    );
    for path in files {
        let frames = frames(&path);
        assert_eq!(frames.len(), 1, "{}", path.display());
        let frame =
            Frame::parse(frames[0].link, &frames[0].data).expect("the frame itself is fine");
        let packet = frame.roce().expect("to UDP port 4791");
        let error = match packet {
            Err(err) => err,
            Ok(_) => frame
                .verify_icrc()
                .expect_err("a malformed fixture is rejected"),
        };
        assert_eq!(error, expected[&path], "{}", path.display());
    }
}

#[test]
fn generated_captures_are_current() {
    for fixture in generated() {
        let path = fixtures_dir().join(fixture.name);
        if blessing() {
            write_capture(&path, &fixture.frame);
            continue;
        }
        let frames = frames(&path);
        assert_eq!(frames.len(), 1, "{}", path.display());
        assert_eq!(
            frames[0].data,
            fixture.frame,
            "{} is stale: ROCE_BLESS=1",
            path.display()
        );
    }
}

/// Seeds for `cargo fuzz`: the first RoCE packet of each opcode in the fixtures, and the frame it
/// came in. Written by `ROCE_BLESS=1`, checked otherwise.
#[test]
fn fuzz_corpus_seeds_are_current() {
    let corpus = fixtures_dir().join("../fuzz/corpus");
    let mut seeds = BTreeMap::new();
    for sub in ["rxe", "vectors", "interop", "malformed"] {
        for path in pcaps(sub) {
            for captured in frames(&path) {
                let Ok(frame) = Frame::parse(captured.link, &captured.data) else {
                    continue;
                };
                let Some(payload) = frame.roce_payload() else {
                    continue;
                };
                let name = match frame.roce() {
                    Some(Ok(packet)) => packet.layout().name.to_lowercase(),
                    _ => path.file_stem().unwrap().to_string_lossy().into_owned(),
                };
                let mut framed = vec![0];
                framed.extend_from_slice(&captured.data);
                seeds.entry(name).or_insert((payload.to_vec(), framed));
            }
        }
    }
    for (name, (packet, frame)) in seeds {
        for (target, data) in [("parse_packet", packet), ("parse_frame", frame)] {
            let path = corpus.join(target).join(&name);
            bless_or_check(&path, &data);
        }
    }
}

/// With `ROCE_BLESS=1` writes `data` to `path` (making its folder); otherwise checks that
/// the committed file holds `data`.
fn bless_or_check(path: &std::path::Path, data: &[u8]) {
    if blessing() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    } else {
        let committed = std::fs::read(path)
            .unwrap_or_else(|e| panic!("{}: {e} (ROCE_BLESS=1 writes it)", path.display()));
        assert_eq!(committed, data, "{} is stale", path.display());
    }
}

/// Seeds for the `parse_cm_mad` fuzz target: one MAD of each CM message
/// (`roce_wire::mad::examples`). Written by `ROCE_BLESS=1`, checked otherwise.
#[test]
fn cm_mad_fuzz_seeds_are_current() {
    let dir = fixtures_dir().join("../fuzz/corpus/parse_cm_mad");
    for mad in roce_wire::mad::examples::all() {
        let mut data = vec![0; roce_wire::mad::MAD_LEN];
        mad.emit(&mut data).unwrap();
        let path = dir.join(mad.message.attr().name().to_lowercase());
        bless_or_check(&path, &data);
    }
}

#[test]
fn fuzz_harnesses_run_clean_over_every_fixture_and_the_corpus() {
    let mut inputs = 0;
    for sub in ["rxe", "vectors", "interop", "malformed"] {
        for path in pcaps(sub) {
            for captured in frames(&path) {
                let mut framed = vec![0];
                framed.extend_from_slice(&captured.data);
                fuzzing::parse_frame(&framed);
                if let Ok(frame) = Frame::parse(captured.link, &captured.data)
                    && let Some(payload) = frame.roce_payload()
                {
                    fuzzing::parse_packet(payload);
                    inputs += 1;
                }
            }
        }
    }
    let corpus = fixtures_dir().join("../fuzz/corpus");
    for target in ["parse_packet", "parse_frame", "parse_cm_mad"] {
        let Ok(dir) = std::fs::read_dir(corpus.join(target)) else {
            continue;
        };
        for entry in dir {
            let data = std::fs::read(entry.expect("corpus entry").path()).expect("corpus file");
            match target {
                "parse_packet" => fuzzing::parse_packet(&data),
                "parse_cm_mad" => fuzzing::parse_cm_mad(&data),
                _ => fuzzing::parse_frame(&data),
            }
            inputs += 1;
        }
    }
    assert!(inputs > 1000, "only {inputs} inputs");
}

#[test]
fn psn_never_names_two_different_packets_in_a_capture_window() {
    // In rxe's own traffic, a retransmitted PSN carries the same opcode and length as the first
    // transmission: the invariant our requester must keep too.
    for path in pcaps("rxe") {
        let mut seen: BTreeMap<(String, u32, u32), (u8, usize)> = BTreeMap::new();
        for captured in frames(&path) {
            let frame = Frame::parse(captured.link, &captured.data).unwrap();
            let (Some(Ok(packet)), Some(ip)) = (frame.roce(), frame.ip) else {
                continue;
            };
            let packet: RocePacket<&[u8]> = packet;
            let bth = packet.bth();
            let key = (ip.src.to_string(), bth.dest_qp().value(), bth.psn().value());
            let value = (u8::from(bth.opcode()), packet.payload().len());
            let first = *seen.entry(key.clone()).or_insert(value);
            assert_eq!(first, value, "{}: {key:?}", path.display());
        }
    }
}
