//! JSON forms of what the tools print, for scripts (`--json`).

use roce_device::BackendStats;
use std::time::Duration;

use roce_wire::frame::{Frame, Transport};
use roce_wire::{ParseError, RoceRepr, Syndrome};
use serde_json::{Value, json};

/// One frame of a capture.
pub(crate) fn frame(
    number: usize,
    time: Duration,
    frame: &Result<Frame<'_>, ParseError>,
    roce: Option<&RoceRepr>,
    roce_error: Option<ParseError>,
    icrc: Option<Result<(), ParseError>>,
    snapped: bool,
) -> Value {
    let mut value = json!({ "frame": number, "time": time.as_secs_f64() });
    let frame = match frame {
        Ok(frame) => frame,
        Err(err) => {
            value["error"] = json!(err.to_string());
            return value;
        }
    };
    if snapped {
        value["cut_short"] = json!(true);
    }
    if let Some(vlan) = frame.ethernet.and_then(|eth| eth.vlan) {
        value["vlan"] = json!({ "vid": vlan.vid, "pcp": vlan.pcp });
    }
    let Some(ip) = frame.ip else {
        value["protocol"] = match frame.ethernet {
            Some(eth) if eth.ether_type == 0x0806 => json!("arp"),
            Some(eth) => json!(format!("ethertype {:#06x}", eth.ether_type)),
            None => json!("non-ip"),
        };
        return value;
    };
    value["src"] = json!(ip.src.to_string());
    value["dst"] = json!(ip.dst.to_string());
    value["dscp"] = json!(ip.dscp);
    value["ecn"] = json!(format!("{:?}", ip.ecn));
    if let Some(id) = ip.identification {
        value["ip_id"] = json!(id);
    }
    match frame.transport {
        Some(Transport::Udp(udp, payload)) => {
            value["src_port"] = json!(udp.src_port);
            value["dst_port"] = json!(udp.dst_port);
            value["protocol"] = json!(if frame.roce_payload().is_some() {
                "roce"
            } else {
                "udp"
            });
            value["udp_len"] = json!(payload.len());
        }
        Some(Transport::Tcp {
            src_port,
            dst_port,
            payload_len,
        }) => {
            value["src_port"] = json!(src_port);
            value["dst_port"] = json!(dst_port);
            value["protocol"] = json!("tcp");
            value["tcp_len"] = json!(payload_len);
        }
        Some(Transport::Other(protocol)) => value["protocol"] = json!(protocol),
        None => {}
    }
    if let Some(repr) = roce {
        value["roce"] = roce_repr(repr);
    }
    if let Some(err) = roce_error {
        value["error"] = json!(err.to_string());
    }
    if frame.roce_payload().is_some() {
        value["icrc"] = json!(match icrc {
            Some(Ok(())) => "ok",
            Some(Err(_)) => "bad",
            None => "unchecked",
        });
    }
    value
}

/// The headers of a RoCE packet. 64-bit values that JavaScript cannot hold exactly are hex
/// strings.
pub(crate) fn roce_repr(repr: &RoceRepr) -> Value {
    let bth = &repr.bth;
    let mut value = json!({
        "opcode": bth.opcode.name(),
        "opcode_value": u8::from(bth.opcode),
        "dest_qp": bth.dest_qp.value(),
        "psn": bth.psn.value(),
        "ack_req": bth.ack_req,
        "se": bth.solicited_event,
        "mig_req": bth.mig_req,
        "fecn": bth.fecn,
        "becn": bth.becn,
        "pkey": bth.pkey,
        "pad": bth.pad_count,
        "payload_len": repr.payload_len,
    });
    if let Some(feth) = repr.feth {
        value["feth"] = json!({ "placement_type": feth.placement_type, "selectivity_level": feth.selectivity_level });
    }
    if let Some(deth) = repr.deth {
        value["deth"] = json!({ "qkey": hex(deth.qkey.into()), "src_qp": deth.src_qp.value() });
    }
    if let Some(reth) = repr.reth {
        value["reth"] =
            json!({ "va": hex(reth.va), "rkey": hex(reth.rkey.into()), "dma_len": reth.dma_len });
    }
    if let Some(a) = repr.atomic_eth {
        value["atomic_eth"] = json!({
            "va": hex(a.va), "rkey": hex(a.rkey.into()),
            "swap_add": hex(a.swap_add), "compare": hex(a.compare),
        });
    }
    if let Some(aeth) = repr.aeth {
        value["aeth"] = match aeth.syndrome {
            Syndrome::Ack { credits } => {
                json!({ "type": "ACK", "credits": credits.credits(), "msn": aeth.msn })
            }
            Syndrome::RnrNak { timer } => {
                json!({ "type": "RNR_NAK", "timer": timer.code(), "micros": timer.micros(), "msn": aeth.msn })
            }
            Syndrome::Nak(code) => {
                json!({ "type": "NAK", "code": code.to_string(), "msn": aeth.msn })
            }
            Syndrome::Reserved(raw) => json!({ "type": "RESERVED", "raw": raw, "msn": aeth.msn }),
        };
    }
    if let Some(ack) = repr.atomic_ack_eth {
        value["atomic_ack_eth"] = json!({ "orig_data": hex(ack.orig_data) });
    }
    if let Some(imm) = repr.immdt {
        value["imm_data"] = json!(hex(imm.imm_data.into()));
    }
    if let Some(ieth) = repr.ieth {
        value["ieth"] = json!({ "rkey": hex(ieth.rkey.into()) });
    }
    value
}

