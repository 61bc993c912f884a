//! Counters, in the spirit of rxe's hw counters: traffic, protocol events, and one counter per
//! reason a datagram is dropped.

macro_rules! stats {
    (
        events { $( $(#[doc = $edoc:literal])+ $event:ident, )* }
        drops { $( $(#[doc = $ddoc:literal])+ $drop:ident, )* }
    ) => {
        /// The NIC's counters. All only ever increase.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct Stats {
            $( $(#[doc = $edoc])+ pub $event: u64, )*
            $( $(#[doc = $ddoc])+ pub $drop: u64, )*
        }

        impl Stats {
            /// Every counter by name, in declaration order (for reports and JSON).
            pub fn counters(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                [$( (stringify!($event), self.$event), )* $( (stringify!($drop), self.$drop), )*]
                    .into_iter()
            }

            /// The counters of datagrams dropped at ingress, one per reason, by name.
            pub fn drop_reasons(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                [$( (stringify!($drop), self.$drop), )*].into_iter()
            }

            /// Every datagram dropped for any reason.
            pub fn rx_dropped(&self) -> u64 {
                0 $( + self.$drop )*
            }
        }
    };
}

stats! {
    events {
        /// Datagrams sent.
        tx_packets,
        /// UDP payload bytes sent.
        tx_bytes,
        /// Datagrams received (all, before any check).
        rx_packets,
        /// UDP payload bytes received.
        rx_bytes,
        /// Datagrams that passed every ingress check: handed to a QP's responder or completer, or
        /// a CNP. `rx_accepted + rx_dropped() == rx_packets` always holds; what a QP then does
        /// with a packet (duplicate, out of sequence, …) has counters of its own.
        rx_accepted,
        /// Request packets sent again: by go-back-N, or alone under selective repeat.
        retransmitted_packets,
        /// Local ACK timeouts that fired.
        retransmit_timeouts,
        /// RNR NAKs received.
        rx_rnr_naks,
        /// RNR NAKs sent.
        tx_rnr_naks,
        /// PSN-sequence-error NAKs received.
        rx_nak_seq_err,
        /// PSN-sequence-error NAKs sent.
        tx_nak_seq_err,
        /// Other NAKs received (invalid request, remote access, remote operational).
        rx_naks_other,
        /// Other NAKs sent.
        tx_naks_other,
        /// ACKs sent (including atomic ACKs).
        tx_acks,
        /// ACKs received.
        rx_acks,
        /// Duplicate requests received (re-ACKed or replayed, not executed again).
        rx_duplicate_requests,
        /// Out-of-sequence requests dropped after the one NAK.
        rx_out_of_sequence,
        /// Responses that named no outstanding request (late duplicates), ignored.
        rx_ghost_responses,
        /// READ responses of the wrong length or position for the READ they name (a full MTU
        /// unless it ends the READ, exactly the rest if it does), dropped before they landed.
        rx_bad_responses,
        /// Implied NAKs: a response that shows earlier responses were lost.
        implied_naks,
        /// Selective repeat: requests past ePSN kept by the responder until the hole fills.
        rx_held_out_of_order,
        /// Selective repeat: dropped, a request more than twice the BDP cap past ePSN (a
        /// requester that ignores BDP-FC).
        rx_beyond_reorder_window,
        /// Selective repeat: NACKs sent (ePSN and the PSN that arrived, `qp/selective.rs`).
        tx_sacks,
        /// Selective repeat: NACKs received.
        rx_sacks,
        /// Selective repeat: dropped, a NACK naming a PSN not in flight (before its ePSN, or
        /// never sent).
        rx_bad_sacks,
        /// Completions dropped because their CQ was full.
        cq_overflows,
        /// Accepted with an IPv4 identification that the backend hid (UDP sockets) and that was
        /// neither the datagram's place in its receive batch nor 0: solved from the ICRC
        /// (`roce_wire::icrc::ipv4_id`). Every packet from rxe on the UDP backend counts here. A
        /// corrupt packet passes this check one time in 2^16.
        rx_icrc_id_solved,
        /// Accepted with the ICRC check off.
        rx_icrc_skipped,
        /// Congestion notification packets received.
        rx_cnps,
        /// Congestion notification packets sent (DCQCN notification point).
        tx_cnps,
        /// CE-marked datagrams of a UD QP that sent no CNP because CNPs to as many senders as
        /// it keeps were due already (`cc::np::UD_SENDERS`).
        rx_ce_ud_cnps_full,
        /// DCQCN rate decreases (CNPs that cut a QP's rate).
        rate_decreases,
        /// DCQCN rate-increase events (timer and byte counter).
        rate_increases,
        /// Dropped: a UC message whose packets did not arrive in order, or that could not land.
        rx_uc_dropped_messages,
        /// Dropped: a UD datagram with no receive WR posted.
        rx_no_recv_wr,
        /// Transmits not written because the caller's buffer was too small.
        tx_buffer_too_small,
        /// Management datagrams QP 1 took: for the engine's CM, or for an agent the application
        /// registered (`Nic::poll_gsi`).
        rx_gsi_mads,
        /// Get and Set MADs no agent takes, answered GetResp with status 0x000c (unsupported
        /// method/attribute) as ib_mad answers them (`generate_unmatched_resp`); counted in
        /// `rx_accepted`.
        gsi_unsupported_replies,
        /// Management datagrams QP 1 sent.
        tx_gsi_mads,
        /// CM MADs (class CM, version 2) QP 1 handed to the engine's CM.
        cm_rx_mads,
        /// Dropped by the CM: a CM MAD that does not parse.
        cm_rx_malformed,
        /// Dropped by the CM: a message naming no connection of ours (a DREQ still gets a DREP).
        cm_rx_unmatched,
        /// Dropped by the CM: a message its connection's state does not take.
        cm_rx_unexpected,
        /// CM messages received again (REQ, REP, RTU, DREQ, DREP, MRA): answered as ib_cm
        /// answers duplicates, or ignored.
        cm_rx_duplicates,
        /// REQs for a service ID nobody listens on (rejected INVALID_SERVICE_ID), at once or
        /// once held for `NicConfig::cm_listen_grace` in vain.
        cm_rx_no_listener,
        /// REQs for a service ID nobody listened on yet, held a moment for a listener
        /// (`NicConfig::cm_listen_grace`); those still without one are counted again under
        /// `cm_rx_no_listener`.
        cm_rx_req_held,
        /// RDMA IP CM REQs whose `cma_hdr` does not parse (rejected CONSUMER_DEFINED).
        cm_rx_bad_private_data,
        /// REQs, REPs and DREQs sent again after their response timeout.
        cm_retransmits,
        /// CM events lost because their queue was full (`cm::MAX_CM_EVENTS`).
        cm_event_overflows,
        /// Requests refused for a memory window's R_Key (answered with a remote access error
        /// NAK, or an invalid-request NAK for a SEND with invalidate): the window unbound or
        /// invalidated, of another PD or (type 2) another QP, without the rights, or the
        /// access outside its bounds. Nothing of such a request lands.
        rx_mw_access_refused,
        /// Asynchronous events raised (`Nic::poll_event`), including those lost.
        async_events,
        /// Asynchronous events lost because the queue was full (`NicConfig::max_async_events`).
        async_event_overflows,
    }
    drops {
        /// Dropped: shorter than a header needs.
        rx_truncated,
        /// Dropped: BTH transport version not 0.
        rx_bad_tver,
        /// Dropped: opcode not supported.
        rx_unsupported_opcode,
        /// Dropped: pad count larger than the payload.
        rx_bad_pad,
        /// Dropped: wrong payload length for the opcode.
        rx_bad_length,
        /// Dropped: ICRC mismatch.
        rx_icrc_errors,
        /// Dropped: the BTH flags an INT header (HPCC's, `roce_wire::int`) that is cut short or
        /// counts more than five hops.
        rx_int_malformed,
        /// Dropped: the BTH flags an INT header but the NIC does not run HPCC, so the bytes
        /// after the BTH cannot be read as their opcode says.
        rx_int_unexpected,
        /// Dropped: destination address is not one of ours.
        rx_dst_addr_mismatch,
        /// Dropped: destination QP 0 (the SMI: there is no subnet manager on RoCE).
        rx_special_qp,
        /// Dropped: a management datagram for QP 1 while its inbox was full, or a Get or Set to
        /// answer while answers held half its send queue.
        rx_gsi_queue_full,
        /// Dropped: a MAD for QP 1 whose base version is not 1 (ib_mad's `validate_mad`).
        rx_gsi_bad_base_version,
        /// Dropped: a subnet management MAD (LID-routed or directed-route class) for QP 1:
        /// ib_mad takes those on QP 0 only (`validate_mad`), and RoCE has no QP 0.
        rx_gsi_smp_class,
        /// Dropped: a CM MAD other than ClassPortInfo whose method is not Send (`validate_mad`).
        rx_gsi_cm_method,
        /// Dropped: a MAD of a class no agent takes that is not a Get or Set (those are
        /// answered: `gsi_unsupported_replies`).
        rx_gsi_no_agent,
        /// Dropped: no such QP.
        rx_unknown_qp,
        /// Dropped: the opcode's transport is not the QP's type.
        rx_wrong_transport,
        /// Dropped: the QP's state does not accept this packet.
        rx_qp_not_ready,
        /// Dropped: source or destination address is not the QP's path.
        rx_path_mismatch,
        /// Dropped: P_Key mismatch.
        rx_pkey_mismatch,
        /// Dropped: Q_Key mismatch (UD).
        rx_qkey_mismatch,
    }
}
