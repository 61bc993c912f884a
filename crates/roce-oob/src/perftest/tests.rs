use super::*;
use crate::testing::v4_gid;

/// mtu1500-write_bw.pcap frame 15: `ib_write_bw -x 1 -n 100`, client 198.18.0.12.
const WRITE_BW_CLIENT_KEYS: &[u8] = b"0000:0001:000016:297886:00000771:00007f6076683000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:\0";
/// mtu1500-read_bw.pcap frame 16: `ib_read_bw -x 1 -n 100`, server 198.18.0.11; rxe's
/// out_reads 0x80.
const READ_BW_SERVER_KEYS: &[u8] = b"0000:0080:000017:e710bf:00000854:00007f72b0852000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0b:00000000:\0";

#[test]
fn golden_keys_from_the_captures() {
    let client = PerftestDest {
        lid: 0,
        out_reads: 1,
        qpn: 0x16,
        psn: 0x297886,
        rkey: 0x771,
        vaddr: 0x7f60_7668_3000,
        gid: Some(v4_gid(12)),
        srqn: 0,
    };
    assert_eq!(encode_keys(&client), WRITE_BW_CLIENT_KEYS);
    assert_eq!(decode_keys(WRITE_BW_CLIENT_KEYS, true).unwrap(), client);

    let server = PerftestDest {
        lid: 0,
        out_reads: 0x80,
        qpn: 0x17,
        psn: 0xe710bf,
        rkey: 0x854,
        vaddr: 0x7f72_b085_2000,
        gid: Some(v4_gid(11)),
        srqn: 0,
    };
    assert_eq!(encode_keys(&server), READ_BW_SERVER_KEYS);
    assert_eq!(decode_keys(READ_BW_SERVER_KEYS, true).unwrap(), server);
}

#[test]
fn keys_without_gid_are_59_bytes() {
    let dest = PerftestDest {
        lid: 0x12,
        out_reads: 0x10,
        qpn: 0xabcdef,
        psn: 0x123456,
        rkey: 0xdeadbeef,
        vaddr: 0x0123_4567_89ab_cdef,
        gid: None,
        srqn: 0x42,
    };
    let msg = encode_keys(&dest);
    assert_eq!(
        msg,
        b"0012:0010:abcdef:123456:deadbeef:0123456789abcdef:00000042\0"
    );
    assert_eq!(msg.len(), KEY_MSG_SIZE);
    assert_eq!(decode_keys(&msg, false).unwrap(), dest);
}

#[test]
fn keys_round_trip_extremes() {
    for gid in [None, Some([0u8; 16]), Some([0xff; 16])] {
        for dest in [
            PerftestDest {
                gid,
                ..PerftestDest::default()
            },
            PerftestDest {
                lid: u16::MAX,
                out_reads: u16::MAX,
                qpn: 0xff_ffff,
                psn: 0xff_ffff,
                rkey: u32::MAX,
                vaddr: u64::MAX,
                gid,
                srqn: u32::MAX,
            },
        ] {
            let msg = encode_keys(&dest);
            assert_eq!(msg.last(), Some(&0));
            assert_eq!(decode_keys(&msg, gid.is_some()).unwrap(), dest);
        }
    }
    let wide = PerftestDest {
        qpn: 0x0100_0016,
        psn: 0x0100_0001,
        ..PerftestDest::default()
    };
    let back = decode_keys(&encode_keys(&wide), false).unwrap();
    assert_eq!((back.qpn, back.psn), (0x16, 1));
}

