//! Packet captures in and out, through the pcap-file crate.
//!
//! [`Capture::open`] reads classic pcap and pcapng alike (dumpcap writes pcapng, tcpdump pcap)
//! and yields each frame with its time and link type, [`Capture::from_stream`] the same from a
//! pipe; [`Writer`] writes classic pcap of Ethernet
//! frames (LINKTYPE_ETHERNET), which Wireshark decodes as RoCEv2 on UDP port 4791, whole or cut
//! to a snap length ([`SnapLen`], tcpdump's `-s`).

#![warn(missing_docs)]

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Chain, Cursor, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter, RawPcapPacket};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, PcapError};
use roce_wire::frame::LinkType;

/// Why a capture could not be read or written. Each message says the cause once (none of them
/// also returns it as its `source`), so that `{err:#}` in anyhow does not repeat it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The file could not be opened, read or written.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Not one byte to read.
    #[error("the file is empty (not even a pcap or pcapng header)")]
    Empty,
    /// The input ended inside the file header.
    #[error("cut short in the middle of its pcap or pcapng header")]
    TruncatedHeader,
    /// The input ended inside a packet (or pcapng block): a capture copied while it was being
    /// written, or a `tcpdump -w -` stopped by a signal. The frames before it were read.
    #[error("cut short in the middle of a packet")]
    Truncated,
    /// The file is not a pcap or pcapng capture, or is damaged.
    #[error("not a readable pcap or pcapng capture: {0}")]
    Format(PcapError),
    /// A link type that has no IP inside that we know how to find.
    #[error(
        "link type {0:?} is not supported (Ethernet, Linux cooked capture v1 and v2, and raw IP are)"
    )]
    LinkType(DataLink),
}

impl From<PcapError> for CaptureError {
    /// pcap-file reports the end of the input inside a record as an `UnexpectedEof` I/O error.
    fn from(err: PcapError) -> Self {
        match err {
            PcapError::IoError(io) if io.kind() == io::ErrorKind::UnexpectedEof => Self::Truncated,
            PcapError::IoError(io) => Self::Io(io),
            other => Self::Format(other),
        }
    }
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedFrame {
    /// Capture time, since the Unix epoch (or the simulation's start).
    pub time: Duration,
    /// What the bytes start with.
    pub link: LinkType,
    /// The frame as captured (possibly cut to the snap length).
    pub data: Vec<u8>,
    /// The frame's length on the wire.
    pub orig_len: u32,
}

/// A capture being read, pcap or pcapng.
pub enum Capture<R: Read> {
    /// Classic pcap.
    Pcap(PcapReader<R>),
    /// pcapng, with the link type of each interface seen so far.
    PcapNg(PcapNgReader<R>, Vec<DataLink>),
}

impl Capture<BufReader<File>> {
    /// Opens a capture file, pcap or pcapng by its magic number.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        let mut file = BufReader::new(File::open(path)?);
        let magic = read_magic(&mut file)?;
        file.seek(SeekFrom::Start(0))?;
        Self::from_reader(file, magic)
    }
}

impl<R: Read> Capture<Chain<Cursor<[u8; 4]>, R>> {
    /// Reads a capture from a stream that cannot seek (a pipe, standard input): its first four
    /// bytes tell pcap from pcapng and are then read again from memory. Empty input is
    /// [`CaptureError::Empty`].
    pub fn from_stream(mut reader: R) -> Result<Self, CaptureError> {
        let magic = read_magic(&mut reader)?;
        Self::from_reader(Cursor::new(magic).chain(reader), magic)
    }
}

