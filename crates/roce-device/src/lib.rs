//! A roce-emu NIC on real sockets.
//!
//! This is where roce-emu meets the network: the backends' sockets. [`Device::spawn`] starts a
//! task that drives a sans-IO `roce_core::Nic` over a [`Backend`]; [`DeviceHandle`] is the verbs
//! API applications use from any thread or task: a verb runs on the caller's thread, sends what it
//! made from there when the backend allows it (else it rings the task's doorbell), and
//! completions are read from [`CompletionQueue`]s the task fills — or the polling thread, when
//! it finds its queue empty and looks at the network itself
//! ([`DeviceHandle::poll_network`]). The backends: [`backend::udp::UdpBackend`], an unprivileged
//! UDP socket on port 4791 (segmentation-offload batches out, GRO in), and
//! [`backend::raw::RawBackend`], whole Ethernet frames on an interface through the crate's own
//! AF_PACKET socket (a `TPACKET_V2` receive ring and virtio-net headers; CAP_NET_RAW), which sees
//! and checks every ICRC in full. A [`Tap`] writes what a device sends (and receives) to a pcap.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use roce_device::{Device, DeviceConfig, backend::udp::UdpBackend};
//! let backend = UdpBackend::bind("127.0.0.1".parse()?, 4791)?;
//! let device = Device::spawn(DeviceConfig::new("127.0.0.1".parse()?), backend);
//! let pd = device.alloc_pd().await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

use std::net::IpAddr;
use std::sync::Arc;

use roce_core::{Nic, NicConfig, SrcPortPolicy};

pub mod backend;
mod batch;
mod clock;
mod cm_inbox;
mod cq;
mod doorbell;
mod driver;
mod endpoint;
mod engine;
mod handle;
mod receive;
pub mod share;
mod shared;
pub mod spec;
mod tap;
mod transmit;

pub use backend::{Backend, BackendStats};
pub use cq::CompletionQueue;
pub use endpoint::{Connection, RcEndpoint};
pub use handle::{DeviceError, DeviceHandle, Verb};
pub use roce_pcap::SnapLen;
pub use spec::{
    BackendKind, Cc, CcParam, DeviceSpec, EnvError, OpenError, Opened, Recovery, TX_BURST_PACKETS,
};
pub use tap::Tap;

/// How a device is set up.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// The engine's configuration. Its addresses must include the backend's; its source port
    /// policy is set from the backend's abilities.
    pub nic: NicConfig,
    /// Where to record traffic, if anywhere.
    pub tap: Option<Tap>,
    /// Drop this fraction of received datagrams at random (0 to 1), to show recovery at work.
    pub rx_loss: f64,
    /// Seed of those drops.
    pub seed: u64,
    /// Busy polling: the device never sleeps (each turn looks at commands, the backend and the
    /// clock without waiting, then yields to the other tasks) and completions are waited for by
    /// polling the CQ (see [`DeviceHandle::next_completion`]): no wake-up on the path of a
    /// packet, one busy core. On a current-thread runtime, build it with `event_interval(1)` so
    /// that it looks at the sockets at every tick rather than every 61.
    pub busy_poll: bool,
}

impl DeviceConfig {
    /// A device with one address and default engine settings. The engine's seed (QPNs, key
    /// variants, region addresses) is drawn from the operating system, so that no two runs show
    /// a peer the same values; set `nic.seed` to repeat a run.
    pub fn new(addr: IpAddr) -> Self {
        Self {
            nic: NicConfig {
                addrs: vec![addr],
                seed: os_seed(),
                ..NicConfig::default()
            },
            tap: None,
            rx_loss: 0.0,
            seed: 1,
            busy_poll: false,
        }
    }
}

/// 64 bits from the operating system's random source, through the standard library's
/// randomly keyed hasher (keyed once per process from the OS, then counted up per call).
fn os_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x726f_6365);
    hasher.finish()
}

/// Starts devices.
#[derive(Debug)]
pub struct Device;

impl Device {
    /// Starts a device on the current tokio runtime and returns its handle. The device runs until
    /// every handle is dropped.
    pub fn spawn<B: Backend>(config: DeviceConfig, backend: B) -> DeviceHandle {
        let mut nic_config = config.nic;
        if let Some(port) = backend.fixed_src_port() {
            // One socket: every packet leaves from its port, so the ICRC must cover that one.
            nic_config.src_port = SrcPortPolicy::Fixed(port);
        }
        let mut backend = backend;
        let direct = backend
            .sender()
            .map(|sender| transmit::Direct::new(sender, config.tap.clone()));
        let rx_loss = receive::Loss {
            ppm: (config.rx_loss.clamp(0.0, 1.0) * 1e6) as u32,
            state: config.seed | 1,
        };
        let direct_rx = backend
            .receiver()
            .map(|receiver| receive::DirectRx::new(receiver, rx_loss, config.tap.clone()));
        let shared = Arc::new(
            shared::Shared::new(Nic::new(nic_config), config.busy_poll, backend.counters())
                .with_direct(direct, direct_rx),
        );
        let driver = driver::Driver {
            shared: shared.clone(),
            backend,
            tap: config.tap,
            busy_poll: config.busy_poll,
            rx_loss,
        };
        tokio::spawn(async move {
            if let Err(err) = driver.run().await {
                tracing::error!(error = %err, "device stopped on an error");
            }
        });
        DeviceHandle::new(shared)
    }
}
