//! `roce dump` on a capture of the connection manager: each CM MAD in one line after the
//! transport part, and as a `cm` object in `--json`.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use roce_wire::mad::{examples, gsi};
use roce_wire::{CmMad, Psn};

/// A capture of `mads`, one GSI frame each from 198.18.0.1 to 198.18.0.12, then `extra` frames.
fn capture(name: &str, mads: &[CmMad], extra: &[Vec<u8>]) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("roce-dump-cm-{}-{name}.pcap", std::process::id()));
    let mut writer = roce_pcap::Writer::create(&path).unwrap();
    let src = "198.18.0.1:49152".parse().unwrap();
    let dst = "198.18.0.12:4791".parse().unwrap();
    let frames = mads
        .iter()
        .enumerate()
        .map(|(i, mad)| gsi::frame(src, dst, Psn::new(i as u32), mad).unwrap());
    for (i, frame) in frames.chain(extra.iter().cloned()).enumerate() {
        writer
            .write(Duration::from_millis(i as u64), &frame)
            .unwrap();
    }
    drop(writer.into_inner());
    path
}

fn dump(args: &[&str], path: &PathBuf) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_roce"))
        .arg("dump")
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn each_cm_message_is_one_line_after_the_transport_part() {
    let mads = examples::all();
    let path = capture("text", &mads, &[]);
    let text = dump(&["--strict"], &path);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), mads.len(), "{text}");
    for (line, mad) in lines.iter().zip(&mads) {
        assert!(
            line.contains(" UD_SEND_ONLY qp=0x000001 ")
                && line.contains(" deth(qkey=0x80010000 src_qp=0x000001) len=256 CM ")
                && line.ends_with(&format!(" {mad} icrc=ok")),
            "{line}"
        );
    }
    assert!(lines[0].contains(
        " CM REQ tid=0x11a2b3c4d lcid=0x1a2b3c4d sid=0x0000000001061c06 (RDMA TCP port 7174) \
         qpn=0x000011 psn=0x765432 mtu=1024 "
    ));
    assert!(lines[0].contains(" cma(198.18.0.1:47123 > 198.18.0.12:7174)"));
    assert!(lines[6].contains(" CM REJ ") && lines[6].contains(" reason=8 (invalid service ID)"));
    for (line, name) in lines.iter().zip([
        "REQ", "MRA", "REP", "RTU", "DREQ", "DREP", "REJ", "SIDR_REQ", "SIDR_REP",
    ]) {
        assert!(line.contains(&format!(" CM {name} tid=")), "{line}");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn json_carries_the_cm_fields() {
    let mads = examples::all();
    // A MAD of another class, and a CM MAD of an attribute without a decoder.
    let src = "198.18.0.1:49152".parse().unwrap();
    let dst = "198.18.0.12:4791".parse().unwrap();
    let mut other_class = gsi::frame(src, dst, Psn::new(9), &mads[3]).unwrap();
    let mad_at = other_class.len() - 4 - roce_wire::mad::MAD_LEN;
    other_class[mad_at + 1] = 0x04;
    let path = capture("json", &mads, &[other_class]);
    let text = dump(&["--json", "--no-icrc"], &path);
    let values: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), mads.len() + 1, "{text}");
    let req = &values[0]["cm"];
    assert_eq!(req["message"], "REQ");
    assert_eq!(req["tid"], "0x11a2b3c4d");
    assert_eq!(req["local_comm_id"], "0x1a2b3c4d");
    assert_eq!(req["service_id"], "0x0000000001061c06");
    assert_eq!(req["rdma_cm"]["port_space"], "TCP");
    assert_eq!(req["rdma_cm"]["port"], 7174);
    assert_eq!(req["local_qpn"], 0x11);
    assert_eq!(req["starting_psn"], 0x76_5432);
    assert_eq!(req["path_mtu"], 1024);
    assert_eq!(req["primary_path"]["local_gid"], "::ffff:198.18.0.1");
    assert_eq!(req["primary_path"]["flow_label"], 0x1_2345);
    assert_eq!(req["cma"]["src"], "198.18.0.1");
    assert_eq!(req["cma"]["dst"], "198.18.0.12");
    assert_eq!(req["cma"]["src_port"], 47123);
    assert_eq!(values[1]["cm"]["message"], "MRA");
    assert_eq!(values[1]["cm"]["service_timeout"], 24);
    assert_eq!(values[2]["cm"]["local_qpn"], 0x12);
    assert_eq!(values[2]["cm"]["attr_mod"], 1);
    assert_eq!(values[4]["cm"]["remote_qpn"], 0x12);
    let rej = &values[6]["cm"];
    assert_eq!(rej["message"], "REJ");
    assert_eq!(rej["reason"], 8);
    assert_eq!(rej["reason_text"], "invalid service ID");
    assert_eq!(rej["remote_comm_id"], "0x1a2b3c4d");
    let sidr_req = &values[7]["cm"];
    assert_eq!(sidr_req["message"], "SIDR_REQ");
    assert_eq!(sidr_req["service_id"], "0x0000000001111c06");
    assert_eq!(sidr_req["partition_key"], 0xffff);
    let sidr_rep = &values[8]["cm"];
    assert_eq!(sidr_rep["message"], "SIDR_REP");
    assert_eq!(
        (sidr_rep["status"].clone(), sidr_rep["qpn"].clone()),
        (0.into(), 0x34.into())
    );
    assert_eq!(sidr_rep["q_key"], "0x1234567");
    let other = &values[mads.len()];
    assert!(
        other["cm"]["error"]
            .as_str()
            .unwrap()
            .contains("class 0x04"),
        "{other}"
    );
    let _ = std::fs::remove_file(&path);
}
