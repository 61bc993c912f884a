//! ETS (802.1Qaz) at an egress port: which class sends next.

use roce_core::Instant;

use super::{CLASSES, Frame, Port, SwitchOf};

impl<P: Frame> SwitchOf<P> {
    /// ETS: the highest strict class with packets, else deficit round robin over the others;
    /// classes the host has paused wait.
    pub(super) fn pick(&mut self, egress: usize, now: Instant) -> Option<usize> {
        #[cfg(test)]
        let reference = {
            let port = &self.ports[egress];
            let (mut deficit, mut next, mut granted) =
                (port.deficit, port.next_class, port.granted);
            let ready: [bool; CLASSES] = std::array::from_fn(|c| {
                !port.class[c].queue.is_empty() && port.class[c].paused_until <= now
            });
            let heads =
                std::array::from_fn(|c| port.class[c].queue.front().map_or(0, |q| q.bytes()));
            let class = super::tests::pick_reference(
                &self.config.ets,
                ready,
                heads,
                (&mut deficit, &mut next, &mut granted),
            );
            (class, deficit, next, granted)
        };
        let class = self.pick_fast(egress, now);
        #[cfg(test)]
        {
            let port = &self.ports[egress];
            assert_eq!(
                (class, port.deficit, port.next_class, port.granted),
                reference,
                "ETS pick differs from the one-step reference"
            );
        }
        class
    }

    pub(super) fn pick_fast(&mut self, egress: usize, now: Instant) -> Option<usize> {
        let weights = &self.config.ets.weights;
        let port = &mut self.ports[egress];
        let queued = port.queued_classes;
        if queued == 0 {
            return None;
        }
        // The classes with packets whose pause has run out, as a bit set (no allocation, and
        // only the queued classes' pause times are read).
        let mut ready: u16 = 0;
        let mut bits = queued;
        while bits != 0 {
            let c = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if port.class[c].paused_until <= now {
                ready |= 1 << c;
            }
        }
        let strict = ready & self.strict_classes;
        if strict != 0 {
            return Some(15 - strict.leading_zeros() as usize); // the highest strict class
        }
        let weighted = ready & !self.strict_classes;
        if weighted == 0 {
            return None;
        }
        // Deficit round robin: each visit in a round grants a class weight × quantum bytes; it
        // sends while its deficit covers its head packet, then the turn passes on. An empty
        // class keeps no deficit.
        if weighted.is_power_of_two() {
            // One weighted class may send (a fabric's data class, nearly always): where the
            // loop below would end, in closed form, with the same deficits and turn.
            let class = weighted.trailing_zeros() as usize;
            let head = port.class[class].queue.front().map_or(0, |q| q.bytes());
            port.drr_alone(class, weights[class], head);
            return Some(class);
        }
        loop {
            let class = port.next_class;
            if weighted & 1 << class != 0 {
                if !port.granted {
                    port.deficit[class] += i64::from(weights[class].max(1)) * QUANTUM;
                    port.granted = true;
                }
                let head = port.class[class].queue.front().map_or(0, |q| q.bytes()) as i64;
                if port.deficit[class] >= head {
                    port.deficit[class] -= head;
                    return Some(class);
                }
                port.next_class = (class + 1) % CLASSES;
            } else {
                // On to the next class that may send; those passed keep no deficit.
                let w = u32::from(weighted);
                let after = ((w >> class) | (w << (CLASSES - class))) & ((1 << CLASSES) - 1);
                let ahead = after.trailing_zeros() as usize; // weighted != 0: < CLASSES
                for k in 0..ahead {
                    port.deficit[(class + k) % CLASSES] = 0;
                }
                port.next_class = (class + ahead) % CLASSES;
            }
            port.granted = false;
        }
    }
}

/// Bytes a class of weight 1 is granted per round of the deficit round robin.
const QUANTUM: i64 = 1500;

impl<P> Port<P> {
    /// The deficit round robin's turn when `class` (of `weight`) is the only weighted class
    /// ready and its head packet is `head` bytes: where the loop of [`SwitchOf::pick_fast`]
    /// would end, in closed form, with the same deficits and turn.
    #[inline(always)]
    pub(super) fn drr_alone(&mut self, class: usize, weight: u32, head: usize) {
        let head = head as i64;
        let quantum = i64::from(weight.max(1)) * QUANTUM;
        if self.next_class != class {
            // The classes from the turn's up to this one are passed: they keep no deficit.
            let mut c = self.next_class;
            while c != class {
                self.deficit[c] = 0;
                c = (c + 1) % CLASSES;
            }
            self.next_class = class;
            self.granted = false;
        }
        if !self.granted {
            self.deficit[class] += quantum;
            self.granted = true;
        }
        if self.deficit[class] < head {
            // Each further round passes every other class and grants this one again.
            let kept = self.deficit[class];
            self.deficit = [0; CLASSES];
            self.deficit[class] = kept;
            let short = head - self.deficit[class]; // > 0
            // Rounds of one quantum each until it covers the head: nearly always one (a
            // packet is shorter than a quantum), which needs no division.
            let rounds = if short <= quantum {
                1
            } else {
                (short as u64).div_ceil(quantum as u64) as i64
            };
            self.deficit[class] += rounds * quantum;
        }
        self.deficit[class] -= head;
    }
}
