//! What the library has handed out: event channels, ids, events, address lists. Everything
//! a program passes in is looked up here by address first, so a pointer the library did not
//! make is `EINVAL`, never a crash.
//!
//! An event channel is a pipe and a queue: queueing an event writes one byte, and
//! `rdma_get_cm_event` reads one byte (blocking, or `EAGAIN` when the program made the fd
//! non-blocking) and takes the queue's first event. The program may `poll` the fd.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{PipeReader, PipeWriter};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use crate::Errno;
use crate::abi::{IbvSaPathRec, RdmaAddrinfo, RdmaCmEvent, RdmaCmId, RdmaEventChannel};
use roce_cabi::CBox;

mod channel;
mod event;
#[cfg(test)]
mod tests;
mod withdraw;

pub(crate) use channel::{create_channel, destroy_channel, migrate_id, new_channel};
pub(crate) use event::{ack_event, get_event};
pub(crate) use withdraw::Withdraw;

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
    /// Takes back the bytes of events that leave the queue unread (shared with the inbox).
    withdraw: Arc<Withdraw>,
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
