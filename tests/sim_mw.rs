//! Memory windows end to end (IBTA vol. 1 §10.6.7; rxe_mw.c): b binds a window onto part of a
//! region and a's QP reaches b's memory through the window's R_Key — inside it, and only while
//! it is bound. Every refusal is checked to leave b's memory as it was.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_core::{Access, MemoryRegion, MwBind, MwType, Remote, SendOp, SendWr, WcOpcode, WcStatus};
use roce_sim::{Pair, PairConfig};
use roce_tests::sim::{drive_millis, post, post_recv, success, wr};

/// The window's place in b's region.
const WINDOW_AT: u64 = 1024;
const WINDOW_LEN: u64 = 1024;
/// The key byte the binds give.
const KEY: u32 = 0x5a;

/// A connected pair, and a region of b's (4 KiB, every right, windows allowed) filled with 0xee.
fn pair_with_region() -> (Pair, MemoryRegion) {
    let mut pair = Pair::connected(&PairConfig::default());
    let mr = pair
        .b
        .nic
        .reg_mr(pair.b.pd, 4096, Access::ALL | Access::MW_BIND)
        .unwrap();
    mr.write(0, &[0xee; 4096]);
    pair.a
        .mr
        .write(0, &(0..=255).cycle().take(4096).collect::<Vec<u8>>());
    (pair, mr)
}

/// The bind b posts: the window `mw_rkey` onto `[at, at + len)` of `mr`, with `access`, taking
/// the key byte `key`.
fn bind(
    wr_id: u64,
    mw_rkey: u32,
    key: u32,
    mr: &MemoryRegion,
    at: u64,
    len: u64,
    access: Access,
) -> SendWr {
    let bind = MwBind {
        mw_rkey,
        rkey: (mw_rkey & !0xff) | key,
        mr_lkey: mr.lkey(),
        addr: mr.addr() + at,
        length: len,
        access,
    };
    SendWr::new(wr_id, SendOp::BindMw(bind), Vec::new())
}

/// A type 2 window of b's bound onto the window's place with remote read and write; its R_Key.
fn bound_type_2(pair: &mut Pair, mr: &MemoryRegion) -> u32 {
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
    let rights = Access::REMOTE_WRITE | Access::REMOTE_READ;
    post(
        pair,
        false,
        bind(90, mw, KEY, mr, WINDOW_AT, WINDOW_LEN, rights),
    );
    drive_millis(pair, 1);
    success(pair.b.completion(), 90, WcOpcode::BindMw);
    let rkey = (mw & !0xff) | KEY;
    assert_eq!(pair.b.nic.mw_rkey(mw), Some(rkey), "the bind's key byte");
    rkey
}

/// a WRITEs `len` bytes of its region to `addr` with `rkey` and returns its completion's status.
fn write_from_a(pair: &mut Pair, wr_id: u64, addr: u64, rkey: u32, len: u32) -> WcStatus {
    let op = SendOp::RdmaWrite(Remote { addr, rkey });
    let wr = wr(&pair.a, wr_id, op, 0, len);
    post(pair, true, wr);
    drive_millis(pair, 5);
    let cqe = pair.a.completion().expect("a completion");
    assert_eq!((cqe.wr_id, cqe.opcode), (wr_id, WcOpcode::RdmaWrite));
    cqe.status
}

#[test]
fn a_write_through_a_bound_window_lands_in_its_region() {
    let (mut pair, mr) = pair_with_region();
    let rkey = bound_type_2(&mut pair, &mr);
    let at = mr.addr() + WINDOW_AT + 100;
    assert_eq!(write_from_a(&mut pair, 1, at, rkey, 300), WcStatus::Success);
    let got = mr.read(0, 4096).unwrap();
    assert_eq!(&got[1124..1424], &pair.a.mr.read(0, 300).unwrap()[..]);
    assert!(
        got[..1124].iter().chain(&got[1424..]).all(|&b| b == 0xee),
        "only the WRITE's bytes changed"
    );
    assert_eq!(pair.b.nic.stats().rx_mw_access_refused, 0);

    // And a READ through it gives back what is there.
    let op = SendOp::RdmaRead(Remote { addr: at, rkey });
    let read = wr(&pair.a, 2, op, 2048, 300);
    post(&mut pair, true, read);
    drive_millis(&mut pair, 5);
    success(pair.a.completion(), 2, WcOpcode::RdmaRead);
    assert_eq!(pair.a.mr.read(2048, 300).unwrap(), got[1124..1424]);
}

