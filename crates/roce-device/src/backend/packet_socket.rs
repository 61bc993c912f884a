//! An AF_PACKET socket on one interface (pnet_datalink), and the thread that reads it: what the
//! raw backend and `roce switch` both stand on. It needs CAP_NET_RAW.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use pnet_datalink::{Channel, DataLinkReceiver, DataLinkSender};

/// An open interface: its sending and receiving halves and its MAC address.
pub struct PacketSocket {
    /// Sends whole frames.
    pub tx: Box<dyn DataLinkSender>,
    /// Receives whole frames (blocking, with a 50 ms timeout); see [`spawn_receiver`].
    pub rx: Box<dyn DataLinkReceiver>,
    /// The interface's MAC address.
    pub mac: [u8; 6],
    /// The longest frame the interface carries: its MTU plus an Ethernet header and a VLAN
    /// tag.
    pub max_frame: usize,
}

impl std::fmt::Debug for PacketSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketSocket")
            .field("mac", &self.mac)
            .finish_non_exhaustive()
    }
}

/// Opens `interface`, in promiscuous mode if asked (a switch sees frames for other MACs).
/// The errors say what to do: a missing interface, one that is not Ethernet, or a process
/// without CAP_NET_RAW (`ErrorKind::PermissionDenied`).
pub fn open(interface: &str, promiscuous: bool) -> io::Result<PacketSocket> {
    let iface = pnet_datalink::interfaces()
        .into_iter()
        .find(|i| i.name == interface)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {interface} (see `ip link`)"),
            )
        })?;
    let mac = iface.mac.map(|m| m.octets()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{interface} has no MAC address: not Ethernet"),
        )
    })?;
    let config = pnet_datalink::Config {
        read_timeout: Some(Duration::from_millis(50)),
        read_buffer_size: 1 << 16,
        write_buffer_size: 1 << 16,
        promiscuous,
        ..pnet_datalink::Config::default()
    };
    match pnet_datalink::channel(&iface, config) {
        Ok(Channel::Ethernet(tx, rx)) => Ok(PacketSocket {
            tx,
            rx,
            mac,
            max_frame: mtu(interface) + 18,
        }),
        Ok(_) => Err(io::Error::other(format!(
            "{interface}: not an Ethernet channel"
        ))),
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "opening {interface} needs CAP_NET_RAW: run as root, or \
                 `sudo setcap cap_net_raw+ep $(which roce)`"
            ),
        )),
        Err(err) => Err(err),
    }
}

/// The interface's MTU (1500 when sysfs does not say).
fn mtu(interface: &str) -> usize {
    std::fs::read_to_string(format!("/sys/class/net/{interface}/mtu"))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(1500)
}

/// Reads `rx` on a thread of its own (pnet's receiver blocks), handing each frame to
/// `on_frame` until it returns false, `stop` is set, or the socket fails (logged).
///
/// Frames longer than `max_frame` are dropped and counted in the returned counter. On a veth,
/// a packet socket sees what the sending socket handed the kernel, before segmentation: a UDP
/// segmentation-offload batch (roce-emu's UDP backend sends them) arrives as one frame of up to
/// 64 KiB. The first one is reported with the remedy.
pub fn spawn_receiver(
    thread_name: String,
    mut rx: Box<dyn DataLinkReceiver>,
    max_frame: usize,
    stop: Arc<AtomicBool>,
    mut on_frame: impl FnMut(&[u8]) -> bool + Send + 'static,
) -> io::Result<Arc<AtomicU64>> {
    let oversized = Arc::new(AtomicU64::new(0));
    let counter = oversized.clone();
    std::thread::Builder::new()
        .name(thread_name.clone())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match rx.next() {
                    Ok(frame) if frame.len() > max_frame => {
                        if counter.fetch_add(1, Ordering::Relaxed) == 0 {
                            tracing::warn!(
                                thread = %thread_name,
                                len = frame.len(),
                                max_frame,
                                "dropped a frame longer than the MTU: a segmentation-offload \
                                 batch from a sender on this link; give roce's UDP backend \
                                 --no-gso, or run `ethtool -K <its interface> \
                                 tx-udp-segmentation off` where it sends"
                            );
                        }
                        tracing::debug!(thread = %thread_name, len = frame.len(), "oversized frame dropped");
                    }
                    Ok(frame) => {
                        if !on_frame(frame) {
                            return;
                        }
                    }
                    Err(err)
                        if matches!(
                            err.kind(),
                            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                        ) => {}
                    Err(err) => {
                        tracing::warn!(thread = %thread_name, error = %err, "receive failed");
                        return;
                    }
                }
            }
        })?;
    Ok(oversized)
}
