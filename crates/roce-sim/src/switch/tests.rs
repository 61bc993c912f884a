//! ETS against the one-step reference.

use std::net::SocketAddr;

use super::*;

/// ETS as first written, one class per step: what `pick` must choose, and the state it must
/// leave. `pick` checks itself against this in every test build.
pub(super) fn pick_reference(
    ets: &Ets,
    ready: [bool; CLASSES],
    heads: [usize; CLASSES],
    (deficit, next_class, granted): (&mut [i64; CLASSES], &mut usize, &mut bool),
) -> Option<usize> {
    if let Some(class) = (0..CLASSES).rev().find(|&c| ets.strict[c] && ready[c]) {
        return Some(class);
    }
    if !(0..CLASSES).any(|c| !ets.strict[c] && ready[c]) {
        return None;
    }
    loop {
        let class = *next_class;
        if !ets.strict[class] && ready[class] {
            if !*granted {
                deficit[class] += i64::from(ets.weights[class].max(1)) * 1500;
                *granted = true;
            }
            if deficit[class] >= heads[class] as i64 {
                deficit[class] -= heads[class] as i64;
                return Some(class);
            }
        } else {
            deficit[class] = 0;
        }
        *next_class = (class + 1) % CLASSES;
        *granted = false;
    }
}

/// Random arrivals of random classes and sizes, random pauses, a mix of strict and
/// weighted classes: every choice `pick` makes agrees with the reference (it asserts so),
/// and every packet leaves.
#[test]
fn ets_picks_as_the_one_step_reference_does() {
    let addr: SocketAddr = "198.18.0.1:4791".parse().unwrap();
    let mut strict = [false; CLASSES];
    strict[6] = true;
    strict[2] = true;
    let config = SwitchConfig {
        ets: Ets {
            strict,
            weights: [1, 3, 1, 2, 1, 5, 1, 2],
        },
        buffer_bytes: usize::MAX / 2,
        ..SwitchConfig::default()
    };
    let mut switch = SwitchOf::<SimPacket>::new(config.clone(), 2, Vec::new(), 1);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut sent, mut left) = (0u64, 0u64);
    let mut now = Instant::ZERO;
    // Time of the last step: what was queued by then may leave from then on, back to back.
    let mut last = Instant::ZERO;
    let drain = |switch: &mut SwitchOf<SimPacket>, from: Instant, now: Instant| {
        let mut n = 0;
        loop {
            let at = switch.busy_until(1).max(from);
            if at > now {
                return n;
            }
            match switch.depart(at, 1) {
                Some(d) => {
                    assert!(d.end > at);
                    n += 1;
                }
                None => return n,
            }
        }
    };
    for _ in 0..20_000 {
        now += Duration::from_nanos(next() % 300);
        match next() % 8 {
            0..=3 => {
                let class = (next() % CLASSES as u64) as u8;
                let dscp = (0..64u8)
                    .find(|&d| config.dscp_to_priority[usize::from(d)] == class)
                    .unwrap_or(0);
                let len = 64 + (next() % 4000) as usize;
                let mut p = SimPacket::new(addr, addr, vec![0; len]);
                p.dscp = dscp;
                assert!(switch.enqueue(now, 0, 1, p));
                sent += 1;
            }
            4 => {
                let until = now + Duration::from_nanos(next() % 3000);
                switch.set_egress_pause(now, 1, (next() % CLASSES as u64) as u8, until);
            }
            _ => {
                left += drain(&mut switch, last, now);
                last = now;
            }
        }
    }
    // Drain: every class resumes, and what is queued leaves.
    now += Duration::from_secs(1);
    for c in 0..CLASSES as u8 {
        switch.set_egress_pause(now, 1, c, now);
    }
    left += drain(&mut switch, now, Instant::from_millis(1_000_000_000));
    assert!(sent > 5_000, "{sent}");
    assert_eq!(left, sent);
    assert_eq!(switch.queue_bytes(1), 0);
}

/// A packet of `class` (DSCP `class * 8`) whose wire length is `wire` bytes.
fn packet_of(class: u8, wire: usize) -> SimPacket {
    let addr: SocketAddr = "198.18.0.1:4791".parse().unwrap();
    let overhead = SimPacket::new(addr, addr, Vec::new()).wire_len();
    let mut p = SimPacket::new(addr, addr, vec![0; wire - overhead]);
    p.dscp = class * 8;
    p
}

/// Two weighted classes, then one of them paused with deficit left: the other sends alone,
/// and the paused one, passed by the turn, keeps no deficit (as the one-step reference, which
/// `pick` checks itself against, says), whether the turn passes it on its way to the class
/// that sends or on a round that class needs to cover a long packet.
#[test]
fn a_class_passed_while_paused_keeps_no_deficit() {
    for passed_on_a_round in [false, true] {
        let mut switch = SwitchOf::<SimPacket>::new(SwitchConfig::default(), 2, Vec::new(), 1);
        let now = Instant::from_micros(1);
        let mut sent = Vec::new();
        let mut depart = |switch: &mut SwitchOf<SimPacket>| {
            let at = switch.busy_until(1).max(now);
            let d = switch.depart(at, 1)?;
            sent.push((usize::from(d.packet.dscp / 8), d.packet.wire_len()));
            Some(())
        };
        for p in [packet_of(1, 1000), packet_of(1, 1000), packet_of(3, 1000)] {
            assert!(switch.enqueue(now, 0, 1, p));
        }
        if passed_on_a_round {
            assert!(switch.enqueue(now, 0, 1, packet_of(3, 4000)));
        }
        // Class 1 sends one (500 bytes of its 1500 left), then class 3 its turn's first.
        depart(&mut switch).unwrap();
        if passed_on_a_round {
            depart(&mut switch).unwrap();
        }
        switch.set_egress_pause(now, 1, 1, Instant::from_millis(1));
        if !passed_on_a_round {
            assert!(switch.enqueue(now, 0, 1, packet_of(3, 4000)));
        }
        while depart(&mut switch).is_some() {}
        assert_eq!(switch.ports[1].deficit[1], 0);
        switch.set_egress_pause(now, 1, 1, now);
        while depart(&mut switch).is_some() {}
        let order: Vec<usize> = sent.iter().map(|&(class, _)| class).collect();
        assert_eq!(
            order,
            [1, 3, 3, 1],
            "passed on a round: {passed_on_a_round}"
        );
        assert_eq!(switch.queue_bytes(1), 0);
    }
}
