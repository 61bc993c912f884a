//! What the library has handed out: event channels, ids, events, address lists. Everything
//! a program passes in is looked up here by address first, so a pointer the library did not
//! make is `EINVAL`, never a crash.
//!
//! An event channel is a pipe and a queue: queueing an event writes one byte, and
//! `rdma_get_cm_event` reads one byte (blocking, or `EAGAIN` when the program made the fd
//! non-blocking) and takes the queue's first event. The program may `poll` the fd.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, PoisonError};

use crate::Errno;
use crate::abi::{IbvSaPathRec, RdmaAddrinfo, RdmaCmEvent, RdmaCmId, RdmaEventChannel};
use roce_cabi::CBox;

pub(crate) const EINVAL: Errno = Errno(libc::EINVAL);

/// An event channel.
#[derive(Debug)]
pub(crate) struct Channel {
    /// The structure the program holds (owned here, freed with the channel).
    #[allow(dead_code)]
    c: CBox<RdmaEventChannel>,
    reader: Arc<PipeReader>,
    /// Shared with the channel's inbox (`inbox.rs`), which writes the bytes of CM events.
    writer: Arc<PipeWriter>,
    /// Events not yet taken by `rdma_get_cm_event`, oldest first (addresses in `events`).
    queue: VecDeque<usize>,
}

/// Where an id is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    Bound,
    AddrResolved,
    RouteResolved,
    Listening,
    /// The REQ left (`rdma_connect`).
    Connecting,
    /// A connection request the program has not accepted or rejected yet.
    Requested,
    /// The REP left (`rdma_accept`); the RTU has not come.
    Accepting,
    Connected,
    /// The connection is down (DISCONNECTED reported, or `rdma_disconnect` called).
    Disconnected,
}

/// What a connection request asked for, kept on the child id for `rdma_accept`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
}

/// An event handed out, and the private data its `param.conn` points to.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) c: CBox<RdmaCmEvent>,
    /// Owned here, freed with the event.
    #[allow(dead_code)]
    pub(crate) data: Box<[u8]>,
}

impl Event {
    pub(crate) fn new(c: RdmaCmEvent) -> Self {
        Self {
            c: CBox::new(c),
            data: Box::new([]),
        }
    }
}

/// An id.
#[derive(Debug)]
pub(crate) struct Id {
    pub(crate) c: CBox<RdmaCmId>,
    /// Unique to this id in the process (an id made later at the same address has another).
    pub(crate) serial: u64,
    /// Its channel; `None` for a synchronous id (`rdma_create_id` with a NULL channel), whose
    /// operations complete before they return and report no events.
    pub(crate) channel: Option<usize>,
    pub(crate) phase: Phase,
    /// The local address once bound (the port is never 0 once bound).
    pub(crate) local: Option<SocketAddr>,
    /// Whether the id holds the device (and with it the device's PD, `Tables::device_pd`).
    pub(crate) has_device: bool,
    /// CQs this library created for the id's QP (destroyed with the QP).
    pub(crate) own_cqs: Vec<usize>,
    /// `route.path_rec` once the route is resolved.
    pub(crate) path: Option<CBox<IbvSaPathRec>>,
    /// The channel of a synchronous id, made when it first needs one (connect, listen): its
    /// CM events come there, and the calls that wait read them.
    pub(crate) sync_channel: Option<usize>,
    /// The engine's connection, once one is made or requested.
    pub(crate) conn: Option<u32>,
    /// The engine's listener.
    pub(crate) listen: Option<u32>,
    /// The connection request of a child id.
    pub(crate) request: Option<Request>,
    /// The QP a passive endpoint (`rdma_create_ep` with `RAI_PASSIVE`) makes for each child
    /// `rdma_get_request` returns: its PD (0: one of its own) and attributes.
    pub(crate) child_qp: Option<(usize, CBox<crate::abi::IbvQpInitAttr>)>,
    /// Comp channels this library made for the CQs of the id's QP.
    pub(crate) own_channels: Vec<usize>,
}

impl Id {
    /// A fresh id.
    pub(crate) fn new(c: RdmaCmId, channel: Option<usize>) -> Self {
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self {
            c: CBox::new(c),
            serial: SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            channel,
            phase: Phase::Idle,
            local: None,
            has_device: false,
            own_cqs: Vec::new(),
            path: None,
            sync_channel: None,
            conn: None,
            listen: None,
            request: None,
            child_qp: None,
            own_channels: Vec::new(),
        }
    }

    /// Where the id's CM events go: its channel, or its synchronous channel.
    pub(crate) fn events_channel(&self) -> Option<usize> {
        self.channel.or(self.sync_channel)
    }
}

/// A list from `rdma_getaddrinfo`: the `rdma_addrinfo` and the addresses it points to.
#[derive(Debug)]
pub(crate) struct AddrInfo {
    pub(crate) info: CBox<RdmaAddrinfo>,
    /// What `ai_src_addr` and `ai_dst_addr` point to (owned here, freed with the list).
    #[allow(dead_code)]
    pub(crate) src: Option<CBox<crate::abi::SockaddrStorage>>,
    #[allow(dead_code)]
    pub(crate) dst: Option<CBox<crate::abi::SockaddrStorage>>,
}

