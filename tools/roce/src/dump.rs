//! `roce dump`: one line per packet of a capture, like tcpdump, with the RoCEv2 headers decoded
//! and the ICRC checked.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use roce_pcap::Capture;
use roce_wire::frame::Frame;
use roce_wire::pretty::FrameLine;
use roce_wire::{ParseError, RoceRepr};

use crate::json;

/// Print the packets of a capture, one line each, with RoCEv2 decoded and the ICRC checked.
///
/// Reads pcap or pcapng (Ethernet, Linux cooked capture or raw IP), such as
/// `tcpdump -i IFACE -w FILE udp port 4791` writes. RoCEv2 is recognised on UDP destination
/// port 4791. Each RoCE line shows: time since the first packet, addresses and UDP ports, the
/// opcode, destination QP, PSN and BTH flags, the key fields of the extension headers (RETH
/// va/rkey/len, AETH syndrome/MSN, immediate data, atomic operands, DETH Q_Key), the payload
/// length and `icrc=ok` or `icrc=BAD`.
///
/// A summary goes to standard error. Exit status: 0, or 1 when `--strict` found a problem, or 2
/// when the file could not be read.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    roce dump pcap-fixtures/rxe/mtu1500-rc_s64_m1024.pcap\n  \
    roce dump --strict -q capture.pcapng     # RoCE only; fail on any malformed packet or bad ICRC\n  \
    roce dump --json capture.pcap | jq 'select(.roce.opcode == \"RC_ACKNOWLEDGE\")'")]
pub(crate) struct Args {
    /// The capture file (pcap or pcapng).
    file: PathBuf,
    /// Write one JSON object per packet (JSON Lines) instead of text.
    #[arg(long)]
    json: bool,
    /// Exit with status 1 if any frame is malformed, any RoCE packet fails to parse, or any ICRC
    /// is bad.
    #[arg(long)]
    strict: bool,
    /// Show only RoCE packets; skip other frames (TCP, ARP, ...).
    #[arg(short, long)]
    quiet: bool,
    /// Do not check ICRCs (for captures taken behind something that rewrites packets).
    #[arg(long)]
    no_icrc: bool,
    /// Stop after this many frames.
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<usize>,
}

/// What a dump found, for the summary and `--strict`.
#[derive(Debug, Default)]
struct Tally {
    frames: usize,
    roce: usize,
    malformed_frames: usize,
    malformed_roce: usize,
    bad_icrc: usize,
    snapped: usize,
}

impl Tally {
    fn problems(&self) -> usize {
        self.malformed_frames + self.malformed_roce + self.bad_icrc
    }
}

/// Runs `roce dump`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let capture = Capture::open(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut tally = Tally::default();
    let mut start = None;
    for (index, captured) in capture.enumerate() {
        if args.count.is_some_and(|count| index >= count) {
            break;
        }
        let captured =
            captured.with_context(|| format!("{}: frame {}", args.file.display(), index + 1))?;
        let time = captured
            .time
            .saturating_sub(*start.get_or_insert(captured.time));
        let snapped = captured.data.len() < captured.orig_len as usize;
        tally.frames += 1;
        tally.snapped += usize::from(snapped);
        let frame = Frame::parse(captured.link, &captured.data);
        let line = Line {
            number: index + 1,
            time,
            frame: &frame,
            snapped,
            check_icrc: !args.no_icrc,
        };
        let verdict = line.verdict();
        tally.roce += usize::from(verdict.is_roce);
        tally.malformed_frames += usize::from(frame.is_err());
        tally.malformed_roce += usize::from(verdict.roce_error.is_some());
        tally.bad_icrc += usize::from(verdict.bad_icrc);
        if args.quiet && !verdict.is_roce && frame.is_ok() {
            continue;
        }
        let written = if args.json {
            line.write_json(&mut out, &verdict)
        } else {
            line.write_text(&mut out)
        };
        if let Err(err) = written {
            return quiet_on_broken_pipe(err);
        }
    }
    if let Err(err) = out.flush() {
        return quiet_on_broken_pipe(err);
    }
    eprintln!(
        "roce dump: {} frames, {} RoCE: {} malformed frames, {} malformed RoCE packets, {} bad ICRCs{}",
        tally.frames,
        tally.roce,
        tally.malformed_frames,
        tally.malformed_roce,
        if args.no_icrc {
            "unchecked".to_owned()
        } else {
            tally.bad_icrc.to_string()
        },
        if tally.snapped > 0 {
            format!(", {} cut short by the capture", tally.snapped)
        } else {
            String::new()
        },
    );
    if args.strict && tally.problems() > 0 {
        eprintln!("roce dump: --strict: {} problems", tally.problems());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `roce dump | head` closes the pipe early: that is not an error.
fn quiet_on_broken_pipe(err: io::Error) -> anyhow::Result<ExitCode> {
    if err.kind() == io::ErrorKind::BrokenPipe {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(err.into())
    }
}

/// One frame of the capture, about to be printed.
struct Line<'a> {
    number: usize,
    time: Duration,
    frame: &'a Result<Frame<'a>, ParseError>,
    snapped: bool,
    check_icrc: bool,
}

/// What is wrong with a frame, if anything.
struct Verdict {
    is_roce: bool,
    roce: Option<RoceRepr>,
    roce_error: Option<ParseError>,
    bad_icrc: bool,
    icrc: Option<Result<(), ParseError>>,
}

impl Line<'_> {
    fn verdict(&self) -> Verdict {
        let Ok(frame) = self.frame else {
            return Verdict {
                is_roce: false,
                roce: None,
                roce_error: None,
                bad_icrc: false,
                icrc: None,
            };
        };
        let parsed = frame
            .roce()
            .map(|packet| packet.and_then(|p| RoceRepr::parse(&p)));
        // A frame cut short by the capture's snap length cannot be judged.
        let icrc = (self.check_icrc && !self.snapped && matches!(parsed, Some(Ok(_))))
            .then(|| frame.verify_icrc());
        Verdict {
            is_roce: parsed.is_some(),
            roce: parsed.and_then(Result::ok),
            roce_error: parsed.and_then(Result::err).filter(|_| !self.snapped),
            bad_icrc: matches!(icrc, Some(Err(_))),
            icrc,
        }
    }

    fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
        let seconds = self.time.as_secs_f64();
        match self.frame {
            Ok(frame) if self.check_icrc && !self.snapped => {
                writeln!(out, "{seconds:.6} {}", FrameLine::new(frame))
            }
            Ok(frame) => writeln!(
                out,
                "{seconds:.6} {}{}",
                FrameLine::without_icrc(frame),
                if self.snapped {
                    " (cut short by the capture)"
                } else {
                    ""
                }
            ),
            Err(err) => writeln!(out, "{seconds:.6} malformed frame: {err}"),
        }
    }

    fn write_json(&self, out: &mut impl Write, verdict: &Verdict) -> io::Result<()> {
        let value = json::frame(
            self.number,
            self.time,
            self.frame,
            verdict.roce.as_ref(),
            verdict.roce_error,
            verdict.icrc,
            self.snapped,
        );
        serde_json::to_writer(&mut *out, &value)?;
        out.write_all(b"\n")
    }
}