#[test]
fn an_access_past_the_window_is_a_remote_access_error_and_nothing_lands() {
    let (mut pair, mr) = pair_with_region();
    let rkey = bound_type_2(&mut pair, &mr);
    let before = mr.read(0, 4096).unwrap();
    // Inside the region, but 1 byte past the window's end: rxe would take it (it checks the
    // region's range), IBTA §10.6.7 does not.
    let at = mr.addr() + WINDOW_AT + WINDOW_LEN - 255;
    assert_eq!(
        write_from_a(&mut pair, 1, at, rkey, 256),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before, "b's memory is untouched");
    assert_eq!(pair.b.nic.stats().rx_mw_access_refused, 1);
}

#[test]
fn a_window_without_the_right_refuses_and_nothing_lands() {
    let (mut pair, mr) = pair_with_region();
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
    post(
        &mut pair,
        false,
        bind(90, mw, KEY, &mr, WINDOW_AT, WINDOW_LEN, Access::REMOTE_READ),
    );
    drive_millis(&mut pair, 1);
    success(pair.b.completion(), 90, WcOpcode::BindMw);
    let before = mr.read(0, 4096).unwrap();
    let rkey = (mw & !0xff) | KEY;
    assert_eq!(
        write_from_a(&mut pair, 1, mr.addr() + WINDOW_AT, rkey, 64),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before);
    assert_eq!(pair.b.nic.stats().rx_mw_access_refused, 1);
}

#[test]
fn a_locally_invalidated_window_refuses_access() {
    let (mut pair, mr) = pair_with_region();
    let rkey = bound_type_2(&mut pair, &mr);
    post(
        &mut pair,
        false,
        SendWr::new(91, SendOp::LocalInv(rkey), Vec::new()),
    );
    drive_millis(&mut pair, 1);
    success(pair.b.completion(), 91, WcOpcode::LocalInv);
    let before = mr.read(0, 4096).unwrap();
    assert_eq!(
        write_from_a(&mut pair, 1, mr.addr() + WINDOW_AT, rkey, 64),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before, "b's memory is untouched");
    assert_eq!(pair.b.nic.stats().rx_mw_access_refused, 1);
}

#[test]
fn a_send_with_invalidate_unbinds_the_window_it_names() {
    let (mut pair, mr) = pair_with_region();
    let rkey = bound_type_2(&mut pair, &mr);
    post_recv(&mut pair.b, 7, 3072, 64);
    let send = wr(&pair.a, 1, SendOp::SendWithInv(rkey), 0, 16);
    post(&mut pair, true, send);
    drive_millis(&mut pair, 5);
    success(pair.a.completion(), 1, WcOpcode::Send);
    let b = pair.b.completions();
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(
        (b[0].wr_id, b[0].status, b[0].invalidated_rkey),
        (7, WcStatus::Success, Some(rkey))
    );

    let before = mr.read(0, 4096).unwrap();
    assert_eq!(
        write_from_a(&mut pair, 2, mr.addr() + WINDOW_AT, rkey, 64),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before);
}

#[test]
fn a_send_with_invalidate_of_a_type_1_window_is_refused_and_lands_nothing() {
    let (mut pair, mr) = pair_with_region();
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type1).unwrap();
    post(
        &mut pair,
        false,
        bind(
            90,
            mw,
            KEY,
            &mr,
            WINDOW_AT,
            WINDOW_LEN,
            Access::REMOTE_WRITE,
        ),
    );
    drive_millis(&mut pair, 1);
    success(pair.b.completion(), 90, WcOpcode::BindMw);
    let rkey = (mw & !0xff) | KEY;
    post_recv(&mut pair.b, 7, 3072, 64);
    let before = mr.read(0, 4096).unwrap();
    let send = wr(&pair.a, 1, SendOp::SendWithInv(rkey), 0, 16);
    post(&mut pair, true, send);
    drive_millis(&mut pair, 5);
    let cqe = pair.a.completion().unwrap();
    assert_eq!(
        (cqe.wr_id, cqe.status),
        (1, WcStatus::RemInvReqErr),
        "o10-37.2.26"
    );
    assert_eq!(
        mr.read(0, 4096).unwrap(),
        before,
        "the SEND's bytes did not land"
    );
    assert_eq!(pair.b.nic.stats().rx_mw_access_refused, 1);
}

#[test]
fn a_free_type_2_window_reaches_nothing() {
    let (mut pair, mr) = pair_with_region();
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
    // Before any bind the window is free: its R_Key reaches nothing.
    let before = mr.read(0, 4096).unwrap();
    assert_eq!(
        write_from_a(&mut pair, 1, mr.addr() + WINDOW_AT, mw, 8),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before);
}

