//! `roce demo` as the README runs it: two NICs over UDP on loopback, every operation checked,
//! and a capture that `roce dump --strict` finds clean.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::roce;

/// `roce demo` with `args` (which ask for `--json`): it must succeed; its report.
fn demo_report(args: &[&str]) -> serde_json::Value {
    let output = roce(args);
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn demo_passes_its_checks_and_writes_a_clean_capture() {
    let dir = std::env::temp_dir().join(format!("roce-demo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("demo.pcap");
    let report = demo_report(&[
        "demo",
        "--a",
        "127.0.20.1",
        "--b",
        "127.0.20.2",
        "-n",
        "16",
        "--size",
        "8192",
        "--json",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert_eq!(report["ok"], true, "{report}");
    let ops: Vec<&str> = report["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["operation"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "SEND",
            "SEND_WITH_IMM",
            "RDMA_WRITE",
            "RDMA_WRITE_IMM",
            "RDMA_READ",
            "ATOMIC_CMP_SWP",
            "ATOMIC_FETCH_ADD"
        ]
    );
    let sent = report["packets_sent"].as_u64().unwrap();
    let dump = roce(&["dump", "--strict", "-q", pcap.to_str().unwrap()]);
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let lines = String::from_utf8(dump.stdout).unwrap().lines().count() as u64;
    assert_eq!(lines, sent, "the capture holds every packet both NICs sent");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn snaplen_cuts_every_packet_of_the_capture_and_keeps_its_length() {
    let dir = std::env::temp_dir().join(format!("roce-demo-snaplen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("demo.pcap");
    let report = demo_report(&[
        "demo",
        "--a",
        "127.0.41.1",
        "--b",
        "127.0.41.2",
        "-n",
        "2",
        "--size",
        "4096",
        "--json",
        "--pcap",
        pcap.to_str().unwrap(),
        "--snaplen",
        "128",
    ]);
    assert_eq!(report["ok"], true, "{report}");
    let bytes = std::fs::read(&pcap).unwrap();
    // The file header's snap length, in the byte order of its magic number.
    let field: [u8; 4] = bytes[16..20].try_into().unwrap();
    let snaplen =
        if bytes[..4] == [0xa1, 0xb2, 0x3c, 0x4d] || bytes[..4] == [0xa1, 0xb2, 0xc3, 0xd4] {
            u32::from_be_bytes(field)
        } else {
            u32::from_le_bytes(field)
        };
    assert_eq!(snaplen, 128);
    let frames: Vec<_> = roce_pcap::Capture::open(&pcap)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        frames.len() as u64,
        report["packets_sent"].as_u64().unwrap()
    );
    assert!(
        frames
            .iter()
            .all(|f| f.data.len() == (f.orig_len as usize).min(128))
    );
    let cut = frames.iter().filter(|f| f.orig_len > 128).count();
    assert!(cut > 0);
    // roce dump decodes them, checks no ICRC it cannot, and finds nothing wrong.
    let dump = roce(&["dump", "--strict", pcap.to_str().unwrap()]);
    assert!(dump.status.success(), "{dump:?}");
    let stderr = String::from_utf8(dump.stderr).unwrap();
    assert!(
        stderr.contains(&format!(" 0 bad ICRCs, {cut} cut short by the capture")),
        "{stderr}"
    );
    let text = String::from_utf8(dump.stdout).unwrap();
    assert_eq!(text.matches("(cut short by the capture: ").count(), cut);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn demo_with_loss_recovers_and_shows_retransmissions() {
    let report = demo_report(&[
        "demo",
        "--a",
        "127.0.21.1",
        "--b",
        "127.0.21.2",
        "-n",
        "16",
        "--size",
        "16384",
        "--loss",
        "0.05",
        "--json",
        "--no-pcap",
    ]);
    assert_eq!(report["ok"], true, "{report}");
    let retransmits: u64 = report["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["retransmitted_packets"].as_u64().unwrap())
        .sum();
    assert!(
        retransmits > 0,
        "5 % loss and nothing retransmitted: {report}"
    );
    // RDMA READ: lost responses are sent again by b, the responder; they count with the
    // requests a sent again.
    let read = report["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "RDMA_READ")
        .unwrap();
    let requests = read["retransmitted_requests"].as_u64().unwrap();
    let responses = read["resent_responses"].as_u64().unwrap();
    assert!(responses > 0, "no READ response sent again: {read}");
    assert_eq!(
        read["retransmitted_packets"],
        requests + responses,
        "{read}"
    );
    // Every row adds up; SENDs' and WRITEs' ACKs are not counted.
    for o in report["operations"].as_array().unwrap() {
        let (requests, responses) = (
            o["retransmitted_requests"].as_u64().unwrap(),
            o["resent_responses"].as_u64().unwrap(),
        );
        assert_eq!(o["retransmitted_packets"], requests + responses, "{o}");
        let name = o["operation"].as_str().unwrap();
        if name.starts_with("SEND") || name.starts_with("RDMA_WRITE") {
            assert_eq!(responses, 0, "{o}");
        }
    }
}

/// Without loss the READ responses and atomic ACKs b sends are exactly the ones asked for
/// (5000-byte READs at MTU 1024: 5 packets each, the last short), so none is counted as sent
/// again.
#[test]
fn demo_without_loss_counts_no_read_response_resent() {
    let report = demo_report(&[
        "demo",
        "--a",
        "127.0.23.1",
        "--b",
        "127.0.23.2",
        "-n",
        "8",
        "--size",
        "5000",
        "--json",
        "--no-pcap",
    ]);
    for o in report["operations"].as_array().unwrap() {
        // A request sent again (a timeout on a loaded machine) may be answered again.
        if o["retransmitted_requests"] == 0 {
            assert_eq!(o["resent_responses"], 0, "{o}");
        }
    }
}

#[test]
fn demo_explains_a_taken_address() {
    let hold = std::net::UdpSocket::bind("127.0.22.1:4791").unwrap();
    let output = roce(&[
        "demo",
        "--a",
        "127.0.22.1",
        "--b",
        "127.0.22.2",
        "--no-pcap",
    ]);
    drop(hold);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("cannot bind UDP 127.0.22.1:4791"),
        "{stderr}"
    );
}

/// Issue 11 (hardening), item 8: `--size 2147483648` aborted the process trying to allocate
/// 256 GiB. It is refused, with the sizes, before a socket is bound or a byte allocated.
#[test]
fn issue_11_demo_refuses_regions_larger_than_the_machine_before_allocating() {
    let output = roce(&[
        "demo",
        "--a",
        "127.0.23.1",
        "--b",
        "127.0.23.2",
        "--size",
        "2147483648",
        "--no-pcap",
    ]);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("256 GiB"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing ran");
    // Nothing was bound: the addresses are free.
    std::net::UdpSocket::bind("127.0.23.1:4791").unwrap();
    let output = roce(&["demo", "--size", "4294967295", "--no-pcap"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8(output.stderr).unwrap().contains("2^31"));
}
