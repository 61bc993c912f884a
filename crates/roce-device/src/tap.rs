//! A capture tap: a device can write every frame it sends (and optionally receives) into a pcap
//! that Wireshark opens. The UDP payload is framed as Ethernet/IP/UDP with the fields the NIC
//! computed its ICRC over (DF, and IPv4 ID 0 or the packet's place in a batch), so `roce dump --strict` checks every ICRC.

use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use roce_core::{Ecn, Transmit};
use roce_pcap::{AppendWriter, CaptureError, SnapLen, Writer};
use roce_wire::frame::FrameRepr;

use crate::backend::Received;

/// A pcap file that several devices may share (clones write to the same file).
#[derive(Debug, Clone)]
pub struct Tap {
    writer: Arc<Mutex<Sink>>,
    received_too: bool,
}

impl Tap {
    /// Creates (or truncates) `path`. With `received_too`, received frames are written as well
    /// as sent ones (two devices sharing a tap should record only what they send, or every
    /// packet appears twice). Each frame is cut to `snaplen` (its original length is kept).
    pub fn create(
        path: impl AsRef<Path>,
        received_too: bool,
        snaplen: SnapLen,
    ) -> Result<Self, CaptureError> {
        // Unbuffered: every frame is in the file as soon as it is written, whenever the process
        // stops (a tap is for looking at a run, not for speed).
        let writer = Writer::with_snaplen(File::create(path)?, snaplen)?;
        Ok(Self {
            writer: Arc::new(Mutex::new(Sink::Own(writer))),
            received_too,
        })
    }

    /// Appends to `path` (creating it), as every process of a shared NIC does: one capture of
    /// the whole NIC, each record written whole ([`AppendWriter`]). Whoever starts the run
    /// empties the file first.
    pub fn append(
        path: impl AsRef<Path>,
        received_too: bool,
        snaplen: SnapLen,
    ) -> Result<Self, CaptureError> {
        Ok(Self {
            writer: Arc::new(Mutex::new(Sink::Shared(AppendWriter::open(path, snaplen)?))),
            received_too,
        })
    }

    pub(crate) fn received_too(&self) -> bool {
        self.received_too
    }

    /// Records a datagram the device sends: `transmit`'s addresses and header fields, the IPv4
    /// identification `ip_id` it leaves with, and its payload.
    pub(crate) fn record_transmit(&self, transmit: &Transmit, ip_id: u16, payload: &[u8]) {
        let src = SocketAddr::new(transmit.src, transmit.src_port);
        let fields = (transmit.ecn, transmit.dscp, transmit.ttl);
        self.record(src, transmit.dst, fields, ip_id, payload);
    }

    /// Records a datagram the device received, as the backend saw it (DSCP and TTL are not
    /// visible there: 0 and 64).
    pub(crate) fn record_received(&self, received: &Received, payload: &[u8]) {
        let ip_id = received.ip_id.unwrap_or(received.segment);
        self.record(
            received.src,
            received.dst,
            (received.ecn, 0, 64),
            ip_id,
            payload,
        );
    }

    /// Records one datagram, with the IPv4 identification its ICRC covers.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        src: SocketAddr,
        dst: SocketAddr,
        (ecn, dscp, ttl): (Ecn, u8, u8),
        ip_id: u16,
        payload: &[u8],
    ) {
        let mut repr = FrameRepr::for_datagram(src, dst, ecn, dscp, ttl);
        if repr.ip.identification.is_some() {
            repr.ip.identification = Some(ip_id);
        }
        let mut frame = vec![0; repr.header_len() + payload.len()];
        let Ok(at) = repr.emit_headers(&mut frame, payload.len()) else {
            return;
        };
        frame[at..].copy_from_slice(payload);
        let time = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let mut writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(err) = writer.write(time, &frame) {
            tracing::warn!(error = %err, "capture tap: write failed");
        }
    }
}

/// Where a tap's frames go: a capture of its own, or one that other processes append to too.
#[derive(Debug)]
enum Sink {
    Own(Writer<File>),
    Shared(AppendWriter),
}

impl Sink {
    fn write(&mut self, time: Duration, frame: &[u8]) -> Result<(), CaptureError> {
        match self {
            Self::Own(writer) => writer.write(time, frame),
            Self::Shared(writer) => writer.write(time, frame),
        }
    }
}
