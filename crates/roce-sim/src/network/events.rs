//! The one event queue of a [`Network`](super::Network): events in `(time, sequence)` order. The
//! sequence number, taken when an event is pushed, breaks ties between events due at the same
//! instant in the order they were scheduled, so a run is the same whatever the queue's layout.
//!
//! Simulated time only moves forward and nearly every event is due within a few µs of now (a
//! link delay plus a serialisation), so the queue is a timing wheel of [`SLOTS`] one-nanosecond
//! slots over `[now, now + SLOTS ns)` (slot = time mod [`SLOTS`], so one slot holds one instant,
//! a FIFO list of its events in push order) with a bitmap of the slots that hold something, and a
//! binary heap of `(time, sequence)` for what lies beyond (timers, flow starts). Whenever the
//! current time moves, the heap's events that the window now covers move into their slots, in
//! `(time, sequence)` order and before anything else can be pushed for those instants, so the
//! order is exactly the `(time, sequence)` order of one heap. A push is O(1); a pop is O(1) plus
//! a scan of the bitmap to the next busy slot, plus the heap's O(log n) for far events.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use roce_core::Instant;

use super::PacketRef;
use crate::scheduled::Scheduled;

/// Something that happens to one node at one instant. Nodes are topology ids, ports are a
/// node's links in [`Topology::neighbors`](crate::topology::Topology::neighbors) order, packets
/// are indexes into the packet pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// A packet's last bit reaches `node` on `port`.
    Arrival {
        node: u32,
        port: u16,
        packet: PacketRef,
    },
    /// A PFC frame reaches `node` on `port`: it may not send `priority` out of that port until
    /// `until` (a resume when `until` is the arrival time).
    Pause {
        node: u32,
        port: u16,
        priority: u8,
        until: Halves,
    },
    /// A switch port finishes serialising its packet.
    PortFree { node: u32, port: u16 },
    /// A switch port's pause runs out: it may start again.
    PortKick { node: u32, port: u16 },
    /// A host's egress is free, or one of its pauses ran out.
    HostTx { host: u32 },
    /// A host's NIC has a timer due.
    NicTimer { host: u32 },
    /// A flow starts.
    FlowStart { flow: u32 },
    /// Every switch port's queue length is sampled.
    QueueSample,
    /// Halfway through a PAUSE a switch sent out of `port`: it sends another if the ingress
    /// still holds too much (a paused ingress may see no packet to check it by).
    PauseRefresh { node: u32, port: u16, priority: u8 },
}

/// An instant as two 32-bit halves: an event then needs no 8-byte alignment, and an event
/// with its link in the wheel ([`Entry`]) fits in 32 bytes, two to a cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Halves([u32; 2]);

impl From<Instant> for Halves {
    fn from(at: Instant) -> Self {
        let nanos = at.as_nanos();
        Self([nanos as u32, (nanos >> 32) as u32])
    }
}

impl From<Halves> for Instant {
    fn from(Halves([low, high]): Halves) -> Self {
        Self::from_nanos(u64::from(low) | (u64::from(high) << 32))
    }
}

/// How many events ahead [`EventQueue::prefetch_upcoming`] names: its hint must come early
/// enough for a line from memory to arrive before the event runs.
pub(super) const LEAD: usize = 2;

/// Nanosecond slots of the wheel: events due less than this far ahead of now go into a slot.
pub(super) const SLOTS: usize = 1 << 13;

const WORDS: usize = SLOTS / 64;
// One bit per word of the bitmap in `words`.
const _: () = assert!(WORDS == 128);

/// No entry (end of a slot's list, or an empty slot).
const NIL: u32 = u32::MAX;

/// [`EventQueue::first`] not known: a scan of the bitmap finds it.
const UNKNOWN: u32 = u32::MAX;

/// One queued event in the wheel's arena, linked to the next of its slot: 32 bytes on a
/// 32-byte boundary, so that reading one never touches two cache lines.
#[derive(Debug, Clone, Copy)]
#[repr(align(32))]
struct Entry {
    event: Event,
    next: u32,
}

/// An event beyond the wheel's window, at its nanosecond.
type Far = Scheduled<u64, Event>;

