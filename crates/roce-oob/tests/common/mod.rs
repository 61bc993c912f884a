//! The TCP port-18515 payloads of the rxe captures in pcap-fixtures/rxe/, pinned byte for
//! byte with their frame numbers (client 198.18.0.12, server 198.18.0.11), and a replay
//! harness that plays one side of a transcript against our implementation of the other.
//! tests/captures.rs checks these transcripts against the pcap files themselves.

#![allow(dead_code, unreachable_pub)]

use std::pin::Pin;
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, DuplexStream, ReadBuf};

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Client,
    Server,
}

/// One TCP payload.
#[derive(Debug, Clone, Copy)]
pub struct Msg {
    /// Frame number in the capture (1-based, as tshark numbers them).
    pub frame: u32,
    pub from: From,
    pub bytes: &'static [u8],
}

const fn c(frame: u32, bytes: &'static [u8]) -> Msg {
    Msg {
        frame,
        from: From::Client,
        bytes,
    }
}

const fn s(frame: u32, bytes: &'static [u8]) -> Msg {
    Msg {
        frame,
        from: From::Server,
        bytes,
    }
}

/// One capture's exchange.
#[derive(Debug)]
pub struct Transcript {
    /// The file in pcap-fixtures/rxe/.
    pub file: &'static str,
    pub msgs: &'static [Msg],
}

const DONE: &[u8] = b"done\0";
const VERSION: &[u8] = b"6.06\0\0\0\0\0\0\0\0\0\0\0\0";
const CYCLE: &[u8] = b"\x00\x00\x10\x00";
const LINE: &[u8] = b"\x00\x00\x00\x40";
const MTU: &[u8] = b"3\0";

/// An ibv_*_pingpong exchange: the client's line at frame `first`, the server's two frames
/// later, and the client's "done" two after that.
macro_rules! pingpong {
    ($file:literal, $first:literal, $client:literal, $server:literal) => {
        Transcript {
            file: $file,
            msgs: &[
                c($first, $client),
                s($first + 2, $server),
                c($first + 4, DONE),
            ],
        }
    };
}

/// A perftest exchange: the version, cycle, cache-line and MTU messages that open every
/// capture here at the same frames (4 to 13), the client's `$client` and the server's `$server`
/// line at frames 15/16, 18/19 and 20/21, then `rest`.
macro_rules! perftest {
    ($client:expr, $server:expr; $($rest:expr),* $(,)?) => {
        &[
            c(4, VERSION),
            s(6, VERSION),
            c(8, CYCLE),
            s(9, CYCLE),
            c(10, LINE),
            s(11, LINE),
            c(12, MTU),
            s(13, MTU),
            c(15, $client),
            s(16, $server),
            c(18, $client),
            s(19, $server),
            c(20, $client),
            s(21, $server),
            $($rest),*
        ]
    };
}

// ---- ibv_rc_pingpong / ibv_ud_pingpong (rdma-core 44) ----

pub const RC_S64: Transcript = pingpong!(
    "mtu1500-rc_s64_m1024.pcap",
    6,
    b"0000:000011:ad1776:00000000000000000000ffffc612000c\0",
    b"0000:000011:efc206:00000000000000000000ffffc612000b\0"
);

pub const RC_S4096: Transcript = pingpong!(
    "mtu1500-rc_s4096_m1024.pcap",
    4,
    b"0000:000012:4f9a57:00000000000000000000ffffc612000c\0",
    b"0000:000012:a54af7:00000000000000000000ffffc612000b\0"
);

pub const RC_S65536: Transcript = pingpong!(
    "mtu1500-rc_s65536_m1024.pcap",
    4,
    b"0000:000013:741dbc:00000000000000000000ffffc612000c\0",
    b"0000:000013:fba290:00000000000000000000ffffc612000b\0"
);

pub const UD_S512: Transcript = pingpong!(
    "mtu1500-ud_s512.pcap",
    4,
    b"0000:000015:83e88c:00000000000000000000ffffc612000c\0",
    b"0000:000015:a7d8e9:00000000000000000000ffffc612000b\0"
);