#[derive(Debug, Default)]
pub(crate) struct Tables {
    pub(crate) channels: HashMap<usize, Channel>,
    pub(crate) ids: HashMap<usize, Id>,
    /// Every event not yet acked: queued, or taken and not yet acked.
    pub(crate) events: HashMap<usize, Event>,
    /// Events taken by `rdma_get_cm_event` and not acked.
    pub(crate) taken: HashSet<usize>,
    pub(crate) addrinfos: HashMap<usize, AddrInfo>,
    /// `rdma_get_devices` arrays.
    pub(crate) device_lists: HashMap<usize, CBox<[usize; 2]>>,
    /// The last ephemeral port given out.
    pub(crate) last_port: u16,
    /// The device's PD, which every id that has the device carries in `id->pd`, as
    /// librdmacm's `cma_dev->pd` (`ucma_get_device`): allocated when the first id gets the
    /// device, deallocated when the last one holding it is destroyed (`ucma_put_device`).
    pub(crate) device_pd: Option<usize>,
    /// How many ids hold the device.
    pub(crate) device_holders: usize,
}

static TABLES: Mutex<Option<Tables>> = Mutex::new(None);

/// Runs `f` on the tables under their lock.
pub(crate) fn with<R>(f: impl FnOnce(&mut Tables) -> R) -> R {
    let mut t = TABLES.lock().unwrap_or_else(PoisonError::into_inner);
    f(t.get_or_insert_with(Tables::default))
}

