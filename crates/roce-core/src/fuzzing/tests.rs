//! The harness over proptest's inputs, over well-formed packets, and over the seed corpus.

use proptest::prelude::*;
use roce_wire::fuzzing::{FieldValues, repr_with};
use roce_wire::opcode::{Layout, PayloadRule, Transport};
use roce_wire::{AethRepr, BthRepr, DethRepr, Opcode};

use super::*;

// ---- the script harness -----------------------------------------------------------------------

/// Builds `nic_ingress` scripts command by command.
#[derive(Default)]
struct Script(Vec<u8>);

impl Script {
    /// A datagram aimed at QP `target` (0 RC, 1 UC, 2 UD), ICRC sealed by the harness.
    fn packet(mut self, target: u8, repr: &RoceRepr, payload: &[u8]) -> Self {
        let mut repr = *repr;
        repr.payload_len = payload.len();
        repr.bth.pad_count = RoceRepr::pad_for(payload.len());
        let mut bytes = vec![0; repr.buffer_len()];
        repr.emit(&mut bytes, |p| p.copy_from_slice(payload))
            .unwrap();
        self.0.push(1 | (target << 3));
        self.0
            .extend_from_slice(&u16::try_from(bytes.len()).unwrap().to_le_bytes());
        self.0.extend_from_slice(&bytes);
        self
    }

    fn post_send(mut self, qp: u8, op: u8, flags: u8, len: u16) -> Self {
        self.0.extend_from_slice(&[2, op * 3 + qp, flags]);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.push(0);
        self
    }

    fn post_recv(mut self, qp: u8, len: u16) -> Self {
        self.0.extend_from_slice(&[3, qp]);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.push(10);
        self
    }

    fn jump_to_timeout(mut self) -> Self {
        self.0.push(5);
        self
    }

    fn error(mut self, qp: u8) -> Self {
        self.0.extend_from_slice(&[6, qp]);
        self
    }
}

fn bth(opcode: Opcode, psn: Psn) -> BthRepr {
    let mut bth = BthRepr::new(opcode, Qpn::new(0), psn);
    bth.ack_req = true;
    bth
}

/// Scripts that reach past the ingress checks into each QP type, one per transport path; they
/// are also the seed corpus of the `nic_ingress` fuzz target.
fn seeds() -> Vec<(&'static str, Vec<u8>, Summary)> {
    let send_only = RoceRepr::new(bth(Opcode::RcSendOnly, RQ_PSN));
    let mut ack = RoceRepr::new(bth(Opcode::RcAcknowledge, SQ_PSN));
    ack.aeth = Some(AethRepr::ack(1));
    let rc = Script::default()
        .post_recv(0, 100)
        .packet(0, &send_only, b"hello")
        .post_send(0, 0, 0, 10)
        .jump_to_timeout()
        .packet(0, &ack, b"");
    let uc_send = RoceRepr::new(bth(Opcode::UcSendOnly, RQ_PSN));
    let mut ud_send = RoceRepr::new(bth(Opcode::UdSendOnly, Psn::new(5)));
    ud_send.deth = Some(DethRepr {
        qkey: QKEY,
        src_qp: PEER_QPNS[2],
    });
    let uc_ud = Script::default()
        .post_recv(1, 100)
        .post_recv(2, 100)
        .packet(1, &uc_send, b"uc")
        .packet(2, &ud_send, b"ud")
        .post_send(1, 3, 0, 300)
        .post_send(2, 0, 0, 20);
    let errors = Script::default()
        .post_recv(0, 100)
        .post_send(0, 5, 0, 600)
        .post_send(0, 7, 0, 8)
        .error(0);
    vec![
        (
            "rc-send-ack-timeout",
            rc.0,
            Summary {
                fed: 2,
                posted: 2,
                // The ACK of the SEND, the request, its retransmission.
                transmits: 3,
                completions: 2,
            },
        ),
        (
            "uc-ud",
            uc_ud.0,
            Summary {
                fed: 2,
                posted: 4,
                // The UC WRITE in two packets, the UD SEND.
                transmits: 3,
                completions: 4,
            },
        ),
        (
            "flush",
            errors.0,
            Summary {
                fed: 0,
                posted: 3,
                // The READ request and the atomic.
                transmits: 2,
                completions: 3,
            },
        ),
    ]
}

