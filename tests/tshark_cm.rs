//! Cross-check of the CM MADs with Wireshark's InfiniBand dissector, through tshark: one GSI
//! packet of each CM message (`roce_wire::mad::examples`: rping's service ID, a `cma_hdr` from
//! 198.18.0.1 to 198.18.0.12, a distinct value in every field) is written to a capture, and
//! every field tshark decodes must be the value our `Repr` holds. tshark must find nothing
//! malformed. Wireshark 4.0 has no MRA decoder: the MRA is compared through the MAD header and
//! the raw MAD data, as every message also is.
//!
//! tshark is installed by `.ci/run`. Where it is missing this test says loudly that it skipped;
//! under CI (`CI` set) a missing tshark is a failure, as in `tests/tshark.rs`.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use roce_wire::mad::cm::Message;
use roce_wire::mad::{HEADER_LEN, MAD_LEN, examples, gsi, req};
use roce_wire::{CmMad, Psn};

/// An expected value: a number (tshark prints it in decimal or 0x-hex) or tshark's text (IP
/// addresses, bytes as lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq)]
enum V {
    N(u64),
    S(String),
}

fn n(value: impl Into<u64>) -> V {
    V::N(value.into())
}

fn hex(bytes: &[u8]) -> V {
    V::S(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn ip(addr: IpAddr) -> V {
    V::S(addr.to_string())
}

/// What tshark must show for one MAD: the header, the raw data, and the message's fields.
fn expected(mad: &CmMad) -> Vec<(&'static str, V)> {
    let h = &mad.header;
    let mut bytes = [0; MAD_LEN];
    mad.emit(&mut bytes).unwrap();
    let mut out = vec![
        ("infiniband.mad.baseversion", n(h.base_version)),
        ("infiniband.mad.mgmtclass", n(h.mgmt_class)),
        ("infiniband.mad.classversion", n(h.class_version)),
        ("infiniband.mad.method", n(h.method)),
        ("infiniband.mad.status", n(h.status)),
        ("infiniband.mad.classspecific", n(h.class_specific)),
        ("infiniband.mad.transactionid", n(h.tid)),
        ("infiniband.mad.attributeid", n(h.attr_id)),
        ("infiniband.mad.attributemodifier", n(h.attr_mod)),
        ("infiniband.mad.data", hex(&bytes[HEADER_LEN..])),
    ];
    match &mad.message {
        Message::Req(m) => out.extend(req_fields(m)),
        Message::Rep(m) => out.extend([
            ("infiniband.cm.rep", n(m.local_comm_id)),
            ("infiniband.cm.rep.remotecommid", n(m.remote_comm_id)),
            ("infiniband.cm.rep.localqkey", n(m.local_qkey)),
            ("infiniband.cm.rep.localqpn", n(m.local_qpn.value())),
            ("infiniband.cm.rep.localeecn", n(m.local_eecn)),
            ("infiniband.cm.rep.startpsn", n(m.starting_psn.value())),
            ("infiniband.cm.rep.respres", n(m.responder_resources)),
            ("infiniband.cm.rep.initdepth", n(m.initiator_depth)),
            ("infiniband.cm.rep.tgtackdelay", n(m.target_ack_delay)),
            ("infiniband.cm.rep.failoveracc", n(m.failover_accepted)),
            (
                "infiniband.cm.rep.e2eflowctrl",
                n(m.end_to_end_flow_control),
            ),
            ("infiniband.cm.rep.rnrretrcount", n(m.rnr_retry_count)),
            ("infiniband.cm.rep.srq", n(m.srq)),
            ("infiniband.cm.rep.localcaguid", n(m.local_ca_guid)),
            ("infiniband.cm.rep.private", hex(&m.private_data)),
        ]),
        Message::Rtu(m) => out.extend([
            ("infiniband.cm.rtu.localcommid", n(m.local_comm_id)),
            ("infiniband.cm.rtu.remotecommid", n(m.remote_comm_id)),
            ("infiniband.cm.rtu.private", hex(&m.private_data)),
        ]),
        Message::Rej(m) => out.extend([
            ("infiniband.cm.rej.localcommid", n(m.local_comm_id)),
            ("infiniband.cm.rej.remotecommid", n(m.remote_comm_id)),
            ("infiniband.cm.rej.msgrej", n(m.message_rejected)),
            ("infiniband.cm.rej.rejinfolen", n(m.reject_info_length)),
            ("infiniband.cm.rej.reason", n(u16::from(m.reason))),
            ("infiniband.cm.rej.ari", hex(&m.ari)),
            ("infiniband.cm.rej.private", hex(&m.private_data)),
        ]),
        Message::Dreq(m) => out.extend([
            ("infiniband.cm.dreq.localcommid", n(m.local_comm_id)),
            ("infiniband.cm.dreq.remotecommid", n(m.remote_comm_id)),
            // Wireshark names the DREQ's Remote QPN/EECN under `req`.
            ("infiniband.cm.req.remoteqpneecn", n(m.remote_qpn.value())),
            ("infiniband.cm.dreq.private", hex(&m.private_data)),
        ]),
        Message::Drep(m) => out.extend([
            ("infiniband.cm.drsp.localcommid", n(m.local_comm_id)),
            ("infiniband.cm.drsp.remotecommid", n(m.remote_comm_id)),
            ("infiniband.cm.drsp.private", hex(&m.private_data)),
        ]),
        // No MRA nor SIDR decoder in Wireshark 4.0: the header and infiniband.mad.data cover
        // them.
        Message::Mra(_) | Message::SidrReq(_) | Message::SidrRep(_) => {}
    }
    out
}

fn req_fields(m: &req::Repr) -> Vec<(&'static str, V)> {
    let sid = m.service_id.to_be_bytes();
    let (p, a) = (&m.primary_path, &m.alternate_path);
    let cma = roce_wire::mad::cma::Repr::parse(
        &roce_wire::mad::cma::Packet::new_checked(&m.private_data[..]).unwrap(),
    )
    .unwrap();
    let cma_version = m.private_data[0];
    vec![
        ("infiniband.cm.req", n(m.local_comm_id)),
        ("infiniband.cm.req.serviceid", n(m.service_id)),
        ("infiniband.cm.req.serviceid.prefix", hex(&sid[..5])),
        ("infiniband.cm.req.serviceid.protocol", n(sid[5])),
        (
            "infiniband.cm.req.serviceid.dport",
            n(u16::from_be_bytes([sid[6], sid[7]])),
        ),
        ("infiniband.cm.req.localcaguid", n(m.local_ca_guid)),
        ("infiniband.cm.req.localqkey", n(m.local_qkey)),
        ("infiniband.cm.req.localqpn", n(m.local_qpn.value())),
        ("infiniband.cm.req.responderres", n(m.responder_resources)),
        ("infiniband.cm.req.localeecn", n(m.local_eecn)),
        ("infiniband.cm.req.initdepth", n(m.initiator_depth)),
        ("infiniband.cm.req.remoteeecn", n(m.remote_eecn)),
        (
            "infiniband.cm.req.remoteresptout",
            n(m.remote_cm_response_timeout),
        ),
        (
            "infiniband.cm.req.transpsvctype",
            n(m.transport_service_type),
        ),
        (
            "infiniband.cm.req.e2eflowctrl",
            n(m.end_to_end_flow_control),
        ),
        ("infiniband.cm.req.startpsn", n(m.starting_psn.value())),
        (
            "infiniband.cm.req.localresptout",
            n(m.local_cm_response_timeout),
        ),
        ("infiniband.cm.req.retrcount", n(m.retry_count)),
        ("infiniband.cm.req.pkey", n(m.partition_key)),
        ("infiniband.cm.req.pppmtu", n(m.path_mtu)),
        ("infiniband.cm.req.rdcexist", n(m.rdc_exists)),
        ("infiniband.cm.req.rnrretrcount", n(m.rnr_retry_count)),
        ("infiniband.cm.req.maxcmretr", n(m.max_cm_retries)),
        ("infiniband.cm.req.srq", n(m.srq)),
        (
            "infiniband.cm.req.ext_transport",
            n(m.extended_transport_type),
        ),
        ("infiniband.cm.req.prim_locallid", n(p.local_lid)),
        ("infiniband.cm.req.prim_remotelid", n(p.remote_lid)),
        // In an IPv4 frame Wireshark shows the ::ffff: GIDs as IPv4 addresses.
        (
            "infiniband.cm.req.prim_localgid_ipv4",
            ip(p.local_gid.to_ip()),
        ),
        (
            "infiniband.cm.req.prim_remotegid_ipv4",
            ip(p.remote_gid.to_ip()),
        ),
        // Wireshark 4.0 reads the 20-bit flow label from 3 bytes and the packet rate from the
        // word's first byte (packet-infiniband.c `parse_CM_Req`), not as Table 106 (and the
        // kernel's CM_REQ_PRIMARY_FLOW_LABEL / _PACKET_RATE) place them: what it shows is
        // what that reading gives of our bytes.
        ("infiniband.cm.req.prim_flowlabel", n(p.flow_label >> 8)),
        (
            "infiniband.cm.req.prim_pktrate",
            n((p.flow_label >> 12) & 0x3f),
        ),
        ("infiniband.cm.req.prim_tfcclass", n(p.traffic_class)),
        ("infiniband.cm.req.prim_hoplim", n(p.hop_limit)),
        ("infiniband.cm.req.prim_sl", n(p.sl)),
        ("infiniband.cm.req.prim_subnetlocal", n(p.subnet_local)),
        (
            "infiniband.cm.req.prim_localacktout",
            n(p.local_ack_timeout),
        ),
        ("infiniband.cm.req.alt_locallid", n(a.local_lid)),
        ("infiniband.cm.req.alt_remotelid", n(a.remote_lid)),
        ("infiniband.cm.req.alt_localgid", hex(&a.local_gid.0)),
        ("infiniband.cm.req.alt_remotegid", hex(&a.remote_gid.0)),
        ("infiniband.cm.req.alt_flowlabel", n(a.flow_label >> 8)),
        (
            "infiniband.cm.req.alt_pktrate",
            n((a.flow_label >> 12) & 0x3f),
        ),
        ("infiniband.cm.req.alt_tfcclass", n(a.traffic_class)),
        ("infiniband.cm.req.alt_hoplim", n(a.hop_limit)),
        ("infiniband.cm.req.alt_sl", n(a.sl)),
        ("infiniband.cm.req.alt_subnetlocal", n(a.subnet_local)),
        ("infiniband.cm.req.alt_localacktout", n(a.local_ack_timeout)),
        ("infiniband.cm.req.ip_cm.majv", n(cma_version >> 4)),
        ("infiniband.cm.req.ip_cm.minv", n(cma_version & 0xf)),
        ("infiniband.cm.req.ip_cm.ipv", n(cma.ip_version())),
        ("infiniband.cm.req.ip_cm.sport", n(cma.port)),
        ("infiniband.cm.req.ip_cm.sip4", ip(cma.src)),
        ("infiniband.cm.req.ip_cm.dip4", ip(cma.dst)),
        (
            "infiniband.cm.req.ip_cm.private",
            hex(&m.private_data[roce_wire::mad::cma::HEADER_LEN..]),
        ),
    ]
}

#[test]
fn tshark_decodes_every_cm_message_as_we_do() {
    if !roce_tests::tshark::available("tshark_decodes_every_cm_message_as_we_do") {
        return;
    }
    let mads = examples::all();
    let path = capture(&mads);
    let compared = compare(&path, &mads);
    // 10 header fields per MAD, and every field of the REQ, REP, REJ, RTU, DREQ and DREP.
    assert!(compared >= 130, "only {compared} fields compared");
    let _ = std::fs::remove_file(&path);
}

/// The CM MADs rxe's kernel CM and ours sent each other in the interop matrix's RDMA CM cells
/// (`pcap-fixtures/interop/rxe-vs-roce-cm.pcap`: rping, ucmatose, udaddy, perftest `-R` both
/// ways): we
/// parse every one, and tshark reads every field as we do.
#[test]
fn tshark_decodes_the_cm_messages_of_rxe_and_ours_as_we_do() {
    if !roce_tests::tshark::available("tshark_decodes_the_cm_messages_of_rxe_and_ours_as_we_do") {
        return;
    }
    let path = roce_tests::fixtures_dir().join("interop/rxe-vs-roce-cm.pcap");
    let mut mads = Vec::new();
    let mut senders = BTreeSet::new();
    for (n, captured) in roce_tests::frames(&path).iter().enumerate() {
        let at = format!("{} frame {}", path.display(), n + 1);
        let frame = roce_wire::frame::Frame::parse(captured.link, &captured.data).expect(&at);
        let packet = frame.roce().expect(&at).expect(&at);
        let mad = gsi::mad_of(&packet).unwrap_or_else(|| panic!("{at}: not a GSI packet"));
        let mad = CmMad::parse(mad).unwrap_or_else(|err| panic!("{at}: {err}"));
        let src = frame.ip.as_ref().expect(&at).src.to_string();
        senders.insert((src, mad.message.attr().name()));
        mads.push(mad);
    }
    // Both sides' REQ, REP, RTU, DREQ, DREP, SIDR_REQ and SIDR_REP, and rxe's REJ.
    for who in ["198.18.0.1", "198.18.0.12"] {
        for attr in ["REQ", "REP", "RTU", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP"] {
            assert!(
                senders.contains(&(who.to_owned(), attr)),
                "no {attr} from {who}: {senders:?}"
            );
        }
    }
    assert!(senders.contains(&("198.18.0.12".to_owned(), "REJ")));
    let compared = compare(&path, &mads);
    assert!(
        compared >= 20 * mads.len(),
        "only {compared} fields compared"
    );
}

/// Compares tshark's reading of the frames of `path` with `mads`, frame by frame; the number
/// of fields compared.
fn compare(path: &Path, mads: &[CmMad]) -> usize {
    let wanted: Vec<Vec<(&str, V)>> = mads.iter().map(expected).collect();
    let fields: Vec<&str> = wanted
        .iter()
        .flatten()
        .map(|(field, _)| *field)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rows = tshark_rows(path, &fields);
    assert_eq!(rows.len(), mads.len(), "frame count");
    let mut compared = 0;
    for ((mad, want), row) in mads.iter().zip(&wanted).zip(&rows) {
        let at = format!(
            "{} (frame of {})",
            mad.message.attr().name(),
            path.display()
        );
        for (field, value) in want {
            let cell = &row[fields.iter().position(|f| f == field).unwrap()];
            let got = match value {
                V::N(_) => roce_tests::tshark::number(cell).map(V::N),
                V::S(_) => (!cell.is_empty()).then(|| V::S(cell.clone())),
            };
            assert_eq!(
                got.as_ref(),
                Some(value),
                "{at}: {field}: tshark shows {cell:?}"
            );
            compared += 1;
        }
    }
    compared
}

/// The capture of `mads`, one GSI frame each from 198.18.0.1 to 198.18.0.12.
fn capture(mads: &[CmMad]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("roce-tshark-cm-{}.pcap", std::process::id()));
    let mut writer = roce_pcap::Writer::create(&path).unwrap();
    let src = "198.18.0.1:49152".parse().unwrap();
    let dst = "198.18.0.12:4791".parse().unwrap();
    for (i, mad) in mads.iter().enumerate() {
        let frame = gsi::frame(src, dst, Psn::new(i as u32), mad).unwrap();
        writer
            .write(Duration::from_millis(i as u64), &frame)
            .unwrap();
    }
    drop(writer.into_inner());
    path
}

/// tshark's cells for every frame; fails on any malformed frame or error-level expert info.
fn tshark_rows(path: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut command = Command::new("tshark");
    command
        .args(["-n", "-r"])
        .arg(path)
        .args(["-T", "fields", "-E", "occurrence=f"]);
    for field in fields
        .iter()
        .chain(&["_ws.malformed", "_ws.expert.severity"])
    {
        command.args(["-e", field]);
    }
    let output = command.output().expect("tshark runs");
    assert!(output.status.success(), "tshark failed: {output:?}");
    let text = String::from_utf8(output.stdout).expect("tshark prints UTF-8");
    text.lines()
        .map(|line| {
            let mut cells: Vec<String> = line.split('\t').map(str::to_owned).collect();
            cells.resize(fields.len() + 2, String::new());
            let severity = cells.pop().unwrap_or_default();
            let malformed = cells.pop().unwrap_or_default();
            assert!(malformed.is_empty(), "tshark: malformed: {line}");
            // Error-level expert info (8388608) means tshark found something wrong.
            assert!(!severity.contains("8388608"), "tshark error: {line}");
            cells
        })
        .collect()
}