#[test]
fn type_2_rkeys_take_the_key_byte_of_the_bind_and_keep_the_index() {
    let (mut pair, mr) = pair_with_region();
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
    // A bind that names another index in the upper bits still binds this window: only the key
    // byte is taken (rxe_do_bind_mw).
    let mut b = bind(90, mw, 0, &mr, WINDOW_AT, WINDOW_LEN, Access::REMOTE_WRITE);
    let SendOp::BindMw(ref mut info) = b.op else {
        unreachable!()
    };
    let key = (mw.wrapping_add(1)) & 0xff;
    info.rkey = 0xabcd_ef00 | key;
    post(&mut pair, false, b);
    drive_millis(&mut pair, 1);
    success(pair.b.completion(), 90, WcOpcode::BindMw);
    let rkey = (mw & !0xff) | key;
    assert_ne!(rkey, mw);
    assert_eq!(pair.b.nic.mw_rkey(mw), Some(rkey));
    let before = mr.read(0, 4096).unwrap();
    let status = write_from_a(&mut pair, 1, mr.addr() + WINDOW_AT, mw, 8);
    assert_eq!(
        status,
        WcStatus::RemAccessErr,
        "the key byte of the allocation"
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before);
}

#[test]
fn binding_a_bound_type_2_window_again_is_a_bind_error() {
    let (mut pair, mr) = pair_with_region();
    let rkey = bound_type_2(&mut pair, &mr);
    // o10-37.2.30: only a free type 2 window is bound.
    post(
        &mut pair,
        false,
        bind(92, rkey, KEY + 1, &mr, 0, 64, Access::REMOTE_WRITE),
    );
    drive_millis(&mut pair, 1);
    let cqe = pair.b.completion().unwrap();
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode),
        (92, WcStatus::MwBindErr, WcOpcode::BindMw)
    );
    assert_eq!(
        pair.b.nic.mw_rkey(rkey),
        Some(rkey),
        "the window kept its R_Key"
    );
    assert_eq!(
        pair.b.qp_state(),
        roce_core::QpState::Err,
        "a failed bind ends the QP"
    );
}

#[test]
fn binds_the_region_or_window_does_not_allow_are_bind_errors() {
    type Case = (&'static str, fn(&mut Pair, &MemoryRegion) -> SendWr);
    let cases: [Case; 5] = [
        ("a region without MW_BIND (C10-73)", |pair, _| {
            let plain = pair.b.nic.reg_mr(pair.b.pd, 4096, Access::ALL).unwrap();
            let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
            bind(93, mw, KEY, &plain, 0, 64, Access::REMOTE_READ)
        }),
        ("outside the region (C10-75)", |pair, mr| {
            let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
            bind(93, mw, KEY, mr, 4000, 200, Access::REMOTE_READ)
        }),
        ("a type 2 window of length 0 (o10-37.2.40)", |pair, mr| {
            let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
            bind(93, mw, KEY, mr, 0, 0, Access::REMOTE_READ)
        }),
        ("a window of another PD (C10-72)", |pair, mr| {
            let other = pair.b.nic.alloc_pd();
            let mw = pair.b.nic.alloc_mw(other, MwType::Type2).unwrap();
            bind(93, mw, KEY, mr, 0, 64, Access::REMOTE_READ)
        }),
        ("a stale R_Key of the window", |pair, mr| {
            let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
            bind(93, mw ^ 0x80, KEY, mr, 0, 64, Access::REMOTE_READ)
        }),
    ];
    for (what, make) in cases {
        let (mut pair, mr) = pair_with_region();
        let b = make(&mut pair, &mr);
        let SendOp::BindMw(info) = b.op else {
            unreachable!()
        };
        let was = pair.b.nic.mw_rkey(info.mw_rkey);
        post(&mut pair, false, b);
        drive_millis(&mut pair, 1);
        let cqe = pair.b.completion().unwrap();
        assert_eq!((cqe.wr_id, cqe.status), (93, WcStatus::MwBindErr), "{what}");
        assert_eq!(
            pair.b.nic.mw_rkey(info.mw_rkey),
            was,
            "{what}: the window's R_Key did not change"
        );
        assert_eq!(
            pair.b.qp_state(),
            roce_core::QpState::Err,
            "{what}: a failed bind ends the QP"
        );
    }
}

#[test]
fn a_type_1_window_moves_with_each_bind_and_cannot_be_invalidated() {
    let (mut pair, mr) = pair_with_region();
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type1).unwrap();
    post(
        &mut pair,
        false,
        bind(90, mw, KEY, &mr, 0, 512, Access::REMOTE_WRITE),
    );
    post(
        &mut pair,
        false,
        bind(
            91,
            (mw & !0xff) | KEY,
            KEY + 1,
            &mr,
            2048,
            512,
            Access::REMOTE_WRITE,
        ),
    );
    drive_millis(&mut pair, 1);
    success(pair.b.completion(), 90, WcOpcode::BindMw);
    success(pair.b.completion(), 91, WcOpcode::BindMw);
    let rkey = (mw & !0xff) | (KEY + 1);
    let before = mr.read(0, 4096).unwrap();
    // The old place is out of the window now.
    assert_eq!(
        write_from_a(&mut pair, 1, mr.addr(), rkey, 8),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before);

    let (mut pair, mr) = pair_with_region();
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type1).unwrap();
    post(
        &mut pair,
        false,
        bind(90, mw, KEY, &mr, 2048, 512, Access::REMOTE_WRITE),
    );
    drive_millis(&mut pair, 1);
    success(pair.b.completion(), 90, WcOpcode::BindMw);
    let rkey = (mw & !0xff) | KEY;
    assert_eq!(
        write_from_a(&mut pair, 1, mr.addr() + 2048, rkey, 8),
        WcStatus::Success
    );
    assert_eq!(mr.read(2048, 8).unwrap(), pair.a.mr.read(0, 8).unwrap());
    // o10-37.2.26: a type 1 window is not invalidated; rxe completes LOC_QP_OP_ERR.
    post(
        &mut pair,
        false,
        SendWr::new(94, SendOp::LocalInv(rkey), Vec::new()),
    );
    drive_millis(&mut pair, 1);
    let cqe = pair.b.completion().unwrap();
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode),
        (94, WcStatus::LocQpOpErr, WcOpcode::LocalInv)
    );
    assert_eq!(pair.b.nic.mw_rkey(rkey), Some(rkey), "still bound");
}

