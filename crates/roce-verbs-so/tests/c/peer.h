/* What victim.c and window.c share: their RC QPs, the peer's line on standard input (its QP numbers and its
 * PSN), and this program's RC QPs taken to RTR and RTS towards them through GID 1, the ::ffff:
 * form of the peer's IPv4 address. */
#ifndef ROCE_TESTS_PEER_H
#define ROCE_TESTS_PEER_H

#include <arpa/inet.h>
#include <stdio.h>
#include <infiniband/verbs.h>

/* Creates `n` RC QPs on `pd` and `cq` into `qp`, each with `send_wr` send WRs, and takes them
 * to INIT with `access`: NULL, or the step that failed. */
static const char *create_qps(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_qp **qp, int n,
			      unsigned send_wr, unsigned access)
{
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr init = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = send_wr, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		};
		qp[i] = ibv_create_qp(pd, &init);
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access };
		if (!qp[i] || ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
							   IBV_QP_ACCESS_FLAGS))
			return "qp";
	}
	return NULL;
}

/* Connects `qp[0..n]` (in INIT) to the peer at `peer_ip`, this side starting at `psn`: NULL,
 * or the step that failed. */
static const char *connect_to_peer(struct ibv_qp **qp, int n, const char *peer_ip, unsigned psn)
{
	unsigned peer[8], peer_psn;
	if (n > 8)
		return "too many QPs";
	for (int i = 0; i < n; i++)
		if (scanf("%u", &peer[i]) != 1)
			return "peer line";
	if (scanf("%u", &peer_psn) != 1)
		return "peer line";
	union ibv_gid dgid = { .raw = { 0 } };
	dgid.raw[10] = dgid.raw[11] = 0xff;
	if (inet_pton(AF_INET, peer_ip, &dgid.raw[12]) != 1)
		return "peer address";
	for (int i = 0; i < n; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer[i],
			.rq_psn = peer_psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
			.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = dgid, .sgid_index = 1, .hop_limit = 64 } },
		};
		if (ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			return "rtr";
		struct ibv_qp_attr r = { .qp_state = IBV_QPS_RTS, .sq_psn = psn, .timeout = 14, .retry_cnt = 7,
					 .rnr_retry = 7, .max_rd_atomic = 1 };
		if (ibv_modify_qp(qp[i], &r, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
			return "rts";
	}
	return NULL;
}

#endif