/// The first four bytes, read through short reads (a pipe gives what it has).
fn read_magic(reader: &mut impl Read) -> Result<[u8; 4], CaptureError> {
    let mut magic = [0; 4];
    let mut got = 0;
    while got < magic.len() {
        match reader.read(&mut magic[got..]) {
            Ok(0) if got == 0 => return Err(CaptureError::Empty),
            Ok(0) => return Err(CaptureError::TruncatedHeader),
            Ok(n) => got += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(magic)
}

impl<R: Read> Capture<R> {
    /// Reads a capture from `reader`, whose first four bytes are `magic`.
    pub fn from_reader(reader: R, magic: [u8; 4]) -> Result<Self, CaptureError> {
        let header = |err: PcapError| match CaptureError::from(err) {
            CaptureError::Truncated => CaptureError::TruncatedHeader,
            other => other,
        };
        if magic == PCAPNG_MAGIC {
            Ok(Self::PcapNg(
                PcapNgReader::new(reader).map_err(header)?,
                Vec::new(),
            ))
        } else {
            let pcap = PcapReader::new(reader).map_err(header)?;
            link_type(pcap.header().datalink)?;
            Ok(Self::Pcap(pcap))
        }
    }

    /// The next frame, `None` at the end.
    pub fn next_frame(&mut self) -> Option<Result<CapturedFrame, CaptureError>> {
        match self {
            Self::Pcap(reader) => {
                let header = reader.header();
                let link = link_type(header.datalink);
                let packet = reader.next_raw_packet()?;
                Some(link.and_then(|link| {
                    let packet = checked(packet?, header)?;
                    Ok(CapturedFrame {
                        time: packet.timestamp,
                        link,
                        data: packet.data.into_owned(),
                        orig_len: packet.orig_len,
                    })
                }))
            }
            Self::PcapNg(reader, interfaces) => loop {
                let block = match reader.next_block()? {
                    Ok(block) => block,
                    Err(err) => return Some(Err(err.into())),
                };
                let (interface, time, data, orig_len) = match block {
                    Block::InterfaceDescription(idb) => {
                        interfaces.push(idb.linktype);
                        continue;
                    }
                    Block::EnhancedPacket(epb) => (
                        epb.interface_id as usize,
                        epb.timestamp,
                        epb.data,
                        epb.original_len,
                    ),
                    Block::SimplePacket(spb) => (0, Duration::ZERO, spb.data, spb.original_len),
                    _ => continue,
                };
                let datalink = interfaces
                    .get(interface)
                    .copied()
                    .unwrap_or(DataLink::ETHERNET);
                return Some(link_type(datalink).map(|link| CapturedFrame {
                    time,
                    link,
                    data: data.into_owned(),
                    orig_len,
                }));
            },
        }
    }
}

impl<R: Read> std::fmt::Debug for Capture<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pcap(reader) => f.debug_tuple("Pcap").field(&reader.header()).finish(),
            Self::PcapNg(_, interfaces) => f.debug_tuple("PcapNg").field(interfaces).finish(),
        }
    }
}

impl<R: Read> Iterator for Capture<R> {
    type Item = Result<CapturedFrame, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_frame()
    }
}

