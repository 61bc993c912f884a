//! Threads that have finished starting when the call that starts them returns.
//!
//! A program sees our libraries as it would see rdma-core's, which start no thread of their
//! own: when a verb returns, nothing of the library runs beside the program, and middleware
//! may count on that. UCX, as it opens a device (its registration cache asks for memory
//! events), hooks libc's `munmap` and `mmap` by rewriting their first bytes in place
//! (`UCX_MEM_MMAP_HOOK_MODE=bistro`, its default on x86-64), with no lock a thread of ours
//! could take: a thread that calls them meanwhile runs half-written code. A thread still
//! starting makes its first allocations: for a library the program loaded with `dlopen`, the
//! first use of its thread-locals (`__tls_get_addr`) allocates them, and glibc gives a
//! thread's first allocation a heap of its own, which `mmap`s twice the heap's size and
//! `munmap`s the unaligned ends. A rank of Open MPI over UCX died of a segmentation fault
//! ("Invalid permissions") in such a thread of ours, just started, in `__munmap` under
//! `malloc` under `__tls_get_addr` — once, in one of about a dozen CI runs of the 16-rank
//! test; 60 runs of that test alone, with the other core loaded, did not bring it back, so
//! the race above is read from that one backtrace.
//!
//! [`spawn_settled`] returns once the thread has run that start (std's own, which sets the
//! thread's name and its handle in a thread-local of the library std is linked into) and its
//! first allocation. What the thread does after is its work, in the NIC's calls
//! or on signals, as the driver of a hardware NIC runs in the kernel.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Starts `work` on a thread named `name` and returns once the thread has started: std's start
/// has run in it, and it has allocated (see the module's notes). An error is the thread's
/// creation's.
pub fn spawn_settled<T, F>(name: &str, work: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // The thread's first allocation, and its heap with it, before the caller goes on.
    spawn_after(
        name,
        || drop(std::hint::black_box(Box::new([0u8; 64]))),
        work,
    )
}

/// Starts a thread named `name` that runs `settle`, then `work`; returns once `settle` ran (or
/// the thread died in it).
fn spawn_after<T, S, F>(name: &str, settle: S, work: F) -> io::Result<JoinHandle<T>>
where
    S: FnOnce() + Send + 'static,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (started, wait) = mpsc::sync_channel::<()>(1);
    let handle = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            settle();
            let _ = started.send(());
            work()
        })?;
    // A thread that dies before it sends has dropped `started`: `recv` returns then too.
    let _ = wait.recv();
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn the_call_returns_after_the_thread_settled_and_before_its_work() {
        let settled = Arc::new(AtomicBool::new(false));
        let worked = Arc::new(AtomicBool::new(false));
        let (s, w) = (settled.clone(), worked.clone());
        let (go, wait) = mpsc::channel::<()>();
        let handle = spawn_after(
            "roce-settle-t",
            move || {
                std::thread::sleep(Duration::from_millis(30));
                s.store(true, Ordering::SeqCst);
            },
            move || {
                let _ = wait.recv();
                w.store(true, Ordering::SeqCst);
                7
            },
        )
        .expect("spawn");
        assert!(
            settled.load(Ordering::SeqCst),
            "returned before the thread settled"
        );
        assert!(
            !worked.load(Ordering::SeqCst),
            "the work ran before the call returned"
        );
        go.send(()).expect("the thread waits");
        assert_eq!(handle.join().expect("join"), 7);
        assert!(worked.load(Ordering::SeqCst));
    }

    #[test]
    fn a_settled_thread_has_its_name_and_runs_its_work() {
        let handle = spawn_settled("roce-settled-t", || {
            std::fs::read_to_string("/proc/thread-self/comm").expect("comm")
        })
        .expect("spawn");
        assert_eq!(handle.join().expect("join").trim_end(), "roce-settled-t");
    }

    #[test]
    fn a_thread_that_dies_settling_does_not_hang_the_caller() {
        let handle = spawn_after("roce-settle-dies", || panic!("in settle"), || 1).expect("spawn");
        assert!(handle.join().is_err());
    }
}