pub const RC_MTU9000: Transcript = pingpong!(
    "mtu9000-rc_s4096_m4096.pcap",
    4,
    b"0000:00001e:c1d448:00000000000000000000ffffc612000c\0",
    b"0000:00001e:8b0887:00000000000000000000ffffc612000b\0"
);

pub const PINGPONG: [&Transcript; 5] = [&RC_S64, &RC_S4096, &RC_S65536, &UD_S512, &RC_MTU9000];

// ---- perftest 4.5-0.17, -x 1 (GID index 1, ::ffff:198.18.0.x) ----

const WRITE_C: &[u8] = b"0000:0001:000016:297886:00000771:00007f6076683000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:\0";
const WRITE_S: &[u8] = b"0000:0001:000016:4ed9d6:0000071e:00007f6984fbb000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0b:00000000:\0";

/// `ib_write_bw -x 1 -n 100`. The server's report values (1750...1758) are its uninitialised
/// report struct.
pub const WRITE_BW: Transcript = Transcript {
    file: "mtu1500-write_bw.pcap",
    msgs: perftest![
        WRITE_C, WRITE_S;
        c(1746, WRITE_C),
        s(1747, WRITE_S),
        c(1749, b"\x00\x00\x00\x00\x00\x01\x00\x00"),
        s(1750, b"\x00\x00\x00\x00\x00\x00\x00\x06"),
        c(1751, b"\x00\x00\x00\x00\x00\x00\x00\x64"),
        s(1752, b"\x00\x00\x7f\xff\xed\xfc\xe3\x00"),
        c(1753, b"\x3f\xbf\x1d\xac\x60\x0f\xef\xdc"),
        s(1754, b"\x00\x00\x7f\x69\x85\x4b\xa8\xb0"),
        c(1755, b"\x3f\xb5\xf9\xa5\xd5\x4a\xa4\x46"),
        s(1756, b"\x00\x00\x7f\xff\xed\xf5\x83\xa8"),
        c(1757, b"\x3f\x25\x75\xcb\xf2\x4a\xe4\x6d"),
        s(1758, b"\x00\x00\x7f\x69\x85\x2f\x2a\x80"),
        c(1759, WRITE_C),
        s(1760, WRITE_S),
        c(1761, DONE),
        s(1763, DONE),
    ],
};

const SEND_C: &[u8] = b"0000:0001:000018:bd9acc:00000000:00007f7253882000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:\0";
const SEND_S: &[u8] = b"0000:0001:000018:707da4:00000000:00007f0b0c505000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0b:00000000:\0";

/// `ib_send_bw -x 1 -n 100`: four handshakes before the test, no report.
pub const SEND_BW: Transcript = Transcript {
    file: "mtu1500-send_bw.pcap",
    msgs: perftest![
        SEND_C, SEND_S;
        c(22, SEND_C),
        s(23, SEND_S),
        c(1756, SEND_C),
        s(1757, SEND_S),
        s(1758, DONE),
        c(1760, DONE),
    ],
};

const READ_C: &[u8] = b"0000:0080:000017:920946:00000819:00007fc3e7473000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:\0";
const READ_S: &[u8] = b"0000:0080:000017:e710bf:00000854:00007f72b0852000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0b:00000000:\0";

