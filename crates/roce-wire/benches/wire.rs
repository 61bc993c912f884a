//! The hot functions of the wire layer.
//!
//! - `icrc/4096`: the ICRC of a RoCE packet with a 4 KiB payload, against `crc32fast::hash` over
//!   the same number of bytes (the floor: the ICRC hashes 8 + 28 more bytes and masks 4 of them).
//! - `icrc_id/*`: a packet whose IPv4 ID a UDP socket hid, sealed for ID 0x4c1d as rxe might
//!   send it: verifying it with its ID known (`verify`), and finding the ID from a wrong guess
//!   (`solve`, one CRC and the algebra of `icrc::ipv4_id`), for a 4 KiB and a 64-byte payload.
//! - `parse/*`: checking and reading a packet's headers.
//!
//! `cargo bench -p roce-wire --bench wire`; figures are kept in docs/benchmarks.md.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roce_wire::{
    BthRepr, IpFields, Opcode, PseudoHeader, Psn, Qpn, RethRepr, RocePacket, RoceRepr, icrc,
};

fn header() -> PseudoHeader {
    PseudoHeader {
        ip: IpFields::V4 {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            identification: 0,
            dont_fragment: true,
        },
        src_port: 0xc121,
        dst_port: 4791,
    }
}

fn write_first(payload_len: usize) -> Vec<u8> {
    let bth = BthRepr::new(Opcode::RcRdmaWriteFirst, Qpn::new(0x11), Psn::new(5));
    let repr = RoceRepr {
        reth: Some(RethRepr {
            va: 0x7f00_0000_0000,
            rkey: 0x1234,
            dma_len: 65536,
        }),
        payload_len,
        ..RoceRepr::new(bth)
    };
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut buf, |p| {
        p.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8)
    })
    .expect("a valid repr");
    icrc::seal(&header(), &mut buf);
    buf
}

fn icrc_bench(c: &mut Criterion) {
    let packet = write_first(4096);
    let header = header();
    let mut group = c.benchmark_group("icrc");
    group.throughput(Throughput::Bytes(packet.len() as u64));
    group.bench_function("icrc/4096", |b| {
        b.iter(|| icrc::compute(black_box(&header), black_box(&packet)))
    });
    group.bench_function("crc32fast/4096", |b| {
        b.iter(|| crc32fast::hash(black_box(&packet)))
    });
    let mut framed = vec![0; icrc::HEADROOM];
    framed.extend_from_slice(&packet);
    group.bench_function("icrc_in_place/4096", |b| {
        b.iter(|| {
            icrc::compute_in_place(black_box(&header), black_box(&mut framed), icrc::HEADROOM)
        })
    });
    group.finish();
    let mut id = c.benchmark_group("icrc_id");
    let with_id = |identification| PseudoHeader {
        ip: IpFields::V4 {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            identification,
            dont_fragment: true,
        },
        ..header
    };
    for len in [4096, 64] {
        let mut packet = write_first(len);
        icrc::seal(&with_id(0x4c1d), &mut packet);
        id.bench_function(format!("verify/{len}"), |b| {
            b.iter(|| icrc::verify(black_box(&with_id(0x4c1d)), black_box(&packet)))
        });
        id.bench_function(format!("solve/{len}"), |b| {
            b.iter(|| icrc::ipv4_id::solve(black_box(&with_id(0)), black_box(&packet)))
        });
    }
    id.finish();
    let mut floor = c.benchmark_group("crc32fast_len");
    for len in [40, 4096, 4128, 4156] {
        let bytes = vec![0x5a; len];
        floor.bench_function(format!("{len}"), |b| {
            b.iter(|| crc32fast::hash(black_box(&bytes)))
        });
    }
    floor.finish();
}

fn parse_bench(c: &mut Criterion) {
    let packet = write_first(4096);
    let mut group = c.benchmark_group("parse");
    group.bench_function("repr/write_first", |b| {
        b.iter(|| {
            RoceRepr::parse(&RocePacket::new_unchecked(black_box(&packet[..]))).expect("valid")
        })
    });
    group.bench_function("check+repr/write_first", |b| {
        b.iter(|| {
            let view = RocePacket::new_checked(black_box(&packet[..])).expect("valid");
            RoceRepr::parse(&view).expect("valid")
        })
    });
    group.bench_function("check+bth/write_first", |b| {
        b.iter(|| {
            let view = RocePacket::new_checked(black_box(&packet[..])).expect("valid");
            (view.bth().psn(), view.bth().dest_qp(), view.payload().len())
        })
    });
    group.finish();
}

criterion_group!(benches, icrc_bench, parse_bench);
criterion_main!(benches);