#[test]
fn malformed_keys_say_what_is_wrong() {
    let err = |m: &[u8], gid| decode_keys(m, gid).unwrap_err();
    // The wrong form for the local -x setting.
    assert!(matches!(
        err(WRITE_BW_CLIENT_KEYS, false),
        OobError::Length {
            expected: 59,
            got: 108,
            ..
        }
    ));
    let mut m = WRITE_BW_CLIENT_KEYS.to_vec();
    m[5] = b'x';
    assert!(matches!(
        err(&m, true),
        OobError::Hex {
            field: "OUT_READS",
            offset: 5,
            ..
        }
    ));
    let mut m = WRITE_BW_CLIENT_KEYS.to_vec();
    m[30] = b'-';
    assert!(matches!(err(&m, true), OobError::Hex { field: "RKEY", .. }));
    let mut m = WRITE_BW_CLIENT_KEYS.to_vec();
    m[49] = b';';
    assert!(matches!(
        err(&m, true),
        OobError::Delimiter {
            after: "VADDR",
            offset: 49,
            ..
        }
    ));
    let mut m = WRITE_BW_CLIENT_KEYS.to_vec();
    m[52] = b'.';
    assert!(matches!(
        err(&m, true),
        OobError::Delimiter {
            after: "GID byte",
            offset: 52,
            ..
        }
    ));
    let mut m = WRITE_BW_CLIENT_KEYS.to_vec();
    m[100] = b'q';
    assert!(matches!(err(&m, true), OobError::Hex { field: "SRQN", .. }));
    let mut m = WRITE_BW_CLIENT_KEYS.to_vec();
    m[106] = 0;
    assert!(matches!(
        err(&m, true),
        OobError::Delimiter {
            after: "SRQN",
            expected: ':',
            ..
        }
    ));
    let mut m = WRITE_BW_CLIENT_KEYS.to_vec();
    m[107] = b'\n';
    assert!(matches!(
        err(&m, true),
        OobError::Delimiter {
            expected: '\0',
            found: b'\n',
            ..
        }
    ));
    let mut m = encode_keys(&PerftestDest::default());
    m[58] = b'0';
    assert!(matches!(
        err(&m, false),
        OobError::Delimiter {
            after: "SRQN",
            expected: '\0',
            ..
        }
    ));
}

#[test]
fn version_message() {
    // Every capture, frames 4 and 6.
    let golden = *b"6.06\0\0\0\0\0\0\0\0\0\0\0\0";
    assert_eq!(encode_version(VERSION).unwrap(), golden);
    let v = decode_version(&golden).unwrap();
    assert_eq!(v.text, "6.06");
    assert!((v.number - 6.06).abs() < 1e-12);

    assert!(matches!(
        encode_version("0123456789abcdef"),
        Err(OobError::Version { .. })
    ));
    assert!(encode_version("0123456789abcde").is_ok());
    assert!(matches!(
        decode_version(b"6.06aaaaaaaaaaaa"),
        Err(OobError::Version {
            reason: "no NUL in 16 bytes",
            ..
        })
    ));
    assert!(matches!(
        decode_version(b"6.\x0106\0\0\0\0\0\0\0\0\0\0\0"),
        Err(OobError::Version {
            reason: "not printable ASCII",
            ..
        })
    ));
    assert!(matches!(
        decode_version(b"6.06"),
        Err(OobError::Length { expected: 16, .. })
    ));
    // Bytes after the NUL do not matter.
    assert_eq!(decode_version(b"5.70\0garbage!!!!").unwrap().text, "5.70");
}

#[test]
fn run_params_ride_after_the_version_nul() {
    let params = RunParams {
        amount: Amount::Iterations(5000),
        size: Some(65536),
        qps: 4,
        modes: Modes::default(),
    };
    let msg = encode_version_with(VERSION, Some(&params)).unwrap();
    // perftest reads "6.06" and nothing after the NUL.
    assert_eq!(&msg[..5], b"6.06\0");
    assert_eq!(msg[5], RUN_PARAMS_MAGIC);
    let peer = decode_version(&msg).unwrap();
    assert_eq!((peer.text.as_str(), peer.params), ("6.06", Some(params)));
    let all = RunParams {
        amount: Amount::Seconds(5),
        size: None,
        qps: 16384,
        modes: Modes {
            duplex: true,
            run_infinitely: true,
            connection: Connection::Ud,
        },
    };
    let msg = encode_version_with(VERSION, Some(&all)).unwrap();
    assert_eq!(decode_version(&msg).unwrap().params, Some(all));
    // perftest's own message (NUL padding) carries none, nor does a long version.
    assert_eq!(
        decode_version(&encode_version(VERSION).unwrap())
            .unwrap()
            .params,
        None
    );
    // Each mode on its own is told apart; a size past 28 bits sends nothing.
    for modes in [
        Modes {
            duplex: true,
            ..Modes::default()
        },
        Modes {
            run_infinitely: true,
            ..Modes::default()
        },
        Modes {
            connection: Connection::Uc,
            ..Modes::default()
        },
    ] {
        let with = RunParams { modes, ..params };
        let msg = encode_version_with(VERSION, Some(&with)).unwrap();
        assert_eq!(decode_version(&msg).unwrap().params, Some(with));
    }
    let huge = RunParams {
        size: Some(1 << 28),
        ..params
    };
    let msg = encode_version_with(VERSION, Some(&huge)).unwrap();
    assert_eq!(msg, encode_version(VERSION).unwrap());
    let long = encode_version_with("6.06.1", Some(&params)).unwrap();
    assert_eq!(long, encode_version("6.06.1").unwrap());
    assert_eq!(decode_version(&long).unwrap().params, None);
}

