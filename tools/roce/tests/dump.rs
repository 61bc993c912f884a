//! `roce dump` as a user runs it: the golden text of every fixture, `--strict` exit codes, JSON
//! output, filtering and errors. `ROCE_BLESS=1` rewrites the golden `.txt` files.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;

fn fixtures(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcap-fixtures")
        .join(sub);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn roce(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

/// Each line of `text` as the JSON value it must be.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn every_fixture_prints_its_golden_text() {
    let bless = std::env::var_os("ROCE_BLESS").is_some_and(|v| v == "1");
    for sub in ["rxe", "vectors", "interop", "loopback", "malformed"] {
        for pcap in fixtures(sub) {
            let output = roce(&["dump"], &pcap);
            assert!(output.status.success(), "{}: {output:?}", pcap.display());
            let golden = pcap.with_extension("txt");
            if bless {
                std::fs::write(&golden, &output.stdout).unwrap();
                continue;
            }
            let expected = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e} (ROCE_BLESS=1 writes it)", golden.display()));
            assert_eq!(
                stdout(&output),
                expected,
                "{} differs from its golden text",
                pcap.display()
            );
        }
    }
}

#[test]
fn strict_is_clean_on_valid_captures_and_fails_on_each_malformed_one() {
    for sub in ["rxe", "vectors", "interop", "loopback"] {
        for pcap in fixtures(sub) {
            let output = roce(&["dump", "--strict", "-q"], &pcap);
            assert_eq!(
                output.status.code(),
                Some(0),
                "{}: {output:?}",
                pcap.display()
            );
        }
    }
    for pcap in fixtures("malformed") {
        let output = roce(&["dump", "--strict"], &pcap);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{}: {output:?}",
            pcap.display()
        );
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains("--strict: 1 problems"),
            "{}: {stderr}",
            pcap.display()
        );
    }
}

#[test]
fn text_lines_name_the_headers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pcap-fixtures/rxe");
    let read = stdout(&roce(&["dump", "-q"], &dir.join("mtu1500-read_bw.pcap")));
    let first = read.lines().next().unwrap();
    assert_eq!(
        first,
        "0.086187 198.18.0.12:49681 > 198.18.0.11:4791 RC_RDMA_READ_REQUEST qp=0x000017 \
         psn=0x920946 ack_req reth(va=0x7f72b0852000 rkey=0x854 len=65536) len=0 icrc=ok"
    );
    let malformed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pcap-fixtures/malformed");
    let bad = stdout(&roce(&["dump"], &malformed.join("bad-icrc.pcap")));
    assert!(bad.trim_end().ends_with("icrc=BAD"), "{bad}");
    let unchecked = stdout(&roce(
        &["dump", "--no-icrc"],
        &malformed.join("bad-icrc.pcap"),
    ));
    assert!(
        unchecked.trim_end().ends_with("icrc=unchecked"),
        "{unchecked}"
    );
    let tver = stdout(&roce(&["dump"], &malformed.join("bad-tver.pcap")));
    assert!(
        tver.contains("RoCE malformed: transport version 1, expected 0"),
        "{tver}"
    );
}

#[test]
fn json_is_one_object_per_frame() {
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcap-fixtures/rxe/mtu1500-rc_s64_m1024.pcap");
    let all = stdout(&roce(&["dump", "--json"], &pcap));
    let values = json_lines(&all);
    assert_eq!(values.len(), 53);
    let roce_only = stdout(&roce(&["dump", "--json", "-q"], &pcap));
    let roce_values = json_lines(&roce_only);
    assert_eq!(roce_values.len(), 40);
    let ack = roce_values
        .iter()
        .find(|v| v["roce"]["opcode"] == "RC_ACKNOWLEDGE")
        .unwrap();
    assert_eq!(ack["roce"]["aeth"]["type"], "ACK");
    assert_eq!(ack["roce"]["aeth"]["credits"], serde_json::Value::Null);
    assert_eq!(ack["icrc"], "ok");
    assert_eq!(ack["dst_port"], 4791);
    let first_frames = stdout(&roce(&["dump", "--json", "-c", "3"], &pcap));
    assert_eq!(first_frames.lines().count(), 3);
}

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcap-fixtures")
        .join(path)
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// `output`'s standard error says `text`.
#[track_caller]
fn assert_stderr_has(output: &Output, text: &str) {
    let err = stderr(output);
    assert!(err.contains(text), "{err}");
}