#[test]
fn a_region_with_a_bound_window_cannot_be_deregistered_and_a_freed_window_reaches_nothing() {
    let (mut pair, mr) = pair_with_region();
    let rkey = bound_type_2(&mut pair, &mr);
    assert!(matches!(
        pair.b.nic.dereg_mr(mr.lkey()),
        Err(roce_core::VerbsError::Busy(_))
    ));
    pair.b.nic.dealloc_mw(rkey).unwrap();
    assert_eq!(pair.b.nic.mw_rkey(rkey), None);
    let before = mr.read(0, 4096).unwrap();
    assert_eq!(
        write_from_a(&mut pair, 1, mr.addr() + WINDOW_AT, rkey, 8),
        WcStatus::RemAccessErr
    );
    assert_eq!(mr.read(0, 4096).unwrap(), before);
    pair.b.nic.dereg_mr(mr.lkey()).unwrap();
}

#[test]
fn a_bind_waits_for_the_wrs_before_it_and_completes_in_order() {
    let (mut pair, mr) = pair_with_region();
    let mw = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
    // b WRITEs to a first, then binds: the bind's completion comes after the WRITE's.
    let op = SendOp::RdmaWrite(roce_tests::sim::remote(&pair.a, 0));
    let first = wr(&pair.b, 1, op, 0, 3000);
    post(&mut pair, false, first);
    post(
        &mut pair,
        false,
        bind(2, mw, KEY, &mr, WINDOW_AT, WINDOW_LEN, Access::REMOTE_WRITE),
    );
    drive_millis(&mut pair, 5);
    success(pair.b.completion(), 1, WcOpcode::RdmaWrite);
    success(pair.b.completion(), 2, WcOpcode::BindMw);
}

#[test]
fn a_window_takes_the_next_key_index_and_is_freed_once() {
    let (mut pair, mr) = pair_with_region();
    let first = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type1).unwrap();
    let second = pair.b.nic.alloc_mw(pair.b.pd, MwType::Type2).unwrap();
    assert_eq!(
        (second >> 8) - (first >> 8),
        1,
        "indices shared with regions, in order"
    );
    assert!((mr.lkey() >> 8) < (first >> 8), "not a region's index");
    pair.b.nic.dealloc_mw(second).unwrap();
    assert!(pair.b.nic.dealloc_mw(second).is_err(), "freed once");
    assert_eq!(
        pair.b.nic.mw_rkey(first),
        Some(first),
        "the other window stays"
    );
    assert_eq!(pair.b.nic.mw_rkey(second), None);
}