fn hex(value: u64) -> String {
    format!("{value:#x}")
}

/// Adds a NIC's counters to a result: every counter by name (`counters`, which includes the
/// drops), every ingress drop by reason (`drops`), and the totals a reader looks for first:
/// everything dropped, NAKs and RNR NAKs each way, duplicate requests, retransmissions; and the
/// backend's own counters (`backend`: what it dropped before the engine saw it, such as frames
/// the kernel dropped for a full ring). Counters added to `Stats` or `BackendStats` appear here
/// without a change.
pub(crate) fn add_counters(value: &mut Value, stats: &roce_core::Stats, backend: &BackendStats) {
    let map = |items: &mut dyn Iterator<Item = (&'static str, u64)>| {
        Value::Object(items.map(|(name, n)| (name.to_owned(), json!(n))).collect())
    };
    value["counters"] = map(&mut stats.counters());
    value["drops"] = map(&mut stats.drop_reasons());
    value["rx_dropped"] = json!(stats.rx_dropped());
    value["naks_sent"] = json!(stats.tx_nak_seq_err + stats.tx_naks_other);
    value["naks_received"] = json!(stats.rx_nak_seq_err + stats.rx_naks_other);
    value["rnr_naks_sent"] = json!(stats.tx_rnr_naks);
    value["rnr_naks_received"] = json!(stats.rx_rnr_naks);
    value["duplicates"] = json!(stats.rx_duplicate_requests);
    value["retransmitted_packets"] = json!(stats.retransmitted_packets);
    value["rx_icrc_errors"] = json!(stats.rx_icrc_errors);
    value["rx_icrc_id_solved"] = json!(stats.rx_icrc_id_solved);
    value["backend"] = map(&mut backend.counters().into_iter());
    value["backend_rx_dropped"] = json!(backend.rx_dropped());
}

/// A NIC's counters as text (`--stats`): the totals, then every counter that is not 0, the
/// backend's among them.
pub(crate) fn stats_text(stats: &roce_core::Stats, backend: &BackendStats) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let drops: Vec<String> = stats
        .drop_reasons()
        .filter(|&(_, n)| n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let _ = writeln!(
        out,
        " dropped: {}{}",
        stats.rx_dropped(),
        if drops.is_empty() {
            String::new()
        } else {
            format!(" ({})", drops.join(", "))
        }
    );
    let _ = writeln!(
        out,
        " NAKs sent {}, received {}; RNR NAKs sent {}, received {}; duplicates {}; retransmitted {}",
        stats.tx_nak_seq_err + stats.tx_naks_other,
        stats.rx_nak_seq_err + stats.rx_naks_other,
        stats.tx_rnr_naks,
        stats.rx_rnr_naks,
        stats.rx_duplicate_requests,
        stats.retransmitted_packets
    );
    let _ = writeln!(out, " counters (those not listed are 0):");
    for (name, n) in stats.counters().filter(|&(_, n)| n > 0) {
        let _ = writeln!(out, "   {name:<28} {n}");
    }
    for (name, n) in backend.counters().into_iter().filter(|&(_, n)| n > 0) {
        let _ = writeln!(out, "   backend {:<20} {n}", name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_and_drop_reason_is_listed() {
        let mut stats = roce_core::Stats::default();
        stats.rx_unknown_qp = 3;
        stats.tx_rnr_naks = 2;
        stats.tx_nak_seq_err = 1;
        stats.tx_naks_other = 4;
        let mut backend = BackendStats::default();
        backend.rx_ring_full = 7;
        let mut value = json!({});
        add_counters(&mut value, &stats, &backend);
        let counters = value["counters"].as_object().unwrap();
        assert_eq!(counters.len(), stats.counters().count());
        assert_eq!(counters["tx_rnr_naks"], 2);
        let drops = value["drops"].as_object().unwrap();
        assert_eq!(drops.len(), stats.drop_reasons().count());
        assert_eq!(drops["rx_unknown_qp"], 3);
        assert_eq!(value["rx_dropped"], 3);
        assert_eq!(value["naks_sent"], 5);
        assert_eq!(value["rnr_naks_sent"], 2);
        assert_eq!(value["backend"]["rx_ring_full"], 7);
        assert_eq!(value["backend"]["rx_ipv4_fragments"], 0);
        assert_eq!(value["backend_rx_dropped"], 7);
        let text = stats_text(&stats, &backend);
        assert!(text.contains(" dropped: 3 (rx_unknown_qp 3)"), "{text}");
        assert!(text.contains("backend rx_ring_full"), "{text}");
        assert!(!text.contains("backend rx_ipv4_fragments"), "{text}");
        assert!(text.contains("tx_rnr_naks"), "{text}");
        assert!(!text.contains("rx_packets"), "{text}");
    }
}
