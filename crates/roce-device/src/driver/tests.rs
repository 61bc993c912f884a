//! The driver's turns, against a backend that records what the driver asks of it.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use roce_core::{Access, AddressVector, Connect, Ecn, Nic, NicConfig, QpInit, QpType, Transmit};
use roce_wire::{BthRepr, Opcode, PseudoHeader, Psn, Qpn, RethRepr, RoceRepr, icrc};

use super::*;
use crate::CompletionQueue;

const US: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));

/// What the driver did, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// It looked at the backend for datagrams.
    Recv,
    /// It sent this many datagrams at once.
    Send(usize),
}

/// Datagrams to hand over, and a log of the driver's calls.
#[derive(Debug)]
struct Recorder {
    incoming: VecDeque<Vec<u8>>,
    log: Arc<Mutex<Vec<Event>>>,
    /// A queue to look at when sending: how many completions the application could see then.
    watch: Option<Watch>,
}

/// A queue, and the number of its completions at each send.
type Watch = (Arc<CompletionQueue>, Arc<Mutex<Vec<usize>>>);

impl Backend for Recorder {
    async fn recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<()> {
        self.log.lock().unwrap().push(Event::Recv);
        let Some(datagram) = self.incoming.pop_front() else {
            return std::future::pending().await;
        };
        buf[..datagram.len()].copy_from_slice(&datagram);
        out.push(Received {
            src: SocketAddr::new(PEER, 4791),
            dst: SocketAddr::new(US, 4791),
            ecn: Ecn::NotEct,
            ip_id: Some(0),
            segment: 0,
            offset: 0,
            len: datagram.len(),
        });
        Ok(())
    }

    async fn send(&mut self, _: &Transmit, _: &[u8]) -> io::Result<()> {
        self.log.lock().unwrap().push(Event::Send(1));
        Ok(())
    }

    async fn send_segments(
        &mut self,
        _: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        let count = payload.len().div_ceil(segment.max(1));
        self.log.lock().unwrap().push(Event::Send(count));
        if let Some((queue, seen)) = &self.watch {
            seen.lock().unwrap().push(queue.len());
        }
        Ok(())
    }

    fn max_segments(&self) -> usize {
        64
    }

    fn fixed_src_port(&self) -> Option<u16> {
        Some(4791)
    }

    fn recv_buffer_len(&self) -> usize {
        65536
    }
}

/// A NIC whose RC QP is connected to the peer's QP 0x99 and has a region of `len` bytes.
fn responder(len: usize) -> (Nic, Qpn, roce_core::MemoryRegion) {
    let mut nic = Nic::new(NicConfig {
        addrs: vec![US],
        src_port: roce_core::SrcPortPolicy::Fixed(4791),
        ..NicConfig::default()
    });
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(16);
    let mr = nic.reg_mr(pd, len, Access::ALL).unwrap();
    let qpn = nic.create_qp(&QpInit::new(QpType::Rc, pd, cq, 16)).unwrap();
    let connect = Connect {
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..Connect::rc(
            AddressVector::new(US, PEER),
            Qpn::new(0x99),
            Psn::new(0),
            Psn::new(0),
        )
    };
    nic.connect_qp(qpn, &connect).unwrap();
    (nic, qpn, mr)
}

/// Issue 11 (hardening), item 7: the responses to one READ were sent in a single turn, so a
/// READ of a GiB kept the device from reading its socket for seconds.
#[tokio::test(start_paused = true)]
async fn issue_11_a_long_train_of_read_responses_leaves_room_to_receive_between_turns() {
    const LEN: usize = 4 << 20;
    let (nic, qpn, mr) = responder(LEN);
    let mut bth = BthRepr::new(Opcode::RcRdmaReadRequest, qpn, Psn::new(0));
    bth.ack_req = true;
    let read = RoceRepr {
        reth: Some(RethRepr {
            va: mr.addr(),
            rkey: mr.rkey(),
            dma_len: LEN as u32,
        }),
        ..RoceRepr::new(bth)
    };
    let mut request = vec![0; read.buffer_len()];
    read.emit(&mut request, |_| {}).unwrap();
    let header =
        PseudoHeader::for_datagram(SocketAddr::new(PEER, 4791), SocketAddr::new(US, 4791), 0)
            .unwrap();
    icrc::seal(&header, &mut request);

    let log = Arc::new(Mutex::new(Vec::new()));
    let driver = Driver {
        shared: Arc::new(Shared::new(nic, false, None)),
        backend: Recorder {
            incoming: VecDeque::from([request]),
            log: log.clone(),
            watch: None,
        },
        tap: None,
        rx_loss: Loss { ppm: 0, state: 1 },
        busy_poll: false,
    };
    // Paused time: the run ends when the task has nothing left but to wait a second.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), driver.run()).await;

    let log = log.lock().unwrap();
    let mut sent_between_recvs = Vec::new();
    let mut run = 0;
    for event in log.iter() {
        match event {
            Event::Recv => {
                sent_between_recvs.push(run);
                run = 0;
            }
            Event::Send(n) => run += n,
        }
    }
    sent_between_recvs.push(run);
    let total: usize = sent_between_recvs.iter().sum();
    assert_eq!(total, LEN / 1024, "every response of the READ left");
    let longest = sent_between_recvs.iter().max().copied().unwrap_or(0);
    assert!(
        longest <= MAX_TRANSMITS_PER_TURN,
        "{longest} packets sent without a look at the socket"
    );
}

