/*
 * Inline data from memory no region covers, as libibverbs allows for IBV_SEND_INLINE: an RC QP
 * connected to itself through the NIC's own address sends from a buffer on the stack, with
 * ibv_post_send and with ibv_wr_set_inline_data, into a registered receive buffer. Prints
 * "ok <what>" / "FAIL <what>" per check; the exit status is the number of failures.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "check.h"

/* Waits for `n` completions; returns how many came, the last one in `*last`. */
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

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open_device");
	if (!ctx)
		return failures;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char landing[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, landing, sizeof(landing), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(pd && mr && cq && qp, "a PD, a region, a CQ and an RC QP");

	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, "query_gid 1");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int ok = !ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 5;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	ok = ok && !ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 5;
	a.max_rd_atomic = 1;
	ok = ok && !ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	CHECK(ok, "the QP connected to itself, in RTS");

	for (int i = 0; i < 2; i++) {
		struct ibv_sge rsge = { .addr = (uintptr_t)landing + 1024 * i, .length = 1024, .lkey = mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 100 + i, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;
		CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, "post_recv");
	}

	char on_stack[48];
	for (int i = 0; i < (int)sizeof(on_stack); i++)
		on_stack[i] = (char)(i * 7 + 1);
	/* No region covers on_stack: the lkey means nothing for an inline send. */
	struct ibv_sge sge = { .addr = (uintptr_t)on_stack, .length = sizeof(on_stack), .lkey = 0xdead };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *bad_wr;
	CHECK(ibv_post_send(qp, &wr, &bad_wr) == 0, "post_send inline from the stack");
	memset(on_stack, 0, sizeof(on_stack)); /* the bytes were taken at the post */

	struct ibv_wc wcs[4];
	int got = wait_for(cq, 2, wcs);
	CHECK(got == 2 && wcs[0].status == IBV_WC_SUCCESS && wcs[1].status == IBV_WC_SUCCESS,
	      "the send and its receive complete");
	int same = 1;
	for (int i = 0; i < 48; i++)
		same &= landing[i] == (char)(i * 7 + 1);
	CHECK(same, "the bytes of the stack landed");

	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	char second[16] = "inline-wr-api!!";
	ibv_wr_start(qpx);
	qpx->wr_id = 2;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, second, sizeof(second));
	CHECK(ibv_wr_complete(qpx) == 0, "wr_set_inline_data then wr_complete");
	got = wait_for(cq, 2, wcs);
	CHECK(got == 2 && wcs[0].status == IBV_WC_SUCCESS && wcs[1].status == IBV_WC_SUCCESS,
	      "the second send and its receive complete");
	CHECK(memcmp(landing + 1024, "inline-wr-api!!", 16) == 0, "the wr API's inline bytes landed");

	static char too_long[4096];
	struct ibv_sge big = { .addr = (uintptr_t)too_long, .length = sizeof(too_long), .lkey = 0 };
	wr.sg_list = &big;
	bad_wr = NULL;
	struct ibv_sge rsge3 = { .addr = (uintptr_t)landing + 2048, .length = 2048, .lkey = mr->lkey };
	struct ibv_recv_wr rwr3 = { .wr_id = 103, .sg_list = &rsge3, .num_sge = 1 }, *bad_rwr3;
	CHECK(ibv_post_recv(qp, &rwr3, &bad_rwr3) == 0, "a receive for a message that must not come");
	memset(too_long, 0x77, sizeof(too_long));
	CHECK(ibv_post_send(qp, &wr, &bad_wr) == EINVAL && bad_wr == &wr, "inline past max_inline: EINVAL");
	int quiet = 1;
	for (long spins = 0; spins < 2000000L && quiet; spins++)
		quiet = ibv_poll_cq(cq, 4, wcs) == 0;
	int untouched = 1;
	for (int i = 2048; i < 4096; i++)
		untouched &= landing[i] == 0;
	CHECK(quiet && untouched, "... and nothing was sent: no completion, the receive buffer untouched");

	CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0 && ibv_dereg_mr(mr) == 0 &&
		      ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0,
	      "everything destroyed");
	ibv_free_device_list(list);
	return failures;
}
