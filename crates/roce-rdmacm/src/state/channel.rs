//! Event channels: a pipe and a queue each, made, destroyed, and an id's events moved from
//! one to another (`rdma_migrate_id`).

use std::collections::VecDeque;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::{Channel, EINVAL, Tables, os, with};
use crate::Errno;
use crate::abi::RdmaEventChannel;
use roce_cabi::CBox;

/// A new channel, not yet in the tables: its address and itself.
fn make_channel() -> Result<(usize, Channel), Errno> {
    let (reader, writer) = std::io::pipe().map_err(|e| os(&e))?;
    // Queueing must never block the caller: a full pipe (65536 unread events) refuses the
    // operation instead.
    crate::ffi::set_nonblocking(&writer).map_err(|e| os(&e))?;
    let c = CBox::new(RdmaEventChannel {
        fd: reader.as_raw_fd(),
    });
    let addr = c.addr();
    let writer = Arc::new(writer);
    let withdraw = Arc::new(super::Withdraw::open(&reader));
    crate::inbox::add_channel(addr, writer.clone(), withdraw.clone());
    let channel = Channel {
        c,
        reader: Arc::new(reader),
        writer,
        withdraw,
        queue: VecDeque::new(),
    };
    Ok((addr, channel))
}

/// `rdma_create_event_channel`.
pub(crate) fn create_channel() -> Result<*mut RdmaEventChannel, Errno> {
    let (addr, channel) = make_channel()?;
    with(|t| t.channels.insert(addr, channel));
    Ok(addr as *mut RdmaEventChannel)
}

/// A channel made under the tables' lock (a synchronous id's).
pub(crate) fn new_channel(t: &mut Tables) -> Result<usize, Errno> {
    let (addr, channel) = make_channel()?;
    t.channels.insert(addr, channel);
    Ok(addr)
}

/// `rdma_destroy_event_channel`: drops the events still queued; ids that still name the
/// channel get `EINVAL` from the calls that would report on it.
pub(crate) fn destroy_channel(channel: usize) -> Result<(), Errno> {
    with(|t| t.drop_channel(channel))
}

impl Tables {
    /// Forgets a channel and the events queued on it.
    pub(crate) fn drop_channel(&mut self, channel: usize) -> Result<(), Errno> {
        let ch = self.channels.remove(&channel).ok_or(EINVAL)?;
        crate::inbox::remove_channel(channel);
        for e in ch.queue {
            self.events.remove(&e);
        }
        Ok(())
    }
}

/// `rdma_migrate_id`: the id's events go to `channel` from now on (`None`: a channel of its
/// own, the id becoming synchronous), with those queued and not yet taken; events already taken
/// stay valid until acked. A synchronous id's own channel goes. `EINVAL` for an id or a
/// channel this library did not make, before anything moves.
pub(crate) fn migrate_id(id: usize, channel: Option<usize>) -> Result<(), Errno> {
    with(|t| {
        let i = t.ids.get(&id).ok_or(EINVAL)?;
        if channel.is_some_and(|c| !t.channels.contains_key(&c)) {
            return Err(EINVAL);
        }
        let old = i.events_channel();
        let old_own = if i.channel.is_none() {
            i.sync_channel
        } else {
            None
        };
        let (conn, listen) = (i.conn, i.listen);
        let to = match channel {
            Some(c) => c,
            None => new_channel(t)?,
        };
        if let Some(old) = old.filter(|&o| o != to) {
            let mut mine = Vec::new();
            if let Some(ch) = t.channels.get_mut(&old) {
                let events = &t.events;
                ch.queue.retain(|e| {
                    let m = events.get(e).is_some_and(|ev| ev.c.get().id as usize == id);
                    if m {
                        mine.push(*e);
                    }
                    !m
                });
                ch.withdraw.take_back(mine.len());
            }
            for e in mine {
                let delivered = t.channels.get_mut(&to).is_some_and(|ch| {
                    let ok = matches!((&*ch.writer).write(&[1]), Ok(1));
                    if ok {
                        ch.queue.push_back(e);
                    }
                    ok
                });
                if !delivered {
                    t.events.remove(&e);
                }
            }
        }
        crate::inbox::migrate(conn, listen, to);
        if let Some(i) = t.ids.get_mut(&id) {
            (i.channel, i.sync_channel) = match channel {
                Some(c) => (Some(c), None),
                None => (None, Some(to)),
            };
            i.c.update(|c| {
                c.channel = channel.map_or(std::ptr::null_mut(), |ch| ch as *mut _);
            });
        }
        if let Some(own) = old_own.filter(|&o| o != to) {
            let _ = t.drop_channel(own);
        }
        Ok(())
    })
}
