//! What is done when the program ends: the counters written at exit, or, with
//! `ROCE_VERBS_STATS`, by a fatal signal's default action.

use std::ffi::c_int;

use super::guard;
use crate::state;

/// Called once, at the first `ibv_open_device`: counters are written at exit too, for programs
/// that exit without closing their device. Not in a child of `fork()`: the device is the
/// parent's (its thread is not in the child, and what the child's copy of it would send or
/// write — stale packets on the parent's sockets, the parent's counters as the child's — is the
/// parent's to do), as libibverbs leaves a child's use of the parent's objects undefined.
pub(crate) fn register_at_exit() {
    use std::sync::atomic::{AtomicI32, Ordering};
    static OPENED_BY: AtomicI32 = AtomicI32::new(0);
    extern "C" fn at_exit() {
        // SAFETY: getpid cannot fail.
        if unsafe { libc::getpid() } != OPENED_BY.load(Ordering::Relaxed) {
            return;
        }
        guard((), crate::cm::flush);
        // ACKs left for a post the program did not make before it returned from main.
        guard((), || {
            if let Ok(engine) = state::running_engine() {
                engine.device.flush();
            }
        });
        guard((), state::write_stats);
    }
    // SAFETY: getpid cannot fail.
    OPENED_BY.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    // SAFETY: registering a function that takes and returns nothing; a failure (ENOMEM) only
    // loses the at-exit write.
    let _ = unsafe { libc::atexit(at_exit) };
}

/// With `ROCE_VERBS_STATS` (`roce exec --stats`): a program that Ctrl-C, SIGTERM or SIGHUP ends
/// by the signal's default action still leaves its counters. For each of those signals whose
/// action the program left at the default when it opened the device, a handler writes the
/// signal's number to a pipe (all a handler may safely do); a thread reads it, writes the
/// counters, restores the default action and sends the signal again, so that the program ends
/// as it would have, by that signal, a few milliseconds later. A program that catches the
/// signal itself is not touched (it exits its own way, and the at-exit write runs). In a child
/// of `fork()`, where the thread does not exist, the handler restores the default and
/// re-raises at once.
pub(crate) fn write_stats_on_fatal_signals() {
    use std::io::Read as _;
    use std::os::fd::IntoRawFd as _;
    use std::sync::atomic::{AtomicI32, Ordering};

    static PIPE: AtomicI32 = AtomicI32::new(-1);
    static PID: AtomicI32 = AtomicI32::new(0);
    const SIGNALS: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    /// Restores `sig`'s default action and sends it to this process (both async-signal-safe).
    fn die_by(sig: c_int) {
        // SAFETY: resetting a signal's action to the default and sending it to ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
        }
    }

    extern "C" fn on_signal(sig: c_int) {
        // SAFETY: getpid and write are async-signal-safe; the byte lives on this stack.
        if unsafe { libc::getpid() } != PID.load(Ordering::Relaxed) {
            die_by(sig);
            return;
        }
        let byte = sig as u8;
        // SAFETY: writing one byte from a live local to the pipe's write end.
        unsafe { libc::write(PIPE.load(Ordering::Relaxed), (&raw const byte).cast(), 1) };
    }

    let Ok((mut reader, writer)) = std::io::pipe() else {
        return;
    };
    PIPE.store(writer.into_raw_fd(), Ordering::Relaxed);
    // SAFETY: getpid cannot fail.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    let spawned = roce_cabi::spawn_settled("roce-verbs-signals", move || {
        let mut byte = [0u8];
        if reader.read_exact(&mut byte).is_ok() {
            guard((), state::write_stats);
            die_by(c_int::from(byte[0]));
        }
    });
    if spawned.is_err() {
        return;
    }
    for sig in SIGNALS {
        // SAFETY: sigaction reads and writes the plain C structs given; the handler only calls
        // async-signal-safe functions.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}