#[test]
fn atof_reads_the_leading_number() {
    assert_eq!(atof("6.06"), 6.06);
    assert_eq!(atof(" 5.70abc"), 5.70);
    assert_eq!(atof("6"), 6.0);
    assert_eq!(atof(".5"), 0.5);
    assert_eq!(atof("-1.5"), -1.5);
    assert_eq!(atof("v6.06"), 0.0);
    assert_eq!(atof(""), 0.0);
    assert_eq!(atof("."), 0.0);
    assert_eq!(atof("7."), 7.0);
}

#[test]
fn mtu_message() {
    // Every perftest capture, frames 12 and 13: "3\0" for 1024.
    assert_eq!(encode_mtu(IbvMtu::Mtu1024), *b"3\0");
    assert_eq!(decode_mtu(b"3\0").unwrap(), IbvMtu::Mtu1024);
    for v in 1..=5u8 {
        let mtu = IbvMtu::from_enum(v).unwrap();
        assert_eq!(decode_mtu(&encode_mtu(mtu)).unwrap(), mtu);
        assert_eq!(IbvMtu::from_bytes(mtu.bytes()), Some(mtu));
    }
    assert_eq!(IbvMtu::Mtu256.bytes(), 256);
    assert_eq!(IbvMtu::Mtu4096.bytes(), 4096);
    assert!(matches!(decode_mtu(b"6\0"), Err(OobError::Mtu(_))));
    assert!(matches!(decode_mtu(b"0\0"), Err(OobError::Mtu(_))));
    assert!(matches!(decode_mtu(b"33"), Err(OobError::Mtu(_))));
    assert!(matches!(decode_mtu(b"3"), Err(OobError::Length { .. })));
    assert_eq!(IbvMtu::from_enum(0), None);
    assert_eq!(IbvMtu::from_bytes(1500), None);
}

#[test]
fn report_from_the_capture() {
    // mtu1500-write_bw.pcap frames 1749, 1751, 1753, 1755, 1757: the client's report.
    let parts = [
        0x0000_0000_0001_0000u64,
        0x64,
        0x3fbf_1dac_600f_efdc,
        0x3fb5_f9a5_d54a_a446,
        0x3f25_75cb_f24a_e46d,
    ]
    .map(u64::to_be_bytes);
    let report = BwReport::decode(&parts);
    assert_eq!(report.size, 65536);
    assert_eq!(report.iters, 100);
    assert!(report.bw_peak > report.bw_avg && report.bw_avg > 0.0);
    assert_eq!(report.encode(), parts);
}

#[test]
fn sys_data_merge_takes_the_larger() {
    let a = SysData {
        cycle_buffer: 4096,
        cache_line_size: 128,
    };
    let b = SysData {
        cycle_buffer: 65536,
        cache_line_size: 64,
    };
    assert_eq!(
        a.merge(b),
        SysData {
            cycle_buffer: 65536,
            cache_line_size: 128
        }
    );
}

#[test]
fn test_plans() {
    let plan = |t: Test| {
        (
            t.handshakes_before_connect(),
            t.handshakes_after_connect(),
            t.exchanges_report(),
            t.closes_with_done(),
        )
    };
    assert_eq!(plan(Test::WRITE_BW), (1, 2, true, true));
    assert_eq!(plan(Test::READ_BW), (1, 2, true, true));
    assert_eq!(plan(Test::ATOMIC_BW), (1, 2, true, true));
    assert_eq!(plan(Test::SEND_BW), (1, 3, false, true));
    assert_eq!(plan(Test::WRITE_LAT), (2, 2, false, false));
    assert_eq!(plan(Test::READ_LAT), (2, 2, false, true));
    assert_eq!(plan(Test::ATOMIC_LAT), (2, 2, false, true));
    assert_eq!(plan(Test::SEND_LAT), (1, 3, false, true));
}
