//! The driver's turns, against a backend that records what the driver asks of it.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use roce_core::{Access, AddressVector, Connect, Ecn, Nic, NicConfig, QpInit, QpType, Transmit};
use roce_wire::{BthRepr, Opcode, PseudoHeader, Psn, Qpn, RethRepr, RoceRepr, icrc};

use super::*;
use crate::backend::Received;
use crate::transmit::MAX_TRANSMITS_PER_ROUND;
use crate::{CompletionQueue, Verb};

pub(crate) const US: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
pub(crate) const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));

/// What the driver did, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// It looked at the backend for datagrams.
    Recv,
    /// It sent this many datagrams at once.
    Send(usize),
    /// It said whether datagrams should wake it (`Backend::wake_on_datagrams`).
    Wake(bool),
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

/// A driver of `shared` over a [`Recorder`] with nothing to hand over, logging into `log`,
/// waiting for datagrams (no busy polling), without a tap or loss.
fn recording_driver(shared: Arc<Shared>, log: Arc<Mutex<Vec<Event>>>) -> Driver<Recorder> {
    Driver {
        shared,
        backend: Recorder {
            incoming: VecDeque::new(),
            log,
            watch: None,
        },
        tap: None,
        rx_loss: Loss { ppm: 0, state: 1 },
        busy_poll: false,
    }
}

/// A [`crate::backend::Sender`] that records each send in the log, with the thread that made
/// it.
#[derive(Debug, Clone, Default)]
struct Sends {
    log: Arc<Mutex<Vec<Event>>>,
    threads: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    /// The opcode of each datagram, batch by batch.
    opcodes: Arc<Mutex<Vec<Vec<Opcode>>>>,
}

impl Sends {
    /// What was sent so far.
    fn sent(&self) -> Vec<Event> {
        self.log.lock().unwrap().clone()
    }

    /// The opcodes of what was sent so far, batch by batch.
    fn opcodes(&self) -> Vec<Vec<Opcode>> {
        self.opcodes.lock().unwrap().clone()
    }
}

/// The datagrams a batch of `len` bytes cut at `segment` makes.
fn datagrams(len: usize, segment: usize) -> usize {
    len.div_ceil(segment.max(1))
}

impl crate::backend::Sender for Sends {
    fn send_segments(
        &mut self,
        _: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        let count = datagrams(payload.len(), segment);
        self.log.lock().unwrap().push(Event::Send(count));
        self.threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        // A datagram opens on its BTH, whose first byte is the opcode.
        let opcodes = payload
            .chunks(segment.max(1))
            .map(|datagram| Opcode::from(datagram[0]))
            .collect();
        self.opcodes.lock().unwrap().push(opcodes);
        Ok(())
    }

    fn max_segments(&self) -> usize {
        64
    }
}

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
        let count = datagrams(payload.len(), segment);
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

    fn wake_on_datagrams(&mut self, wake: bool) -> io::Result<()> {
        self.log.lock().unwrap().push(Event::Wake(wake));
        Ok(())
    }
}

/// A NIC at [`US`] sending from port 4791, as a device's.
pub(crate) fn nic() -> Nic {
    Nic::new(NicConfig {
        addrs: vec![US],
        src_port: roce_core::SrcPortPolicy::Fixed(4791),
        ..NicConfig::default()
    })
}

/// A NIC whose RC QP is connected to the peer's QP 0x99 and has a region of `len` bytes.
pub(crate) fn responder(len: usize) -> (Nic, Qpn, roce_core::MemoryRegion) {
    let mut nic = nic();
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
            Event::Wake(_) => {}
        }
    }
    sent_between_recvs.push(run);
    let total: usize = sent_between_recvs.iter().sum();
    assert_eq!(total, LEN / 1024, "every response of the READ left");
    let longest = sent_between_recvs.iter().max().copied().unwrap_or(0);
    assert!(
        longest <= MAX_TRANSMITS_PER_ROUND,
        "{longest} packets sent without a look at the socket"
    );
}

/// A program that sees the completion of a received SEND may exit at once: the ACK of that
/// SEND must have left by then, or the sender retries into the void until its retry counter
/// runs out (seen with `ibv_rc_pingpong -e`, whose last receive ends the server).
#[tokio::test(start_paused = true)]
async fn the_ack_of_a_send_leaves_before_its_receive_completion_is_visible() {
    ack_before_completion(false, false).await;
}

