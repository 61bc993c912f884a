//! The calls into libc the exported functions share: `errno`, non-blocking pipes, and the guard
//! that keeps a panic from unwinding into C.

#![allow(unsafe_code)]

use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Sets the calling thread's `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: as in `set_errno`.
    unsafe { *libc::__errno_location() }
}

/// Makes `fd` non-blocking: the libraries write events into pipes the program reads, and must
/// lose an event rather than wait for a program that never reads.
pub fn set_nonblocking(fd: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller owns, with flags read from it.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f`; a panic returns `on_panic` with `errno = EIO` (unwinding into C is undefined).
pub fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_errno(libc::EIO);
        on_panic
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_and_says_eio() {
        set_errno(0);
        assert_eq!(guard(5, || 6), 6);
        assert_eq!(errno(), 0);
        let r = guard(-1, || -> i32 { panic!("inside") });
        assert_eq!(r, -1);
        assert_eq!(errno(), libc::EIO);
    }

    #[test]
    fn a_pipe_becomes_non_blocking() {
        let (r, _w) = std::io::pipe().expect("pipe");
        set_nonblocking(&r).expect("fcntl");
        let mut buf = [0u8; 1];
        let e = std::io::Read::read(&mut &r, &mut buf).expect_err("nothing to read");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
}