/// A scratch file of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!("roce-dump-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        Self(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `roce dump ARGS -` with `input` written into a pipe.
fn roce_stdin(args: &[&str], input: Vec<u8>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // Small writes, so that the reader sees short reads.
        for chunk in input.chunks(1000) {
            if pipe.write_all(chunk).is_err() {
                break;
            }
        }
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

#[test]
fn gso_batches_captured_on_lo_print_as_the_segments_the_kernel_sends() {
    let pcap = fixture("loopback/lo-demo.pcap");
    let output = roce(&["dump"], &pcap);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(!text.contains("icrc=BAD"), "{text}");
    let segments: Vec<_> = text.lines().filter(|l| l.contains(" gso ")).collect();
    assert_eq!(segments.len(), 74, "{text}");
    // A WRITE_FIRST (16 bytes of RETH longer than what follows) leads a batch of two.
    assert!(
        text.lines()
            .any(|l| l.contains("RC_RDMA_WRITE_FIRST") && l.ends_with("len=1024 icrc=ok gso 1/2")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("RC_SEND_LAST ") && l.ends_with("icrc=ok gso 8/8")),
        "{text}"
    );
    assert_stderr_has(
        &output,
        "40 frames, 98 RoCE: 0 malformed frames, 0 malformed RoCE packets, 0 bad ICRCs, \
         16 GSO batches of 74 segments in all",
    );

    let json = stdout(&roce(&["dump", "--json"], &pcap));
    let values = json_lines(&json);
    assert_eq!(values.len(), 98);
    let first: Vec<_> = values.iter().filter(|v| v["frame"] == 1).collect();
    assert_eq!(first.len(), 8);
    for (i, value) in first.iter().enumerate() {
        assert_eq!(value["gso"]["segment"], i + 1);
        assert_eq!(value["gso"]["segments"], 8);
        assert_eq!(value["gso"]["segment_size"], 1040);
        assert_eq!(
            value["ip_id"], i,
            "the kernel numbers segments 0, 1, 2, ..."
        );
        assert_eq!(value["udp_len"], 1040);
        assert_eq!(value["icrc"], "ok");
        assert_eq!(value["roce"]["psn"], 0x1000 + i);
    }
    let ack = values.iter().find(|v| v["frame"] == 2).unwrap();
    assert_eq!(ack["gso"], serde_json::Value::Null);

    // One bit flipped in the last packet of the first batch: still cut, that packet BAD.
    let mut bytes = std::fs::read(&pcap).unwrap();
    let first_frame_end = 24 + 16 + 14 + 20 + 8 + 8 * 1040;
    bytes[first_frame_end - 100] ^= 1;
    let damaged = Scratch::new("damaged.pcap", &bytes);
    let output = roce(&["dump", "--strict"], &damaged.0);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stdout(&output);
    let bad: Vec<_> = text.lines().filter(|l| l.contains("icrc=BAD")).collect();
    assert_eq!(bad.len(), 1, "{text}");
    assert!(
        bad[0].ends_with("RC_SEND_LAST qp=0x000011 psn=0x001007 ack_req len=1024 icrc=BAD gso 8/8"),
        "{text}"
    );
    assert_stderr_has(&output, " 1 bad ICRCs, 16 GSO batches of 74 segments");
}

#[test]
fn cooked_captures_of_loopback_decode_like_the_ethernet_one() {
    let without_time = |file: &str| -> Vec<String> {
        let output = roce(&["dump", "--strict"], &fixture(file));
        assert_eq!(output.status.code(), Some(0), "{file}: {output:?}");
        let text = stdout(&output);
        assert!(!text.contains("malformed"), "{file}: {text}");
        text.lines()
            .map(|l| l.split_once(' ').unwrap().1.to_owned())
            .collect()
    };
    let lo = without_time("loopback/lo-demo.pcap");
    assert_eq!(lo.len(), 98);
    assert_eq!(without_time("loopback/any-sll-demo.pcap"), lo);
    assert_eq!(without_time("loopback/any-sll2-demo.pcap"), lo);
}

#[test]
fn standard_input_is_read_as_a_stream() {
    let pcap = fixture("loopback/any-sll-demo.pcap");
    let from_file = roce(&["dump"], &pcap);
    let from_pipe = roce_stdin(&["dump"], std::fs::read(&pcap).unwrap());
    assert_eq!(from_pipe.status.code(), Some(0), "{from_pipe:?}");
    assert_eq!(stdout(&from_pipe), stdout(&from_file));
    assert_eq!(stderr(&from_pipe), stderr(&from_file));

    let empty = roce_stdin(&["dump"], Vec::new());
    assert_eq!(empty.status.code(), Some(2));
    assert_stderr_has(&empty, "cannot read standard input: the file is empty");
}

#[test]
fn count_counts_printed_lines_after_quiet() {
    // The capture starts with ARP and the TCP exchange: -c counted frames read, and printed
    // nothing with -q.
    let pcap = fixture("rxe/mtu1500-rc_s64_m1024.pcap");
    let output = roce(&["dump", "-q", "-c", "3"], &pcap);
    let text = stdout(&output);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().all(|l| l.contains(" RC_")), "{text}");
    // Each segment of a batch is a line.
    let output = roce(&["dump", "-c", "3"], &fixture("loopback/lo-demo.pcap"));
    let text = stdout(&output);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().last().unwrap().ends_with("gso 3/8"), "{text}");
    let json = stdout(&roce(&["dump", "--json", "-q", "-c", "5"], &pcap));
    assert_eq!(json.lines().count(), 5);
}

