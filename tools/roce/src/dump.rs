//! `roce dump`: one line per packet of a capture, like tcpdump, with the RoCEv2 headers decoded
//! and the ICRC checked.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use roce_pcap::{Capture, CaptureError};
use roce_wire::frame::Frame;
use roce_wire::pretty::FrameLine;
use roce_wire::{ParseError, RoceRepr};
use serde_json::json;

use crate::json;

mod cm;

/// Print the packets of a capture, one line each, with RoCEv2 decoded and the ICRC checked.
///
/// Reads pcap or pcapng (Ethernet, Linux cooked capture v1 or v2, or raw IP), such as
/// `tcpdump -i IFACE -w FILE udp port 4791` writes, from a file or (FILE `-`) from standard
/// input. RoCEv2 is recognised on UDP destination port 4791. Each RoCE line shows: time since the
/// first packet, addresses and UDP ports, the opcode, destination QP, PSN and BTH flags, the key
/// fields of the extension headers (RETH va/rkey/len, AETH syndrome/MSN, immediate data, atomic
/// operands, DETH Q_Key), the payload length and `icrc=ok` or `icrc=BAD`. A UD SEND to QP 1
/// carries a MAD: a connection manager message is shown after the transport part in one line
/// (`CM REQ tid=… lcid=… sid=0x0000000001061c06 (RDMA TCP port 7174) qpn=… psn=… mtu=1024 …`,
/// `CM REJ … reason=8 (invalid service ID)`), and `--json` gives it as a `cm` object.
///
/// A capture taken on `lo`, or on a veth with segmentation offload on, holds UDP GSO batches:
/// one datagram of up to 64 KiB carrying many RoCE packets of one size (the last maybe shorter),
/// which the kernel cuts before they leave. Such a frame is shown as the datagrams the kernel
/// sends, one line each ending in `gso I/N`, each with its own IPv4 ID (the batch's plus I-1)
/// and lengths, and each ICRC checked against its own. The segment size is the smallest for
/// which every piece parses as a RoCE packet and every piece's ICRC verifies (or, for a batch
/// damaged in one place, the first or second piece's).
///
/// A summary goes to standard error. Exit status: 0, or 1 when `--strict` found a problem, or 2
/// when the file could not be read. A file cut short in the middle of a packet (a capture still
/// being written) is read up to there; `--strict` counts that as a problem.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    roce dump pcap-fixtures/rxe/mtu1500-rc_s64_m1024.pcap\n  \
    roce dump --strict -q capture.pcapng     # RoCE only; fail on any malformed packet or bad ICRC\n  \
    tcpdump -i lo -U -w - udp port 4791 | roce dump -q -\n  \
    roce dump --json capture.pcap | jq 'select(.roce.opcode == \"RC_ACKNOWLEDGE\")'\n  \
    roce dump --json capture.pcap | jq 'select(.cm.message == \"REJ\") | .cm.reason_text'")]
pub(crate) struct Args {
    /// The capture file (pcap or pcapng); `-` reads standard input.
    file: PathBuf,
    /// Write one JSON object per packet (JSON Lines) instead of text. The segments of a GSO
    /// batch share their frame's number and carry `gso: {segment, segments, segment_size}`.
    #[arg(long)]
    json: bool,
    /// Exit with status 1 if any frame is malformed, any RoCE packet fails to parse, any ICRC
    /// is bad, the file is cut short, or there is no RoCE packet at all.
    #[arg(long)]
    strict: bool,
    /// Show only RoCE packets; skip other frames (TCP, ARP, ...).
    #[arg(short, long)]
    quiet: bool,
    /// Do not check ICRCs (for captures taken behind something that rewrites packets).
    #[arg(long)]
    no_icrc: bool,
    /// Stop after printing this many lines (after `-q`; each segment of a GSO batch is a line).
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
    gso_batches: usize,
    gso_segments: usize,
    printed: usize,
    cut_short: bool,
}

impl Tally {
    fn problems(&self) -> usize {
        self.malformed_frames + self.malformed_roce + self.bad_icrc + usize::from(self.cut_short)
    }
}

