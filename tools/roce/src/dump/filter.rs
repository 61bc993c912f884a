//! Which packets `roce dump` shows: `-Q/--qp`, `-o/--opcode` and `--host`, as tcpdump's
//! primitives. Each option may be given more than once (its values are alternatives); different
//! options must all match.

use std::net::IpAddr;

use roce_wire::frame::Frame;
use roce_wire::{Opcode, Qpn};

/// The filter of a dump.
#[derive(Debug, Clone, Default)]
pub(super) struct Filter {
    /// Destination QPs of the BTH.
    pub(super) qps: Vec<Qpn>,
    /// Opcodes (one option may name several: `SEND_ONLY` is RC's, UC's and UD's).
    pub(super) opcodes: Vec<Opcode>,
    /// Source or destination IP addresses.
    pub(super) hosts: Vec<IpAddr>,
}

impl Filter {
    /// Whether any filter was given.
    pub(super) fn is_active(&self) -> bool {
        !(self.qps.is_empty() && self.opcodes.is_empty() && self.hosts.is_empty())
    }

    /// Whether a frame matches: `bth` is its RoCE packet's opcode and destination QP when its
    /// BTH could be read. A frame without a BTH matches only when no QP or opcode is asked for.
    pub(super) fn matches(&self, frame: Option<&Frame<'_>>, bth: Option<(Opcode, Qpn)>) -> bool {
        let host = self.hosts.is_empty()
            || frame
                .and_then(|frame| frame.ip)
                .is_some_and(|ip| self.hosts.contains(&ip.src) || self.hosts.contains(&ip.dst));
        let qp = self.qps.is_empty() || bth.is_some_and(|(_, qp)| self.qps.contains(&qp));
        let opcode =
            self.opcodes.is_empty() || bth.is_some_and(|(op, _)| self.opcodes.contains(&op));
        host && qp && opcode
    }
}

/// `-Q`: a QPN in hex (`0x11`, as `roce dump` prints it) or decimal (`17`).
pub(super) fn parse_qpn(text: &str) -> Result<Qpn, String> {
    let value = parse_number(text)
        .ok_or_else(|| format!("{text:?} is not a QPN (hex such as 0x000011, or decimal)"))?;
    if value > u64::from(Qpn::MASK) {
        return Err(format!("{text}: a QPN has 24 bits (at most 0xffffff)"));
    }
    Ok(Qpn::new(value as u32))
}

/// `-o`: an opcode by its name as `roce dump` prints it (`RC_SEND_ONLY`, `RC_ACKNOWLEDGE`,
/// `CNP`; any case), by its name without the transport (`SEND_ONLY`, `ACKNOWLEDGE`: every
/// transport's), or by its number (`0x11`, `17`).
pub(super) fn parse_opcode(text: &str) -> Result<Vec<Opcode>, String> {
    if let Some(value) = parse_number(text) {
        let byte = u8::try_from(value).map_err(|_| format!("{text}: an opcode is one byte"))?;
        return Ok(vec![Opcode::from(byte)]);
    }
    let name = text.trim();
    let matching: Vec<Opcode> = Opcode::ALL
        .iter()
        .copied()
        .filter(|opcode| {
            let full = opcode.name();
            full.eq_ignore_ascii_case(name)
                || full
                    .split_once('_')
                    .is_some_and(|(_, operation)| operation.eq_ignore_ascii_case(name))
        })
        .collect();
    if matching.is_empty() {
        return Err(format!(
            "{text:?} is not an opcode: give its name as roce dump prints it (RC_SEND_ONLY, \
             RC_ACKNOWLEDGE, CNP, ...), its name without the transport (SEND_ONLY: RC's, UC's and \
             UD's), or its number (0x11)"
        ));
    }
    Ok(matching)
}

/// A number in hex (`0x` prefix) or decimal.
fn parse_number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qpns_are_hex_or_decimal_and_24_bits() {
        assert_eq!(parse_qpn("0x000011"), Ok(Qpn::new(0x11)));
        assert_eq!(parse_qpn("0X11"), Ok(Qpn::new(0x11)));
        assert_eq!(parse_qpn("17"), Ok(Qpn::new(0x11)));
        assert_eq!(parse_qpn("0xffffff"), Ok(Qpn::new(0xff_ffff)));
        assert!(parse_qpn("0x1000000").unwrap_err().contains("24 bits"));
        for bad in ["", "qp", "0x", "-1", "1e3", "0x1g"] {
            assert!(parse_qpn(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn opcodes_by_name_suffix_or_number() {
        assert_eq!(parse_opcode("RC_SEND_ONLY"), Ok(vec![Opcode::RcSendOnly]));
        assert_eq!(
            parse_opcode("rc_acknowledge"),
            Ok(vec![Opcode::RcAcknowledge])
        );
        assert_eq!(parse_opcode("cnp"), Ok(vec![Opcode::Cnp]));
        assert_eq!(parse_opcode("0x81"), Ok(vec![Opcode::Cnp]));
        assert_eq!(parse_opcode("17"), Ok(vec![Opcode::RcAcknowledge]));
        assert_eq!(
            parse_opcode("send_only"),
            Ok(vec![
                Opcode::RcSendOnly,
                Opcode::UcSendOnly,
                Opcode::UdSendOnly
            ])
        );
        assert_eq!(parse_opcode("ACKNOWLEDGE"), Ok(vec![Opcode::RcAcknowledge]));
        for bad in ["", "SEND", "RC_", "0x100", "NAK"] {
            assert!(parse_opcode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn options_of_one_kind_are_alternatives_and_kinds_all_apply() {
        let filter = Filter {
            qps: vec![Qpn::new(0x11), Qpn::new(0x12)],
            opcodes: vec![Opcode::RcAcknowledge],
            hosts: Vec::new(),
        };
        assert!(filter.matches(None, Some((Opcode::RcAcknowledge, Qpn::new(0x12)))));
        assert!(!filter.matches(None, Some((Opcode::RcSendOnly, Qpn::new(0x12)))));
        assert!(!filter.matches(None, Some((Opcode::RcAcknowledge, Qpn::new(0x13)))));
        assert!(!filter.matches(None, None), "no BTH, no match");
        assert!(Filter::default().matches(None, None));
        assert!(!Filter::default().is_active());
    }
}
