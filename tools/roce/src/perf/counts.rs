//! The values of `roce perf`'s count options (`-n`, `-s`, `-D`, `-t`, `-r`, `--timeout`):
//! whole numbers of at least 1, each refused with a sentence that says why 0 means nothing.

/// Why a count option (`-n`, `-s`, `-D`, `-t`, `-r`, `--timeout`) is refused.
#[derive(Debug, thiserror::Error)]
pub(super) enum CountError {
    /// Not a whole number.
    #[error("{0:?} is not a whole number")]
    NotWhole(String),
    /// 0, and why that means nothing here.
    #[error("{0}")]
    Zero(&'static str),
    /// More than a `u32` holds.
    #[error("{0} is more than {max}", max = u32::MAX)]
    AboveU32(u64),
    /// More seconds than perftest's `int` holds.
    #[error("{0} seconds is more than perftest's {max}", max = i32::MAX)]
    SecondsAboveI32(u32),
}

/// A whole number of at least 1, or why not.
fn positive(text: &str, zero: &'static str) -> Result<u64, CountError> {
    let n: u64 = text
        .parse()
        .map_err(|_| CountError::NotWhole(text.to_owned()))?;
    if n == 0 {
        return Err(CountError::Zero(zero));
    }
    Ok(n)
}

fn positive_u32(text: &str, zero: &'static str) -> Result<u32, CountError> {
    let n = positive(text, zero)?;
    u32::try_from(n).map_err(|_| CountError::AboveU32(n))
}

pub(super) fn iterations(text: &str) -> Result<u32, CountError> {
    positive_u32(
        text,
        "0 iterations: a test needs at least 1 (-D SECS runs for a time instead)",
    )
}

pub(super) fn bytes(text: &str) -> Result<u32, CountError> {
    positive_u32(text, "0 bytes: a message has at least 1")
}

pub(super) fn depth(text: &str) -> Result<u32, CountError> {
    positive_u32(text, "0: nothing would ever be posted; give at least 1")
}

pub(super) fn cq_mod(text: &str) -> Result<u32, CountError> {
    positive_u32(
        text,
        "0: no WR would ask for a completion; give at least 1 (1: every WR)",
    )
}

pub(super) fn seconds(text: &str) -> Result<u32, CountError> {
    let n = positive_u32(text, "0 seconds: give at least 1")?;
    if n > i32::MAX as u32 {
        return Err(CountError::SecondsAboveI32(n));
    }
    Ok(n)
}

pub(super) fn timeout(text: &str) -> Result<u64, CountError> {
    positive(
        text,
        "0 seconds: every wait would give up at once; give at least 1",
    )
}