/// Runs `roce dump`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let stdin = args.file.as_os_str() == "-";
    let name = if stdin {
        "standard input".to_owned()
    } else {
        args.file.display().to_string()
    };
    let input: Box<dyn Read> = if stdin {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(&args.file).with_context(|| format!("cannot read {name}"))?)
    };
    let capture = Capture::from_stream(input).with_context(|| format!("cannot read {name}"))?;
    let mut printer = Printer {
        args,
        out: BufWriter::new(io::stdout().lock()),
        tally: Tally::default(),
    };
    let mut start = None;
    for (index, captured) in capture.enumerate() {
        if printer.done() {
            break;
        }
        let captured = match captured {
            Ok(captured) => captured,
            Err(CaptureError::Truncated) => {
                printer.tally.cut_short = true;
                break;
            }
            Err(err) => {
                return Err(err).with_context(|| format!("{name}: frame {}", index + 1));
            }
        };
        let time = captured
            .time
            .saturating_sub(*start.get_or_insert(captured.time));
        let snapped = captured.data.len() < captured.orig_len as usize;
        printer.tally.frames += 1;
        printer.tally.snapped += usize::from(snapped);
        let frame = Frame::parse(captured.link, &captured.data);
        // A frame cut short by the snap length is not cut into segments: its last ones are gone.
        let batch = match &frame {
            Ok(frame) if !snapped => frame.gso_segments(),
            _ => None,
        };
        let shown = match batch {
            Some(segments) => {
                printer.tally.gso_batches += 1;
                printer.tally.gso_segments += segments.count();
                let mut shown = Ok(());
                for (i, segment) in segments.iter().enumerate() {
                    let segment = Ok(segment);
                    let line = Line {
                        number: index + 1,
                        time,
                        frame: &segment,
                        snapped: false,
                        check_icrc: !args.no_icrc,
                        gso: Some(Gso {
                            segment: i + 1,
                            segments: segments.count(),
                            size: segments.segment_size(),
                        }),
                    };
                    shown = printer.show(&line);
                    if shown.is_err() || printer.done() {
                        break;
                    }
                }
                shown
            }
            None => printer.show(&Line {
                number: index + 1,
                time,
                frame: &frame,
                snapped,
                check_icrc: !args.no_icrc,
                gso: None,
            }),
        };
        if let Err(err) = shown {
            return quiet_on_broken_pipe(err);
        }
    }
    if let Err(err) = printer.out.flush() {
        return quiet_on_broken_pipe(err);
    }
    let tally = &printer.tally;
    eprintln!(
        "roce dump: {} frames, {} RoCE: {} malformed frames, {} malformed RoCE packets, {} bad ICRCs{}{}{}",
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
        if tally.gso_batches > 0 {
            format!(
                ", {} GSO batches of {} segments in all",
                tally.gso_batches, tally.gso_segments
            )
        } else {
            String::new()
        },
        if tally.cut_short {
            "; the file is cut short in the middle of a packet"
        } else {
            ""
        },
    );
    if args.strict && tally.problems() > 0 {
        eprintln!("roce dump: --strict: {} problems", tally.problems());
        return Ok(ExitCode::from(1));
    }
    if args.strict && tally.roce == 0 && !printer.done() {
        eprintln!(
            "roce dump: --strict: no RoCE packet in {name} (RoCEv2 is UDP to port 4791; was the capture filtered?)"
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Where lines go, and what they added up to.
struct Printer<'a, W: Write> {
    args: &'a Args,
    out: W,
    tally: Tally,
}

impl<W: Write> Printer<'_, W> {
    /// Whether `-c` has been reached.
    fn done(&self) -> bool {
        self.args
            .count
            .is_some_and(|count| self.tally.printed >= count)
    }

    /// Counts a line, and prints it unless `-q` hides it.
    fn show(&mut self, line: &Line<'_>) -> io::Result<()> {
        let verdict = line.verdict();
        let tally = &mut self.tally;
        tally.roce += usize::from(verdict.is_roce);
        tally.malformed_frames += usize::from(line.frame.is_err());
        tally.malformed_roce += usize::from(verdict.roce_error.is_some());
        tally.bad_icrc += usize::from(verdict.bad_icrc);
        if self.args.quiet && !verdict.is_roce && line.frame.is_ok() {
            return Ok(());
        }
        tally.printed += 1;
        if self.args.json {
            line.write_json(&mut self.out, &verdict)
        } else {
            line.write_text(&mut self.out)
        }
    }
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
    /// Which segment of a GSO batch this is.
    gso: Option<Gso>,
}

/// A segment's place in its GSO batch.
#[derive(Debug, Clone, Copy)]
struct Gso {
    /// From 1.
    segment: usize,
    segments: usize,
    /// The batch's segment size (UDP payload bytes).
    size: usize,
}

impl std::fmt::Display for Gso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, " gso {}/{}", self.segment, self.segments)
    }
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
        let gso = self.gso.map(|gso| gso.to_string()).unwrap_or_default();
        match self.frame {
            Ok(frame) if self.check_icrc && !self.snapped => {
                writeln!(out, "{seconds:.6} {}{gso}", FrameLine::new(frame))
            }
            Ok(frame) => writeln!(
                out,
                "{seconds:.6} {}{}{gso}",
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
        let mut value = json::frame(
            self.number,
            self.time,
            self.frame,
            verdict.roce.as_ref(),
            verdict.roce_error,
            verdict.icrc,
            self.snapped,
        );
        if let Some(cm) = self.frame.as_ref().ok().and_then(cm::of_frame) {
            value["cm"] = cm;
        }
        if let Some(gso) = self.gso {
            value["gso"] = json!({
                "segment": gso.segment,
                "segments": gso.segments,
                "segment_size": gso.size,
            });
        }
        serde_json::to_writer(&mut *out, &value)?;
        out.write_all(b"\n")
    }
}