#[test]
fn seed_scripts_reach_every_transport() {
    for (name, script, expected) in seeds() {
        assert_eq!(run(&script), expected, "{name}");
    }
}

/// The seeds are committed as the fuzz target's corpus; `ROCE_BLESS=1` writes them again.
#[test]
fn the_committed_corpus_is_the_seed_scripts() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/nic_ingress");
    for (name, script, _) in seeds() {
        let path = dir.join(name);
        if std::env::var_os("ROCE_BLESS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &script).unwrap();
        }
        let committed = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (ROCE_BLESS=1 writes it)", path.display()));
        assert_eq!(committed, script, "{} is stale", path.display());
        nic_ingress(&committed);
    }
}

#[test]
#[should_panic(expected = "bad ICRC")]
fn a_transmit_with_a_bad_icrc_is_caught() {
    let mut harness = Harness::new();
    let send = SendWr::new(1, SendOp::Send, harness.sge(10, 0));
    harness.post(0, Some(send), None);
    let mut buf = vec![0; MAX_DATAGRAM];
    let transmit = harness.nic.poll_transmit(harness.now, &mut buf).unwrap();
    check_transmit(&transmit, &buf);
    buf[transmit.len - 1] ^= 1;
    check_transmit(&transmit, &buf);
}

#[test]
#[should_panic(expected = "never posted")]
fn a_completion_for_an_unknown_wr_is_caught() {
    let mut harness = Harness::new();
    let cqe = Cqe::success(99, WcOpcode::Send, harness.qps[0]);
    harness.check_completion(&cqe);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_scripts_keep_the_invariants(data in proptest::collection::vec(any::<u8>(), 0..1024)) {
        nic_ingress(&data);
    }

    /// Scripts of many commands whose datagrams have a length that fits: more of them reach
    /// the QPs than arbitrary bytes, where the first datagram's length usually eats the rest.
    #[test]
    fn arbitrary_commands_keep_the_invariants(
        commands in proptest::collection::vec(
            (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..80)),
            0..64,
        ),
    ) {
        let mut data = Vec::new();
        for (command, args) in commands {
            data.push(command);
            if command % 8 <= 1 {
                data.extend_from_slice(&u16::try_from(args.len()).unwrap().to_le_bytes());
                data.extend_from_slice(&args);
            } else {
                data.extend_from_slice(&args[..args.len().min(5)]);
            }
        }
        nic_ingress(&data);
    }
}

// ---- well-formed packets ----------------------------------------------------------------------

/// Which QP a packet goes to.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The QP of the opcode's transport (RC for a CNP).
    Matching,
    /// QP 0 (RC), 1 (UC) or 2 (UD), whatever the opcode.
    Qp(usize),
    /// A QPN the NIC does not have.
    Unknown(u32),
}

/// Which PSN a packet carries.
#[derive(Debug, Clone, Copy)]
enum PsnPick {
    /// Near what the QP expects: ePSN + n for a request, the requester's last PSN + n for a
    /// response.
    Near(i8),
    /// Any.
    Any(u32),
}

/// One thing that happens to the harness.
#[derive(Debug, Clone)]
enum Step {
    /// A well-formed packet from the peer, ICRC sealed.
    Packet {
        repr: RoceRepr,
        target: Target,
        psn: PsnPick,
        fill: u8,
    },
    /// A send WR on QP `qp` with operation selector `op` over `len` bytes.
    PostSend { qp: u8, op: u8, len: u16 },
    /// A receive WR on QP `qp`.
    PostRecv { qp: u8, len: u16 },
    /// Time passes, timers fire.
    Wait { micros: u64 },
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (
            proptest::sample::select(Opcode::ALL).prop_flat_map(arb_repr),
            prop_oneof![
                8 => Just(Target::Matching),
                1 => (0usize..3).prop_map(Target::Qp),
                1 => any::<u32>().prop_map(Target::Unknown),
            ],
            prop_oneof![
                8 => (-4i8..=4).prop_map(PsnPick::Near),
                1 => any::<u32>().prop_map(PsnPick::Any),
            ],
            any::<u8>(),
        )
            .prop_map(|(repr, target, psn, fill)| Step::Packet {
                repr,
                target,
                psn,
                fill,
            }),
        2 => (0u8..3, 0u8..8, 0u16..1200).prop_map(|(qp, op, len)| Step::PostSend { qp, op, len }),
        2 => (0u8..3, 0u16..1200).prop_map(|(qp, len)| Step::PostRecv { qp, len }),
        1 => (0u64..2000).prop_map(|micros| Step::Wait { micros }),
    ]
}

