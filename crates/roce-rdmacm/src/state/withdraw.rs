//! Taking back the byte of an event that goes before it is read.
//!
//! A channel's fd is readable when the pipe holds a byte, one per queued event; the kernel's
//! rdma_cm file is readable when its list holds an event (`ucma_poll`). When an event leaves
//! its queue unread — its id destroyed (`ucma_destroy_id` frees the id's pending events), or
//! moved with its id to another channel — its byte must go too, or a program's `poll` wakes
//! for nothing. rping's event thread does: it calls `rdma_get_cm_event` after `poll` said
//! the fd was readable, and its main thread, having destroyed the id, may destroy the channel
//! in between; the call then fails and the thread exits the program with 255.
//!
//! The bytes are taken through a read end of the pipe's own (opened again through
//! `/proc/self/fd`, a new open file description), non-blocking whatever the program set on
//! the fd it holds, so that taking back never waits under the tables' lock. Bytes are all
//! alike: taking back one whose event a reader has just read the byte of leaves that reader
//! to find the queue shorter and read on, and the counts agree again.

use std::fs::{File, OpenOptions};
use std::io::{PipeReader, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// A channel's non-blocking read end (none where `/proc` cannot open it: the bytes then stay,
/// and `rdma_get_cm_event` skips a byte without an event behind it, as before).
#[derive(Debug)]
pub(crate) struct Withdraw(Option<File>);

impl Withdraw {
    /// A second read end of `reader`'s pipe.
    pub(crate) fn open(reader: &PipeReader) -> Self {
        let path = format!("/proc/self/fd/{}", reader.as_raw_fd());
        Self(
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .ok(),
        )
    }

    /// Takes back up to `n` bytes: fewer if readers have taken them already.
    pub(crate) fn take_back(&self, n: usize) {
        let Some(file) = &self.0 else { return };
        let mut left = n;
        let mut buf = [0u8; 64];
        while left > 0 {
            match (&*file).read(&mut buf[..left.min(64)]) {
                Ok(0) | Err(_) => break,
                Ok(k) => left -= k,
            }
        }
    }
}
