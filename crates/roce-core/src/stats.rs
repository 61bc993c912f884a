//! Counters, in the spirit of rxe's hw counters: traffic, protocol events, and one counter per
//! reason a datagram is dropped.

/// The NIC's counters. All only ever increase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Datagrams sent.
    pub tx_packets: u64,
    /// UDP payload bytes sent.
    pub tx_bytes: u64,
    /// Datagrams received (all, before any check).
    pub rx_packets: u64,
    /// UDP payload bytes received.
    pub rx_bytes: u64,
    /// Datagrams that passed every ingress check: handed to a QP's responder or completer, or
    /// a CNP. `rx_accepted + rx_dropped() == rx_packets` always holds; what a QP then does
    /// with a packet (duplicate, out of sequence, …) has counters of its own.
    pub rx_accepted: u64,

    /// Request packets sent again by go-back-N.
    pub retransmitted_packets: u64,
    /// Local ACK timeouts that fired.
    pub retransmit_timeouts: u64,
    /// RNR NAKs received.
    pub rx_rnr_naks: u64,
    /// RNR NAKs sent.
    pub tx_rnr_naks: u64,
    /// PSN-sequence-error NAKs received.
    pub rx_nak_seq_err: u64,
    /// PSN-sequence-error NAKs sent.
    pub tx_nak_seq_err: u64,
    /// Other NAKs received (invalid request, remote access, remote operational).
    pub rx_naks_other: u64,
    /// Other NAKs sent.
    pub tx_naks_other: u64,
    /// ACKs sent (including atomic ACKs).
    pub tx_acks: u64,
    /// ACKs received.
    pub rx_acks: u64,
    /// Duplicate requests received (re-ACKed or replayed, not executed again).
    pub rx_duplicate_requests: u64,
    /// Out-of-sequence requests dropped after the one NAK.
    pub rx_out_of_sequence: u64,
    /// Responses that named no outstanding request (late duplicates), ignored.
    pub rx_ghost_responses: u64,
    /// Implied NAKs: a response that shows earlier responses were lost.
    pub implied_naks: u64,
    /// Completions dropped because their CQ was full.
    pub cq_overflows: u64,

    /// Dropped: shorter than a header needs.
    pub rx_truncated: u64,
    /// Dropped: BTH transport version not 0.
    pub rx_bad_tver: u64,
    /// Dropped: opcode not supported.
    pub rx_unsupported_opcode: u64,
    /// Dropped: pad count larger than the payload.
    pub rx_bad_pad: u64,
    /// Dropped: wrong payload length for the opcode.
    pub rx_bad_length: u64,
    /// Dropped: ICRC mismatch.
    pub rx_icrc_errors: u64,
    /// Accepted without a full ICRC check: the backend hid the IPv4 ID and ID 0 did not match.
    pub rx_icrc_unverifiable: u64,
    /// Accepted with the ICRC check off.
    pub rx_icrc_skipped: u64,
    /// Dropped: destination address is not one of ours.
    pub rx_dst_addr_mismatch: u64,
    /// Dropped: destination QP 0, or QP 1 (the GSI is not implemented).
    pub rx_special_qp: u64,
    /// Dropped: no such QP.
    pub rx_unknown_qp: u64,
    /// Dropped: the opcode's transport is not the QP's type.
    pub rx_wrong_transport: u64,
    /// Dropped: the QP's state does not accept this packet.
    pub rx_qp_not_ready: u64,
    /// Dropped: source or destination address is not the QP's path.
    pub rx_path_mismatch: u64,
    /// Dropped: P_Key mismatch.
    pub rx_pkey_mismatch: u64,
    /// Dropped: Q_Key mismatch (UD).
    pub rx_qkey_mismatch: u64,
    /// Congestion notification packets received.
    pub rx_cnps: u64,
    /// Congestion notification packets sent (DCQCN notification point).
    pub tx_cnps: u64,
    /// DCQCN rate decreases (CNPs that cut a QP's rate).
    pub rate_decreases: u64,
    /// DCQCN rate-increase events (timer and byte counter).
    pub rate_increases: u64,
    /// Dropped: a UC message whose packets did not arrive in order, or that could not land.
    pub rx_uc_dropped_messages: u64,
    /// Dropped: a UD datagram with no receive WR posted.
    pub rx_no_recv_wr: u64,
    /// Transmits not written because the caller's buffer was too small.
    pub tx_buffer_too_small: u64,
}

impl Stats {
    /// Every datagram dropped for any reason.
    pub fn rx_dropped(&self) -> u64 {
        self.rx_truncated
            + self.rx_bad_tver
            + self.rx_unsupported_opcode
            + self.rx_bad_pad
            + self.rx_bad_length
            + self.rx_icrc_errors
            + self.rx_dst_addr_mismatch
            + self.rx_special_qp
            + self.rx_unknown_qp
            + self.rx_wrong_transport
            + self.rx_qp_not_ready
            + self.rx_path_mismatch
            + self.rx_pkey_mismatch
            + self.rx_qkey_mismatch
    }
}
