use std::io::Write;
use std::os::fd::AsRawFd;

use super::*;
use crate::abi::event;

/// Bytes waiting in `channel`'s pipe: what makes its fd readable to the program's `poll`.
#[allow(unsafe_code)]
fn unread(channel: usize) -> libc::c_int {
    let fd = with(|t| t.channels[&channel].reader.as_raw_fd());
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int; the channel (and its fd) lives until the test destroys it.
    assert_eq!(unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) }, 0);
    n
}

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
    with(|t| t.report(gone, event::ROUTE_RESOLVED, 0)).unwrap();
    assert_eq!(unread(ch), 3);
    with(|t| {
        t.drop_queued(gone);
        t.ids.remove(&gone);
    });
    // As the kernel's file, readable for the events still queued only: a program's poll
    // does not wake for the two that went.
    assert_eq!(unread(ch), 1, "the dropped events' bytes are taken back");
    let e = get_event(ch).unwrap() as usize;
    with(|t| {
        assert_eq!(t.events[&e].c.get().id as usize, kept);
        assert_eq!(t.events[&e].c.get().status, -5);
        assert!(
            !t.events.values().any(|ev| ev.c.get().id as usize == gone),
            "the dropped event is freed"
        );
    });
    assert_eq!(unread(ch), 0);
    ack_event(e).unwrap();
    with(|t| t.ids.remove(&kept));
    destroy_channel(ch).unwrap();
}

#[test]
fn a_migrated_ids_queued_events_take_their_bytes_along() {
    let (from, to) = (
        create_channel().unwrap() as usize,
        create_channel().unwrap() as usize,
    );
    let id = with(|t| fake_id(t, Some(from)));
    let other = with(|t| fake_id(t, Some(from)));
    with(|t| t.report(id, event::ADDR_RESOLVED, 0)).unwrap();
    with(|t| t.report(other, event::ADDR_ERROR, -5)).unwrap();
    with(|t| t.report(id, event::ROUTE_RESOLVED, 0)).unwrap();
    migrate_id(id, Some(to)).unwrap();
    assert_eq!((unread(from), unread(to)), (1, 2));
    let e = get_event(to).unwrap() as usize;
    assert_eq!(with(|t| t.events[&e].c.get().event), event::ADDR_RESOLVED);
    ack_event(e).unwrap();
    let e = get_event(from).unwrap() as usize;
    assert_eq!(with(|t| t.events[&e].c.get().id as usize), other);
    ack_event(e).unwrap();
    with(|t| {
        t.drop_queued(id);
        t.ids.remove(&id);
        t.ids.remove(&other);
    });
    assert_eq!((unread(from), unread(to)), (0, 0));
    destroy_channel(from).unwrap();
    destroy_channel(to).unwrap();
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
