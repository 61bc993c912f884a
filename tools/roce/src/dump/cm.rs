//! The `cm` object of `roce dump --json`: the CM MAD a GSI packet (a UD SEND to QP 1) carries.
//! 64-bit values are hex strings, as in the `roce` object.

use roce_wire::frame::Frame;
use roce_wire::mad::cm::Message;
use roce_wire::mad::cma::{self, ServiceId};
use roce_wire::mad::{gsi, req};
use roce_wire::{CmMad, ParseError};
use serde_json::{Value, json};

/// The `cm` object of a frame, or `None` when it carries no MAD. A MAD that does not parse as a
/// CM MAD is `{"error": "..."}`.
pub(crate) fn of_frame(frame: &Frame<'_>) -> Option<Value> {
    let packet = frame.roce()?.ok()?;
    let mad = gsi::mad_of(&packet)?;
    Some(match CmMad::parse(mad) {
        Ok(mad) => cm_mad(&mad),
        Err(err) => error(err),
    })
}

fn error(err: ParseError) -> Value {
    json!({ "error": err.to_string() })
}

fn hex(value: u64) -> String {
    format!("{value:#x}")
}

/// Every field of a CM MAD that a script may select on.
pub(crate) fn cm_mad(mad: &CmMad) -> Value {
    let h = &mad.header;
    let mut value = json!({
        "message": mad.message.attr().name(),
        "tid": hex(h.tid),
        "method": h.method,
        "status": h.status,
        "attr_id": h.attr_id,
        "attr_mod": h.attr_mod,
        "local_comm_id": hex(mad.message.local_comm_id().into()),
    });
    let fields = match &mad.message {
        Message::Req(m) => req_fields(m),
        Message::Mra(m) => json!({
            "remote_comm_id": hex(m.remote_comm_id.into()),
            "message_mraed": m.message_mraed,
            "service_timeout": m.service_timeout,
        }),
        Message::Rej(m) => json!({
            "remote_comm_id": hex(m.remote_comm_id.into()),
            "message_rejected": m.message_rejected,
            "reason": u16::from(m.reason),
            "reason_text": m.reason.text(),
            "reject_info_length": m.reject_info_length,
        }),
        Message::Rep(m) => json!({
            "remote_comm_id": hex(m.remote_comm_id.into()),
            "local_qpn": m.local_qpn.value(),
            "starting_psn": m.starting_psn.value(),
            "responder_resources": m.responder_resources,
            "initiator_depth": m.initiator_depth,
            "target_ack_delay": m.target_ack_delay,
            "failover_accepted": m.failover_accepted,
            "end_to_end_flow_control": m.end_to_end_flow_control,
            "rnr_retry_count": m.rnr_retry_count,
            "srq": m.srq,
            "local_ca_guid": hex(m.local_ca_guid),
        }),
        Message::Rtu(m) => json!({ "remote_comm_id": hex(m.remote_comm_id.into()) }),
        Message::Dreq(m) => json!({
            "remote_comm_id": hex(m.remote_comm_id.into()),
            "remote_qpn": m.remote_qpn.value(),
        }),
        Message::Drep(m) => json!({ "remote_comm_id": hex(m.remote_comm_id.into()) }),
        Message::SidrReq(m) => json!({
            "partition_key": m.partition_key,
            "service_id": format!("{:#018x}", m.service_id),
        }),
        Message::SidrRep(m) => json!({
            "status": u8::from(m.status),
            "qpn": m.qpn.value(),
            "q_key": hex(m.q_key.into()),
            "service_id": format!("{:#018x}", m.service_id),
        }),
    };
    if let (Value::Object(map), Value::Object(more)) = (&mut value, fields) {
        map.extend(more);
    }
    value
}

fn req_fields(m: &req::Repr) -> Value {
    let sid = ServiceId(m.service_id);
    let p = &m.primary_path;
    let cma = cma::Packet::new_checked(&m.private_data[..]).and_then(|h| cma::Repr::parse(&h));
    json!({
        "service_id": format!("{:#018x}", m.service_id),
        "rdma_cm": sid.is_ip_cm().then(|| json!({
            "port_space": sid.port_space().name().map_or_else(|| hex(sid.port_space().0.into()), str::to_owned),
            "port": sid.port(),
        })),
        "local_ca_guid": hex(m.local_ca_guid),
        "local_qpn": m.local_qpn.value(),
        "starting_psn": m.starting_psn.value(),
        "transport_service_type": m.transport_service_type,
        "path_mtu": req::mtu_bytes(m.path_mtu),
        "partition_key": m.partition_key,
        "responder_resources": m.responder_resources,
        "initiator_depth": m.initiator_depth,
        "retry_count": m.retry_count,
        "rnr_retry_count": m.rnr_retry_count,
        "local_cm_response_timeout": m.local_cm_response_timeout,
        "remote_cm_response_timeout": m.remote_cm_response_timeout,
        "max_cm_retries": m.max_cm_retries,
        "srq": m.srq,
        "primary_path": {
            "local_gid": p.local_gid.to_string(),
            "remote_gid": p.remote_gid.to_string(),
            "flow_label": p.flow_label,
            "traffic_class": p.traffic_class,
            "hop_limit": p.hop_limit,
            "sl": p.sl,
            "local_ack_timeout": p.local_ack_timeout,
        },
        "cma": match cma {
            Ok(hdr) => json!({ "src": hdr.src.to_string(), "dst": hdr.dst.to_string(), "src_port": hdr.port }),
            Err(err) => error(err),
        },
    })
}