/// Events in time order, ties in the order pushed.
#[derive(Debug)]
pub(super) struct EventQueue {
    /// The time of the last event popped (or the furthest `pop_until` bound reached): nothing
    /// is due before it, and the wheel covers `[now, now + SLOTS)`.
    now: u64,
    /// Per slot: its first and last entry, `NIL` when empty.
    /// (Arrays of the wheel's size: a slot, taken modulo it, needs no bounds check.)
    heads: Box<[u32; SLOTS]>,
    tails: Box<[u32; SLOTS]>,
    /// Bit `s` set when slot `s` holds an event.
    busy: Box<[u64; WORDS]>,
    /// Bit `w` set when `busy[w]` is not zero: the scan for the next event reads one word.
    words: u128,
    /// The first busy slot from now's, once a scan found it ([`UNKNOWN`] until then): the
    /// cache hints look for the next event right after a pop, and the next pop looks for the
    /// same one; a push into an earlier slot moves it there, a pop that empties it forgets it.
    first: Cell<u32>,
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// Events in the wheel.
    in_wheel: usize,
    /// Events beyond the wheel's window.
    far: BinaryHeap<Reverse<Far>>,
    seq: u64,
    peak: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self {
            now: 0,
            heads: Box::new([NIL; SLOTS]),
            tails: Box::new([NIL; SLOTS]),
            busy: Box::new([0; WORDS]),
            words: 0,
            first: Cell::new(UNKNOWN),
            entries: Vec::new(),
            free: Vec::new(),
            in_wheel: 0,
            far: BinaryHeap::new(),
            seq: 0,
            peak: 0,
        }
    }
}

impl EventQueue {
    /// Schedules `event` at `at`. An instant before the last one popped is taken as that one
    /// (the network never schedules into the past; this keeps the order total if it did).
    pub(super) fn push(&mut self, at: Instant, event: Event) {
        self.seq += 1;
        let at = at.as_nanos().max(self.now);
        if at - self.now < SLOTS as u64 {
            self.link(at, event);
        } else {
            self.far.push(Reverse(Far {
                at,
                seq: self.seq,
                item: event,
            }));
        }
        self.peak = self.peak.max(self.len());
    }

    /// The earliest event, if it is due by `until`. Inlined into the one loop that pops.
    #[inline(always)]
    pub(super) fn pop_until(&mut self, until: Instant) -> Option<(Instant, Event)> {
        let until = until.as_nanos();
        let at = match self.next_in_wheel() {
            Some(at) => at,
            None => {
                let &Reverse(Far { at, .. }) = self.far.peek()?;
                at
            }
        };
        if at > until {
            return None;
        }
        if at != self.now {
            self.advance(at);
        }
        let slot = slot_of(at);
        let index = self.heads[slot];
        let entry = self.entries[index as usize];
        self.heads[slot] = entry.next;
        if entry.next == NIL {
            self.tails[slot] = NIL;
            self.busy[slot / 64] &= !(1 << (slot % 64));
            if self.busy[slot / 64] == 0 {
                self.words &= !(1 << (slot / 64));
            }
            self.first.set(UNKNOWN);
        }
        self.free.push(index);
        self.in_wheel -= 1;
        Some((Instant::from_nanos(at), entry.event))
    }

    /// Events waiting.
    pub(super) fn len(&self) -> usize {
        self.in_wheel + self.far.len()
    }

    /// The most events that were ever waiting at once.
    pub(super) fn peak(&self) -> usize {
        self.peak
    }

    /// Events pushed so far.
    pub(super) fn pushed(&self) -> u64 {
        self.seq
    }

    /// Appends `event` to the slot of `at` (within the window). Inlined: every push within the
    /// window is one.
    #[inline(always)]
    fn link(&mut self, at: u64, event: Event) {
        let entry = Entry { event, next: NIL };
        let index = match self.free.pop() {
            Some(index) => {
                self.entries[index as usize] = entry;
                index
            }
            None => {
                self.entries.push(entry);
                u32::try_from(self.entries.len() - 1).expect("fewer than 2^32 events")
            }
        };
        let slot = slot_of(at);
        match self.tails[slot] {
            NIL => {
                self.heads[slot] = index;
                self.busy[slot / 64] |= 1 << (slot % 64);
                self.words |= 1 << (slot / 64);
                // A slot before the first busy one is the first now.
                let first = self.first.get();
                if first != UNKNOWN && self.ahead(slot) < self.ahead(first as usize) {
                    self.first.set(slot as u32);
                }
            }
            tail => self.entries[tail as usize].next = index,
        }
        self.tails[slot] = index;
        self.in_wheel += 1;
    }

    /// The time of the wheel's earliest event: the first busy slot from now's, round the wheel.
    fn next_in_wheel(&self) -> Option<u64> {
        let slot = self.first_busy()?;
        Some(self.now + self.ahead(slot) as u64)
    }

    /// The first busy slot from now's, round the wheel: [`EventQueue::first`], or a scan.
    #[inline]
    fn first_busy(&self) -> Option<usize> {
        if self.in_wheel == 0 {
            return None;
        }
        let known = self.first.get();
        if known != UNKNOWN {
            debug_assert_eq!(Some(known as usize), self.busy_from(slot_of(self.now)));
            return Some(known as usize);
        }
        let slot = self.busy_from(slot_of(self.now))?;
        self.first.set(slot as u32);
        Some(slot)
    }

