use super::*;

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
