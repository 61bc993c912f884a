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
        "--ip-a",
        "127.0.20.1",
        "--ip-b",
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
        "--ip-a",
        "127.0.41.1",
        "--ip-b",
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
        "--ip-a",
        "127.0.21.1",
        "--ip-b",
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
        "--ip-a",
        "127.0.28.1",
        "--ip-b",
        "127.0.28.2",
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
        "--ip-a",
        "127.0.22.1",
        "--ip-b",
        "127.0.22.2",
        "--no-pcap",
    ]);
    drop(hold);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("cannot bind UDP 127.0.22.1:4791: in use"),
        "{stderr}"
    );
    assert!(
        stderr.contains("another loopback address with --ip-a"),
        "{stderr}"
    );
    assert!(!stderr.contains("not an address"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing ran");
}

/// An address this host does not have is named as such, not as one in use.
#[test]
fn demo_names_an_address_this_host_lacks() {
    let output = roce(&[
        "demo",
        "--ip-a",
        "198.18.9.9",
        "--ip-b",
        "127.0.24.2",
        "--no-pcap",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("198.18.9.9 is not an address of this host"),
        "{stderr}"
    );
    assert!(
        stderr.contains("give --ip-a one of this host's addresses"),
        "{stderr}"
    );
    assert!(!stderr.contains("in use"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing ran");
}

/// A negative number is a value that the range check refuses, not an option clap cannot find,
/// and a mistyped option is not "corrected" to a one-letter one.
#[test]
fn demo_reads_a_negative_loss_as_a_value_and_hints_real_options() {
    let output = roce(&["demo", "--loss", "-0.1", "--no-pcap"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("--loss -0.1: a fraction from 0 up to (not including) 1"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "nothing ran");
    let output = roce(&["demo", "--bogus"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("unexpected argument '--bogus'"), "{stderr}");
    assert!(!stderr.contains("'--b'"), "{stderr}");
    assert!(!stderr.contains("'--a'"), "{stderr}");
}

/// Issue 11 (hardening), item 8: `--size 2147483648` aborted the process trying to allocate
/// 256 GiB. It is refused, with the sizes, before a socket is bound or a byte allocated.
#[test]
fn issue_11_demo_refuses_regions_larger_than_the_machine_before_allocating() {
    let output = roce(&[
        "demo",
        "--ip-a",
        "127.0.23.1",
        "--ip-b",
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

/// Ctrl-C in the middle of an operation (SEND, under so much loss that it cannot end) keeps
/// what was done: the run says where it stopped, prints its table, exits 130, and the capture
/// holds the packets sent until then, every one whole.
#[test]
fn ctrl_c_keeps_the_table_and_the_capture() {
    let dir = std::env::temp_dir().join(format!("roce-demo-int-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("demo.pcap");
    let child = common::spawn(&[
        "demo",
        "--ip-a",
        "127.0.25.1",
        "--ip-b",
        "127.0.25.2",
        "-n",
        "64",
        "--size",
        "1048576",
        "--loss",
        "0.5",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    // Packets are being captured: the run is in its first operation.
    let begun = std::time::Instant::now();
    while std::fs::metadata(&pcap).map_or(0, |m| m.len()) < 10_000 {
        assert!(begun.elapsed().as_secs() < 60, "no packet captured");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    common::interrupt(&child);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("roce demo: interrupted during SEND;"),
        "{stderr}"
    );
    assert!(
        stdout.starts_with("roce demo: two NICs over UDP"),
        "{stdout}"
    );
    assert!(stdout.contains("capture: "), "{stdout}");
    let dump = roce(&["dump", "--strict", "-q", pcap.to_str().unwrap()]);
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert!(String::from_utf8(dump.stdout).unwrap().lines().count() > 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Retransmitted packets of one operation in a demo report.
fn retransmits_of(report: &serde_json::Value, operation: &str) -> u64 {
    report["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == operation)
        .unwrap()["retransmitted_packets"]
        .as_u64()
        .unwrap()
}

/// `--loss-recovery selective-repeat`: every operation still lands checked, and a WRITE sends
/// again about what was lost, where go-back-N sends again everything after each loss.
#[test]
fn demo_with_selective_repeat_sends_again_only_what_was_lost() {
    let run = |how: &str, a: &str, b: &str| {
        demo_report(&[
            "demo",
            "--ip-a",
            a,
            "--ip-b",
            b,
            "-n",
            "16",
            "--size",
            "65536",
            "--loss",
            "0.02",
            "--loss-recovery",
            how,
            "--json",
            "--no-pcap",
        ])
    };
    let gbn = run("go-back-n", "127.0.27.1", "127.0.27.2");
    let sr = run("selective-repeat", "127.0.27.3", "127.0.27.4");
    for report in [&gbn, &sr] {
        assert_eq!(report["ok"], true, "{report}");
    }
    assert_eq!(
        (&gbn["loss_recovery"], &sr["loss_recovery"]),
        (&"go-back-n".into(), &"selective-repeat".into())
    );
    // 1 024 WRITE packets at 2 % loss: go-back-N sends again the window behind each of the
    // ~20 losses (thousands), selective repeat about the lost ones.
    let (g, s) = (
        retransmits_of(&gbn, "RDMA_WRITE"),
        retransmits_of(&sr, "RDMA_WRITE"),
    );
    assert!(s > 0 && s * 4 < g, "selective repeat {s}, go-back-N {g}");
}

#[test]
fn an_unknown_loss_recovery_is_refused_with_the_choices() {
    let output = roce(&["demo", "--loss-recovery", "sack", "--no-pcap"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("go-back-n") && err.contains("selective-repeat"),
        "{err}"
    );
    assert!(output.stdout.is_empty(), "nothing ran: {output:?}");
}