    /// Nanoseconds from now to the time slot `s` holds.
    #[inline]
    fn ahead(&self, s: usize) -> usize {
        (s + SLOTS - slot_of(self.now)) % SLOTS
    }

    /// Hints for the caches, [`LEAD`] events ahead: the `LEAD`th event from now in the wheel
    /// (its entry was asked for while the one before ran) goes to `upcoming`, which asks for
    /// what it will read, and the entry of the one after it is asked for. An event pushed
    /// meanwhile may come before them: a hint then only costs a wasted line.
    #[inline]
    pub(super) fn prefetch_upcoming(&self, upcoming: impl FnOnce(&Event)) {
        let Some(slot) = self.first_busy() else {
            return;
        };
        let mut at = (slot, self.heads[slot]);
        for _ in 1..LEAD {
            match self.after(at) {
                Some(next) => at = next,
                None => return,
            }
        }
        if let Some((_, index)) = self.after(at) {
            crate::prefetch::prefetch(&self.entries[index as usize]);
        }
        upcoming(&self.entries[at.1 as usize].event);
    }

    /// The entry popped after entry `index` of `slot` (if nothing is pushed meanwhile), and
    /// its slot.
    #[inline]
    fn after(&self, (slot, index): (usize, u32)) -> Option<(usize, u32)> {
        match self.entries[index as usize].next {
            NIL => {
                let next = self.busy_from((slot + 1) % SLOTS)?;
                // Not round the wheel past now: that slot is `slot` itself, or in the past.
                (self.ahead(next) > self.ahead(slot)).then(|| (next, self.heads[next]))
            }
            next => Some((slot, next)),
        }
    }

    /// The first busy slot from `start`, round the wheel.
    #[inline]
    fn busy_from(&self, start: usize) -> Option<usize> {
        let (word, bit) = (start / 64, start % 64);
        // The start word from now's bit, the other words in order, then the start word's bits
        // before now's (the wheel's far end).
        let first = self.busy[word] & (u64::MAX << bit);
        if first != 0 {
            Some(word * 64 + first.trailing_zeros() as usize)
        } else {
            // The next busy word after the start word, round the wheel (`words` rotated so
            // that the word after the start word is bit 0).
            let after = self.words.rotate_right(((word + 1) % WORDS) as u32);
            (after != 0).then(|| {
                let w = (word + 1 + after.trailing_zeros() as usize) % WORDS;
                let bits = if w == word {
                    self.busy[w] & !(u64::MAX << bit)
                } else {
                    self.busy[w]
                };
                w * 64 + bits.trailing_zeros() as usize
            })
        }
    }

    /// Time moves to `at`: the far events the window now covers move into their slots.
    fn advance(&mut self, at: u64) {
        self.now = at;
        while let Some(&Reverse(Far {
            at: t, item: event, ..
        })) = self.far.peek()
        {
            if t - at >= SLOTS as u64 {
                break;
            }
            self.far.pop();
            self.link(t, event);
        }
    }
}

