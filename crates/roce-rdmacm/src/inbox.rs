//! Where the engine's CM events land: the sink libibverbs calls (`roce_cabi::cm`), and the
//! routing of each event to the event channel of the id it concerns.
//!
//! The sink runs on the NIC's thread with the engine locked, so it takes only this module's
//! lock, never the tables' (`state.rs`), which are held while this library calls libibverbs:
//! the lock order is tables → engine → inbox. An event is copied, queued on its channel's
//! inbox and announced by one byte on the channel's pipe; `rdma_get_cm_event` turns it into
//! an `rdma_cm_event` under the tables' lock (`conn::materialize`).
//!
//! An event may come before its connection is routed: the REJ of a REQ can arrive between
//! `roce_cm_connect` returning the connection and `rdma_connect` routing it. Such events wait
//! (at most [`MAX_UNROUTED`]) until the route comes; an event of a connection whose id is gone
//! is dropped. So may a connection request before its listener is routed: the REQ can be
//! taken by the NIC's thread between `roce_cm_listen` returning the listener and `rdma_listen`
//! routing it; it waits the same way, and comes out when the route does, unless the listener is
//! gone.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{PipeWriter, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use roce_cabi::cm::CmEventRecord;

/// Events of unrouted connections kept at most (the oldest go first).
pub(crate) const MAX_UNROUTED: usize = 64;

/// A CM event, copied out of the sink's record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CmEvent {
    pub(crate) kind: u32,
    pub(crate) conn: u32,
    pub(crate) listen: u32,
    pub(crate) status: i32,
    pub(crate) peer: [u8; 16],
    pub(crate) local: [u8; 16],
    pub(crate) peer_port: u16,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) srq: u8,
    pub(crate) peer_qpn: u32,
    pub(crate) qkey: u32,
    pub(crate) private_data: Vec<u8>,
}

/// A channel's share: its pipe's write end and the events routed to it.
#[derive(Debug)]
struct Inbox {
    writer: Arc<PipeWriter>,
    /// Takes back the bytes of events that leave the inbox unread.
    withdraw: Arc<crate::state::Withdraw>,
    queue: VecDeque<CmEvent>,
}

#[derive(Debug, Default)]
struct Router {
    /// Inboxes by channel address.
    inboxes: HashMap<usize, Inbox>,
    /// Listener → channel.
    listens: HashMap<u32, usize>,
    /// Listeners that are gone: requests for them are dropped.
    closed_listens: HashSet<u32>,
    /// Connection → channel.
    conns: HashMap<u32, usize>,
    /// Connections whose id is gone: their events are dropped.
    closed: HashSet<u32>,
    /// Events of connections not routed yet, oldest first.
    unrouted: VecDeque<CmEvent>,
    /// Events dropped (no channel, a full pipe, too many unrouted).
    dropped: u64,
}

static ROUTER: Mutex<Option<Router>> = Mutex::new(None);

fn router() -> MutexGuard<'static, Option<Router>> {
    ROUTER.lock().unwrap_or_else(PoisonError::into_inner)
}

fn with<R>(f: impl FnOnce(&mut Router) -> R) -> R {
    f(router().get_or_insert_with(Router::default))
}

impl Router {
    /// Queues `event` on `channel` and writes its byte; `false` if the channel is gone or its
    /// pipe is full (the event is dropped).
    fn deliver(&mut self, channel: usize, event: CmEvent) -> bool {
        let Some(inbox) = self.inboxes.get_mut(&channel) else {
            self.dropped += 1;
            return false;
        };
        if !matches!((&*inbox.writer).write(&[2]), Ok(1)) {
            self.dropped += 1;
            return false;
        }
        inbox.queue.push_back(event);
        true
    }

    fn route(&mut self, event: CmEvent) {
        let request = matches!(
            event.kind,
            roce_cabi::cm::kind::CONNECT_REQUEST | roce_cabi::cm::kind::SIDR_REQUEST
        );
        let to = if request {
            // The child id shares the listener's channel, until it is migrated.
            let to = self.listens.get(&event.listen).copied();
            if let Some(ch) = to {
                self.conns.insert(event.conn, ch);
            }
            to
        } else {
            self.conns.get(&event.conn).copied()
        };
        match to {
            Some(ch) => {
                self.deliver(ch, event);
            }
            None if request && self.closed_listens.contains(&event.listen) => {
                self.dropped += 1;
            }
            None if !request && self.closed.contains(&event.conn) => {
                self.dropped += 1;
            }
            None => {
                if self.unrouted.len() >= MAX_UNROUTED {
                    self.unrouted.pop_front();
                    self.dropped += 1;
                }
                self.unrouted.push_back(event);
            }
        }
    }
}

