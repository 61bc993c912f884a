//! The application's path to the NIC is a hardware NIC's: a poll reads the completion queue
//! the device shares with it, and a post is the caller's own work plus a doorbell. Neither
//! waits for the device's task or for another verb.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::pair;

use std::net::IpAddr;
use std::sync::mpsc;
use std::time::Duration;

use roce_core::{Access, SendOp, SendWr, Sge, WcStatus};
use roce_device::backend::udp::UdpBackend;
use roce_device::{Device, DeviceConfig};

/// Long enough that only a deadlock reaches it.
const STUCK: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_answers_while_another_thread_holds_the_engine() {
    let ip: IpAddr = "127.0.31.1".parse().unwrap();
    let device = Device::spawn(DeviceConfig::new(ip), UdpBackend::bind(ip, 4791).unwrap());
    let queue = device.create_completion_queue(8).unwrap();

    // A verb that holds the engine until the poll below has answered.
    let (polled_tx, polled_rx) = mpsc::channel::<()>();
    let (inside_tx, inside_rx) = mpsc::channel::<()>();
    let holder = std::thread::spawn({
        let device = device.clone();
        move || {
            device
                .verb(roce_device::Verb::Other, |_, _| {
                    inside_tx.send(()).unwrap();
                    polled_rx.recv_timeout(STUCK).is_ok()
                })
                .unwrap()
        }
    });
    inside_rx.recv_timeout(STUCK).unwrap();
    assert_eq!(
        queue.poll(),
        None,
        "an empty queue, read without the engine"
    );
    assert!(queue.is_empty());
    // The handle finds the queue by its CQ without the engine's lock too.
    let cq = queue.handle();
    assert_eq!(device.poll_completion(cq).await.unwrap(), None);
    assert!(device.completion_queue(cq).is_some());
    polled_tx.send(()).unwrap();
    assert!(
        holder.join().unwrap(),
        "the poll waited for the engine's lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_of_a_list_of_writes_arrive_in_the_shared_queue_in_order() {
    let ((a, qp_a), (b, qp_b), _, _) = pair("127.0.31.2", "127.0.31.3").await;
    let src = a.reg_mr(qp_a.pd, 4096, Access::LOCAL_WRITE).await.unwrap();
    let dst = b.reg_mr(qp_b.pd, 4096, Access::ALL).await.unwrap();
    assert!(src.write(0, &[0x5a; 4096]));

    // 16 WRITEs of 256 bytes, one post: the device wakes once and sends them in one go.
    let wrs: Vec<_> = (0..16u64)
        .map(|i| {
            let sge = Sge {
                addr: src.addr() + i * 256,
                length: 256,
                lkey: src.lkey(),
            };
            let op = SendOp::RdmaWrite(roce_core::Remote {
                addr: dst.addr() + i * 256,
                rkey: dst.rkey(),
            });
            (qp_a.qpn, SendWr::new(i, op, sge))
        })
        .collect();
    a.post_send_list(wrs).await.unwrap();
    let queue = a.completion_queue(qp_a.cq).unwrap();
    let mut ids = Vec::new();
    while ids.len() < 16 {
        let cqes = a.next_completions_within(qp_a.cq, 16, STUCK).await.unwrap();
        for cqe in cqes {
            assert_eq!(cqe.status, WcStatus::Success, "{cqe:?}");
            ids.push(cqe.wr_id);
        }
    }
    assert_eq!(ids, (0..16).collect::<Vec<_>>());
    assert!(queue.is_empty());
    let landed = dst.read(0, 4096).unwrap();
    assert!(landed.iter().all(|&b| b == 0x5a));
    let stats = a.stats().await.unwrap();
    assert_eq!(stats.cq_overflows, 0);
}

/// A wait for a completion within a limit ends with a timeout at the limit when nothing comes,
/// whether the device sleeps between packets or busy-polls (which looks at the clock between
/// its turns instead of arming a timer), and takes nothing from the queue.
#[tokio::test]
async fn a_wait_within_a_limit_ends_at_the_limit_when_nothing_comes() {
    for (host, busy_poll) in [(10, false), (11, true)] {
        let ip: IpAddr = format!("127.0.31.{host}").parse().unwrap();
        let mut config = DeviceConfig::new(ip);
        config.busy_poll = busy_poll;
        let device = Device::spawn(config, UdpBackend::bind(ip, 4791).unwrap());
        let queue = device.create_completion_queue(8).unwrap();
        let limit = Duration::from_millis(50);
        let started = std::time::Instant::now();
        let waited = device.next_completion_within(queue.handle(), limit).await;
        assert_eq!(
            waited,
            Err(roce_device::DeviceError::Timeout(limit)),
            "busy_poll {busy_poll}"
        );
        assert!(started.elapsed() >= limit, "busy_poll {busy_poll}");
        assert!(queue.is_empty());
    }
}
