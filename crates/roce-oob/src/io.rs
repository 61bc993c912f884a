//! Whole-message reads and writes with typed errors.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::{DONE, OobError, escaped};

/// A bidirectional byte stream the exchanges run over: a `TcpStream`, or anything that reads
/// and writes as one (a test's duplex pipe).
pub trait Stream: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin + ?Sized> Stream for T {}

/// Reads exactly `buf.len()` bytes; the end of the stream before that is [`OobError::Closed`].
pub(crate) async fn read_msg<S>(
    stream: &mut S,
    buf: &mut [u8],
    message: &'static str,
) -> Result<(), OobError>
where
    S: AsyncRead + Unpin + ?Sized,
{
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]).await {
            Ok(0) => {
                return Err(OobError::Closed {
                    message,
                    got,
                    expected: buf.len(),
                });
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => return Err(OobError::Io { message, source }),
        }
    }
    Ok(())
}

/// Writes one whole message and flushes it (one `write_all` of the complete buffer, so a TCP
/// stream sends it in one segment and the peer's single `read()` gets all of it).
pub(crate) async fn write_msg<S>(
    stream: &mut S,
    bytes: &[u8],
    message: &'static str,
) -> Result<(), OobError>
where
    S: AsyncWrite + Unpin + ?Sized,
{
    let result = async {
        stream.write_all(bytes).await?;
        stream.flush().await
    }
    .await;
    result.map_err(|source| OobError::Io { message, source })
}

/// Reads the 5-byte `"done\0"` and checks it.
pub(crate) async fn read_done<S>(stream: &mut S) -> Result<(), OobError>
where
    S: AsyncRead + Unpin + ?Sized,
{
    let mut buf = [0; DONE.len()];
    read_msg(stream, &mut buf, "closing \"done\"").await?;
    if buf == DONE {
        Ok(())
    } else {
        Err(OobError::NotDone(escaped(&buf)))
    }
}