/// A record as pcap-file checks it, but for one check: pcap-file 2.0 refuses a record whose
/// original length exceeds the file's snap length, which is every record that the snap length
/// cut (what `tcpdump -s 128` writes). Its captured length must still be at most the original.
fn checked(raw: RawPcapPacket<'_>, header: PcapHeader) -> Result<PcapPacket<'_>, PcapError> {
    raw.try_into_pcap_packet(header.ts_resolution, u32::MAX)
}

/// How much of each frame a capture keeps, as tcpdump's `-s`: the file header's snap length, and
/// the most bytes of a frame a record holds (its original length is kept, so that a reader
/// knows what is missing: `roce dump` decodes what was kept; Wireshark's InfiniBand dissector
/// calls a cut RoCE packet malformed, as it does any `tcpdump -s` capture).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SnapLen(u32);

impl SnapLen {
    /// Whole frames: the snap length of a file with no limit (65535, what pcap-file and older
    /// tcpdumps write; a RoCE frame is at most a 9000-byte MTU plus headers).
    pub const WHOLE: Self = Self(65_535);

    /// At most `bytes` of each frame; 0 means whole frames (tcpdump's `-s 0`).
    pub const fn new(bytes: u32) -> Self {
        if bytes == 0 { Self::WHOLE } else { Self(bytes) }
    }

    /// The snap length in bytes.
    pub const fn bytes(self) -> u32 {
        self.0
    }

    /// The part of `frame` a record keeps.
    pub fn cut(self, frame: &[u8]) -> &[u8] {
        let keep = usize::try_from(self.0).unwrap_or(usize::MAX);
        &frame[..frame.len().min(keep)]
    }
}

impl Default for SnapLen {
    fn default() -> Self {
        Self::WHOLE
    }
}

/// Writes a classic pcap of Ethernet frames.
#[derive(Debug)]
pub struct Writer<W: Write> {
    inner: PcapWriter<W>,
    snaplen: SnapLen,
}

impl Writer<BufWriter<File>> {
    /// Creates (or truncates) a capture file.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        Self::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> Writer<W> {
    /// Starts a capture of whole frames on `writer` with nanosecond timestamps.
    pub fn new(writer: W) -> Result<Self, CaptureError> {
        Self::with_snaplen(writer, SnapLen::WHOLE)
    }

    /// Starts a capture on `writer` that keeps at most `snaplen` bytes of each frame.
    pub fn with_snaplen(writer: W, snaplen: SnapLen) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            snaplen: snaplen.bytes(),
            ..PcapHeader::default()
        };
        Ok(Self {
            inner: PcapWriter::with_header(writer, header)?,
            snaplen,
        })
    }

    /// Appends one Ethernet frame captured at `time`: its first snap length bytes, and its
    /// whole length as the original length.
    pub fn write(&mut self, time: Duration, frame: &[u8]) -> Result<(), CaptureError> {
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let kept = self.snaplen.cut(frame);
        self.inner
            .write_packet(&PcapPacket::new(time, orig_len, kept))?;
        Ok(())
    }

    /// Flushes and returns the writer.
    pub fn into_inner(self) -> W {
        self.inner.into_writer()
    }
}

/// A classic pcap that several processes write at once: each opens it for appending, the first
/// to find it empty writes the file header (under the file's lock), and every record goes out
/// in one `write` of an `O_APPEND` descriptor, so records of different processes never
/// interleave. Frames appear in the order they were written, which across processes is nearly,
/// not exactly, the order of their timestamps (Wireshark sorts nothing and minds nothing).
#[derive(Debug)]
pub struct AppendWriter {
    file: File,
    snaplen: SnapLen,
}

impl AppendWriter {
    /// Opens `path` for appending (creating it), with the header of a capture of Ethernet
    /// frames with nanosecond timestamps that keeps `snaplen` bytes of each, if it is empty.
    pub fn open(path: impl AsRef<Path>, snaplen: SnapLen) -> Result<Self, CaptureError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        file.lock()?;
        if file.metadata()?.len() == 0 {
            let header = PcapHeader {
                datalink: DataLink::ETHERNET,
                ts_resolution: pcap_file::TsResolution::NanoSecond,
                snaplen: snaplen.bytes(),
                endianness: pcap_file::Endianness::Big,
                ..PcapHeader::default()
            };
            let mut bytes = Vec::with_capacity(24);
            header.write_to(&mut bytes)?;
            (&file).write_all(&bytes)?;
        }
        file.unlock()?;
        Ok(Self { file, snaplen })
    }

    /// Appends one Ethernet frame captured at `time`, as [`Writer::write`] does, in one write.
    pub fn write(&mut self, time: Duration, frame: &[u8]) -> Result<(), CaptureError> {
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let kept = self.snaplen.cut(frame);
        // The record header in the file header's byte order (pcap-file's default, big-endian,
        // as `Writer` writes it): seconds, nanoseconds, bytes kept, bytes on the wire.
        let mut record = Vec::with_capacity(16 + kept.len());
        let seconds = u32::try_from(time.as_secs()).unwrap_or(u32::MAX);
        let kept_len = u32::try_from(kept.len()).unwrap_or(u32::MAX);
        for word in [seconds, time.subsec_nanos(), kept_len, orig_len] {
            record.extend_from_slice(&word.to_be_bytes());
        }
        record.extend_from_slice(kept);
        (&self.file).write_all(&record)?;
        Ok(())
    }
}