/// The same while busy polling, where the application's tasks run at the end of every turn
/// (in real time: a busy-polling runtime is never idle, so paused time would never advance).
#[tokio::test]
async fn busy_polling_the_ack_of_a_send_leaves_before_its_receive_completion_is_visible() {
    ack_before_completion(true, false).await;
}

/// The same when the task sends through the backend's sender for every thread.
#[tokio::test(start_paused = true)]
async fn sending_directly_the_ack_of_a_send_leaves_before_its_receive_completion_is_visible() {
    ack_before_completion(false, true).await;
}

async fn ack_before_completion(busy_poll: bool, direct: bool) {
    let nic = Nic::new(NicConfig {
        addrs: vec![US],
        src_port: roce_core::SrcPortPolicy::Fixed(4791),
        ..NicConfig::default()
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut backend = Recorder {
        incoming: VecDeque::new(),
        log: log.clone(),
        watch: None,
    };
    // The queue is made on the shared engine below; the sender watches it from its creation.
    let queue_cell: Arc<Mutex<Option<Arc<CompletionQueue>>>> = Arc::default();
    let sender = direct.then(|| {
        Box::new(LateWatch {
            inner: Sends {
                log: log.clone(),
                ..Sends::default()
            },
            queue: queue_cell.clone(),
            seen: seen.clone(),
        }) as Box<dyn crate::backend::Sender>
    });
    let direct = sender.map(|s| crate::transmit::Direct::new(s, None));
    let shared = Arc::new(Shared::new(nic, busy_poll, None).with_direct(direct, None));
    let handle = crate::DeviceHandle::new(shared.clone());
    let queue = handle.create_completion_queue(16).unwrap();
    *queue_cell.lock().unwrap() = Some(queue.clone());
    let qpn = receiving_qp(&handle, &queue);
    let datagram = send_only(qpn);

    backend.incoming.push_back(datagram);
    backend.watch = Some((queue.clone(), seen.clone()));
    let driver = Driver {
        shared,
        backend,
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

/// An RC QP of `handle` on `queue`, connected to the peer's QP 0x99, with a receive (wr_id 7)
/// posted.
fn receiving_qp(handle: &crate::DeviceHandle, queue: &CompletionQueue) -> Qpn {
    handle
        .verb(Verb::Other, |nic, _| {
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
                    sgl: Default::default(),
                },
            )
            .unwrap();
            qpn
        })
        .unwrap()
}

/// The peer's SEND_ONLY of no bytes with PSN 0 to `qpn`, asking for an ACK, sealed.
fn send_only(qpn: Qpn) -> Vec<u8> {
    let mut bth = BthRepr::new(Opcode::RcSendOnly, qpn, Psn::new(0));
    bth.ack_req = true;
    let send = RoceRepr::new(bth);
    let mut datagram = vec![0; send.buffer_len()];
    send.emit(&mut datagram, |_| {}).unwrap();
    let header =
        PseudoHeader::for_datagram(SocketAddr::new(PEER, 4791), SocketAddr::new(US, 4791), 0)
            .unwrap();
    icrc::seal(&header, &mut datagram);
    datagram
}

/// A [`crate::backend::Receiver`] that hands over the datagrams put in `waiting`, recording
/// the thread of each receive that found some.
#[derive(Debug, Clone, Default)]
struct Inflow {
    waiting: Arc<Mutex<VecDeque<Vec<u8>>>>,
    threads: Arc<Mutex<Vec<std::thread::ThreadId>>>,
}

impl crate::backend::Receiver for Inflow {
    fn try_recv(&mut self, buf: &mut [u8], out: &mut Vec<Received>) -> io::Result<bool> {
        let mut waiting = self.waiting.lock().unwrap();
        if !waiting.is_empty() {
            self.threads
                .lock()
                .unwrap()
                .push(std::thread::current().id());
        }
        let mut at = 0;
        while let Some(datagram) = waiting.pop_front() {
            buf[at..at + datagram.len()].copy_from_slice(&datagram);
            out.push(Received {
                src: SocketAddr::new(PEER, 4791),
                dst: SocketAddr::new(US, 4791),
                ecn: Ecn::NotEct,
                ip_id: Some(0),
                segment: 0,
                offset: at,
                len: datagram.len(),
            });
            at += datagram.len();
        }
        Ok(true)
    }

    fn buffer_len(&self) -> usize {
        65536
    }
}

/// A device that sends and receives from any thread, with no task running (the test plays
/// it), an RC QP with a receive posted, and the peer's SEND to it waiting on the network.
struct Spinning {
    handle: crate::DeviceHandle,
    shared: Arc<Shared>,
    qpn: Qpn,
    sends: Sends,
    inflow: Inflow,
    queue: Arc<CompletionQueue>,
    seen: Arc<Mutex<Vec<usize>>>,
}

fn spinning() -> Spinning {
    let nic = Nic::new(NicConfig {
        addrs: vec![US],
        src_port: roce_core::SrcPortPolicy::Fixed(4791),
        ..NicConfig::default()
    });
    let sends = Sends::default();
    let (queue_cell, seen) = (Arc::default(), Arc::new(Mutex::new(Vec::new())));
    let watched = LateWatch {
        inner: sends.clone(),
        queue: Arc::clone(&queue_cell),
        seen: seen.clone(),
    };
    let inflow = Inflow::default();
    let loss = Loss { ppm: 0, state: 1 };
    let shared = Arc::new(Shared::new(nic, false, None).with_direct(
        Some(crate::transmit::Direct::new(Box::new(watched), None)),
        Some(crate::receive::DirectRx::new(
            Box::new(inflow.clone()),
            loss,
            None,
        )),
    ));
    // The task's timer fires before any retry deadline: no verb needs to wake it for one.
    shared.timer_at.store(0, Ordering::SeqCst);
    let handle = crate::DeviceHandle::new(shared.clone());
    let queue = handle.create_completion_queue(16).unwrap();
    *queue_cell.lock().unwrap() = Some(queue.clone());
    let qpn = receiving_qp(&handle, &queue);
    inflow.waiting.lock().unwrap().push_back(send_only(qpn));
    Spinning {
        handle,
        shared,
        qpn,
        sends,
        inflow,
        queue,
        seen,
    }
}

/// A program that polls its empty CQ receives what it waits for on its own thread: the SEND
/// is received, acknowledged and completed there, and the device's task is never woken. One
/// poll is not a program spinning on its CQ: the ACK leaves before the completion is visible
/// (see `a_spinning_program_sees_its_completion_first_and_its_answer_takes_the_ack_along`).
#[test]
fn a_program_polling_an_empty_cq_receives_on_its_own_thread() {
    let Spinning {
        handle,
        shared,
        sends,
        inflow,
        queue,
        seen,
        ..
    } = spinning();
    assert!(queue.poll().is_none());
    let poller = std::thread::spawn(move || {
        let came = handle.poll_network();
        (handle, came, std::thread::current().id())
    });
    let (_handle, came, poller) = poller.join().unwrap();
    assert!(came, "the SEND was not received");
    assert_eq!(
        *inflow.threads.lock().unwrap(),
        [poller],
        "received by the poller"
    );
    assert_eq!(sends.sent(), [Event::Send(1)], "one ACK");
    assert_eq!(
        *sends.threads.lock().unwrap(),
        [poller],
        "sent by the poller"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [0],
        "the completion was visible before the ACK left"
    );
    let cqe = queue.poll().expect("the receive completed");
    assert_eq!(cqe.wr_id, 7);
    assert!(!shared.doorbell.is_rung(), "the task was woken");
}

/// The task steps back from the socket only for a program that spins on it: a poll after a
/// completion event, alone, does not count (the program then waits for its next datagram on
/// the event, which the task must bring); polls in a row do.
#[test]
fn only_a_program_spinning_on_the_network_keeps_the_task_off_the_socket() {
    let Spinning {
        handle,
        shared,
        inflow,
        ..
    } = spinning();
    inflow.waiting.lock().unwrap().clear();
    let window = std::time::Duration::from_secs(3600);
    assert!(!shared.network_polled_within(window));
    assert!(!handle.poll_network());
    assert!(
        !shared.network_polled_within(window),
        "one poll made a spinner"
    );
    // A spinning program polls again and again; two of its polls come close together.
    let spun = (0..10_000).any(|_| {
        handle.poll_network();
        shared.network_polled_within(window)
    });
    assert!(spun, "polls in a row did not keep the task away");
}

/// A program spinning on its empty CQ receives the peer's SEND: two polls in a row (paused
/// time makes them simultaneous), the second of which brings the SEND. Its completion is
/// visible, and nothing was sent yet.
#[track_caller]
fn spin_and_receive(s: &Spinning) {
    let send = s.inflow.waiting.lock().unwrap().pop_front().unwrap();
    assert!(!s.handle.poll_network());
    s.inflow.waiting.lock().unwrap().push_back(send);
    assert!(s.handle.poll_network(), "the SEND was not received");
    assert!(
        s.sends.sent().is_empty(),
        "sent before the program answered"
    );
    let cqe = s.queue.poll().expect("the receive completed");
    assert_eq!(cqe.wr_id, 7);
}

/// A program spinning on its CQ sees the completion of a received SEND before the ACK
/// leaves. Its posted receive sends nothing; its answer takes the ACK along, in one batch,
/// the answer first (one system call, and the peer has the answer sooner). No thread woke.
#[tokio::test(start_paused = true)]
async fn a_spinning_program_sees_its_completion_first_and_its_answer_takes_the_ack_along() {
    let s = spinning();
    spin_and_receive(&s);
    let recv = roce_core::RecvWr {
        wr_id: 8,
        sgl: Default::default(),
    };
    s.handle
        .verb(Verb::PostRecv, |nic, _| nic.post_recv(s.qpn, recv))
        .unwrap()
        .unwrap();
    assert!(s.sends.sent().is_empty(), "a posted receive sent the ACK");
    // An answer of 8 bytes, as `ib_send_lat -s 8`'s: its packet (24 bytes) is longer than the
    // ACK (20), which can then end its batch.
    let mut answer = roce_core::SendWr::new(1, roce_core::SendOp::Send, Vec::new());
    answer.inline_data = Some(b"answer!!".to_vec().into());
    s.handle
        .verb(Verb::PostSend, |nic, _| nic.post_send(s.qpn, answer))
        .unwrap()
        .unwrap();
    assert_eq!(
        s.sends.opcodes(),
        [vec![Opcode::RcSendOnly, Opcode::RcAcknowledge]]
    );
    assert!(!s.shared.doorbell.is_rung(), "the task was woken");
}

/// What a spinning program's poll left for its answer leaves with its next empty poll when
/// no answer came first.
#[tokio::test(start_paused = true)]
async fn what_a_poll_left_leaves_with_the_next_empty_poll() {
    let s = spinning();
    spin_and_receive(&s);
    assert!(!s.handle.poll_network());
    assert_eq!(s.sends.opcodes(), [vec![Opcode::RcAcknowledge]]);
    assert!(!s.handle.poll_network());
    assert_eq!(s.sends.sent().len(), 1, "sent twice");
}

/// Any verb but a post sends what is owed before it runs: one that destroys the QP would
/// otherwise take the ACK with it, and the peer's SEND would end in retries.
#[tokio::test(start_paused = true)]
async fn a_verb_sends_what_a_poll_left_before_it_runs() {
    let s = spinning();
    spin_and_receive(&s);
    assert_eq!(sent_when_destroying(&s), [vec![Opcode::RcAcknowledge]]);
}

/// What had been sent when a verb destroyed the QP of `s`, from inside that verb.
fn sent_when_destroying(s: &Spinning) -> Vec<Vec<Opcode>> {
    s.handle
        .verb(Verb::Other, |nic, _| {
            let sent = s.sends.opcodes();
            nic.destroy_qp(s.qpn).unwrap();
            sent
        })
        .unwrap()
}

/// The device's task hands `send` (the peer's SEND to `qpn`) to the engine, one step, its send
/// round still to come; then the program posts a receive, which delivers the SEND's
/// completion, and sees it on `queue`.
fn task_receives_and_program_sees(
    shared: &Shared,
    handle: &crate::DeviceHandle,
    queue: &CompletionQueue,
    qpn: Qpn,
    send: &[u8],
) {
    let now = shared.clock.now();
    shared.step(|nic| {
        nic.handle_datagram(
            now,
            roce_core::Datagram {
                src: SocketAddr::new(PEER, 4791),
                dst: SocketAddr::new(US, 4791),
                ecn: Ecn::NotEct,
                ip_id: Some(0),
                segment: 0,
                payload: send,
            },
        );
    });
    let recv = roce_core::RecvWr {
        wr_id: 8,
        sgl: Default::default(),
    };
    handle
        .verb(Verb::PostRecv, |nic, _| nic.post_recv(qpn, recv))
        .unwrap()
        .unwrap();
    assert_eq!(queue.poll().expect("the receive completed").wr_id, 7);
}

/// The device's task hands the peer's SEND to the engine; before its turn sends the ACK, a
/// verb of the program's thread (a posted receive) delivers the completion, the program sees
/// it and destroys the QP: the ACK leaves before the QP goes, though no poll left it owed.
/// (`ibv_srq_pingpong`'s server once ran out of retries on its last SEND this way: the
/// client had exited with the ACK of it.)
#[tokio::test(start_paused = true)]
async fn a_verb_sends_what_the_tasks_turn_has_not_sent_yet_before_it_runs() {
    let s = spinning();
    let send = s.inflow.waiting.lock().unwrap().pop_front().unwrap();
    task_receives_and_program_sees(&s.shared, &s.handle, &s.queue, s.qpn, &send);
    assert!(s.sends.sent().is_empty(), "a posted receive sent the ACK");
    assert!(!s.shared.owed.load(Ordering::SeqCst));
    assert_eq!(sent_when_destroying(&s), [vec![Opcode::RcAcknowledge]]);
}

/// The same on a device without a sender for every thread (the raw backend's): only the
/// task sends, and a verb of the program's thread waits for the task's turn to send the ACK
/// before it destroys the QP.
#[test]
fn without_a_sender_for_every_thread_a_verb_waits_for_the_task_to_send_the_ack() {
    let nic = Nic::new(NicConfig {
        addrs: vec![US],
        src_port: roce_core::SrcPortPolicy::Fixed(4791),
        ..NicConfig::default()
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::new(Shared::new(nic, false, None));
    let handle = crate::DeviceHandle::new(shared.clone());
    let queue = handle.create_completion_queue(16).unwrap();
    let qpn = receiving_qp(&handle, &queue);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let driver = recording_driver(shared.clone(), log.clone());
    let task = runtime.spawn(driver.run());
    while shared.task_turns.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // The task has handed the SEND to the engine and not sent yet; the program sees the
    // completion (a posted receive delivers it).
    task_receives_and_program_sees(&shared, &handle, &queue, qpn, &send_only(qpn));
    let sent = |log: &Mutex<Vec<Event>>| {
        let log = log.lock().unwrap();
        log.iter().filter(|e| matches!(e, Event::Send(_))).count()
    };
    assert_eq!(sent(&log), 0, "sent before the program's verb");
    let sent_before = handle
        .verb(Verb::Other, |nic, _| {
            let sent = sent(&log);
            nic.destroy_qp(qpn).unwrap();
            sent
        })
        .unwrap();
    assert_eq!(sent_before, 1, "the QP was destroyed with its ACK unsent");
    drop(handle);
    runtime.block_on(async { task.await.unwrap().unwrap() });
}

/// A program that drops its last handle (it exits) leaves nothing owed behind.
#[tokio::test(start_paused = true)]
async fn the_last_handle_dropped_sends_what_a_poll_left() {
    let s = spinning();
    spin_and_receive(&s);
    let Spinning { handle, sends, .. } = s;
    drop(handle);
    assert_eq!(sends.opcodes(), [vec![Opcode::RcAcknowledge]]);
}

/// A program that stops polling (and posts nothing) with an ACK owed: the task, which stepped
/// back from the socket while the program spun, sends it when it looks again.
#[tokio::test(start_paused = true)]
async fn the_task_sends_what_a_poll_left_once_the_program_stops_polling() {
    let s = spinning();
    spin_and_receive(&s);
    let driver = recording_driver(s.shared.clone(), Arc::default());
    let task = tokio::spawn(driver.run());
    tokio::time::sleep(STEP_BACK / 2).await;
    assert!(s.sends.sent().is_empty(), "sent while the program spun");
    tokio::time::sleep(STEP_BACK * 3).await;
    assert_eq!(s.sends.opcodes(), [vec![Opcode::RcAcknowledge]]);
    task.abort();
}

/// While a program spins on the network, datagrams do not wake the device's task (each
/// would take a core from the spinner for nothing: the task leaves the socket to it); once
/// the program stops, the task has them wake it again before it waits on the socket.
#[tokio::test(start_paused = true)]
async fn datagrams_wake_the_task_only_while_no_program_spins() {
    let s = spinning();
    s.inflow.waiting.lock().unwrap().clear();
    spin(&s);
    let log = Arc::new(Mutex::new(Vec::new()));
    let driver = recording_driver(s.shared.clone(), log.clone());
    let wakes = || -> Vec<bool> {
        let log = log.lock().unwrap();
        let mut wakes: Vec<bool> = log
            .iter()
            .filter_map(|e| match e {
                Event::Wake(wake) => Some(*wake),
                _ => None,
            })
            .collect();
        wakes.dedup();
        wakes
    };
    let task = tokio::spawn(driver.run());
    tokio::time::sleep(STEP_BACK / 2).await;
    assert_eq!(wakes(), [false], "datagrams still wake the task");
    tokio::time::sleep(STEP_BACK * 3).await;
    assert_eq!(
        wakes(),
        [false, true],
        "the task waits on a socket that wakes nobody"
    );
    task.abort();
}

/// While another thread receives (the device's task, say), a poll of the network takes
/// nothing: two receivers side by side could hand datagrams to the engine out of order.
#[test]
fn a_poll_of_the_network_takes_nothing_while_another_thread_receives() {
    let Spinning {
        handle,
        shared,
        sends,
        inflow,
        queue,
        ..
    } = spinning();
    let held = shared.rx.as_ref().unwrap().lock().unwrap();
    std::thread::scope(|scope| {
        assert!(!scope.spawn(|| handle.poll_network()).join().unwrap());
    });
    assert_eq!(
        inflow.waiting.lock().unwrap().len(),
        1,
        "the SEND was taken"
    );
    assert!(sends.sent().is_empty() && queue.poll().is_none());
    // The holder's receive takes it.
    let mut held = held;
    assert_eq!(
        shared
            .receive_round(&mut held, || shared.clock.now())
            .unwrap(),
        (true, 1)
    );
}

/// A [`Sends`] that learns the queue to watch after the engine made it.
#[derive(Debug)]
struct LateWatch {
    inner: Sends,
    queue: Arc<Mutex<Option<Arc<CompletionQueue>>>>,
    seen: Arc<Mutex<Vec<usize>>>,
}

impl crate::backend::Sender for LateWatch {
    fn send_segments(
        &mut self,
        t: &Transmit,
        payload: &mut [u8],
        segment: usize,
    ) -> io::Result<()> {
        if let Some(queue) = &*self.queue.lock().unwrap() {
            self.seen.lock().unwrap().push(queue.len());
        }
        self.inner.send_segments(t, payload, segment)
    }

    fn max_segments(&self) -> usize {
        self.inner.max_segments()
    }
}

/// A device whose backend sends from any thread, with no task running: the test plays the
/// task. Its NIC's RC QP is connected to the peer's QP 0x99.
fn direct_device() -> (crate::DeviceHandle, Arc<Shared>, Sends, Qpn) {
    let (nic, qpn, _) = responder(64);
    let sends = Sends::default();
    let direct = crate::transmit::Direct::new(Box::new(sends.clone()), None);
    let shared = Arc::new(Shared::new(nic, false, None).with_direct(Some(direct), None));
    (crate::DeviceHandle::new(shared.clone()), shared, sends, qpn)
}

/// Posts a SEND of no bytes, `wr_id`, on `qpn`, on this thread.
fn post_a_send(handle: &crate::DeviceHandle, qpn: Qpn, wr_id: u64) {
    let wr = roce_core::SendWr::new(wr_id, roce_core::SendOp::Send, Vec::new());
    handle
        .verb(Verb::PostSend, |nic, _| nic.post_send(qpn, wr))
        .unwrap()
        .unwrap();
}

/// A posted SEND leaves on the thread that posted it, as a NIC's doorbell starts the transmit:
/// the device's task is not woken, since its timer already fires before the new retry
/// deadline. A posted receive sends nothing and wakes nobody either.
#[test]
fn a_verb_sends_what_it_makes_on_its_own_thread_and_wakes_nobody() {
    let (handle, shared, sends, qpn) = direct_device();
    // The task's timer fires first (at 0): the retry timer of the SEND needs no wake-up.
    shared.timer_at.store(0, Ordering::SeqCst);
    let poster = std::thread::spawn(move || {
        post_a_send(&handle, qpn, 1);
        handle
            .verb(Verb::Other, |nic, _| {
                nic.post_recv(
                    qpn,
                    roce_core::RecvWr {
                        wr_id: 2,
                        sgl: Default::default(),
                    },
                )
            })
            .unwrap()
            .unwrap();
        // The handle comes back: its last drop would ring the doorbell (the task stops).
        (handle, std::thread::current().id())
    });
    let (_handle, poster) = poster.join().unwrap();
    assert_eq!(sends.sent(), [Event::Send(1)], "the SEND, once");
    assert_eq!(
        *sends.threads.lock().unwrap(),
        [poster],
        "sent by the posting thread"
    );
    assert!(!shared.doorbell.is_rung(), "the task was woken");
}

/// A post while requests are in flight (a stream) leaves its packets to the task, whose turn
/// gathers a burst of posts into batches: the first SEND leaves at once, the second, posted
/// before the first is acknowledged, waits for the task.
#[test]
fn a_post_during_a_stream_leaves_its_packets_to_the_task() {
    let (handle, shared, sends, qpn) = direct_device();
    shared.timer_at.store(0, Ordering::SeqCst);
    post_a_send(&handle, qpn, 1);
    assert_eq!(sends.sent(), [Event::Send(1)]);
    assert!(!shared.doorbell.is_rung());
    post_a_send(&handle, qpn, 2);
    assert_eq!(sends.sent(), [Event::Send(1)], "the second went at once");
    assert!(
        shared.doorbell.is_rung(),
        "nobody was told to send the second"
    );
}

/// A program spinning on its CQ (empty polls in a row), posting a stream: the first SEND
/// leaves at once, the next two, posted before it is acknowledged, wake nobody and wait for
/// the program's next poll, which sends both on its thread, in one batch.
#[tokio::test(start_paused = true)]
async fn a_spinning_programs_stream_leaves_with_its_next_poll_and_wakes_nobody() {
    let s = spinning();
    spin_and_stream(&s);
    post_a_send(&s.handle, s.qpn, 3);
    assert_eq!(s.sends.sent().len(), 1, "sent before the next poll");
    assert!(!s.handle.poll_network());
    assert_eq!(
        s.sends.opcodes()[1..],
        [vec![Opcode::RcSendOnly, Opcode::RcSendOnly]],
        "the next poll did not send the two in one batch"
    );
    assert!(!s.shared.doorbell.is_rung(), "the task was woken");
}

/// A spinning program's posts wait for one poll, not for an empty one: the poll that brings
/// the peer's SEND (and its completion) sends them, with that SEND's ACK. A rank of an
/// all-to-all, whose every poll brings something, would otherwise never send.
#[tokio::test(start_paused = true)]
async fn a_spinning_programs_posts_leave_with_its_next_poll_even_one_that_brings_datagrams() {
    let s = spinning();
    let send = spin_and_stream(&s);
    s.inflow.waiting.lock().unwrap().push_back(send);
    assert!(s.handle.poll_network(), "the SEND was not received");
    assert_eq!(s.queue.poll().expect("the receive completed").wr_id, 7);
    let after_the_first: Vec<Opcode> = s.sends.opcodes()[1..].concat();
    assert!(
        after_the_first.len() == 2
            && after_the_first.contains(&Opcode::RcSendOnly)
            && after_the_first.contains(&Opcode::RcAcknowledge),
        "the poll did not send the second SEND and the ACK: {after_the_first:?}"
    );
}

/// The same stream from a program that arms its CQ after its posts, to wait for the
/// completion event: what it left for a poll it will not make leaves when it arms.
#[tokio::test(start_paused = true)]
async fn what_a_spinning_program_posted_leaves_when_it_turns_to_waiting() {
    let s = spinning();
    spin_and_stream(&s);
    s.handle.send_owed();
    assert_eq!(s.sends.opcodes()[1..], [vec![Opcode::RcSendOnly]]);
    s.handle.send_owed();
    assert_eq!(s.sends.sent().len(), 2, "sent twice");
}

/// A program spinning on its CQ posts two SENDs: the first leaves at once, the second, posted
/// before the first is acknowledged, waits for the next poll and wakes nobody. The peer's
/// SEND that waited on the network is taken off it first (the polls find nothing) and
/// returned.
#[track_caller]
fn spin_and_stream(s: &Spinning) -> Vec<u8> {
    let send = s.inflow.waiting.lock().unwrap().pop_front().unwrap();
    spin(s);
    post_a_send(&s.handle, s.qpn, 1);
    assert_eq!(s.sends.opcodes(), [vec![Opcode::RcSendOnly]]);
    post_a_send(&s.handle, s.qpn, 2);
    assert_eq!(s.sends.sent().len(), 1, "sent before the next poll");
    assert!(!s.shared.doorbell.is_rung(), "the task was woken");
    send
}

/// Empty polls in a row (paused time makes them simultaneous): a program spinning on its CQ.
#[track_caller]
fn spin(s: &Spinning) {
    assert!(!s.handle.poll_network() && !s.handle.poll_network());
    assert!(s.shared.network_polled_within(STEP_BACK), "not spinning");
    assert!(s.sends.sent().is_empty());
}

/// A verb whose packets start a retry timer earlier than the task's timer (here: none armed)
/// still sends them itself, and rings the doorbell so that the task arms its timer.
#[test]
fn a_verb_rings_for_a_deadline_the_task_does_not_wait_for() {
    let (handle, shared, sends, qpn) = direct_device();
    assert_eq!(shared.timer_at.load(Ordering::SeqCst), u64::MAX);
    post_a_send(&handle, qpn, 1);
    assert_eq!(sends.sent(), [Event::Send(1)]);
    assert!(
        shared.doorbell.is_rung(),
        "the retry timer would not be armed"
    );
}

/// While another thread sends (it holds the transmit lock), a verb does not send beside it —
/// its packets could overtake that thread's — but leaves them in the engine and rings the
/// doorbell; they leave with the next round.
#[test]
fn a_verb_that_finds_another_thread_sending_leaves_its_packets_to_the_task() {
    let (handle, shared, sends, qpn) = direct_device();
    shared.timer_at.store(0, Ordering::SeqCst);
    let direct = shared.direct.as_ref().unwrap();
    let held = direct.lock().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| post_a_send(&handle, qpn, 1));
    });
    assert!(sends.sent().is_empty(), "sent beside the lock's holder");
    assert!(shared.doorbell.is_rung(), "nobody was told to send it");
    let mut held = held;
    let more = shared.send_round(&mut held, MAX_TRANSMITS_PER_ROUND, shared.clock.now());
    assert!(!more);
    assert_eq!(sends.sent(), [Event::Send(1)], "the round sent it");
}

/// A deregistration waits for the thread that holds the sending lock: a round reads lent
/// payloads (`roce_core::Loan`) in its `sendmsg`s after the engine's lock is released, and a
/// program may free its buffer as soon as `ibv_dereg_mr` returns.
#[test]
fn a_deregistration_waits_for_a_round_that_may_have_lent_from_the_region() {
    let (handle, shared, _sends, _qpn) = direct_device();
    let lkey = handle
        .verb(Verb::Other, |nic, _| {
            let pd = nic.alloc_pd();
            nic.reg_mr(pd, 4096, Access::ALL).map(|mr| mr.lkey())
        })
        .unwrap()
        .unwrap();
    let direct = shared.direct.as_ref().unwrap();
    let round = direct.lock().unwrap();
    let (done, deregistered) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let result = handle.verb(Verb::Deregister, |nic, _| nic.dereg_mr(lkey));
            done.send(result.map(|r| r.is_ok())).unwrap();
        });
        // However long the round takes, the deregistration waits for it.
        assert!(
            deregistered
                .recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "deregistered while a round held the sending lock"
        );
        drop(round);
        assert!(deregistered.recv().unwrap().unwrap(), "deregistered");
    });
    assert!(
        shared.step(|nic| nic.dereg_mr(lkey)).is_err(),
        "the region is still there"
    );
}