#[test]
fn a_file_cut_short_ends_with_the_summary() {
    let bytes = std::fs::read(fixture("rxe/mtu1500-rc_s64_m1024.pcap")).unwrap();
    let whole = roce(&["dump"], &fixture("rxe/mtu1500-rc_s64_m1024.pcap"));
    let cut = Scratch::new("cut.pcap", &bytes[..bytes.len() - 30]);
    let output = roce(&["dump"], &cut.0);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    // Every frame but the last, as the whole file prints them.
    let expected: Vec<_> = stdout(&whole).lines().map(str::to_owned).collect();
    let got: Vec<_> = text.lines().map(str::to_owned).collect();
    assert_eq!(got, expected[..expected.len() - 1]);
    let summary = stderr(&output);
    assert!(
        summary.starts_with("roce dump: 52 frames")
            && summary.contains("cut short in the middle of a packet"),
        "{summary}"
    );
    let strict = roce(&["dump", "--strict"], &cut.0);
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    assert_stderr_has(&strict, "--strict: 1 problems");

    let empty = Scratch::new("empty.pcap", &[]);
    let output = roce(&["dump"], &empty.0);
    assert_eq!(output.status.code(), Some(2));
    assert!(stdout(&output).is_empty());
    assert_stderr_has(&output, "the file is empty");
}

#[test]
fn strict_fails_on_a_capture_without_roce() {
    // The first two frames of an rxe capture (ARP), as a capture of their own: the 24-byte
    // pcap header, then records of a 16-byte header and the frame (lengths little-endian).
    let bytes = std::fs::read(fixture("rxe/mtu1500-rc_s64_m1024.pcap")).unwrap();
    let mut end = 24;
    for _ in 0..2 {
        let len = u32::from_le_bytes(bytes[end + 8..end + 12].try_into().unwrap()) as usize;
        end += 16 + len;
    }
    let arp = Scratch::new("arp.pcap", &bytes[..end]);
    let plain = roce(&["dump"], &arp.0);
    assert_eq!(plain.status.code(), Some(0), "{plain:?}");
    assert_eq!(stdout(&plain).lines().count(), 2);
    let strict = roce(&["dump", "--strict"], &arp.0);
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    assert_eq!(stdout(&strict).lines().count(), 2);
    assert_stderr_has(&strict, "--strict: no RoCE packet");
}