/// The sink libibverbs calls for each CM event (`roce_cm_set_sink`).
pub(crate) extern "C" fn sink(record: *const CmEventRecord) {
    roce_cabi::os::guard((), || {
        // SAFETY (of the library's contract): libibverbs passes a valid record whose private
        // data is valid for its length during the call.
        let Some(event) = crate::ibv::read_record(record) else {
            return;
        };
        with(|r| r.route(event));
    });
}

/// A new channel's inbox.
pub(crate) fn add_channel(
    channel: usize,
    writer: Arc<PipeWriter>,
    withdraw: Arc<crate::state::Withdraw>,
) {
    with(|r| {
        r.inboxes.insert(
            channel,
            Inbox {
                writer,
                withdraw,
                queue: VecDeque::new(),
            },
        )
    });
}

/// Forgets a channel and what waits in its inbox.
pub(crate) fn remove_channel(channel: usize) {
    with(|r| {
        r.inboxes.remove(&channel);
        r.listens.retain(|_, c| *c != channel);
        r.conns.retain(|_, c| *c != channel);
    });
}

/// The oldest event waiting on `channel`.
pub(crate) fn take(channel: usize) -> Option<CmEvent> {
    with(|r| r.inboxes.get_mut(&channel)?.queue.pop_front())
}

/// Events of `listen` go to `channel` from now on: the requests that came before the route
/// first (with the events of their connections that came after them), in order.
pub(crate) fn route_listen(listen: u32, channel: usize) {
    with(|r| {
        r.closed_listens.remove(&listen);
        r.listens.insert(listen, channel);
        let mut children = HashSet::new();
        let (mine, rest): (VecDeque<_>, VecDeque<_>) = r.unrouted.drain(..).partition(|e| {
            let request = matches!(
                e.kind,
                roce_cabi::cm::kind::CONNECT_REQUEST | roce_cabi::cm::kind::SIDR_REQUEST
            );
            if request && e.listen == listen {
                children.insert(e.conn);
                true
            } else {
                !request && children.contains(&e.conn)
            }
        });
        r.unrouted = rest;
        for e in mine {
            r.route(e);
        }
    });
}

/// Forgets a listener: requests for it that come later are dropped.
pub(crate) fn unroute_listen(listen: u32) {
    with(|r| {
        r.listens.remove(&listen);
        r.closed_listens.insert(listen);
    });
}

/// Events of `conn` go to `channel` from now on, those that came before the route first.
pub(crate) fn route_conn(conn: u32, channel: usize) {
    with(|r| {
        r.closed.remove(&conn);
        r.conns.insert(conn, channel);
        let (mine, rest): (VecDeque<_>, VecDeque<_>) =
            r.unrouted.drain(..).partition(|e| e.conn == conn);
        r.unrouted = rest;
        for e in mine {
            r.deliver(channel, e);
        }
    });
}

/// An id moves to `to` (`rdma_migrate_id`): its listener's and its connection's events go
/// there from now on, and those waiting on another channel move there too, in order (with the
/// events of the connections they request, whose children follow their listener), as the
/// kernel's `ucma_migrate_id` moves the id's events to the new file. Their bytes are taken
/// back from the old pipe (`crate::state::Withdraw`).
pub(crate) fn migrate(conn: Option<u32>, listen: Option<u32>, to: usize) {
    let is_request = |e: &CmEvent| {
        matches!(
            e.kind,
            roce_cabi::cm::kind::CONNECT_REQUEST | roce_cabi::cm::kind::SIDR_REQUEST
        )
    };
    with(|r| {
        if let Some(l) = listen
            && r.listens.contains_key(&l)
        {
            r.listens.insert(l, to);
        }
        let mut conns: HashSet<u32> = conn.into_iter().collect();
        let mut moved = Vec::new();
        for (&ch, inbox) in &mut r.inboxes {
            if ch == to {
                continue;
            }
            let before = inbox.queue.len();
            inbox.queue.retain(|e| {
                let mine = if is_request(e) && listen == Some(e.listen) {
                    conns.insert(e.conn);
                    true
                } else {
                    conns.contains(&e.conn)
                };
                if mine {
                    moved.push(e.clone());
                }
                !mine
            });
            inbox.withdraw.take_back(before - inbox.queue.len());
        }
        for c in conns {
            if r.conns.contains_key(&c) {
                r.conns.insert(c, to);
            }
        }
        for e in moved {
            r.deliver(to, e);
        }
    });
}

/// `conn`'s id is gone: its later events are dropped, and those waiting on its channel too.
pub(crate) fn close_conn(conn: u32) {
    with(|r| {
        if let Some(ch) = r.conns.remove(&conn)
            && let Some(inbox) = r.inboxes.get_mut(&ch)
        {
            let before = inbox.queue.len();
            inbox.queue.retain(|e| e.conn != conn);
            inbox.withdraw.take_back(before - inbox.queue.len());
        }
        r.unrouted.retain(|e| e.conn != conn);
        r.closed.insert(conn);
    });
}

