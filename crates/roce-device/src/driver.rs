//! The device's task: quinn's `ConnectionDriver`, in mini-redis's shape. One task owns the
//! `Nic` and the backend; applications talk to it through `DeviceHandle` commands.
//!
//! Each turn of the loop waits for the first of three things — a command from a handle, datagrams
//! from the backend, the engine's next deadline — hands it to the engine with the current time,
//! then drains everything the engine wants to send, and wakes whoever waits for completions.
//! The engine is synchronous and never blocks, so a turn is short; the only awaits are on the
//! backend.

use std::io;
use std::sync::Arc;

use roce_core::{Datagram, Instant, MAX_DATAGRAM, Nic};
use tokio::sync::{Notify, mpsc};

use crate::backend::{Backend, Received};
use crate::clock::TokioClock;
use crate::tap::Tap;

/// A verb to run on the device's task: a closure over the engine and the current time, which
/// replies through a oneshot channel it captured.
pub(crate) type Command = Box<dyn FnOnce(&mut Nic, Instant) + Send>;

pub(crate) struct Driver<B> {
    pub(crate) nic: Nic,
    pub(crate) backend: B,
    pub(crate) commands: mpsc::UnboundedReceiver<Command>,
    pub(crate) completions: Arc<Notify>,
    pub(crate) clock: TokioClock,
    pub(crate) tap: Option<Tap>,
    pub(crate) rx_loss: Loss,
}

/// Receive-side random drops, for showing recovery at work (`roce demo --loss`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loss {
    /// Probability in parts per million.
    pub(crate) ppm: u32,
    /// xorshift state.
    pub(crate) state: u64,
}

impl Loss {
    fn drop_next(&mut self) -> bool {
        if self.ppm == 0 {
            return false;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % 1_000_000) < u64::from(self.ppm)
    }
}

impl<B: Backend> Driver<B> {
    pub(crate) async fn run(self) -> io::Result<()> {
        let Self {
            mut nic,
            mut backend,
            mut commands,
            completions,
            clock,
            tap,
            mut rx_loss,
        } = self;
        let mut rx_buf = vec![0u8; backend.recv_buffer_len()];
        let mut tx_buf = vec![0u8; MAX_DATAGRAM];
        let mut received: Vec<Received> = Vec::new();
        tracing::info!("device started");
        loop {
            let deadline = nic.poll_timeout().map(|at| clock.to_tokio(at));
            tokio::select! {
                // Commands first: an application waiting on a verb should not wait behind a
                // flood of datagrams.
                biased;
                command = commands.recv() => match command {
                    Some(command) => command(&mut nic, clock.now()),
                    // Every handle is gone: the device stops.
                    None => break,
                },
                result = backend.recv(&mut rx_buf, &mut received) => {
                    if let Err(err) = result {
                        tracing::debug!(error = %err, "backend receive error");
                    }
                    let now = clock.now();
                    for datagram in received.drain(..) {
                        let payload = &rx_buf[datagram.offset..datagram.offset + datagram.len];
                        if rx_loss.drop_next() {
                            continue;
                        }
                        if let Some(tap) = tap.as_ref().filter(|t| t.received_too()) {
                            tap.record(datagram.src, datagram.dst, datagram.ecn, 0, 64, payload);
                        }
                        nic.handle_datagram(now, Datagram {
                            src: datagram.src,
                            dst: datagram.dst,
                            ecn: datagram.ecn,
                            ip_id: datagram.ip_id,
                            payload,
                        });
                    }
                }
                // `deadline` is None when no timer is armed: that branch then never fires.
                () = sleep_until(deadline) => nic.handle_timeout(clock.now()),
            }
            let now = clock.now();
            while let Some(transmit) = nic.poll_transmit(now, &mut tx_buf) {
                let payload = &tx_buf[..transmit.len];
                if let Some(tap) = &tap {
                    let src = std::net::SocketAddr::new(transmit.src, transmit.src_port);
                    tap.record(
                        src,
                        transmit.dst,
                        transmit.ecn,
                        transmit.dscp,
                        transmit.ttl,
                        payload,
                    );
                }
                if let Err(err) = backend.send(&transmit, payload).await {
                    // A datagram that cannot go out is lost, as on a wire: the transport
                    // recovers. The error is logged, not fatal.
                    tracing::debug!(dst = %transmit.dst, error = %err, "send failed");
                }
            }
            completions.notify_waiters();
        }
        tracing::info!("device stopped");
        Ok(())
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
