//! Packet captures in and out, through the pcap-file crate.
//!
//! [`Capture::open`] reads classic pcap and pcapng alike (dumpcap writes pcapng, tcpdump pcap)
//! and yields each frame with its time and link type, [`Capture::from_stream`] the same from a
//! pipe; [`Writer`] writes classic pcap of Ethernet
//! frames (LINKTYPE_ETHERNET), which Wireshark decodes as RoCEv2 on UDP port 4791.

#![warn(missing_docs)]

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Chain, Cursor, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
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
                let link = link_type(reader.header().datalink);
                let packet = reader.next_packet()?;
                Some(link.and_then(|link| {
                    let packet = packet?;
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

/// Writes a classic pcap of Ethernet frames.
#[derive(Debug)]
pub struct Writer<W: Write> {
    inner: PcapWriter<W>,
}

impl Writer<BufWriter<File>> {
    /// Creates (or truncates) a capture file.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        Self::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> Writer<W> {
    /// Starts a capture on `writer` with nanosecond timestamps.
    pub fn new(writer: W) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        Ok(Self {
            inner: PcapWriter::with_header(writer, header)?,
        })
    }

    /// Appends one Ethernet frame captured at `time`.
    pub fn write(&mut self, time: Duration, frame: &[u8]) -> Result<(), CaptureError> {
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        self.inner
            .write_packet(&PcapPacket::new(time, orig_len, frame))?;
        Ok(())
    }

    /// Flushes and returns the writer.
    pub fn into_inner(self) -> W {
        self.inner.into_writer()
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