#[test]
fn unreadable_files_are_a_clear_error() {
    let output = roce(&["dump"], Path::new("/nonexistent/capture.pcap"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr.trim_end(),
        "roce: error: cannot read /nonexistent/capture.pcap: No such file or directory (os error 2)",
        "the cause is told once"
    );
    let output = roce(
        &["dump"],
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("Cargo.toml")
            .as_path(),
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("not a readable pcap or pcapng capture"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("Invalid field value").count(), 1, "{stderr}");
}

/// Two NICs over the simulator, with a QP on each connected to the other, whose links write
/// into one capture.
struct Sim {
    pair: roce_sim::Pair,
    capture: roce_sim::Capture,
    file: Scratch,
    a_qp: roce_core::Qpn,
    b_qp: roce_core::Qpn,
}

impl Sim {
    fn new(name: &str, config: &roce_sim::PairConfig) -> Self {
        use roce_core::{Psn, QpInit};
        use roce_sim::{A_ADDR, B_ADDR, Pair};

        let path = std::env::temp_dir().join(format!("roce-dump-{}-{name}", std::process::id()));
        let file = Scratch(path);
        let capture = roce_sim::Capture::create(&file.0).unwrap();
        let mut pair = Pair::connected(config);
        // The pair's QPs have one number (0x11) on both NICs: connect a new one on a to a
        // second new one on b, so that the two directions go to different QPs.
        let new_qp = |side: &mut roce_sim::Side| {
            let init = QpInit::new(config.qp_type, side.pd, side.cq, config.queue_depth);
            side.nic.create_qp(&init).unwrap()
        };
        let a_qp = new_qp(&mut pair.a);
        new_qp(&mut pair.b);
        let b_qp = new_qp(&mut pair.b);
        let (a_psn, b_psn) = (Psn::new(0), Psn::new(0x80_0000));
        let a = (A_ADDR, a_qp);
        let b = (B_ADDR, b_qp);
        roce_sim::connect(config, &mut pair.a.nic, a_qp, A_ADDR, b, b_psn, a_psn, 0);
        roce_sim::connect(config, &mut pair.b.nic, b_qp, B_ADDR, a, a_psn, b_psn, 0);
        pair.a_to_b.capture(capture.clone());
        pair.b_to_a.capture(capture.clone());
        Self {
            pair,
            capture,
            file,
            a_qp,
            b_qp,
        }
    }

    /// Posts on a's QP an operation of `len` bytes from the start of a's region (to the start
    /// of b's, for a WRITE).
    fn post(
        &mut self,
        wr_id: u64,
        op: impl FnOnce(roce_core::Remote) -> roce_core::SendOp,
        len: u32,
    ) {
        let pair = &mut self.pair;
        let remote = roce_core::Remote {
            addr: pair.b.mr.addr(),
            rkey: pair.b.mr.rkey(),
        };
        let sge = roce_core::Sge {
            addr: pair.a.mr.addr(),
            length: len,
            lkey: pair.a.mr.lkey(),
        };
        let wr = roce_core::SendWr::new(wr_id, op(remote), vec![sge]);
        pair.a.nic.post_send(self.a_qp, wr).unwrap();
    }

    /// Runs `millis` more milliseconds of simulated time.
    fn run(&mut self, millis: u64) {
        let deadline = self.pair.now + roce_core::Duration::from_millis(millis);
        self.pair.drive_until(deadline);
    }

    /// The capture, flushed.
    fn file(&self) -> &Path {
        self.capture.flush().unwrap();
        &self.file.0
    }

    /// `roce dump --summary --json`: the row of a's requests (to b's QP), and of b's responses.
    fn summary(&self) -> (serde_json::Value, serde_json::Value) {
        let output = roce(&["dump", "--summary", "--json"], self.file());
        assert!(output.status.success(), "{output:?}");
        let rows = json_lines(&stdout(&output));
        assert_eq!(rows.len(), 2, "{rows:?}");
        let row = |qp: roce_core::Qpn| {
            rows.iter()
                .find(|r| r["dest_qp"] == qp.value())
                .unwrap()
                .clone()
        };
        (row(self.b_qp), row(self.a_qp))
    }
}

/// A capture of two RDMA WRITEs of four packets each from a to b over the simulator: the first
/// loses its PSN 2 (b NAKs it, a goes back to it), the second its last packet, PSN 7 (nothing
/// tells a but its timer, and it goes back to 4). Returns the capture and what a put on its link
/// (PSNs in order, dropped ones included), a's QPN and b's QPN (which differ: b has a QP more).
fn go_back_n_capture(name: &str) -> (Scratch, Vec<u32>, u32, u32) {
    let mut sim = Sim::new(name, &roce_sim::PairConfig::default());
    for (wr_id, lost) in [(1, 2), (2, 7)] {
        sim.pair.a_to_b.fail(roce_sim::Fault::DropPsn {
            psn: roce_core::Psn::new(lost),
            times: 1,
        });
        sim.post(wr_id, roce_core::SendOp::RdmaWrite, 4 * 1024);
        sim.run(5);
        assert!(sim.pair.a.completion().is_some(), "WRITE {wr_id} completes");
    }
    sim.file();
    let sent = sim.pair.a_to_b.sent_psns();
    let (a_qp, b_qp) = (sim.a_qp.value(), sim.b_qp.value());
    let Sim { file, .. } = sim;
    (file, sent, a_qp, b_qp)
}

#[test]
fn summary_counts_rnr_naks_and_the_resends_they_cause() {
    let mut sim = Sim::new("rnr.pcap", &roce_sim::PairConfig::default());
    // A SEND that finds no receive WQE at b until 1 ms on: b answers RNR NAKs, a sends again
    // after each RNR timer.
    sim.post(1, |_| roce_core::SendOp::Send, 64);
    sim.run(1);
    let recv = roce_core::RecvWr {
        wr_id: 7,
        sgl: [roce_core::Sge {
            addr: sim.pair.b.mr.addr(),
            length: 64,
            lkey: sim.pair.b.mr.lkey(),
        }]
        .into(),
    };
    sim.pair.b.nic.post_recv(sim.b_qp, recv).unwrap();
    sim.run(2);
    assert!(sim.pair.a.completion().is_some(), "the SEND completes");
    let rnr = sim.pair.b.nic.stats().tx_rnr_naks;
    assert!(rnr >= 2, "{rnr}");
    let (requests, responses) = sim.summary();
    assert_eq!(responses["rnr_naks"]["count"], rnr);
    assert_eq!(responses["seq_naks"]["count"], 0);
    assert!(
        responses["rnr_naks"]["psns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p == 0)
    );
    assert_eq!(requests["packets"], rnr + 1);
    assert_eq!(requests["retransmitted"], rnr);
    assert_eq!(requests["rewinds"]["count"], rnr);
    let rewinds = requests["rewinds"]["list"].as_array().unwrap();
    assert!(
        rewinds
            .iter()
            .all(|r| r["after"] == "rnr_nak" && r["to"] == 0),
        "{rewinds:?}"
    );
    // The lines say as much.
    let naks = stdout(&roce(&["dump", "-o", "acknowledge"], sim.file()));
    assert_eq!(naks.matches("RNR").count() as u64, rnr, "{naks}");
}

#[test]
fn summary_counts_ce_marks_and_cnps() {
    let mut config = roce_sim::PairConfig::default();
    config.nic.congestion = roce_core::Congestion::Dcqcn(roce_core::DcqcnConfig::default());
    let mut sim = Sim::new("cnp.pcap", &config);
    for psn in [1, 6] {
        sim.pair.a_to_b.fail(roce_sim::Fault::MarkCe {
            psn: roce_core::Psn::new(psn),
        });
    }
    sim.post(1, roce_core::SendOp::RdmaWrite, 8 * 1024);
    sim.run(2);
    assert!(sim.pair.a.completion().is_some(), "the WRITE completes");
    let marked = sim
        .pair
        .a_to_b
        .sent()
        .iter()
        .filter(|s| s.ce_marked)
        .count();
    assert_eq!(marked, 2);
    let cnps = sim.pair.b.nic.stats().tx_cnps;
    assert!(cnps >= 1);
    let (requests, responses) = sim.summary();
    assert_eq!(requests["ce"], marked);
    assert_eq!(requests["cnps"], 0);
    assert_eq!(responses["cnps"], cnps);
    assert_eq!(responses["ce"], 0);
    let lines = stdout(&roce(
        &["dump", "-o", "CNP", "-Q", &sim.a_qp.value().to_string()],
        sim.file(),
    ));
    assert_eq!(lines.lines().count() as u64, cnps, "{lines}");
}

/// How many of `psns` came again after an earlier packet of the same or a higher PSN (no wrap
/// in these captures).
fn resent(psns: &[u32]) -> usize {
    (0..psns.len())
        .filter(|&i| psns[..i].iter().any(|&p| p >= psns[i]))
        .count()
}

#[test]
fn summary_counts_the_retransmissions_and_naks_of_a_capture_with_known_drops() {
    let (pcap, sent, a_qp, b_qp) = go_back_n_capture("gbn-summary.pcap");
    assert_eq!(sent, [0, 1, 2, 3, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7]);
    let output = roce(&["dump", "--summary", "--json"], &pcap.0);
    assert!(output.status.success(), "{output:?}");
    let rows = json_lines(&stdout(&output));
    assert_eq!(rows.len(), 2, "{rows:?}");
    let requests = rows.iter().find(|r| r["dest_qp"] == b_qp).unwrap();
    assert_eq!(requests["src"], "198.18.0.1");
    assert_eq!(requests["packets"], sent.len());
    assert_eq!(requests["payload_bytes"], sent.len() * 1024);
    assert_eq!(requests["retransmitted"], resent(&sent));
    assert_eq!(
        requests["rewinds"],
        serde_json::json!({"count": 2, "list": [
            {"to": 2, "from": 3, "after": "nak"},
            {"to": 4, "from": 7, "after": "timeout"},
        ]})
    );
    assert_eq!(
        (
            requests["first_psn"].as_u64(),
            requests["last_psn"].as_u64()
        ),
        (Some(0), Some(7))
    );
    assert_eq!(requests["seq_naks"]["count"], 0);
    let responses = rows.iter().find(|r| r["dest_qp"] == a_qp).unwrap();
    assert_eq!(responses["src"], "198.18.0.2");
    assert_eq!(
        responses["seq_naks"],
        serde_json::json!({"count": 1, "psns": [2]})
    );
    assert_eq!(responses["retransmitted"], 0);
    assert_eq!(
        (responses["cnps"].as_u64(), responses["ce"].as_u64()),
        (Some(0), Some(0))
    );
    // The responses row counts what the lines of b's packets are.
    let lines = stdout(&roce(&["dump"], &pcap.0));
    let from_b = lines
        .lines()
        .filter(|l| l.split(' ').nth(1).unwrap().starts_with("198.18.0.2:"))
        .count();
    assert!(from_b > 0);
    assert_eq!(responses["packets"], from_b);

    let text = stdout(&roce(&["dump", "--summary"], &pcap.0));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("src ") && lines[0].ends_with(" cnps  ce"),
        "{text}"
    );
    let row = lines
        .iter()
        .find(|l| l.contains(&format!("{b_qp:#08x}")))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[..10],
        [
            "198.18.0.1",
            "198.18.0.2",
            &format!("{b_qp:#08x}"),
            "14",
            "14336",
            "0x000000",
            "0x000007",
            "6",
            "2",
            "0"
        ],
        "{text}"
    );
    assert!(
        text.contains("\n  go-back-N rewinds: 0x000003->0x000002 after a NAK, 0x000007->0x000004 after a timeout\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  PSN sequence error NAKs for psn 0x000002\n"),
        "{text}"
    );
}

#[test]
fn filters_select_exactly_the_matching_lines() {
    let (pcap, _, a_qp, b_qp) = go_back_n_capture("gbn-filters.pcap");
    let all = stdout(&roce(&["dump"], &pcap.0));
    let expect = |keep: &dyn Fn(&str) -> bool| -> String {
        all.lines()
            .filter(|l| keep(l))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let dump = |args: &[&str]| {
        let mut full = vec!["dump"];
        full.extend_from_slice(args);
        let output = roce(&full, &pcap.0);
        assert!(output.status.success(), "{args:?}: {output:?}");
        output
    };
    let to_b = format!(" qp={b_qp:#08x} ");
    let to_a = format!(" qp={a_qp:#08x} ");
    let requests = expect(&|l| l.contains(&to_b));
    assert_eq!(requests.lines().count(), 14);
    assert_eq!(stdout(&dump(&["-Q", &format!("{b_qp:#x}")])), requests);
    assert_eq!(stdout(&dump(&["--qp", &b_qp.to_string()])), requests);
    let both = stdout(&dump(&["-Q", &a_qp.to_string(), "-Q", &b_qp.to_string()]));
    assert_eq!(both, all, "two QPs: either");
    let naks_and_acks = expect(&|l| l.contains(" RC_ACKNOWLEDGE "));
    assert!(naks_and_acks.contains("NAK"), "{naks_and_acks}");
    assert_eq!(stdout(&dump(&["-o", "acknowledge"])), naks_and_acks);
    assert_eq!(
        stdout(&dump(&["-o", "0x11", "-Q", &to_a.trim()[3..]])),
        naks_and_acks
    );
    assert_eq!(
        stdout(&dump(&["-o", "RC_ACKNOWLEDGE", "-Q", &b_qp.to_string()])),
        ""
    );
    let firsts_and_lasts =
        expect(&|l| l.contains(" RC_RDMA_WRITE_FIRST ") || l.contains(" RC_RDMA_WRITE_LAST "));
    // FIRST at PSNs 0, 4 and 4 again; LAST at 3, 3, 7 and 7.
    assert_eq!(firsts_and_lasts.lines().count(), 7);
    let output = dump(&["-o", "rc_rdma_write_first", "-o", "RDMA_WRITE_LAST"]);
    assert_eq!(stdout(&output), firsts_and_lasts);
    assert_stderr_has(&output, "; 7 matched the filter");
    assert_eq!(stdout(&dump(&["--host", "198.18.0.2"])), all);
    assert_eq!(stdout(&dump(&["--host", "198.18.0.9"])), "");
    // JSON and -c see the same packets.
    let json = json_lines(&stdout(&dump(&["--json", "-Q", &b_qp.to_string()])));
    assert_eq!(json.len(), 14);
    assert!(json.iter().all(|v| v["roce"]["dest_qp"] == b_qp));
    let first_two = stdout(&dump(&["-c", "2", "-o", "RDMA_WRITE_LAST"]));
    assert_eq!(
        first_two,
        firsts_and_lasts
            .lines()
            .filter(|l| l.contains("LAST"))
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    // The summary of a filter sums only what it selects.
    let rows = json_lines(&stdout(&dump(&[
        "--summary",
        "--json",
        "-o",
        "RDMA_WRITE_LAST",
    ])));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["packets"], 4);

    for (bad, says) in [
        (&["-Q", "0x1000000"][..], "24 bits"),
        (&["-Q", "qp1"][..], "not a QPN"),
        (&["-o", "NAK"][..], "not an opcode"),
        (&["--host", "example"][..], "invalid"),
    ] {
        let mut args = vec!["dump"];
        args.extend_from_slice(bad);
        let output = roce(&args, &pcap.0);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {output:?}");
        assert_stderr_has(&output, says);
        assert!(output.stdout.is_empty(), "{bad:?}: no frame printed first");
    }
}

/// Rewrites a capture keeping `snaplen` bytes of each frame, as `tcpdump -s` would have.
fn cut_to(pcap: &Path, snaplen: u32, name: &str) -> Scratch {
    let path = std::env::temp_dir().join(format!("roce-dump-{}-{name}", std::process::id()));
    let mut writer = roce_pcap::Writer::with_snaplen(
        std::fs::File::create(&path).unwrap(),
        roce_pcap::SnapLen::new(snaplen),
    )
    .unwrap();
    for frame in roce_pcap::Capture::open(pcap).unwrap() {
        let frame = frame.unwrap();
        writer.write(frame.time, &frame.data).unwrap();
    }
    drop(writer.into_inner());
    Scratch(path)
}

#[test]
fn packets_cut_by_a_snap_length_decode_their_headers_and_are_not_bad() {
    let (pcap, sent, _, b_qp) = go_back_n_capture("gbn-whole.pcap");
    let whole = stdout(&roce(&["dump", "--strict"], &pcap.0));
    // 14 + 20 + 8 bytes of Ethernet, IPv4 and UDP, then 58 of the RoCE packet: BTH and RETH.
    let cut = cut_to(&pcap.0, 100, "gbn-cut.pcap");
    let output = roce(&["dump", "--strict"], &cut.0);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    assert!(
        !text.contains("BAD") && !text.contains("malformed"),
        "{text}"
    );
    let mut cut_lines = 0;
    for (whole, cut) in whole.lines().zip(text.lines()) {
        // A frame longer than 100 bytes (a WRITE of 1024) is shown as far as the ICRC.
        let udp_len: usize = whole.rsplit(" len=").next().map_or(0, |len| {
            len.split(' ').next().unwrap().parse::<usize>().unwrap()
        });
        if udp_len == 0 {
            assert_eq!(cut, whole);
            continue;
        }
        cut_lines += 1;
        let expected = whole.replace(
            " icrc=ok",
            &format!(
                " icrc=unchecked (cut short by the capture: 58 of {} bytes)",
                12 + 16 * usize::from(whole.contains("reth(")) + udp_len + 4
            ),
        );
        assert_eq!(cut, expected);
    }
    assert_eq!(cut_lines, sent.len());
    assert_eq!(text.lines().count(), whole.lines().count());
    assert_stderr_has(
        &output,
        &format!("{} cut short by the capture (ICRC not checked)", sent.len()),
    );
    // JSON says how much was kept; the summary and filters see cut packets.
    let json = json_lines(&stdout(&roce(
        &["dump", "--json", "-Q", &b_qp.to_string()],
        &cut.0,
    )));
    assert_eq!(json.len(), sent.len());
    assert_eq!(json[0]["cut_short"], true);
    assert_eq!(json[0]["captured_len"], 100);
    assert_eq!(json[0]["frame_len"], 42 + 12 + 16 + 1024 + 4);
    assert_eq!(json[0]["icrc"], "unchecked");
    let rows = json_lines(&stdout(&roce(&["dump", "--summary", "--json"], &cut.0)));
    let whole_rows = json_lines(&stdout(&roce(&["dump", "--summary", "--json"], &pcap.0)));
    assert_eq!(rows, whole_rows);

    // Cut inside the headers: said so, never a malformed frame.
    for snaplen in [1, 20, 41, 50] {
        let cut = cut_to(&pcap.0, snaplen, "gbn-tiny.pcap");
        let output = roce(&["dump"], &cut.0);
        assert_eq!(output.status.code(), Some(0), "{snaplen}: {output:?}");
        // Without the UDP destination port (bytes 36 and 37) nothing says RoCE.
        if snaplen < 38 {
            let strict = roce(&["dump", "--strict"], &cut.0);
            assert_stderr_has(
                &strict,
                "was its snap length too short to see the UDP header?",
            );
        }
        let text = stdout(&output);
        assert!(
            !text.contains("BAD") && !text.contains("malformed"),
            "{text}"
        );
        assert_eq!(text.lines().count(), whole.lines().count());
        assert_stderr_has(
            &output,
            " 0 malformed frames, 0 malformed RoCE packets, 0 bad ICRCs",
        );
        let expected = if snaplen < 42 {
            format!("frame cut short by the capture before the end of its headers: {snaplen} of")
        } else {
            " RoCE icrc=unchecked (cut short by the capture: 8 of".to_owned()
        };
        assert!(text.lines().all(|l| l.contains(&expected)), "{text}");
    }
}

/// A capture of the first millisecond of `roce sim incast-hpcc` with `args` (`--set`s), in a
/// scratch file named by `tag`, and `roce dump --strict` of it (more than 100 frames, none
/// malformed).
fn incast_hpcc_capture(tag: &str, args: &[&str]) -> (Scratch, String) {
    let file =
        Scratch(std::env::temp_dir().join(format!("roce-dump-{}-{tag}.pcap", std::process::id())));
    let out = common::ScratchDir::new(&format!("roce-dump-{tag}"));
    let sim = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(["sim", "incast-hpcc"])
        .args(args)
        .args([
            "--set",
            "duration_ms=1",
            "--set",
            "summary_from_ms=0",
            "--pcap",
        ])
        .arg(&file.0)
        .arg("--out")
        .arg(&*out)
        .output()
        .unwrap();
    assert!(sim.status.success(), "{sim:?}");
    let output = roce(&["dump", "--strict"], &file.0);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(
        text.lines().count() > 100,
        "{} frames",
        text.lines().count()
    );
    (file, text)
}

/// A capture of HPCC's traffic: each request carries an INT header after its BTH (empty as the
/// host sends it) and each ACK its echo, with the switch's record. Every frame reads as its own
/// headers, then the INT header — not as the INT header's bytes taken for a RETH or an AETH.
#[test]
fn int_headers_of_hpcc_show_after_the_headers_they_follow() {
    let (file, text) = incast_hpcc_capture("hpcc", &[]);
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines {
        let request = line.contains("RC_RDMA_WRITE_");
        let ack = line.contains("RC_ACKNOWLEDGE");
        assert!(request || ack, "{line}");
        if request {
            assert!(line.contains(" int(hops=0) icrc=ok"), "{line}");
        } else {
            assert!(line.contains(" aeth(ACK "), "{line}");
            assert!(line.contains(" int-echo(hops=1 q="), "{line}");
        }
    }
    let first = &lines[0];
    assert!(
        first.contains(" reth(va=0x") && first.contains(" len=65536)"),
        "{first}"
    );
    let json = json_lines(&stdout(&roce(&["dump", "--json"], &file.0)));
    assert_eq!(json[0]["roce"]["reth"]["dma_len"], 65536, "{}", json[0]);
    let echoes = json.iter().filter(|v| v["int"]["echo"] == true).count();
    assert!(echoes > 0);
    assert!(json.iter().all(|v| v["int"]["hops"].is_array()));
}

/// A capture of HPCC-PINT's traffic: each request carries PINT's 4-byte header (0 as the host
/// sends it) and each ACK its echo, with the value the switch raised it to; every frame reads
/// as its own headers, then the PINT header, its ICRC checked with the header masked.
#[test]
fn pint_headers_of_hpcc_pint_show_after_the_headers_they_follow() {
    let (file, text) = incast_hpcc_capture("pint", &["--set", "congestion=hpcc-pint"]);
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines {
        if line.contains("RC_RDMA_WRITE_") {
            assert!(line.contains(" pint(value=0) icrc=ok"), "{line}");
        } else {
            assert!(
                line.contains(" aeth(ACK ") && line.contains(" pint-echo(value="),
                "{line}"
            );
        }
        assert!(line.ends_with(" icrc=ok"), "{line}");
    }
    let first = &lines[0];
    assert!(first.contains(" reth(va=0x"), "{first}");
    let json = json_lines(&stdout(&roce(&["dump", "--json"], &file.0)));
    let raised = json
        .iter()
        .filter(|v| v["pint"]["echo"] == true && v["pint"]["value"].as_u64() > Some(0))
        .count();
    assert!(raised > 0, "the switch raised some");
    assert!(
        json.iter()
            .all(|v| v["pint"]["value"].is_u64() && v["int"].is_null())
    );
}