/// The driver's timer moves only to earlier deadlines: a later one (the engine's retry timer
/// pushed on by the next packet) leaves it where it is, so that it is not registered anew with
/// the runtime at every packet; it then fires early, once, and is armed again.
#[tokio::test(start_paused = true)]
async fn the_timer_moves_only_to_earlier_deadlines() {
    let shared = Shared::new(Nic::new(NicConfig::default()), false, None);
    let start = tokio::time::Instant::now();
    let ms = std::time::Duration::from_millis;
    let at = roce_core::Instant::from_millis;
    let timer_at = || shared.timer_at.load(Ordering::SeqCst);
    let mut timer = Timer::new();
    // Not armed: it never fires.
    assert!(
        tokio::time::timeout(ms(50), timer.fired(&shared))
            .await
            .is_err()
    );
    assert_eq!(timer_at(), u64::MAX);
    timer.arm(Some(at(100)), &shared);
    timer.arm(Some(at(300)), &shared);
    assert_eq!(timer.armed, Some(at(100)), "a later deadline moved it");
    assert_eq!(timer_at(), at(100).as_nanos(), "the verbs see where it is");
    timer.arm(Some(at(80)), &shared);
    assert_eq!(timer.armed, Some(at(80)));
    timer.arm(None, &shared);
    assert_eq!(timer.armed, Some(at(80)), "no deadline disarmed it");
    assert_eq!(timer_at(), at(80).as_nanos());
    timer.fired(&shared).await;
    assert_eq!(tokio::time::Instant::now(), start + ms(80));
    assert_eq!((timer.armed, timer_at()), (None, u64::MAX));
    // Fired, it waits for the next deadline, whatever it is.
    timer.arm(Some(at(300)), &shared);
    timer.fired(&shared).await;
    assert_eq!(tokio::time::Instant::now(), start + ms(300));
}
