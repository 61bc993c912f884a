//! The NIC inside the program: roce-device's `Device` on a tokio runtime of its own thread,
//! started by the first `ibv_open_device`. The program's threads call its verbs directly
//! ([`roce_device::DeviceHandle::verb`]); the thread only moves packets, timers and
//! completions.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use roce_device::backend::BindError;
use roce_device::backend::raw::RawBackend;
use roce_device::backend::udp::{Interface, UdpBackend};
use roce_device::{Device, DeviceConfig, DeviceHandle, SnapLen, Tap};
use roce_wire::ROCE_V2_UDP_PORT as PORT;

use crate::config::Backend;
use crate::device::DeviceModel;

/// A running NIC.
#[derive(Debug)]
pub(crate) struct Engine {
    /// Its verbs.
    pub(crate) device: DeviceHandle,
}

impl Engine {
    /// Starts the NIC on a thread named `roce-verbs-nic`; fails (with a message for stderr) if
    /// the backend cannot open, e.g. when the address is not one of this host's. An IPv4 NIC
    /// that cannot bind GID 0's link-local address starts without it, and `model` records why
    /// ([`DeviceModel::link_local_unbound`]).
    pub(crate) fn start(model: &DeviceModel) -> Result<Self, String> {
        let spec = model.spec.clone();
        let mut config = DeviceConfig::new(spec.ip);
        config.nic.max_mtu = spec.mtu;
        let iface = model.iface.clone();
        config.nic.line_rate_bps = model.nic.line_rate_bps;
        config.nic.congestion = model.nic.congestion;
        config.rx_loss = spec.loss;
        config.busy_poll = spec.busy_poll;
        if let Some(path) = &spec.pcap {
            config.tap = Some(
                Tap::create(path, true, SnapLen::new(spec.snaplen))
                    .map_err(|e| format!("cannot create {}: {e}", path.display()))?,
            );
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("roce-verbs-nic".into())
            .spawn(move || {
                let mut builder = tokio::runtime::Builder::new_current_thread();
                builder.enable_all();
                if spec.busy_poll {
                    // Look at the socket at every tick, not every 61 (see roce's --busy-poll).
                    builder.event_interval(1);
                }
                let runtime = match builder.build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(format!("cannot start the NIC's runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let ip = spec.ip;
                    let device = match spec.backend {
                        Backend::Udp => udp_backend(ip, iface.as_ref(), &mut config.nic.addrs).map(
                            |(b, unbound)| {
                                let b = if spec.no_gso { b.without_gso() } else { b };
                                (Device::spawn(config, b), unbound)
                            },
                        ),
                        Backend::Raw => {
                            let dev = spec.dev.clone().unwrap_or_default();
                            RawBackend::open(&dev, ip)
                                .map(|b| (Device::spawn(config, b), None))
                                .map_err(|e| format!("raw backend on {dev}: {e}"))
                        }
                    };
                    let ok = device.is_ok();
                    let _ = tx.send(device);
                    if ok {
                        // The device runs as long as the process: its task lives on this runtime.
                        std::future::pending::<()>().await;
                    }
                });
            })
            .map_err(|e| format!("cannot start the NIC's thread: {e}"))?;
        let (device, unbound) = rx
            .recv()
            .map_err(|_| "the NIC's thread stopped".to_owned())??;
        if let Some(why) = unbound {
            model.link_local_unbound(why);
        }
        Ok(Self { device })
    }
}

/// The UDP backend of a NIC at `ip` on `iface` (the interface that holds it), and, where
/// GID 0 is that interface's link-local address, that address added to `addrs`. An IPv6 NIC
/// takes `[::]:4791` on the interface (for both its GIDs), and does not start without it. An
/// IPv4 NIC takes `ip:4791` and, for GID 0, `[link-local%interface]:4791`; without the latter
/// it starts all the same, with, as the second value, why GID 0 carries no traffic.
fn udp_backend(
    ip: IpAddr,
    iface: Option<&Interface>,
    addrs: &mut Vec<IpAddr>,
) -> Result<(UdpBackend, Option<String>), String> {
    let Some((iface, ll)) = iface.and_then(|i| Some((i, i.link_local?))) else {
        let backend = UdpBackend::bind(ip, PORT).map_err(|e| bind_error(ip, e))?;
        return Ok((backend, None));
    };
    let backend = if ip.is_ipv6() {
        UdpBackend::bind_interface(&iface.name, iface.index, PORT)
            .map_err(|e| interface_bind_error(ip, &iface.name, e))?
    } else {
        let mut backend = UdpBackend::bind(ip, PORT).map_err(|e| bind_error(ip, e))?;
        if let Err(err) = backend.bind_link_local(ll, iface.index) {
            let why = link_local_bind_error(ll, &iface.name, err);
            tracing::info!("GID 0 carries no traffic: {why}");
            return Ok((backend, Some(why)));
        }
        backend
    };
    addrs.push(IpAddr::V6(ll));
    Ok((backend, None))
}

/// Why an IPv4 NIC could not bind UDP 4791 on `ll`, the link-local address of `ifname` that is
/// its GID 0: the end of "GID 0 carries no traffic here: ...".
fn link_local_bind_error(ll: Ipv6Addr, ifname: &str, err: std::io::Error) -> String {
    let what = format!("UDP [{ll}%{ifname}]:4791, {ifname}'s link-local address, cannot be bound");
    if err.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "{what}: in use, by another NIC on {ifname} (an IPv6 one, or an IPv4 one that \
             started first) or the kernel's rxe driver"
        )
    } else {
        format!("{what}: {err}")
    }
}

/// Why the NIC could not bind UDP `[::]:4791` on `ifname`, the socket of both its GIDs (its
/// address, GID 1, and the interface's link-local address, GID 0).
fn interface_bind_error(ip: IpAddr, ifname: &str, err: std::io::Error) -> String {
    let what = format!(
        "cannot bind UDP [::]:4791 on {ifname}, the socket of GID 1 ({ip}) and GID 0 ({ifname}'s \
         link-local address)"
    );
    if err.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "{what}: in use, by another IPv6 NIC on {ifname}, an IPv4 NIC on {ifname} (for its \
             GID 0, the link-local address) or the kernel's rxe driver: one IPv6 NIC per \
             interface; give this one an address on another interface"
        )
    } else {
        format!("{what}: {err}")
    }
}

/// Why the NIC could not bind `ip:4791`, by its real cause (in use, or not an address of this
/// host), with what a `roce exec` user does about it.
fn bind_error(ip: IpAddr, err: std::io::Error) -> String {
    let err = BindError::new(SocketAddr::new(ip, roce_wire::ROCE_V2_UDP_PORT), err);
    match err.advice("roce exec --ip") {
        Some(advice) => format!("{err}; {advice}"),
        None => err.to_string(),
    }
}