/// A program that sees the completion of a received SEND may exit at once: the ACK of that
/// SEND must have left by then, or the sender retries into the void until its retry counter
/// runs out (seen with `ibv_rc_pingpong -e`, whose last receive ends the server).
#[tokio::test(start_paused = true)]
async fn the_ack_of_a_send_leaves_before_its_receive_completion_is_visible() {
    ack_before_completion(false).await;
}

/// The same while busy polling, where the application's tasks run at the end of every turn
/// (in real time: a busy-polling runtime is never idle, so paused time would never advance).
#[tokio::test]
async fn busy_polling_the_ack_of_a_send_leaves_before_its_receive_completion_is_visible() {
    ack_before_completion(true).await;
}

async fn ack_before_completion(busy_poll: bool) {
    let nic = Nic::new(NicConfig {
        addrs: vec![US],
        src_port: roce_core::SrcPortPolicy::Fixed(4791),
        ..NicConfig::default()
    });
    let shared = Arc::new(Shared::new(nic, busy_poll, None));
    let handle = crate::DeviceHandle::new(shared.clone());
    let queue = handle.create_completion_queue(16).unwrap();
    let qpn = handle
        .with(|nic, _| {
            let pd = nic.alloc_pd();
            let qpn = nic
                .create_qp(&QpInit::new(QpType::Rc, pd, queue.handle(), 16))
                .unwrap();
            let connect = Connect::rc(
                AddressVector::new(US, PEER),
                Qpn::new(0x99),
                Psn::new(0),
                Psn::new(0),
            );
            nic.connect_qp(qpn, &connect).unwrap();
            nic.post_recv(
                qpn,
                roce_core::RecvWr {
                    wr_id: 7,
                    sgl: Vec::new(),
                },
            )
            .unwrap();
            qpn
        })
        .unwrap();
    let mut bth = BthRepr::new(Opcode::RcSendOnly, qpn, Psn::new(0));
    bth.ack_req = true;
    let send = RoceRepr::new(bth);
    let mut datagram = vec![0; send.buffer_len()];
    send.emit(&mut datagram, |_| {}).unwrap();
    let header =
        PseudoHeader::for_datagram(SocketAddr::new(PEER, 4791), SocketAddr::new(US, 4791), 0)
            .unwrap();
    icrc::seal(&header, &mut datagram);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let driver = Driver {
        shared,
        backend: Recorder {
            incoming: VecDeque::from([datagram]),
            log: Arc::new(Mutex::new(Vec::new())),
            watch: Some((queue.clone(), seen.clone())),
        },
        tap: None,
        rx_loss: Loss { ppm: 0, state: 1 },
        busy_poll,
    };
    let _ = tokio::time::timeout(std::time::Duration::from_millis(100), driver.run()).await;

    assert_eq!(
        *seen.lock().unwrap(),
        [0],
        "one send (the ACK), while the receive was not yet visible"
    );
    let cqe = queue
        .poll()
        .expect("the receive completed after its ACK left");
    assert_eq!((cqe.wr_id, cqe.qpn), (7, qpn));
    drop(handle);
}

/// The driver's timer moves only to earlier deadlines: a later one (the engine's retry timer
/// pushed on by the next packet) leaves it where it is, so that it is not registered anew with
/// the runtime at every packet; it then fires early, once, and is armed again.
#[tokio::test(start_paused = true)]
async fn the_timer_moves_only_to_earlier_deadlines() {
    let start = tokio::time::Instant::now();
    let ms = std::time::Duration::from_millis;
    let mut timer = Timer::new();
    // Not armed: it never fires.
    assert!(tokio::time::timeout(ms(50), timer.fired()).await.is_err());
    timer.arm(Some(start + ms(100)));
    timer.arm(Some(start + ms(300)));
    assert_eq!(
        timer.armed,
        Some(start + ms(100)),
        "a later deadline moved it"
    );
    timer.arm(Some(start + ms(80)));
    assert_eq!(timer.armed, Some(start + ms(80)));
    timer.arm(None);
    assert_eq!(timer.armed, Some(start + ms(80)), "no deadline disarmed it");
    timer.fired().await;
    assert_eq!(tokio::time::Instant::now(), start + ms(80));
    assert_eq!(timer.armed, None);
    // Fired, it waits for the next deadline, whatever it is.
    timer.arm(Some(start + ms(300)));
    timer.fired().await;
    assert_eq!(tokio::time::Instant::now(), start + ms(300));
}
