use std::collections::HashMap;
use std::net::Ipv6Addr;

use super::*;

fn spec(vars: &[(&str, &str)]) -> Result<Option<DeviceSpec>, EnvError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    DeviceSpec::from_env(|k| map.get(k).cloned())
}

#[test]
fn no_address_no_device() {
    assert_eq!(spec(&[(ENV_MTU, "4096")]), Ok(None));
}

#[test]
fn defaults_are_udp_mtu_1024_no_cc_100_gbps() {
    let s = spec(&[(ENV_IP, "127.0.0.2")]).unwrap().unwrap();
    assert_eq!(s.recovery, Recovery::GoBackN);
    assert_eq!(s.nic_config().loss_recovery, LossRecovery::GoBackN);
    // The engine's default is a packet a turn (the simulator's hosts, as ns-3's); a device's
    // QPs send in bursts.
    assert_eq!(NicConfig::default().tx_burst_packets, 1);
    assert_eq!(s.nic_config().tx_burst_packets, TX_BURST_PACKETS);
    assert_eq!(s.ip, IpAddr::from([127, 0, 0, 2]));
    assert_eq!(s.backend, BackendKind::Udp);
    assert_eq!(s.mtu, Some(Mtu::Mtu1024));
    assert_eq!((s.pcap, s.snaplen), (None, 0));
    assert_eq!(
        (s.cc, s.line_rate_bps, s.loss, s.busy_poll, s.no_gso),
        (Cc::None, 100_000_000_000, 0.0, false, false)
    );
}