/// Events dropped so far.
#[cfg(test)]
pub(crate) fn dropped() -> u64 {
    with(|r| r.dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_cabi::cm::kind;
    use std::io::Read;

    /// Bytes waiting in the pipe of `reader`.
    #[allow(unsafe_code)]
    fn unread(reader: &std::io::PipeReader) -> libc::c_int {
        use std::os::fd::AsRawFd;
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int; `reader` keeps the fd open.
        assert_eq!(
            unsafe { libc::ioctl(reader.as_raw_fd(), libc::FIONREAD, &mut n) },
            0
        );
        n
    }

    fn ev(kind: u32, conn: u32, listen: u32) -> CmEvent {
        CmEvent {
            kind,
            conn,
            listen,
            ..CmEvent::default()
        }
    }

    #[test]
    fn an_event_before_its_route_waits_for_it_and_a_closed_connections_are_dropped() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let ch = 0x5151_0000;
        add_channel(
            ch,
            Arc::new(writer),
            Arc::new(crate::state::Withdraw::open(&reader)),
        );
        // The REJ of conn 901 comes before rdma_connect routes it.
        with(|r| r.route(ev(kind::REJECTED, 901, 0)));
        assert_eq!(take(ch), None, "nothing is on the channel before the route");
        route_conn(901, ch);
        let mut byte = [0u8; 1];
        reader.read_exact(&mut byte).unwrap();
        assert_eq!(
            take(ch).map(|e| (e.kind, e.conn)),
            Some((kind::REJECTED, 901))
        );
        // Closing takes back the bytes of the connection's events still waiting, as the
        // kernel frees a destroyed id's pending events: the fd is not readable for them.
        with(|r| r.route(ev(kind::DISCONNECTED, 901, 0)));
        with(|r| r.route(ev(kind::TIMEWAIT_EXIT, 901, 0)));
        assert_eq!(unread(&reader), 2);
        // Once closed, the connection's events go nowhere.
        let before = dropped();
        close_conn(901);
        assert_eq!(unread(&reader), 0, "their bytes are taken back");
        assert_eq!(take(ch), None);
        with(|r| r.route(ev(kind::DISCONNECTED, 901, 0)));
        assert_eq!(take(ch), None);
        assert_eq!(dropped(), before + 1);
        remove_channel(ch);
    }

    #[test]
    fn a_connect_request_goes_to_its_listeners_channel_and_routes_the_child() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let ch = 0x5252_0000;
        add_channel(
            ch,
            Arc::new(writer),
            Arc::new(crate::state::Withdraw::open(&reader)),
        );
        route_listen(77, ch);
        with(|r| r.route(ev(kind::CONNECT_REQUEST, 902, 77)));
        with(|r| r.route(ev(kind::ESTABLISHED, 902, 0)));
        let mut two = [0u8; 2];
        reader.read_exact(&mut two).unwrap();
        assert_eq!(take(ch).map(|e| e.kind), Some(kind::CONNECT_REQUEST));
        assert_eq!(take(ch).map(|e| e.kind), Some(kind::ESTABLISHED));
        // A request for a listener that is gone is dropped, not kept for a route.
        unroute_listen(77);
        with(|r| r.route(ev(kind::CONNECT_REQUEST, 903, 77)));
        assert!(with(|r| r.unrouted.iter().all(|e| e.conn != 903)));
        close_conn(902);
        remove_channel(ch);
    }

    #[test]
    fn a_connect_request_before_its_listener_is_routed_waits_for_the_route() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let ch = 0x5353_0000;
        add_channel(
            ch,
            Arc::new(writer),
            Arc::new(crate::state::Withdraw::open(&reader)),
        );
        // The NIC's thread takes the REQ between roce_cm_listen and rdma_listen's route, and
        // the child's next event comes before the route too.
        with(|r| r.route(ev(kind::CONNECT_REQUEST, 904, 78)));
        with(|r| r.route(ev(kind::DISCONNECTED, 904, 0)));
        assert_eq!(take(ch), None, "nothing is on the channel before the route");
        route_listen(78, ch);
        let mut two = [0u8; 2];
        reader.read_exact(&mut two).unwrap();
        assert_eq!(
            take(ch).map(|e| (e.kind, e.conn)),
            Some((kind::CONNECT_REQUEST, 904))
        );
        assert_eq!(
            take(ch).map(|e| (e.kind, e.conn)),
            Some((kind::DISCONNECTED, 904))
        );
        assert!(with(|r| r.unrouted.iter().all(|e| e.conn != 904)));
        unroute_listen(78);
        close_conn(904);
        remove_channel(ch);
    }
}
