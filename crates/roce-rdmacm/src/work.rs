//! The library's work queue: the thread that reports the end of address and route
//! resolution, as the kernel's `ib_addr` and `rdma_cm` work queues do for librdmacm.
//!
//! The kernel's `rdma_resolve_addr` and `rdma_resolve_route` return once the work is queued;
//! the event comes later, written to the channel by a kernel worker, so the program's thread
//! waits for it in `rdma_get_cm_event` and another thread has to run before it goes on. Ours
//! have nothing to wait for (the UDP backend reaches every IPv4 address), but they report
//! the same way: from this thread, after the call returned. (Queued before the call returned,
//! they let an active side go from its first handshake to its REQ without giving the
//! processor away; perftest `-R` pairs, which race that path against their server's second
//! listen, lost it about as often either way on a loaded machine: docs/rdmacm.md.)

use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::state::with;

/// An event to report: the id (its address and serial) and the event.
struct Work {
    id: usize,
    serial: u64,
    event: i32,
}

static QUEUE: OnceLock<Mutex<Sender<Work>>> = OnceLock::new();

/// Reports `event` (status 0) for the id at `id` from the work thread, if the id (the one of
/// `serial`, not another made at the same address since) still exists then. Without the
/// thread (it could not be started), reports it at once.
pub(crate) fn report_later(id: usize, serial: u64, event: i32) {
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = channel::<Work>();
        let started = roce_cabi::spawn_settled("roce-rdmacm-wq", move || {
            while let Ok(w) = rx.recv() {
                run(&w);
            }
        });
        if let Err(err) = started {
            crate::note(
                "work thread",
                &format!("not started ({err}): events reported at once"),
            );
        }
        Mutex::new(tx)
    });
    let work = Work { id, serial, event };
    let sent = queue
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send(work);
    // No thread to receive it: report it on this one.
    if let Err(std::sync::mpsc::SendError(work)) = sent {
        run(&work);
    }
}

/// Reports one event, if its id is still there. A full pipe or a destroyed channel loses it,
/// as for the CM's events.
fn run(w: &Work) {
    with(|t| {
        if t.ids.get(&w.id).is_some_and(|i| i.serial == w.serial) {
            let _ = t.report(w.id, w.event, 0);
        }
    });
}
