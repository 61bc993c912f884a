/*
 * A UD receive as middleware reads it: a UD QP sends to itself through the NIC's own IPv4
 * address (GID 1). The receive's completion says IBV_WC_GRH, the sender's QP, and in `sl` the
 * RoCE L3 header type as mlx5 reports it (2: IPv4); the 40-byte GRH area holds 20 zero bytes
 * and the IPv4 header. Then what UCX's ud_verbs does with them (uct_ud_iface_check_grh): with
 * `sl & 7 == 2` it takes the area's last 4 bytes as the destination and looks up
 * ::ffff:a.b.c.d among the device's GIDs. The same through an extended CQ (ibv_wc_read_sl) and
 * ibv_init_ah_from_wc. Prints "ok <what>" / "FAIL <what>" per check; the exit status is the
 * number of failures.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "check.h"

#define QKEY 0x11111111
#define GRH 40

static int wait_for(struct ibv_cq *cq, int n, struct ibv_wc *wcs)
{
	int got = 0;
	for (long spins = 0; got < n && spins < 50000000L; spins++) {
		int r = ibv_poll_cq(cq, n - got, wcs + got);
		if (r < 0)
			return -1;
		got += r;
	}
	return got;
}

/* UCX 1.13's check of a received datagram's destination, given the GID table's entry 1. */
static int ucx_would_keep(const unsigned char *area, uint8_t sl, const union ibv_gid *gid)
{
	union ibv_gid dgid;
	if ((sl & 7) == 2) {
		memset(&dgid, 0, sizeof(dgid));
		dgid.raw[10] = 0xff;
		dgid.raw[11] = 0xff;
		memcpy(&dgid.raw[12], area + GRH - 4, 4);
	} else {
		memcpy(&dgid, area + GRH - 16, 16);
	}
	return memcmp(&dgid, gid, sizeof(dgid)) == 0;
}

/* Sends `len` bytes of `msg` to the QP itself; the receive lands at `slot`. */
static int post_pair(struct ibv_qp *qp, struct ibv_ah *ah, struct ibv_mr *mr, char *slot,
		     const char *msg, uint32_t len, uint64_t id)
{
	struct ibv_sge rsge = { .addr = (uintptr_t)slot, .length = 512, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = id, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;
	struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id + 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_wr;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qp->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	return ibv_post_recv(qp, &rwr, &bad_rwr) == 0 && ibv_post_send(qp, &wr, &bad_wr) == 0;
}

static int ud_qp_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return 0;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	return !ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open_device");
	if (!ctx)
		return failures;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(pd && mr && cq && qp, "a PD, a region, a CQ and a UD QP");
	CHECK(qp && ud_qp_ready(qp), "the UD QP in RTS");

	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, "query_gid 1");
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	ah_attr.grh.dgid = gid;
	ah_attr.grh.sgid_index = 1;
	ah_attr.grh.hop_limit = 64;
	struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
	CHECK(ah != NULL, "create_ah to our own IPv4 GID");

	/* The area is filled with 0xee first: the NIC must write every byte of it. */
	memset(buf, 0xee, sizeof(buf));
	strcpy(buf + 3072, "a UD datagram");
	CHECK(post_pair(qp, ah, mr, buf, buf + 3072, 14, 10), "post a receive and a send to ourselves");
	struct ibv_wc wcs[2];
	int got = wait_for(cq, 2, wcs);
	CHECK(got == 2, "the send and the receive complete");
	struct ibv_wc *recv = got == 2 ? (wcs[0].opcode == IBV_WC_RECV ? &wcs[0] : &wcs[1]) : NULL;
	if (!recv)
		return failures;
	unsigned char *area = (unsigned char *)buf;
	CHECK(recv->status == IBV_WC_SUCCESS && recv->wr_id == 10 && recv->byte_len == GRH + 14,
	      "the receive: success, 40 + 14 bytes");
	CHECK(recv->src_qp == qp->qp_num, "src_qp is the sender's QP");
	CHECK(recv->wc_flags & IBV_WC_GRH, "wc_flags has IBV_WC_GRH");
	CHECK((recv->sl & 7) == 2, "sl & 7 is 2: an IPv4 datagram (mlx5's L3 header type)");
	int zeroes = 1;
	for (int i = 0; i < 20; i++)
		zeroes &= area[i] == 0;
	CHECK(zeroes, "the first 20 bytes of the GRH area are zero");
	CHECK(area[20] == 0x45 && area[29] == 17, "an IPv4 header (UDP) at offset 20");
	CHECK(memcmp(area + 32, &gid.raw[12], 4) == 0 && memcmp(area + 36, &gid.raw[12], 4) == 0,
	      "its source and destination are our address");
	CHECK(memcmp(area + GRH, "a UD datagram", 14) == 0, "the data follows the area");
	CHECK(ucx_would_keep(area, recv->sl, &gid), "UCX's destination check keeps it");
	CHECK(!ucx_would_keep(area, 0, &gid), "... which it would not with sl 0 (as rxe says)");

	struct ibv_ah_attr reply;
	memset(&reply, 0, sizeof(reply));
	CHECK(ibv_init_ah_from_wc(ctx, 1, recv, (struct ibv_grh *)area, &reply) == 0 &&
		      reply.is_global && memcmp(&reply.grh.dgid, &gid, sizeof(gid)) == 0,
	      "init_ah_from_wc answers the sender");

	/* The same through an extended CQ. */
	struct ibv_cq_init_attr_ex cq_attr = {
		.cqe = 16,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SL,
	};
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cq_attr);
	CHECK(cqx != NULL, "create_cq_ex with IBV_WC_EX_WITH_SL");
	struct ibv_qp_init_attr init_x = init;
	init_x.send_cq = init_x.recv_cq = ibv_cq_ex_to_cq(cqx);
	struct ibv_qp *qpx = cqx ? ibv_create_qp(pd, &init_x) : NULL;
	CHECK(qpx && ud_qp_ready(qpx), "a second UD QP on it, in RTS");
	if (!qpx)
		return failures;
	memset(buf + 1024, 0xee, 512);
	CHECK(post_pair(qpx, ah, mr, buf + 1024, buf + 3072, 14, 20), "post a receive and a send");
	int seen = 0, sl = -1, flags = 0;
	struct ibv_poll_cq_attr pa = { 0 };
	for (long spins = 0; seen < 2 && spins < 50000000L; spins++) {
		int r = ibv_start_poll(cqx, &pa);
		if (r == ENOENT)
			continue;
		if (r)
			break;
		do {
			seen++;
			if (ibv_wc_read_opcode(cqx) == IBV_WC_RECV) {
				sl = ibv_wc_read_sl(cqx);
				flags = ibv_wc_read_wc_flags(cqx);
			}
		} while (seen < 2 && ibv_next_poll(cqx) == 0);
		ibv_end_poll(cqx);
	}
	CHECK(seen == 2, "both complete on the extended CQ");
	CHECK(sl >= 0 && (sl & 7) == 2 && (flags & IBV_WC_GRH), "ibv_wc_read_sl says IPv4 there too");

	CHECK(ibv_destroy_qp(qpx) == 0 && ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0 &&
		      ibv_destroy_ah(ah) == 0 && ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0 &&
		      ibv_dereg_mr(mr) == 0 && ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0,
	      "everything destroyed");
	ibv_free_device_list(list);
	return failures;
}
