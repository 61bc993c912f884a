//! pcap captures of simulated links, stamped with simulated time.
//!
//! A [`Capture`] writes each packet offered to a [`Link`](crate::Link) that holds it, once, at the
//! time it was offered, as a whole Ethernet/IPv4-or-IPv6/UDP frame that Wireshark decodes as
//! RoCEv2. Like a port mirror on the switch, it sees what the sender put on the link, dropped
//! packets included, in the form the link passes on: with the CE mark the queue set and the bit
//! that corruption flipped, so that a marked packet shows CE and a corrupted one a bad ICRC. A
//! duplicate is not written twice. What happened to each packet is in [`Link::sent`](crate::Link::sent).
//!
//! The frames carry IPv4 identification 0 and DF (what a RoCEv2 sender's ICRC is computed for),
//! or an IPv6 flow label of 0, and locally administered MACs derived from the IP addresses.
//!
//! A capture is a shared handle: clone it into both directions of a pair of links to get one
//! file with the whole conversation. Set `ROCE_SIM_PCAP=<dir>` and each test that calls
//! [`Capture::from_env`] writes `<dir>/<name>.pcap` (quinn's trick).

use std::cell::RefCell;
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use roce_core::Instant;
use roce_pcap::{CaptureError, Writer};
use roce_wire::frame::FrameRepr;
use tracing::warn;

use crate::link::SimPacket;

/// A pcap file that links write their packets into. Cloning shares the file.
#[derive(Clone)]
pub struct Capture {
    shared: Rc<RefCell<Shared>>,
}

struct Shared {
    writer: Writer<Sink>,
    /// The same output as `writer`'s, to flush it (the pcap writer only hands it back).
    sink: Sink,
    frame: Vec<u8>,
    frames: u64,
    skipped: u64,
}

impl Capture {
    /// Writes into `writer`.
    pub fn new(writer: impl Write + 'static) -> Result<Self, CaptureError> {
        let sink = Sink(Rc::new(RefCell::new(Box::new(writer))));
        let writer = Writer::new(sink.clone())?;
        Ok(Self {
            shared: Rc::new(RefCell::new(Shared {
                writer,
                sink,
                frame: Vec::new(),
                frames: 0,
                skipped: 0,
            })),
        })
    }

    /// Creates (or truncates) the file at `path`.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        Self::new(BufWriter::new(File::create(path)?))
    }

    /// `$ROCE_SIM_PCAP/<name>.pcap` when the environment variable `ROCE_SIM_PCAP` names a
    /// directory (created if missing), else `None`. Characters of `name` other than ASCII
    /// letters, digits, `-`, `_` and `.` become `_`, so a test path such as `sim::go_back_n` is a
    /// file name. A file that cannot be created is reported on stderr, and gives `None`.
    pub fn from_env(name: &str) -> Option<Self> {
        Self::in_dir(std::env::var_os(PCAP_DIR_VAR), name)
    }

    /// Writes `packet` as a frame captured at `time`. A packet that cannot be framed (IPv4 and
    /// IPv6 addresses mixed, a DSCP above 63, a payload too long for UDP) or written is skipped
    /// and counted.
    pub fn record(&self, time: Instant, packet: &SimPacket) {
        let mut shared = self.shared.borrow_mut();
        let Shared {
            writer,
            frame,
            frames,
            skipped,
            ..
        } = &mut *shared;
        let repr = frame_repr(packet);
        frame.clear();
        frame.resize(repr.header_len() + packet.payload.len(), 0);
        let written = repr
            .emit_headers(frame, packet.payload.len())
            .map_err(|err| err.to_string())
            .and_then(|at| {
                frame[at..].copy_from_slice(&packet.payload);
                let time = std::time::Duration::from_nanos(time.as_nanos());
                writer.write(time, frame).map_err(|err| err.to_string())
            });
        match written {
            Ok(()) => *frames += 1,
            Err(err) => {
                *skipped += 1;
                warn!(error = %err, src = %packet.src, dst = %packet.dst, "packet not captured");
            }
        }
    }

    /// Flushes buffered frames to the file (dropping the last clone flushes too).
    pub fn flush(&self) -> io::Result<()> {
        self.shared.borrow_mut().sink.flush()
    }

    /// Frames written.
    pub fn frames(&self) -> u64 {
        self.shared.borrow().frames
    }

    /// Packets that could not be framed or written.
    pub fn skipped(&self) -> u64 {
        self.shared.borrow().skipped
    }

    /// `<dir>/<name>.pcap`, if `dir` is set and not empty.
    fn in_dir(dir: Option<OsString>, name: &str) -> Option<Self> {
        let dir = PathBuf::from(dir.filter(|dir| !dir.is_empty())?);
        let path = dir.join(format!("{}.pcap", file_name(name)));
        let created = fs::create_dir_all(&dir)
            .map_err(CaptureError::from)
            .and_then(|()| Self::create(&path));
        match created {
            Ok(capture) => Some(capture),
            Err(err) => {
                // The user asked for a capture: say why there is none, wherever logging goes.
                eprintln!("{PCAP_DIR_VAR}: cannot write {}: {err}", path.display());
                None
            }
        }
    }
}

