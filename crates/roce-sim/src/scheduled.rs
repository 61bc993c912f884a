//! Something due at a time, ordered by `(time, sequence)` alone: the order of a simulator's
//! queues, where the sequence number (taken when it was scheduled) breaks ties so that two
//! things due at one instant come out in the order they were scheduled, whatever they are.

use std::cmp::Ordering;

/// `item`, due at `at`, scheduled as the `seq`-th thing of its queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scheduled<K, T> {
    pub(crate) at: K,
    pub(crate) seq: u64,
    pub(crate) item: T,
}

impl<K: Ord, T> PartialEq for Scheduled<K, T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K: Ord, T> Eq for Scheduled<K, T> {}

impl<K: Ord, T> PartialOrd for Scheduled<K, T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord, T> Ord for Scheduled<K, T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (&self.at, self.seq).cmp(&(&other.at, other.seq))
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use super::Scheduled;

    #[test]
    fn earlier_first_then_in_the_order_scheduled_whatever_the_items() {
        let mut heap = BinaryHeap::new();
        for (seq, (at, item)) in [(5, "c"), (3, "z"), (5, "a"), (1, "y")]
            .into_iter()
            .enumerate()
        {
            heap.push(Reverse(Scheduled {
                at,
                seq: seq as u64,
                item,
            }));
        }
        let order: Vec<_> = std::iter::from_fn(|| heap.pop().map(|Reverse(s)| s.item)).collect();
        assert_eq!(order, ["y", "z", "c", "a"]);
    }
}
