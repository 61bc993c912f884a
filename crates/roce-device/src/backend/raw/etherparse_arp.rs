//! ARP for IPv4 over Ethernet, through etherparse's `ArpEthIpv4Packet`.

use std::net::Ipv4Addr;

use etherparse::{
    ArpEthIpv4Packet, ArpOperation, EtherType, Ethernet2Header, NetSlice, SlicedPacket,
};

/// The fields of an ARP packet that matter here.
pub(super) struct Arp {
    pub(super) is_request: bool,
    pub(super) sender_mac: [u8; 6],
    pub(super) sender_ip: Ipv4Addr,
    pub(super) target_ip: Ipv4Addr,
}

pub(super) fn parse_arp(frame: &[u8]) -> Option<Arp> {
    let sliced = SlicedPacket::from_ethernet(frame).ok()?;
    let Some(NetSlice::Arp(arp)) = sliced.net else {
        return None;
    };
    let arp = arp.to_packet().try_eth_ipv4().ok()?;
    Some(Arp {
        is_request: arp.operation == ArpOperation::REQUEST,
        sender_mac: arp.sender_mac,
        sender_ip: arp.sender_ipv4_addr(),
        target_ip: arp.target_ipv4_addr(),
    })
}

pub(super) fn arp_request(mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    frame([0xff; 6], mac, ArpOperation::REQUEST, ip, [0; 6], target)
}

pub(super) fn arp_reply(mac: [u8; 6], ip: Ipv4Addr, to_mac: [u8; 6], to_ip: Ipv4Addr) -> Vec<u8> {
    frame(to_mac, mac, ArpOperation::REPLY, ip, to_mac, to_ip)
}

fn frame(
    dst: [u8; 6],
    src: [u8; 6],
    operation: ArpOperation,
    ip: Ipv4Addr,
    target_mac: [u8; 6],
    target: Ipv4Addr,
) -> Vec<u8> {
    let eth = Ethernet2Header {
        source: src,
        destination: dst,
        ether_type: EtherType::ARP,
    };
    let arp = ArpEthIpv4Packet {
        operation,
        sender_mac: src,
        sender_ipv4: ip.octets(),
        target_mac,
        target_ipv4: target.octets(),
    };
    let mut out = eth.to_bytes().to_vec();
    out.extend_from_slice(&arp.to_bytes());
    // Ethernet's minimum frame (60 bytes before the FCS).
    out.resize(60, 0);
    out
}