fn link_type(datalink: DataLink) -> Result<LinkType, CaptureError> {
    match datalink {
        DataLink::ETHERNET => Ok(LinkType::Ethernet),
        DataLink::LINUX_SLL => Ok(LinkType::LinuxSll),
        DataLink::LINUX_SLL2 => Ok(LinkType::LinuxSll2),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Ok(LinkType::RawIp),
        other => Err(CaptureError::LinkType(other)),
    }
}

/// The first four bytes of a pcapng file (a section header block).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// Two writers appending to one file, as two processes sharing a NIC do: one header, every
    /// record of both read back whole, in the order they were written.
    #[test]
    fn two_appending_writers_make_one_readable_capture() {
        let path = std::env::temp_dir().join(format!("roce-pcap-append-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut a = AppendWriter::open(&path, SnapLen::WHOLE).unwrap();
        let mut b = AppendWriter::open(&path, SnapLen::WHOLE).unwrap();
        let frames: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
        for (i, frame) in frames.iter().enumerate() {
            let writer = if i % 2 == 0 { &mut a } else { &mut b };
            writer
                .write(Duration::new(1_700_000_000, i as u32), frame)
                .unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let mut magic = [0; 4];
        magic.copy_from_slice(&bytes[..4]);
        let read: Vec<_> = Capture::from_reader(Cursor::new(bytes), magic)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(read.len(), frames.len());
        for (i, (got, want)) in read.iter().zip(&frames).enumerate() {
            assert_eq!(got.data, *want, "frame {i}");
            assert_eq!(got.time, Duration::new(1_700_000_000, i as u32));
        }
    }

    #[test]
    fn write_then_read_back() {
        let mut writer = Writer::new(Vec::new()).unwrap();
        writer
            .write(Duration::from_nanos(1_500), &[1, 2, 3])
            .unwrap();
        writer.write(Duration::from_secs(2), &[4; 60]).unwrap();
        let bytes = writer.into_inner();
        let mut magic = [0; 4];
        magic.copy_from_slice(&bytes[..4]);
        let frames: Vec<_> = Capture::from_reader(Cursor::new(bytes), magic)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].time, Duration::from_nanos(1_500));
        assert_eq!(frames[0].data, [1, 2, 3]);
        assert_eq!(frames[1].link, LinkType::Ethernet);
        assert_eq!(frames[1].orig_len, 60);
    }

    #[test]
    fn a_snap_length_cuts_records_and_keeps_their_length() {
        let mut writer = Writer::with_snaplen(Vec::new(), SnapLen::new(64)).unwrap();
        writer.write(Duration::from_secs(1), &[7; 1000]).unwrap();
        writer.write(Duration::from_secs(2), &[8; 40]).unwrap();
        let bytes = writer.into_inner();
        let snaplen = |bytes: &[u8]| PcapReader::new(bytes).unwrap().header().snaplen;
        assert_eq!(snaplen(&bytes), 64);
        let frames: Vec<_> = Capture::from_stream(&bytes[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(frames[0].data, [7; 64]);
        assert_eq!(frames[0].orig_len, 1000);
        assert_eq!(
            frames[1].data, [8; 40],
            "a frame under the snap length is whole"
        );
        assert_eq!(frames[1].orig_len, 40);
        assert_eq!(SnapLen::new(0), SnapLen::WHOLE);
        let whole = Writer::new(Vec::new()).unwrap().into_inner();
        assert_eq!(snaplen(&whole), 65_535);
    }

    #[test]
    fn records_cut_by_another_tool_are_read() {
        // What tcpdump -s 20 writes: a snap length of 20 and a record of 20 bytes of 60.
        let header = PcapHeader {
            snaplen: 20,
            ..PcapHeader::default()
        };
        let mut bytes = Vec::new();
        let mut writer = PcapWriter::with_header(&mut bytes, header).unwrap();
        writer
            .write_raw_packet(&RawPcapPacket {
                ts_sec: 1,
                ts_frac: 0,
                incl_len: 20,
                orig_len: 60,
                data: vec![5; 20].into(),
            })
            .unwrap();
        let frames: Vec<_> = Capture::from_stream(&bytes[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(frames[0].data, [5; 20]);
        assert_eq!(frames[0].orig_len, 60);
    }

    #[test]
    fn garbage_is_a_format_error() {
        let bytes = vec![0x42; 64];
        let Err(err) = Capture::from_reader(Cursor::new(bytes), [0x42; 4]) else {
            panic!("garbage opened as a capture");
        };
        assert!(matches!(err, CaptureError::Format(_)), "{err}");
    }

    fn two_frames() -> Vec<u8> {
        let mut writer = Writer::new(Vec::new()).unwrap();
        writer.write(Duration::from_secs(1), &[1; 60]).unwrap();
        writer.write(Duration::from_secs(2), &[2; 60]).unwrap();
        writer.into_inner()
    }

    /// A reader that cannot seek and hands out at most 7 bytes per read, as a pipe may.
    struct Pipe<'a>(&'a [u8]);

    impl Read for Pipe<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(7).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_stream_reads_like_a_file() {
        let bytes = two_frames();
        let frames: Vec<_> = Capture::from_stream(Pipe(&bytes))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[1].data, [2; 60]);
    }

    #[test]
    fn empty_and_short_inputs_say_so() {
        let err = Capture::from_stream(Pipe(&[])).unwrap_err();
        assert!(matches!(err, CaptureError::Empty), "{err}");
        let bytes = two_frames();
        let err = Capture::from_stream(Pipe(&bytes[..3])).unwrap_err();
        assert!(matches!(err, CaptureError::TruncatedHeader), "{err}");
        let err = Capture::from_stream(Pipe(&bytes[..10])).unwrap_err();
        assert!(matches!(err, CaptureError::TruncatedHeader), "{err}");
    }

    #[test]
    fn a_capture_cut_inside_a_packet_yields_the_frames_before_it() {
        let bytes = two_frames();
        let mut capture = Capture::from_stream(Pipe(&bytes[..bytes.len() - 10])).unwrap();
        assert_eq!(capture.next().unwrap().unwrap().data, [1; 60]);
        let err = capture.next().unwrap().unwrap_err();
        assert!(matches!(err, CaptureError::Truncated), "{err}");
        assert_eq!(err.to_string(), "cut short in the middle of a packet");
    }

    #[test]
    fn causes_are_told_once() {
        let err = Capture::open("/nonexistent/roce-pcap-test.pcap").unwrap_err();
        assert!(matches!(err, CaptureError::Io(_)), "{err}");
        // The I/O error is the message, not also its source: anyhow's `{:#}` prints it once.
        assert!(std::error::Error::source(&err).is_none(), "{err}");
        assert!(err.to_string().contains("No such file"), "{err}");
        let Err(err) = Capture::from_reader(Cursor::new(vec![0x42; 64]), [0x42; 4]) else {
            panic!("garbage opened as a capture");
        };
        assert!(std::error::Error::source(&err).is_none(), "{err}");
    }

    #[test]
    fn cooked_captures_v1_and_v2_are_read() {
        for (datalink, link) in [
            (DataLink::LINUX_SLL, LinkType::LinuxSll),
            (DataLink::LINUX_SLL2, LinkType::LinuxSll2),
        ] {
            let header = PcapHeader {
                datalink,
                ..PcapHeader::default()
            };
            let mut writer = PcapWriter::with_header(Vec::new(), header).unwrap();
            writer
                .write_packet(&PcapPacket::new(Duration::ZERO, 20, &[0; 20]))
                .unwrap();
            let bytes = writer.into_writer();
            let frames: Vec<_> = Capture::from_stream(&bytes[..])
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(frames[0].link, link);
        }
    }
}
