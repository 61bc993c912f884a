use super::*;

#[test]
fn pfc_frame_layout() {
    let frame = pfc_frame([2, 0, 0, 0, 0, 1], 3, 0xffff);
    assert_eq!(frame.len(), 60);
    assert_eq!(&frame[0..6], &PFC_DA);
    assert_eq!(&frame[12..16], &[0x88, 0x08, 0x01, 0x01]);
    assert_eq!(&frame[16..18], &[0x00, 0x08]); // class-enable vector: priority 3
    assert_eq!(&frame[18 + 6..18 + 8], &[0xff, 0xff]); // time of priority 3
    assert!(frame[18..24].iter().all(|&b| b == 0));
}

#[test]
fn pause_requests_are_read_from_pfc_and_802_3x_frames() {
    let pfc = pfc_frame([2, 0, 0, 0, 0, 1], 3, 1000);
    assert_eq!(pause_request(&pfc), [(3, 1000)]);
    let xon = pfc_frame([2, 0, 0, 0, 0, 1], 5, 0);
    assert_eq!(pause_request(&xon), [(5, 0)]);
    let mut pause = pfc.clone();
    pause[14..18].copy_from_slice(&[0x00, 0x01, 0x12, 0x34]);
    assert_eq!(pause_request(&pause).len(), CLASSES);
    assert!(pause_request(&pause).iter().all(|&(_, q)| q == 0x1234));
    assert!(pause_request(&pfc[..17]).is_empty(), "truncated");
    assert_eq!(
        pause_request(&pfc[..20]),
        [],
        "priority 3's time is cut off"
    );
}

#[test]
fn options_parse_and_refuse() {
    assert_eq!(parse_rate("200m"), Ok(200_000_000));
    assert_eq!(parse_rate("1G"), Ok(1_000_000_000));
    assert!(parse_rate("fast").is_err());
    assert!(parse_rate("0").is_err());
    let ecn = parse_ecn("5000,50000,0.1").expect("valid");
    assert_eq!((ecn.k_min_bytes, ecn.k_max_bytes), (5000, 50000));
    assert!(parse_ecn("5000,500,0.1").is_err());
    assert!(parse_ecn("5000,50000,2").is_err());
    assert!(parse_pfc("40000,60000").is_err());
    assert_eq!(parse_pfc("60000,40000").map(|p| p.priorities), Ok(8));
}