fn slot_of(at: u64) -> usize {
    (at % SLOTS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(n: u64) -> Instant {
        Instant::from_nanos(n)
    }

    fn drain(q: &mut EventQueue, until: u64) -> Vec<(Instant, Event)> {
        std::iter::from_fn(|| q.pop_until(ns(until))).collect()
    }

    /// Events are the wheel's arena: a packet's arrival carries its [`PacketRef`] and stays
    /// within 32 bytes.
    #[test]
    fn an_event_is_small() {
        assert!(size_of::<Event>() <= 28, "{}", size_of::<Event>());
        assert_eq!(size_of::<Entry>(), 32);
        let at = Instant::from_nanos(0x1234_5678_9abc_def0);
        assert_eq!(Instant::from(Halves::from(at)), at);
    }

    #[test]
    fn ties_keep_the_order_pushed() {
        let mut q = EventQueue::default();
        let t = ns(5);
        q.push(t, Event::HostTx { host: 9 });
        q.push(ns(3), Event::FlowStart { flow: 1 });
        q.push(t, Event::HostTx { host: 1 });
        q.push(ns(7), Event::FlowStart { flow: 0 });
        assert_eq!(
            drain(&mut q, 6),
            [
                (ns(3), Event::FlowStart { flow: 1 }),
                (t, Event::HostTx { host: 9 }),
                (t, Event::HostTx { host: 1 }),
            ]
        );
        assert_eq!(q.len(), 1);
        assert_eq!(drain(&mut q, 7), [(ns(7), Event::FlowStart { flow: 0 })]);
        assert_eq!(q.len(), 0);
    }

    /// Far events that the window reaches keep their place among near events pushed later for
    /// the same instant, and the wheel wraps round.
    #[test]
    fn far_events_keep_their_order_with_near_ones() {
        let mut q = EventQueue::default();
        let far = SLOTS as u64 * 3 + 17;
        q.push(ns(far), Event::NicTimer { host: 1 });
        q.push(ns(far), Event::NicTimer { host: 2 });
        q.push(ns(10), Event::HostTx { host: 0 });
        assert_eq!(drain(&mut q, 10), [(ns(10), Event::HostTx { host: 0 })]);
        // Not yet within the window: goes far, behind the two.
        q.push(ns(far), Event::NicTimer { host: 3 });
        q.push(ns(far - 100), Event::FlowStart { flow: 4 });
        assert_eq!(
            drain(&mut q, far - 100),
            [(ns(far - 100), Event::FlowStart { flow: 4 })]
        );
        // Now the window covers `far`: a push goes into its slot after the three moved there.
        q.push(ns(far), Event::NicTimer { host: 5 });
        q.push(ns(far - 1), Event::FlowStart { flow: 6 });
        let hosts: Vec<_> = drain(&mut q, u64::MAX)
            .into_iter()
            .map(|(at, e)| (at.as_nanos(), e))
            .collect();
        assert_eq!(
            hosts,
            [
                (far - 1, Event::FlowStart { flow: 6 }),
                (far, Event::NicTimer { host: 1 }),
                (far, Event::NicTimer { host: 2 }),
                (far, Event::NicTimer { host: 3 }),
                (far, Event::NicTimer { host: 5 }),
            ]
        );
    }

    /// The hint names the event the [`LEAD`]th pop from now returns, whether it shares its
    /// slot with the one before or not, and round the wheel's end; past the last it names
    /// none.
    #[test]
    fn the_upcoming_hint_names_the_event_lead_pops_ahead() {
        let mut q = EventQueue::default();
        let upcoming = |q: &EventQueue| {
            let mut seen = None;
            q.prefetch_upcoming(|e| seen = Some(*e));
            seen
        };
        assert_eq!(upcoming(&q), None);
        q.push(ns(100), Event::HostTx { host: 0 });
        assert!(q.pop_until(ns(100)).is_some());
        // The window is [100, SLOTS + 100): the last two are in its last slot and, round the
        // wheel, in slot 8.
        let last = SLOTS as u64 - 1;
        q.push(ns(last), Event::HostTx { host: 3 });
        q.push(ns(105), Event::HostTx { host: 1 });
        q.push(ns(105), Event::HostTx { host: 2 });
        q.push(ns(last + 9), Event::HostTx { host: 4 });
        // `hints[i]` is taken after `i` pops.
        let mut hints = vec![upcoming(&q)];
        let mut order = Vec::new();
        while let Some((_, popped)) = q.pop_until(ns(u64::MAX)) {
            order.push(popped);
            hints.push(upcoming(&q));
        }
        let host = |host| Event::HostTx { host };
        assert_eq!(order, [host(1), host(2), host(3), host(4)]);
        // After `i` pops, the event of pop `i + LEAD` (none past the end).
        let expected: Vec<_> = (0..=order.len())
            .map(|i| order.get(i + LEAD - 1).copied())
            .collect();
        assert_eq!(hints, expected);
    }

    /// Against a binary heap of (time, sequence): monotone pushes at random distances, near and
    /// far, many ties, popped in exactly the heap's order.
    #[test]
    fn pops_in_the_order_of_a_binary_heap() {
        let mut q = EventQueue::default();
        let mut reference = BinaryHeap::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut popped = 0;
        for round in 0..20_000u32 {
            for _ in 0..(next() % 3) {
                let r = next();
                let ahead = match r % 4 {
                    0 => 0,
                    1 => r % 50,
                    2 => r % (SLOTS as u64 + 10),
                    _ => r % (SLOTS as u64 * 40),
                };
                seq += 1;
                q.push(ns(now + ahead), Event::FlowStart { flow: round });
                reference.push(Reverse((now + ahead, seq, round)));
            }
            let until = now + next() % 2000;
            while let Some(got) = q.pop_until(ns(until)) {
                let Reverse((at, _, flow)) = reference.pop().unwrap();
                assert_eq!(got, (ns(at), Event::FlowStart { flow }));
                assert!(at >= now);
                now = at;
                popped += 1;
            }
            assert!(
                reference
                    .peek()
                    .is_none_or(|Reverse((at, _, _))| *at > until)
            );
            assert_eq!(q.len(), reference.len());
        }
        assert!(popped > 10_000, "{popped}");
    }
}