impl fmt::Debug for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = self.shared.borrow();
        f.debug_struct("Capture")
            .field("frames", &shared.frames)
            .field("skipped", &shared.skipped)
            .finish_non_exhaustive()
    }
}

/// The output, shared between the pcap writer and [`Capture::flush`].
#[derive(Clone)]
struct Sink(Rc<RefCell<Box<dyn Write>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// The Ethernet/IP/UDP headers a RoCEv2 sender would put around `packet`.
fn frame_repr(packet: &SimPacket) -> FrameRepr {
    FrameRepr::for_datagram(packet.src, packet.dst, packet.ecn, packet.dscp, packet.ttl)
}

/// `name` with every character that is not safe in a file name replaced by `_`.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The environment variable naming the directory of [`Capture::from_env`].
pub const PCAP_DIR_VAR: &str = "ROCE_SIM_PCAP";

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use roce_core::Duration;
    use roce_wire::Psn;
    use roce_wire::frame::{Ecn, Frame, LinkType};

    use super::*;
    use crate::{Fault, Link, LinkConfig};

    /// A scratch directory for one test, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("roce-sim-{}-{test}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            Self(dir)
        }

        /// The path of `name` in the scratch directory, which now exists.
        fn file(&self, name: &str) -> PathBuf {
            fs::create_dir_all(&self.0).unwrap();
            self.0.join(name)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// An RC SEND_ONLY with a valid ICRC for `src` → `dst`, IPv4 ID 0 and DF.
    fn send_only(src: SocketAddr, dst: SocketAddr, psn: u32, ecn: Ecn) -> SimPacket {
        SimPacket {
            ecn,
            ..crate::link::sealed_send_only(src, dst, psn, 0xab)
        }
    }

    fn read_back(path: &Path) -> Vec<roce_pcap::CapturedFrame> {
        roce_pcap::Capture::open(path)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn every_offered_packet_is_a_frame_that_decodes_as_roce() {
        let scratch = Scratch::new("every_offered");
        let path = scratch.file("link.pcap");
        let a: SocketAddr = "10.0.0.1:49152".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:4791".parse().unwrap();

        let capture = Capture::create(&path).unwrap();
        let mut link = Link::new(LinkConfig::default(), 0);
        link.capture(capture.clone());
        link.fail(Fault::DropPsn {
            psn: Psn::new(1),
            times: 1,
        });
        link.fail(Fault::Corrupt { psn: Psn::new(2) });
        link.fail(Fault::MarkCe { psn: Psn::new(3) });
        for psn in 0..4 {
            let at = Instant::ZERO + Duration::from_micros(u64::from(psn));
            link.send(at, send_only(a, b, psn, Ecn::Ect0));
        }
        capture.flush().unwrap();

        let frames = read_back(&path);
        assert_eq!(frames.len(), link.sent().len(), "the dropped one too");
        assert_eq!(capture.frames(), 4);
        assert_eq!(capture.skipped(), 0);
        for (i, captured) in frames.iter().enumerate() {
            assert_eq!(captured.time, Duration::from_micros(i as u64));
            let frame = Frame::parse(LinkType::Ethernet, &captured.data).unwrap();
            let roce = frame.roce().expect("a RoCEv2 frame").unwrap();
            assert_eq!(roce.bth().psn(), Psn::new(i as u32));
            let ip = frame.ip.unwrap();
            assert_eq!((ip.src, ip.dst), (a.ip(), b.ip()));
            assert_eq!((ip.identification, ip.dont_fragment), (Some(0), true));
            let ethernet = frame.ethernet.unwrap();
            assert_eq!(ethernet.src, [0x02, 0x00, 10, 0, 0, 1]);
            assert_eq!(ethernet.dst, [0x02, 0x00, 10, 0, 0, 2]);
            let expect_ecn = if i == 3 { Ecn::Ce } else { Ecn::Ect0 };
            assert_eq!(ip.ecn, expect_ecn, "frame {i}");
            // The ICRC was computed for exactly these headers, unless the link corrupted it.
            assert_eq!(frame.verify_icrc().is_ok(), i != 2, "frame {i}");
        }
    }

    #[test]
    fn ipv6_frames_and_a_shared_capture() {
        let scratch = Scratch::new("ipv6");
        let path = scratch.file("pair.pcap");
        let a: SocketAddr = "[fd00::1]:49152".parse().unwrap();
        let b: SocketAddr = "[fd00::2]:4791".parse().unwrap();
        let b_reply: SocketAddr = "[fd00::2]:49153".parse().unwrap();
        let a_reply: SocketAddr = "[fd00::1]:4791".parse().unwrap();

        let capture = Capture::create(&path).unwrap();
        let mut a_to_b = Link::new(LinkConfig::default(), 1);
        let mut b_to_a = Link::new(LinkConfig::default(), 2);
        a_to_b.capture(capture.clone());
        b_to_a.capture(capture.clone());
        a_to_b.send(Instant::ZERO, send_only(a, b, 7, Ecn::NotEct));
        b_to_a.send(
            Instant::from_micros(10),
            send_only(b_reply, a_reply, 8, Ecn::NotEct),
        );
        drop(a_to_b);
        drop(b_to_a);
        drop(capture); // the last clone: flushes

        let frames = read_back(&path);
        assert_eq!(frames.len(), 2);
        for (captured, src) in frames.iter().zip([a, b_reply]) {
            let frame = Frame::parse(LinkType::Ethernet, &captured.data).unwrap();
            assert_eq!(frame.ip.unwrap().src, src.ip());
            assert!(frame.roce().unwrap().is_ok());
            assert!(frame.verify_icrc().is_ok());
        }
    }

    #[test]
    fn a_packet_that_cannot_be_framed_is_skipped_not_fatal() {
        let capture = Capture::new(Vec::new()).unwrap();
        let v4: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let v6: SocketAddr = "[fd00::2]:4791".parse().unwrap();
        capture.record(Instant::ZERO, &SimPacket::new(v4, v6, vec![1, 2, 3]));
        let bad_dscp = SimPacket {
            dscp: 64,
            ..SimPacket::new(v4, v4, vec![])
        };
        capture.record(Instant::ZERO, &bad_dscp);
        capture.record(Instant::ZERO, &SimPacket::new(v4, v4, vec![0xff; 5]));
        assert_eq!((capture.frames(), capture.skipped()), (1, 2));
    }

    #[test]
    fn the_env_directory_gets_one_file_per_name() {
        let scratch = Scratch::new("env");
        assert!(Capture::in_dir(None, "x").is_none());
        assert!(Capture::in_dir(Some(OsString::new()), "x").is_none());

        let capture = Capture::in_dir(Some(scratch.0.clone().into()), "sim::go back/n").unwrap();
        drop(capture);
        assert!(scratch.0.join("sim__go_back_n.pcap").is_file());
        assert!(read_back(&scratch.0.join("sim__go_back_n.pcap")).is_empty());
    }
}