/// `ib_read_bw -x 1 -n 100`: out_reads 0x80 (rxe's max_qp_rd_atom).
pub const READ_BW: Transcript = Transcript {
    file: "mtu1500-read_bw.pcap",
    msgs: perftest![
        READ_C, READ_S;
        c(1746, READ_C),
        s(1747, READ_S),
        c(1749, b"\x00\x00\x00\x00\x00\x01\x00\x00"),
        s(1750, b"\x00\x00\x00\x00\x00\x00\x00\x06"),
        c(1751, b"\x00\x00\x00\x00\x00\x00\x00\x64"),
        s(1752, b"\x00\x00\x7f\xfd\x07\x98\x13\x00"),
        c(1753, b"\x3f\xba\xcd\x87\x4b\x4f\x25\x42"),
        s(1754, b"\x00\x00\x7f\x72\xb0\xd5\x18\xb0"),
        c(1755, b"\x3f\xb8\xb1\xff\xf1\x53\x15\x29"),
        s(1756, b"\x00\x00\x7f\xfd\x07\x8b\x88\xf8"),
        c(1757, b"\x3f\x28\x1d\xd3\xf1\xab\x22\xaa"),
        s(1758, b"\x00\x00\x7f\x72\xb0\xb8\x9a\x80"),
        c(1759, READ_C),
        s(1760, READ_S),
        s(1761, DONE),
        c(1762, DONE),
    ],
};

pub const PERFTEST: [&Transcript; 3] = [&WRITE_BW, &SEND_BW, &READ_BW];

impl Transcript {
    /// The first message `from` sent.
    pub fn first(&self, from: From) -> &'static [u8] {
        self.msgs
            .iter()
            .find(|m| m.from == from)
            .map(|m| m.bytes)
            .unwrap_or_default()
    }

    /// The first message of `len` bytes `from` sent.
    pub fn first_of_len(&self, from: From, len: usize) -> &'static [u8] {
        self.msgs
            .iter()
            .find(|m| m.from == from && m.bytes.len() == len)
            .map(|m| m.bytes)
            .unwrap_or_default()
    }

    /// The 8-byte report values `from` sent, in order.
    pub fn report(&self, from: From) -> Vec<[u8; 8]> {
        self.msgs
            .iter()
            .filter(|m| m.from == from && m.bytes.len() == 8)
            .map(|m| m.bytes.try_into().unwrap())
            .collect()
    }
}

/// Plays the `peer` side of `t` on `stream`: writes what the peer wrote, reads what the other
/// side wrote and checks it is byte for byte what the real tool wrote, then checks the other
/// side wrote nothing more and closed.
///
/// Before each message the peer writes, it also checks that the other side has not written
/// ahead of its turn (a server must read before it writes). The closing `"done"`s are exempt:
/// perftest writes its own without waiting for the other's.
pub async fn play(mut stream: DuplexStream, t: &Transcript, peer: From) {
    for m in t.msgs {
        if m.from == peer {
            if m.bytes != DONE
                && let Some(byte) = written_ahead(&mut stream).await
            {
                panic!(
                    "{} frame {}: the other side wrote {:?} before its turn",
                    t.file,
                    m.frame,
                    char::from(byte)
                );
            }
            stream.write_all(m.bytes).await.unwrap();
        } else {
            let mut got = vec![0u8; m.bytes.len()];
            stream.read_exact(&mut got).await.unwrap_or_else(|e| {
                panic!("{} frame {}: reading {:?}: {e}", t.file, m.frame, m.from)
            });
            assert_eq!(
                got.escape_ascii().to_string(),
                m.bytes.escape_ascii().to_string(),
                "{} frame {}",
                t.file,
                m.frame
            );
        }
    }
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.unwrap();
    assert!(
        rest.is_empty(),
        "{}: extra bytes {:?}",
        t.file,
        rest.escape_ascii().to_string()
    );
}

/// Lets the other side run until it blocks, then takes a byte if it wrote one.
async fn written_ahead(stream: &mut DuplexStream) -> Option<u8> {
    for _ in 0..32 {
        tokio::task::yield_now().await;
    }
    let mut byte = [0u8; 1];
    std::future::poll_fn(|cx| {
        let mut buf = ReadBuf::new(&mut byte);
        match Pin::new(&mut *stream).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => Poll::Ready(buf.filled().first().copied()),
            Poll::Ready(Err(_)) | Poll::Pending => Poll::Ready(None),
        }
    })
    .await
}

/// The v4-mapped GID `::ffff:198.18.0.<last>` of the capture hosts.
pub fn v4_gid(last: u8) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&[198, 18, 0, last]);
    gid
}
