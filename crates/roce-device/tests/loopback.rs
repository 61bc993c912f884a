//! Two devices in one process over UDP on loopback: real sockets, real kernel, no root.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::pair;

use std::net::IpAddr;
use std::time::Duration;

use roce_core::{Access, Psn, RecvWr, Remote, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use roce_device::backend::udp::UdpBackend;
use roce_device::{Connection, Device, DeviceConfig, RcEndpoint};

#[tokio::test]
async fn send_write_read_and_atomics_over_loopback_udp() {
    let ((dev_a, qp_a), (dev_b, qp_b), _, _) = pair("127.0.10.1", "127.0.10.2").await;
    let mr_a = dev_a.reg_mr(qp_a.pd, 1 << 20, Access::ALL).await.unwrap();
    let mr_b = dev_b.reg_mr(qp_b.pd, 1 << 20, Access::ALL).await.unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + 3) as u8).collect();
    mr_a.write(0, &data);
    let sge = |mr: &roce_core::MemoryRegion, offset: u64, len: u32| Sge {
        addr: mr.addr() + offset,
        length: len,
        lkey: mr.lkey(),
    };
    let limit = Duration::from_secs(5);

    // SEND into a posted receive.
    dev_b
        .post_recv(
            qp_b.qpn,
            RecvWr {
                wr_id: 1,
                sgl: [sge(&mr_b, 0, 4096)].into(),
            },
        )
        .await
        .unwrap();
    dev_a
        .post_send(qp_a.qpn, SendWr::new(10, SendOp::Send, sge(&mr_a, 0, 4000)))
        .await
        .unwrap();
    let recv = dev_b.next_completion_within(qp_b.cq, limit).await.unwrap();
    assert_eq!(
        (recv.wr_id, recv.status, recv.byte_len),
        (1, WcStatus::Success, 4000)
    );
    assert_eq!(
        dev_a
            .next_completion_within(qp_a.cq, limit)
            .await
            .unwrap()
            .wr_id,
        10
    );
    assert_eq!(mr_b.read(0, 4000).unwrap(), &data[..4000]);

    // WRITE 300 kB, then READ it back into another place.
    let remote = Remote {
        addr: mr_b.addr() + 100_000,
        rkey: mr_b.rkey(),
    };
    dev_a
        .post_send(
            qp_a.qpn,
            SendWr::new(11, SendOp::RdmaWrite(remote), sge(&mr_a, 0, 300_000)),
        )
        .await
        .unwrap();
    let write = dev_a.next_completion_within(qp_a.cq, limit).await.unwrap();
    assert_eq!(
        (write.wr_id, write.status, write.opcode),
        (11, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(mr_b.read(100_000, 300_000).unwrap(), data);
    dev_a
        .post_send(
            qp_a.qpn,
            SendWr::new(12, SendOp::RdmaRead(remote), sge(&mr_a, 500_000, 300_000)),
        )
        .await
        .unwrap();
    let read = dev_a.next_completion_within(qp_a.cq, limit).await.unwrap();
    assert_eq!(
        (read.wr_id, read.status, read.byte_len),
        (12, WcStatus::Success, 300_000)
    );
    assert_eq!(mr_a.read(500_000, 300_000).unwrap(), data);

    // Fetch-and-add, then compare-and-swap.
    mr_b.write(0, &40u64.to_le_bytes());
    let target = Remote {
        addr: mr_b.addr(),
        rkey: mr_b.rkey(),
    };
    dev_a
        .post_send(
            qp_a.qpn,
            SendWr::new(
                13,
                SendOp::FetchAdd {
                    remote: target,
                    add: 2,
                },
                sge(&mr_a, 900_000, 8),
            ),
        )
        .await
        .unwrap();
    dev_a
        .post_send(
            qp_a.qpn,
            SendWr::new(
                14,
                SendOp::CompareSwap {
                    remote: target,
                    compare: 42,
                    swap: 7,
                },
                sge(&mr_a, 900_008, 8),
            ),
        )
        .await
        .unwrap();
    for id in [13, 14] {
        let cqe = dev_a.next_completion_within(qp_a.cq, limit).await.unwrap();
        assert_eq!((cqe.wr_id, cqe.status), (id, WcStatus::Success));
    }
    assert_eq!(
        mr_a.read(900_000, 16).unwrap(),
        [40u64.to_le_bytes(), 42u64.to_le_bytes()].concat()
    );
    assert_eq!(mr_b.read(0, 8).unwrap(), 7u64.to_le_bytes());

    // Every ICRC checked out assuming IPv4 ID 0: Linux sends DF datagrams from an unconnected
    // UDP socket with ID 0, as the engine's ICRC assumes.
    for dev in [&dev_a, &dev_b] {
        let stats = dev.stats().await.unwrap();
        assert_eq!(stats.rx_icrc_id_solved, 0, "{stats:?}");
        assert_eq!(stats.rx_dropped(), 0, "{stats:?}");
        // At least the 293 WRITE packets (b) or the 293 READ responses (a) of 300 kB at 1024 bytes.
        assert!(stats.rx_packets >= 293, "{stats:?}");
    }
}

#[tokio::test]
async fn a_peer_that_is_not_there_exhausts_the_retries() {
    let ip_a: IpAddr = "127.0.11.1".parse().unwrap();
    let dev_a = Device::spawn(
        DeviceConfig::new(ip_a),
        UdpBackend::bind(ip_a, 4791).unwrap(),
    );
    let qp_a = RcEndpoint::create(&dev_a, 8).await.unwrap();
    qp_a.init(Access::ALL).await.unwrap();
    let mut connection = Connection::new(
        ip_a,
        "127.0.11.2".parse().unwrap(),
        roce_core::Qpn::new(0x11),
        Psn::new(0),
        Psn::new(0),
    );
    connection.timeout = 5; // 131 µs
    connection.retry_cnt = 2;
    qp_a.connect(&connection).await.unwrap();
    let mr = dev_a.reg_mr(qp_a.pd, 64, Access::ALL).await.unwrap();
    let sge = Sge {
        addr: mr.addr(),
        length: 8,
        lkey: mr.lkey(),
    };
    dev_a
        .post_send(qp_a.qpn, SendWr::new(1, SendOp::Send, sge))
        .await
        .unwrap();
    let cqe = dev_a
        .next_completion_within(qp_a.cq, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(cqe.status, WcStatus::RetryExcErr);
    assert_eq!(dev_a.stats().await.unwrap().retransmit_timeouts, 3);
}