fn os(e: &std::io::Error) -> Errno {
    Errno(e.raw_os_error().unwrap_or(libc::EIO))
}

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
    crate::inbox::add_channel(addr, writer.clone());
    let channel = Channel {
        c,
        reader: Arc::new(reader),
        writer,
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
    /// Gives the id `id` the device: `id->verbs`, `id->port_num` and `id->pd`, the device's PD
    /// (allocated now if no id holds the device). An id that has it already keeps it; a
    /// failed allocation changes nothing.
    pub(crate) fn give_device(&mut self, id: usize, ctx: usize) -> Result<(), Errno> {
        let i = self.ids.get(&id).ok_or(EINVAL)?;
        if i.has_device {
            return Ok(());
        }
        let pd = match self.device_pd {
            Some(pd) => pd,
            None => {
                let pd = crate::ibv::alloc_pd(ctx)?;
                self.device_pd = Some(pd);
                pd
            }
        };
        self.device_holders += 1;
        if let Some(i) = self.ids.get_mut(&id) {
            i.has_device = true;
            i.c.update(|c| {
                c.verbs = ctx as *mut _;
                c.port_num = 1;
                c.pd = pd as *mut _;
            });
        }
        Ok(())
    }

    /// The id `id`, being destroyed, lets the device go: the last holder deallocates the
    /// device's PD (which fails, and leaves it to the program, while its QPs or MRs use it,
    /// as librdmacm's `ucma_put_device` does).
    pub(crate) fn put_device(&mut self, id: usize) {
        let Some(i) = self.ids.get_mut(&id) else {
            return;
        };
        if !std::mem::take(&mut i.has_device) {
            return;
        }
        self.device_holders -= 1;
        if self.device_holders == 0
            && let Some(pd) = self.device_pd.take()
        {
            crate::ibv::dealloc_pd(pd);
        }
    }

    /// Forgets a channel and the events queued on it.
    pub(crate) fn drop_channel(&mut self, channel: usize) -> Result<(), Errno> {
        let ch = self.channels.remove(&channel).ok_or(EINVAL)?;
        crate::inbox::remove_channel(channel);
        for e in ch.queue {
            self.events.remove(&e);
        }
        Ok(())
    }

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

    /// Drops the queued (not yet taken) events of `id`, when it is destroyed. Their bytes stay
    /// in the pipe; `get_event` skips a byte that has no event behind it.
    pub(crate) fn drop_queued(&mut self, id: usize) {
        let events = &mut self.events;
        for ch in self.channels.values_mut() {
            ch.queue.retain(|e| {
                let mine = events.get(e).is_some_and(|ev| ev.c.get().id as usize == id);
                if mine {
                    events.remove(e);
                }
                !mine
            });
        }
    }

    /// A fresh ephemeral port (32768-60999, the Linux default range) no id holds.
    pub(crate) fn ephemeral_port(&mut self) -> Result<u16, Errno> {
        for _ in 0..(61000 - 32768) {
            self.last_port = if (32768..60999).contains(&self.last_port) {
                self.last_port + 1
            } else {
                32768
            };
            let p = self.last_port;
            if !self
                .ids
                .values()
                .any(|i| i.local.is_some_and(|a| a.port() == p))
            {
                return Ok(p);
            }
        }
        Err(Errno(libc::EADDRINUSE))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::event;

    fn fake_id(t: &mut Tables, channel: Option<usize>) -> usize {
        let id = Id::new(
            crate::id::blank_id(channel, std::ptr::null_mut(), 0x0106, 2),
            channel,
        );
        let a = id.c.addr();
        t.ids.insert(a, id);
        a
    }

    #[test]
    fn events_come_out_in_order_once_and_are_acked_once() {
        let ch = create_channel().unwrap() as usize;
        let id = with(|t| fake_id(t, Some(ch)));
        with(|t| t.report(id, event::ADDR_RESOLVED, 0)).unwrap();
        with(|t| t.report(id, event::ROUTE_RESOLVED, 0)).unwrap();
        let a = get_event(ch).unwrap();
        let b = get_event(ch).unwrap();
        with(|t| {
            assert_eq!(t.events[&(a as usize)].c.get().event, event::ADDR_RESOLVED);
            assert_eq!(t.events[&(b as usize)].c.get().event, event::ROUTE_RESOLVED);
            assert_eq!(t.events[&(b as usize)].c.get().id as usize, id);
        });
        assert_eq!(ack_event(a as usize), Ok(()));
        assert_eq!(
            ack_event(a as usize),
            Err(EINVAL),
            "a second ack is refused"
        );
        assert_eq!(ack_event(b as usize), Ok(()));
        assert_eq!(ack_event(0x1234), Err(EINVAL));
        with(|t| t.ids.remove(&id));
        destroy_channel(ch).unwrap();
        assert_eq!(destroy_channel(ch), Err(EINVAL));
        assert_eq!(get_event(ch).err(), Some(EINVAL));
    }

    #[test]
    fn a_destroyed_ids_queued_events_are_skipped() {
        let ch = create_channel().unwrap() as usize;
        let gone = with(|t| fake_id(t, Some(ch)));
        let kept = with(|t| fake_id(t, Some(ch)));
        with(|t| t.report(gone, event::ADDR_RESOLVED, 0)).unwrap();
        with(|t| t.report(kept, event::ADDR_ERROR, -5)).unwrap();
        with(|t| {
            t.drop_queued(gone);
            t.ids.remove(&gone);
        });
        let e = get_event(ch).unwrap() as usize;
        with(|t| {
            assert_eq!(t.events[&e].c.get().id as usize, kept);
            assert_eq!(t.events[&e].c.get().status, -5);
            assert!(
                !t.events.values().any(|ev| ev.c.get().id as usize == gone),
                "the dropped event is freed"
            );
        });
        ack_event(e).unwrap();
        with(|t| t.ids.remove(&kept));
        destroy_channel(ch).unwrap();
    }

    #[test]
    fn a_blocked_reader_gets_the_event_queued_after_it_started_waiting() {
        let ch = create_channel().unwrap() as usize;
        let id = with(|t| fake_id(t, Some(ch)));
        let reader = std::thread::spawn(move || get_event(ch).map(|e| e as usize));
        // Whether or not the reader is already blocked in read(2), it must get this event.
        std::thread::sleep(std::time::Duration::from_millis(20));
        with(|t| t.report(id, event::ROUTE_RESOLVED, 0)).unwrap();
        let e = reader.join().unwrap().unwrap();
        assert_eq!(with(|t| t.events[&e].c.get().event), event::ROUTE_RESOLVED);
        ack_event(e).unwrap();
        with(|t| t.ids.remove(&id));
        destroy_channel(ch).unwrap();
    }

    /// A byte read just before the channel is destroyed (its event gone with it) leaves the
    /// reader waiting, as the kernel's does; it used to return `EINVAL` to a program that
    /// never misused the channel (rping's event thread then exits 255).
    #[test]
    #[allow(unsafe_code)]
    fn a_reader_whose_channel_is_destroyed_under_it_waits_on() {
        let ch = create_channel().unwrap() as usize;
        let (writer, fd) = with(|t| {
            let c = &t.channels[&ch];
            (c.writer.clone(), c.reader.as_raw_fd())
        });
        let unread = || {
            let mut n: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int; `fd` stays open while `writer` and the
            // reader's clone live.
            assert_eq!(unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) }, 0);
            n
        };
        let wait_read = || {
            while unread() != 0 {
                std::thread::yield_now();
            }
        };
        // A byte with no event behind it: once it is read, the reader holds the channel and
        // reads on.
        (&*writer).write_all(&[1]).unwrap();
        let reader = std::thread::spawn(move || get_event(ch).map(|e| e as usize));
        wait_read();
        destroy_channel(ch).unwrap();
        (&*writer).write_all(&[1]).unwrap();
        wait_read();
        // The byte is read: a reader that gave up would return at once.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!reader.is_finished(), "{:?}", reader.join());
    }

    #[test]
    fn a_synchronous_id_reports_nothing() {
        let id = with(|t| fake_id(t, None));
        with(|t| t.report(id, event::ADDR_RESOLVED, 0)).unwrap();
        assert!(!with(|t| t
            .events
            .values()
            .any(|ev| ev.c.get().id as usize == id)));
        with(|t| t.ids.remove(&id));
    }
}
