//! A receiver read on a thread of its own ([`spawn_receiver`]), offload batches cut, with its
//! counters.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::batch::cut_batch;
use super::receiver::{COPY_BUFFER, Receiver};

/// Counters of a receive thread.
#[derive(Debug, Default)]
pub struct ReceiverStats {
    /// Segmentation-offload batches cut into their datagrams.
    pub batches_cut: AtomicU64,
    /// Frames dropped: batches that cannot be cut (TCP, malformed).
    pub dropped: AtomicU64,
    /// Frames the kernel dropped because the receive ring was full.
    pub ring_full: AtomicU64,
}

/// Reads `rx` on a thread of its own, handing each frame to `on_frame` with whether its L4
/// checksum was left to an offload (`VIRTIO_NET_HDR_F_NEEDS_CSUM`), until it returns false,
/// `stop` is set, or the socket fails (logged). A UDP/IPv4 segmentation-offload batch (on a
/// veth, what a UDP socket sent with UDP_SEGMENT) is first cut into its datagrams, each a
/// whole frame with its own headers and no UDP checksum; other batches are dropped and
/// counted.
pub fn spawn_receiver(
    thread_name: String,
    mut rx: Receiver,
    stop: Arc<AtomicBool>,
    mut on_frame: impl FnMut(&[u8], bool) -> bool + Send + 'static,
) -> io::Result<Arc<ReceiverStats>> {
    let stats = Arc::new(ReceiverStats::default());
    let counters = stats.clone();
    roce_cabi::spawn_settled(&thread_name.clone(), move || {
        let mut segment = Vec::with_capacity(COPY_BUFFER);
        let mut going = true;
        while going && !stop.load(Ordering::Relaxed) {
            if let Err(err) = rx.wait(Duration::from_millis(50)) {
                tracing::warn!(thread = %thread_name, error = %err, "receive failed");
                return;
            }
            rx.poll_frames(usize::MAX, |frame| {
                    if !going {
                        return true;
                    }
                    if !frame.vnet.is_gso() {
                        going = on_frame(frame.data, frame.vnet.needs_csum());
                        return true;
                    }
                    match cut_batch(frame.data, &frame.vnet) {
                        Ok(batch) => {
                            counters.batches_cut.fetch_add(1, Ordering::Relaxed);
                            for index in 0..batch.count() {
                                if going && batch.write(index, &mut segment) {
                                    going = on_frame(&segment, false);
                                }
                            }
                        }
                        Err(err) => {
                            counters.dropped.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(thread = %thread_name, error = %err, len = frame.data.len(), "offload batch dropped");
                        }
                    }
                    true
                });
            let lost = rx.take_ring_drops(false);
            if lost > 0 {
                counters.ring_full.fetch_add(lost, Ordering::Relaxed);
                tracing::debug!(thread = %thread_name, lost, "frames dropped by the kernel, ring full");
            }
        }
    })?;
    Ok(stats)
}
