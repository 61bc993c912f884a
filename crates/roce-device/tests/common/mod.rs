//! What the device's integration tests share.

#![allow(clippy::unwrap_used, dead_code)] // test code; each test file uses part of it

use std::net::IpAddr;

use roce_core::{Access, Psn};
use roce_device::backend::udp::UdpBackend;
use roce_device::{Connection, Device, DeviceConfig, DeviceHandle, RcEndpoint};

/// Two devices on loopback addresses `a` and `b`, each with an RC QP connected to the other's.
pub(crate) async fn pair(
    a: &str,
    b: &str,
) -> (
    (DeviceHandle, RcEndpoint),
    (DeviceHandle, RcEndpoint),
    IpAddr,
    IpAddr,
) {
    let (ip_a, ip_b): (IpAddr, IpAddr) = (a.parse().unwrap(), b.parse().unwrap());
    let dev_a = Device::spawn(
        DeviceConfig::new(ip_a),
        UdpBackend::bind(ip_a, 4791).unwrap(),
    );
    let dev_b = Device::spawn(
        DeviceConfig::new(ip_b),
        UdpBackend::bind(ip_b, 4791).unwrap(),
    );
    let qp_a = RcEndpoint::create(&dev_a, 64).await.unwrap();
    let qp_b = RcEndpoint::create(&dev_b, 64).await.unwrap();
    qp_a.init(Access::ALL).await.unwrap();
    qp_b.init(Access::ALL).await.unwrap();
    let (psn_a, psn_b) = (Psn::new(0x123), Psn::new(0xabcdef));
    qp_a.connect(&Connection::new(ip_a, ip_b, qp_b.qpn, psn_b, psn_a))
        .await
        .unwrap();
    qp_b.connect(&Connection::new(ip_b, ip_a, qp_a.qpn, psn_a, psn_b))
        .await
        .unwrap();
    ((dev_a, qp_a), (dev_b, qp_b), ip_a, ip_b)
}