/// A `Repr` for `opcode` that follows the opcode table, with fields that are mostly plausible
/// for the harness's QPs (our region's R_Key and addresses, the UD Q_Key, the default P_Key) and
/// sometimes anything.
fn arb_repr(opcode: Opcode) -> impl Strategy<Value = RoceRepr> {
    let layout: Layout = opcode
        .layout()
        .expect("Opcode::ALL holds supported opcodes");
    let mtu = 256usize;
    let payload_len = match layout.payload {
        PayloadRule::None => Just(0usize).boxed(),
        PayloadRule::Fixed(n) => Just(n).boxed(),
        PayloadRule::Mtu => prop_oneof![4 => Just(mtu), 1 => 1..=mtu + 8].boxed(),
        PayloadRule::OneToMtu => (1usize..=mtu + 8).boxed(),
        PayloadRule::UpToMtu => (0usize..=mtu + 8).boxed(),
    };
    (
        (
            any::<[bool; 5]>(),
            prop_oneof![9 => Just(roce_wire::bth::DEFAULT_PKEY), 1 => any::<u16>()],
        ),
        payload_len,
        (
            prop_oneof![9 => Just(QKEY), 1 => any::<u32>()],
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
        ),
        (
            prop_oneof![4 => Just(None), 1 => any::<u32>().prop_map(Some)],
            0u64..(REGION_LEN as u64 + 64),
            0u32..3000,
            any::<u64>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            move |(
                (flags, pkey),
                payload_len,
                (qkey, syndrome, msn, imm),
                (rkey, offset, len, swap, compare),
            )| {
                let values = FieldValues {
                    flags,
                    pkey,
                    placement_type: syndrome,
                    selectivity_level: syndrome,
                    qkey,
                    imm,
                    syndrome,
                    msn,
                    // Filled in when the step runs: the region's address and key are the
                    // harness's.
                    va: offset,
                    rkey: rkey.unwrap_or(0),
                    dma_len: len,
                    swap_add: swap,
                    compare,
                    payload_len,
                    ..FieldValues::default()
                };
                repr_with(opcode, layout.headers, &values)
            },
        )
}

impl Harness {
    /// Emits `repr` with a payload of `fill` bytes and a good ICRC, and feeds it.
    fn feed_repr(&mut self, repr: &RoceRepr, fill: u8) {
        let mut bytes = vec![0; repr.buffer_len()];
        repr.emit(&mut bytes, |payload| payload.fill(fill)).unwrap();
        icrc::seal(&pseudo_header(PEER, PEER_PORT, US), &mut bytes);
        self.feed(&bytes, Some(0));
    }

    /// Runs one step; then drains and checks the invariants.
    fn step(&mut self, step: &Step) {
        match *step {
            Step::Packet {
                repr,
                target,
                psn,
                fill,
            } => {
                let repr = self.aim(repr, target, psn);
                self.feed_repr(&repr, fill);
            }
            Step::PostSend { qp, op, len } => {
                self.post_send(op * 3 + qp, 0, len, 0);
            }
            Step::PostRecv { qp, len } => self.post_recv(qp, len, 0),
            Step::Wait { micros } => {
                self.now += Duration::from_micros(micros);
                self.timeout();
            }
        }
        self.drain();
    }

    /// Addresses a generated packet: destination QP, PSN, and our region's address and key
    /// where the generator left a placeholder.
    fn aim(&self, mut repr: RoceRepr, target: Target, psn: PsnPick) -> RoceRepr {
        let layout = repr.bth.opcode.layout().expect("a supported opcode");
        let index = match target {
            Target::Matching => match layout.transport {
                Transport::Uc => Some(1),
                Transport::Ud => Some(2),
                Transport::Rc | Transport::Cnp => Some(0),
            },
            Target::Qp(index) => Some(index),
            Target::Unknown(_) => None,
        };
        repr.bth.dest_qp = match (index, target) {
            (Some(index), _) => self.qps[index],
            (None, Target::Unknown(raw)) => Qpn::new(raw.max(0x1000)),
            (None, _) => unreachable!("only Unknown has no index"),
        };
        let (next_psn, epsn) = index
            .and_then(|i| self.nic.qp_psns(self.qps[i]).ok())
            .unwrap_or((SQ_PSN, RQ_PSN));
        repr.bth.psn = match psn {
            PsnPick::Near(n) if layout.is_request() => {
                epsn.wrapping_add(i32::from(n).cast_unsigned())
            }
            PsnPick::Near(n) => next_psn.wrapping_add((i32::from(n) - 1).cast_unsigned()),
            PsnPick::Any(raw) => Psn::new(raw),
        };
        // A zero R_Key stands for ours; offsets become addresses in our region.
        let rkey = |r: u32| if r == 0 { self.mr.rkey() } else { r };
        let va = |offset: u64| self.mr.addr() + offset;
        if let Some(reth) = repr.reth.as_mut() {
            reth.rkey = rkey(reth.rkey);
            reth.va = va(reth.va);
        }
        if let Some(atomic) = repr.atomic_eth.as_mut() {
            atomic.rkey = rkey(atomic.rkey);
            atomic.va = va(atomic.va);
        }
        if let Some(ieth) = repr.ieth.as_mut() {
            ieth.rkey = rkey(ieth.rkey);
        }
        repr
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Well-formed packets with random fields and PSNs never panic the NIC, and each one is
    /// accepted or counted as dropped, never as malformed.
    #[test]
    fn well_formed_packets_are_accepted_or_counted(
        steps in proptest::collection::vec(arb_step(), 1..48),
    ) {
        let mut harness = Harness::new();
        let mut packets = 0;
        for step in &steps {
            harness.step(step);
            packets += u64::from(matches!(step, Step::Packet { .. }));
            let stats = harness.nic.stats();
            prop_assert_eq!(stats.rx_packets, packets);
            prop_assert_eq!(stats.rx_accepted + stats.rx_dropped(), packets);
            // Well-formed, from the QP's peer, with a good ICRC: never malformed.
            let malformed = stats.rx_truncated
                + stats.rx_bad_tver
                + stats.rx_unsupported_opcode
                + stats.rx_bad_pad
                + stats.rx_bad_length
                + stats.rx_icrc_errors
                + stats.rx_dst_addr_mismatch
                + stats.rx_path_mismatch;
            prop_assert_eq!(malformed, 0, "{:?}", stats);
        }
    }

    /// The same under selective repeat with a cap of 8 PSNs: requests past ePSN are kept or
    /// dropped beyond the cap, NACKs with any PSN in their MSN field are taken or counted, and
    /// every invariant holds.
    #[test]
    fn well_formed_packets_keep_the_invariants_under_selective_repeat(
        steps in proptest::collection::vec(arb_step(), 1..48),
    ) {
        let mut harness = Harness::with(NicConfig {
            loss_recovery: crate::LossRecovery::selective_repeat(8),
            ..NicConfig::default()
        });
        for step in &steps {
            harness.step(step);
            let stats = harness.nic.stats();
            prop_assert_eq!(stats.rx_accepted + stats.rx_dropped(), stats.rx_packets);
        }
    }
}

#[test]
fn a_well_formed_send_is_accepted_and_a_stray_one_is_counted() {
    let mut harness = Harness::new();
    harness.step(&Step::PostRecv { qp: 0, len: 100 });
    let mut send = RoceRepr {
        payload_len: 5,
        ..RoceRepr::new(bth(Opcode::RcSendOnly, RQ_PSN))
    };
    send.bth.pad_count = RoceRepr::pad_for(5);
    let packet = |target| Step::Packet {
        repr: send,
        target,
        psn: PsnPick::Near(0),
        fill: b'x',
    };
    harness.step(&packet(Target::Matching));
    harness.step(&packet(Target::Unknown(0x4242)));
    harness.step(&packet(Target::Qp(2)));
    let stats = harness.nic.stats();
    assert_eq!(
        (
            stats.rx_accepted,
            stats.rx_unknown_qp,
            stats.rx_wrong_transport
        ),
        (1, 1, 1)
    );
    assert_eq!(harness.summary.completions, 1);
    assert_eq!(harness.summary.transmits, 1, "the ACK");
}
