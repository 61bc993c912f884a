//! CM events on a channel: queued (a byte in the pipe each), taken by `rdma_get_cm_event`,
//! acked by `rdma_ack_cm_event`.

use std::io::{PipeReader, Read, Write};
use std::sync::Arc;

use super::{EINVAL, Event, Tables, os, with};
use crate::Errno;
use crate::abi::{RdmaCmEvent, RdmaCmId};

impl Tables {
    /// Whether an event for `id` could be queued now (`EINVAL`: the id is unknown or its channel
    /// was destroyed): `Ok` with the id's serial, for an event reported later
    /// (`crate::work::report_later`); `Ok(None)` for a synchronous id, which gets none.
    pub(crate) fn reportable(&self, id: usize) -> Result<Option<u64>, Errno> {
        let i = self.ids.get(&id).ok_or(EINVAL)?;
        match i.channel {
            None => Ok(None),
            Some(ch) if self.channels.contains_key(&ch) => Ok(Some(i.serial)),
            Some(_) => Err(EINVAL),
        }
    }

    /// Queues `event` for `id` on its channel; a synchronous id gets none. Nothing is queued
    /// if this fails (`EINVAL`: the channel was destroyed, `ENOBUFS`: its pipe is full).
    pub(crate) fn report(&mut self, id: usize, event: i32, status: i32) -> Result<(), Errno> {
        let Some(ch_addr) = self.ids.get(&id).ok_or(EINVAL)?.channel else {
            return Ok(());
        };
        let ch = self.channels.get_mut(&ch_addr).ok_or(EINVAL)?;
        match (&*ch.writer).write(&[1]) {
            Ok(1) => {}
            Ok(_) => return Err(Errno(libc::ENOBUFS)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(Errno(libc::ENOBUFS));
            }
            Err(e) => return Err(os(&e)),
        }
        // SAFETY of the union: zeroed `param` is a valid rdma_conn_param (no private data).
        let e = Event::new(RdmaCmEvent {
            id: id as *mut RdmaCmId,
            listen_id: std::ptr::null_mut(),
            event,
            status,
            param: crate::abi::RdmaCmEventParam {
                conn: crate::abi::RdmaConnParam {
                    private_data: std::ptr::null(),
                    private_data_len: 0,
                    responder_resources: 0,
                    initiator_depth: 0,
                    flow_control: 0,
                    retry_count: 0,
                    rnr_retry_count: 0,
                    srq: 0,
                    qp_num: 0,
                },
            },
        });
        ch.queue.push_back(e.c.addr());
        self.events.insert(e.c.addr(), e);
        Ok(())
    }

    /// Drops the queued (not yet taken) events of `id`, when it is destroyed, and takes their
    /// bytes back (`Withdraw`); a byte a reader took meanwhile has no event behind it, and
    /// `get_event` reads on.
    pub(crate) fn drop_queued(&mut self, id: usize) {
        let events = &mut self.events;
        for ch in self.channels.values_mut() {
            let before = ch.queue.len();
            ch.queue.retain(|e| {
                let mine = events.get(e).is_some_and(|ev| ev.c.get().id as usize == id);
                if mine {
                    events.remove(e);
                }
                !mine
            });
            ch.withdraw.take_back(before - ch.queue.len());
        }
    }
}

/// `rdma_get_cm_event`: the channel's next event, waiting for it unless the program made the
/// fd non-blocking (`EAGAIN`).
pub(crate) fn get_event(channel: usize) -> Result<*mut RdmaCmEvent, Errno> {
    // Both ends of the pipe, held for the whole wait: a channel destroyed while this thread
    // waits leaves it waiting, as a read of the kernel's rdma_cm file sleeps on through the
    // file's close (rping's event thread is still in rdma_get_cm_event when its main thread
    // destroys the channel and returns).
    let (reader, _writer) = with(|t| {
        t.channels
            .get(&channel)
            .map(|c| (c.reader.clone(), c.writer.clone()))
    })
    .ok_or(EINVAL)?;
    loop {
        let mut byte = [0u8; 1];
        // Without the tables' lock: this may block until an event comes. A signal whose
        // handler was installed without SA_RESTART interrupts it: EINTR, as librdmacm's
        // read(2) of the rdma_cm file fails.
        match (&*reader).read(&mut byte) {
            Ok(1) => {}
            Ok(_) => return Err(Errno(libc::EPIPE)),
            Err(e) => return Err(os(&e)),
        }
        // No event behind the byte (it was dropped with its id, moved with it, or its channel
        // was destroyed meanwhile): read on.
        if let Some(e) = with(|t| t.take_event(channel, &reader)) {
            return Ok(e);
        }
    }
}

impl Tables {
    /// The next event of `channel`, if it is still the channel whose pipe `reader` reads (not
    /// destroyed, nor another made since at its address): queued by this library, else one
    /// of the engine's CM events made now. Marked taken.
    fn take_event(&mut self, channel: usize, reader: &Arc<PipeReader>) -> Option<*mut RdmaCmEvent> {
        let ch = self
            .channels
            .get_mut(&channel)
            .filter(|c| Arc::ptr_eq(&c.reader, reader))?;
        let e = match ch.queue.pop_front() {
            Some(e) => e,
            None => crate::conn::materialize(self, channel, crate::inbox::take(channel)?)?,
        };
        self.taken.insert(e);
        self.events.get(&e).map(|e| e.c.ptr())
    }
}

/// `rdma_ack_cm_event`: frees an event `get_event` returned.
pub(crate) fn ack_event(event: usize) -> Result<(), Errno> {
    with(|t| {
        if !t.taken.remove(&event) {
            return Err(EINVAL);
        }
        t.events.remove(&event);
        Ok(())
    })
}