#[test]
fn selective_repeat_reaches_the_engine_with_its_window_as_the_cap() {
    let s = spec(&[
        (ENV_IP, "127.0.0.2"),
        (ENV_LOSS_RECOVERY, "selective-repeat"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(s.recovery, Recovery::SelectiveRepeat);
    let config = s.nic_config();
    assert_eq!(
        config.loss_recovery,
        LossRecovery::selective_repeat(config.max_unacked_psns)
    );
}

#[test]
fn an_ipv6_address_is_taken() {
    let s = spec(&[(ENV_IP, " ::1 ")]).unwrap().unwrap();
    assert_eq!(s.ip, IpAddr::from(Ipv6Addr::LOCALHOST));
    let s = spec(&[(ENV_IP, "fd00:198:18::2")]).unwrap().unwrap();
    assert_eq!(s.ip.to_string(), "fd00:198:18::2");
}

#[test]
fn device_tool_options_parse() {
    let s = spec(&[
        (ENV_IP, "127.0.0.2"),
        (ENV_CC, "dcqcn"),
        (ENV_LINE_RATE, "25"),
        (ENV_LOSS, "0.01"),
        (ENV_BUSY_POLL, "1"),
        (ENV_SNAPLEN, "128"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(s.snaplen, 128);
    assert_eq!(
        (s.cc, s.line_rate_bps, s.loss, s.busy_poll),
        (Cc::Dcqcn, 25_000_000_000, 0.01, true)
    );
}

#[test]
fn every_bad_value_names_its_variable() {
    for (vars, var) in [
        (&[(ENV_IP, "localhost")][..], ENV_IP),
        (&[(ENV_IP, "::1/128")][..], ENV_IP),
        (&[(ENV_IP, "1.2.3.4"), (ENV_MTU, "1500")][..], ENV_MTU),
        (
            &[(ENV_IP, "1.2.3.4"), (ENV_BACKEND, "tcp")][..],
            ENV_BACKEND,
        ),
        (&[(ENV_IP, "1.2.3.4"), (ENV_BACKEND, "raw")][..], ENV_DEV),
        (&[(ENV_IP, "1.2.3.4"), (ENV_CC, "reno")][..], ENV_CC),
        (
            &[(ENV_IP, "1.2.3.4"), (ENV_LOSS_RECOVERY, "sack")][..],
            ENV_LOSS_RECOVERY,
        ),
        (&[(ENV_IP, "1.2.3.4"), (ENV_LOSS, "1.5")][..], ENV_LOSS),
        (&[(ENV_IP, "1.2.3.4"), (ENV_SNAPLEN, "-1")][..], ENV_SNAPLEN),
        (
            &[(ENV_IP, "1.2.3.4"), (ENV_LINE_RATE, "0")][..],
            ENV_LINE_RATE,
        ),
        (
            &[(ENV_IP, "1.2.3.4"), (ENV_BUSY_POLL, "yes")][..],
            ENV_BUSY_POLL,
        ),
        (&[(ENV_IP, "1.2.3.4"), (ENV_NO_GSO, "true")][..], ENV_NO_GSO),
        (
            &[
                (ENV_IP, "1.2.3.4"),
                (ENV_CC, "hpcc"),
                (ENV_CC_PARAMS, "eta"),
            ][..],
            ENV_CC_PARAMS,
        ),
        (
            &[
                (ENV_IP, "1.2.3.4"),
                (ENV_CC, "hpcc"),
                (ENV_CC_PARAMS, "rpg_gd=2"),
            ][..],
            ENV_CC_PARAMS,
        ),
        (
            &[(ENV_IP, "1.2.3.4"), (ENV_CC_PARAMS, "eta=990")][..],
            ENV_CC_PARAMS,
        ),
    ] {
        assert_eq!(spec(vars).unwrap_err().var, var, "{vars:?}");
    }
}

/// What `roce exec` writes is what the library reads: every field that travels comes back.
#[test]
fn the_environment_written_reads_back_as_the_same_device() {
    let mut written = DeviceSpec::new("198.18.0.1".parse().unwrap());
    written.backend = BackendKind::Raw;
    written.dev = Some("veth0".to_owned());
    written.mtu = Some(Mtu::Mtu4096);
    written.cc = Cc::DcqcnPaper;
    written.cc_params = vec![
        "rpg_ai_rate=40".parse().unwrap(),
        "alpha_on_cnp=true".parse().unwrap(),
    ];
    written.recovery = Recovery::SelectiveRepeat;
    written.line_rate_bps = 25_000_000_000;
    written.loss = 0.125;
    written.busy_poll = true;
    written.no_gso = true;
    written.pcap = Some(PathBuf::from("/tmp/x.pcap"));
    written.snaplen = 384;
    let vars = written.env();
    let read = spec(
        &vars
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(read, written);
}

#[test]
fn a_capture_that_cannot_be_created_fails_the_open_before_any_socket() {
    let mut s = DeviceSpec::new("127.0.0.1".parse().unwrap());
    s.pcap = Some(PathBuf::from("/nonexistent-dir/x.pcap"));
    let err = s.config().unwrap_err();
    assert!(matches!(err, OpenError::Capture { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent-dir/x.pcap"), "{err}");
}

#[test]
fn the_raw_backend_without_an_interface_is_refused() {
    let mut s = DeviceSpec::new("198.18.0.1".parse().unwrap());
    s.backend = BackendKind::Raw;
    let runtime = s.runtime().unwrap();
    let err = runtime.block_on(async { s.open() }).unwrap_err();
    assert!(matches!(err, OpenError::NoInterface), "{err}");
}

#[test]
fn a_bind_error_carries_the_advice_for_the_option_that_chose_the_address() {
    // 198.18.0.1 is not an address of this host (tests create it only in namespaces).
    let s = DeviceSpec::new("198.18.0.1".parse().unwrap());
    let runtime = s.runtime().unwrap();
    let err = runtime.block_on(async { s.open() }).unwrap_err();
    assert!(matches!(err, OpenError::Bind(_)), "{err}");
    assert!(
        err.with_advice("--ip")
            .contains("give --ip one of this host's addresses"),
        "{}",
        err.with_advice("--ip")
    );
}

#[test]
fn cc_params_reach_the_engine_over_the_algorithms_defaults() {
    let s = spec(&[
        (ENV_IP, "127.0.0.2"),
        (ENV_CC, "hpcc"),
        (ENV_CC_PARAMS, "base_rtt_ns=400000, min_rate=10,"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        s.nic_config().congestion,
        Congestion::Hpcc(HpccConfig {
            base_rtt_ns: 400_000,
            min_rate: 10,
            ..HpccConfig::default()
        })
    );
}

#[test]
fn hpcc_pint_is_hpcc_with_pints_header() {
    let s = spec(&[(ENV_IP, "127.0.0.2"), (ENV_CC, "hpcc-pint")])
        .unwrap()
        .unwrap();
    assert_eq!(s.cc, Cc::HpccPint);
    assert_eq!(s.cc.name(), "hpcc-pint");
    let Congestion::Hpcc(h) = s.nic_config().congestion else {
        panic!("{:?}", s.nic_config().congestion)
    };
    assert!(h.pint);
    assert_eq!(
        h,
        HpccConfig {
            pint: true,
            ..HpccConfig::default()
        }
    );
}

#[test]
fn a_parameter_the_algorithm_does_not_take_says_which_it_takes() {
    let err = spec(&[
        (ENV_IP, "127.0.0.2"),
        (ENV_CC, "timely"),
        (ENV_CC_PARAMS, "base_rtt_ns=400000"),
    ])
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("timely has no parameter \"base_rtt_ns\"; its parameters: t_low_ns"),
        "{err}"
    );
    // A device described by flags is refused at its opening, before any socket is bound.
    let mut s = DeviceSpec::new("127.0.0.1".parse().unwrap());
    s.cc = Cc::Timely;
    s.cc_params = vec!["base_rtt_ns=400000".parse().unwrap()];
    let err = s.config().unwrap_err();
    assert!(matches!(err, OpenError::CcParam(_)), "{err}");
    assert!("base_rtt_ns".parse::<CcParam>().is_err());
    assert!("=5".parse::<CcParam>().is_err());
}
