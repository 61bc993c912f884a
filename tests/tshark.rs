//! Cross-check with a second, independent decoder: Wireshark's InfiniBand dissector, through
//! tshark. For every frame of every valid fixture, the fields both decoders see must agree, and
//! tshark must find nothing malformed. The ICRC that tshark shows (it does not check it) must be
//! the one our parser reads.
//!
//! tshark is installed by `.ci/run`. Where it is missing this test says loudly that it skipped;
//! under CI (`CI` set) a missing tshark is a failure, so the cross-check cannot silently vanish.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::path::Path;
use std::process::Command;

use roce_tests::{frames, pcaps};
use roce_wire::frame::Frame;
use roce_wire::{Opcode, RocePacket, Syndrome};

/// The tshark fields compared, in output order.
const FIELDS: [&str; 15] = [
    "frame.number",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.bth.padcnt",
    "infiniband.bth.p_key",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.invariant.crc",
];

#[test]
fn tshark_decodes_every_fixture_as_we_do() {
    if !roce_tests::tshark::available("tshark_decodes_every_fixture_as_we_do") {
        return;
    }
    let mut compared = 0;
    for sub in ["rxe", "vectors", "interop"] {
        for path in pcaps(sub) {
            compared += cross_check(&path);
        }
    }
    assert!(compared > 5000, "only {compared} packets compared");
}

/// Compares one capture frame by frame; returns how many RoCE packets were compared.
fn cross_check(path: &Path) -> usize {
    let rows = tshark_rows(path);
    let ours = frames(path);
    assert_eq!(rows.len(), ours.len(), "{}: frame count", path.display());
    let mut compared = 0;
    for (n, (row, captured)) in rows.iter().zip(&ours).enumerate() {
        let at = format!("{} frame {}", path.display(), n + 1);
        assert_eq!(row[0], Some((n + 1) as u64), "{at}");
        assert!(row.len() == FIELDS.len(), "{at}: {row:?}");
        let frame = Frame::parse(captured.link, &captured.data).expect(&at);
        let Some(packet) = frame.roce() else {
            assert_eq!(row[1], None, "{at}: tshark sees a BTH we do not");
            continue;
        };
        let packet: RocePacket<&[u8]> = packet.expect(&at);
        let bth = packet.bth();
        let mut expected: Vec<Option<u64>> = vec![
            Some((n + 1) as u64),
            Some(u8::from(bth.opcode()).into()),
            Some(bth.dest_qp().value().into()),
            Some(bth.psn().value().into()),
            Some(bth.ack_req().into()),
            Some(bth.pad_count().into()),
            Some(bth.pkey().into()),
        ];
        let reth = packet.reth();
        expected.push(reth.map(|r| r.va()));
        expected.push(reth.map(|r| r.rkey().into()));
        expected.push(reth.map(|r| r.dma_len().into()));
        let aeth = packet.aeth();
        expected.push(aeth.map(|a| a.syndrome_raw().into()));
        expected.push(aeth.map(|a| a.msn().into()));
        let deth = packet.deth();
        expected.push(deth.map(|d| d.qkey().into()));
        expected.push(deth.map(|d| d.src_qp().value().into()));
        // tshark shows the ICRC bytes read big-endian; the ICRC is sent little-endian.
        expected.push(Some(packet.icrc().swap_bytes().into()));
        if bth.opcode() == Opcode::Cnp && row[FIELDS.len() - 1].is_none() {
            // Wireshark 4.0 does not know opcode 0x81 and stops after the BTH.
            expected[FIELDS.len() - 1] = None;
        }
        assert_eq!(
            row, &expected,
            "{at}: tshark and roce-wire disagree\nfields: {FIELDS:?}"
        );
        if let Some(aeth) = aeth {
            // The decoded syndrome agrees with tshark's raw byte.
            assert_eq!(u8::from(aeth.syndrome()), aeth.syndrome_raw());
            assert!(!matches!(aeth.syndrome(), Syndrome::Reserved(_)), "{at}");
        }
        compared += 1;
    }
    compared
}

/// tshark's fields for every frame of a capture, as numbers; fails on any malformed frame.
fn tshark_rows(path: &Path) -> Vec<Vec<Option<u64>>> {
    let mut command = Command::new("tshark");
    command
        .args(["-n", "-r"])
        .arg(path)
        .args(["-T", "fields", "-E", "occurrence=f"]);
    for field in FIELDS
        .iter()
        .chain(&["_ws.malformed", "_ws.expert.severity"])
    {
        command.args(["-e", field]);
    }
    let output = command.output().expect("tshark runs");
    assert!(
        output.status.success(),
        "tshark failed on {}: {output:?}",
        path.display()
    );
    let text = String::from_utf8(output.stdout).expect("tshark prints UTF-8");
    text.lines()
        .map(|line| {
            let mut cells: Vec<&str> = line.split('\t').collect();
            cells.resize(FIELDS.len() + 2, "");
            let severity = cells.pop().unwrap_or_default();
            let malformed = cells.pop().unwrap_or_default();
            assert!(
                malformed.is_empty(),
                "{}: tshark: malformed: {line}",
                path.display()
            );
            // Error-level expert info (8388608) means tshark found something wrong in the frame.
            assert!(
                !severity.contains("8388608"),
                "{}: tshark error: {line}",
                path.display()
            );
            cells
                .iter()
                .map(|cell| roce_tests::tshark::number(cell))
                .collect()
        })
        .collect()
}
