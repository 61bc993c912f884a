/* Error paths of roce-emu's libibverbs.so.1, from C, through the public API of Debian's
 * <infiniband/verbs.h>. Each CHECK prints "ok <what>" or "FAIL <what>"; the exit status is the
 * number of failures. Where a call is refused, the test also checks that nothing happened
 * (the caller's struct is untouched, the QP state did not change). Run by tests/errors.rs
 * with ROCE_VERBS_IP set. */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "check.h"

int main(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 1 && list[0] && !list[1], "one device");
	if (!list || n != 1)
		return 100;

	struct ibv_device fake_dev;
	memset(&fake_dev, 0, sizeof(fake_dev));
	errno = 0;
	CHECK(!ibv_open_device(&fake_dev) && errno == EINVAL, "open_device of a device not ours: EINVAL");
	errno = 0;
	CHECK(!ibv_get_device_name(&fake_dev) && errno == EINVAL, "get_device_name of a device not ours: EINVAL");

	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx != NULL, "open_device");
	if (!ctx)
		return 100;

	struct ibv_port_attr port;
	memset(&port, 0xab, sizeof(port));
	CHECK(ibv_query_port(ctx, 2, &port) == EINVAL, "query_port of port 2: EINVAL");
	CHECK(((unsigned char *)&port)[0] == 0xab && port.link_layer == 0xab, "... and the attributes untouched");
	CHECK(ibv_query_port(ctx, 1, &port) == 0 && port.state == IBV_PORT_ACTIVE, "query_port 1");

	/* ibv_query_device_ex through verbs_context.query_device_ex, as rxe's provider answers
	 * it (libibverbs' fallback without that op would leave every extended field 0). */
	struct ibv_device_attr_ex ex;
	struct ibv_device_attr plain;
	memset(&ex, 0xab, sizeof(ex));
	CHECK(ibv_query_device(ctx, &plain) == 0 && ibv_query_device_ex(ctx, NULL, &ex) == 0,
	      "query_device_ex");
	CHECK(ex.phys_port_cnt_ex == 1 && ex.orig_attr.phys_port_cnt == 1, "... phys_port_cnt_ex 1");
	CHECK(ex.device_cap_flags_ex == plain.device_cap_flags && ex.comp_mask == 0 &&
	      ex.max_dm_size == 0 && ex.odp_caps.general_caps == 0,
	      "... device_cap_flags_ex as device_cap_flags, what rxe lacks 0");
	CHECK(ex.orig_attr.max_cqe == plain.max_cqe && ex.orig_attr.max_mw == plain.max_mw &&
	      ex.orig_attr.vendor_id == 0xffffff, "... orig_attr as ibv_query_device");

	union ibv_gid gid;
	memset(&gid, 0xab, sizeof(gid));
	CHECK(ibv_query_gid(ctx, 1, 1024, &gid) == -1 && errno == EINVAL, "query_gid past the table: -1 EINVAL");
	CHECK(gid.raw[0] == 0xab, "... and the gid untouched");
	CHECK(ibv_query_gid(ctx, 1, 5, &gid) == 0 && gid.global.interface_id == 0, "an empty slot reads as zero");

	struct ibv_context fake_ctx;
	memset(&fake_ctx, 0, sizeof(fake_ctx));
	errno = 0;
	CHECK(!ibv_alloc_pd(&fake_ctx) && errno == EINVAL, "alloc_pd on a context not ours: EINVAL");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd != NULL, "alloc_pd");
	static char buf[8192];
	errno = 0;
	CHECK(!ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_ON_DEMAND) && errno == EINVAL, "reg_mr on-demand: EINVAL");
	/* rxe 6.1's ib_check_mr_access: a flag outside IB_ACCESS_SUPPORTED is EINVAL; MW_BIND is taken. */
	errno = 0;
	CHECK(!ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | (1 << 12)) && errno == EINVAL,
	      "reg_mr with an unknown access bit: EINVAL");
	struct ibv_mr *bind_mr = ibv_reg_mr(pd, buf, sizeof(buf),
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(bind_mr && bind_mr->lkey != 0, "reg_mr with IBV_ACCESS_MW_BIND");
	CHECK(bind_mr && ibv_dereg_mr(bind_mr) == 0, "... and dereg_mr of it");
	errno = 0;
	CHECK(!ibv_reg_mr(pd, NULL, 16, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "reg_mr of NULL: EINVAL");
	errno = 0;
	CHECK(!ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
	      "reg_mr remote write without local write: EINVAL");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && mr->addr == buf && mr->length == sizeof(buf) && mr->pd == pd, "reg_mr at the caller's address");
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd while a region uses it: EBUSY");
	struct ibv_mr fake_mr;
	memset(&fake_mr, 0, sizeof(fake_mr));
	CHECK(ibv_dereg_mr(&fake_mr) == EINVAL, "dereg_mr of a region not ours: EINVAL");

	errno = 0;
	CHECK(!ibv_create_cq(ctx, 0, NULL, NULL, 0) && errno == EINVAL, "create_cq of 0 entries: EINVAL");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq != NULL, "create_cq");
	CHECK(ibv_req_notify_cq(cq, 0) == EINVAL, "req_notify_cq without a channel: EINVAL");

	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr bad = init;
	bad.srq = (struct ibv_srq *)&fake_ctx;
	errno = 0;
	CHECK(!ibv_create_qp(pd, &bad) && errno == EINVAL, "create_qp with an SRQ not ours: EINVAL");
	bad = init;
	bad.cap.max_send_sge = 1000;
	errno = 0;
	CHECK(!ibv_create_qp(pd, &bad) && errno == EINVAL, "create_qp with 1000 SGEs: EINVAL");
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(qp && qp->qp_num != 0 && qp->state == IBV_QPS_RESET, "create_qp");
	CHECK(init.cap.max_inline_data > 0, "create_qp reports its inline size");

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad_wr = NULL;
	CHECK(ibv_post_send(qp, &wr, &bad_wr) != 0 && bad_wr == &wr, "post_send in RESET: refused, bad_wr set");

	struct ibv_qp_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL, "RESET to RTR: EINVAL");
	struct ibv_qp_attr got;
	struct ibv_qp_init_attr got_init;
	CHECK(ibv_query_qp(qp, &got, IBV_QP_STATE, &got_init) == 0 && got.qp_state == IBV_QPS_RESET,
	      "... and the QP is still in RESET");
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.pkey_index = 0;
	attr.qp_access_flags = 0;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
	      "RESET to INIT");
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = 0x11;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.sgid_index = 0;
	attr.ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == EINVAL,
	      "RTR from the link-local GID 0: EINVAL");
	CHECK(ibv_query_qp(qp, &got, IBV_QP_STATE, &got_init) == 0 && got.qp_state == IBV_QPS_INIT,
	      "... and the QP is still in INIT");
	CHECK(ibv_destroy_cq(cq) == EBUSY, "destroy_cq while a QP uses it: EBUSY");

	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	ah_attr.grh.sgid_index = 0;
	errno = 0;
	CHECK(!ibv_create_ah(pd, &ah_attr) && errno == EINVAL, "create_ah from GID 0: EINVAL");
	ah_attr.grh.sgid_index = 1;
	errno = 0;
	CHECK(!ibv_create_ah(pd, &ah_attr) && errno == EINVAL,
	      "create_ah from GID 1 (IPv4) to the unspecified IPv6 GID ::: EINVAL");
	/* To the NIC's own GID 1, ::ffff:127.0.13.60. */
	CHECK(ibv_query_gid(ctx, 1, 1, &ah_attr.grh.dgid) == 0, "query_gid 1");
	struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
	CHECK(ah && ah->pd == pd, "create_ah from GID 1");
	CHECK(ibv_destroy_ah(ah) == 0, "destroy_ah");

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch && ch->fd >= 0, "create_comp_channel");
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 4, NULL, ch, 0);
	CHECK(cq2 && cq2->channel == ch, "create_cq on the channel");
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "destroy_comp_channel while a CQ uses it: EBUSY");
	CHECK(ibv_req_notify_cq(cq2, 0) == 0, "req_notify_cq");
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN, "get_cq_event with no event: EAGAIN");

	struct ibv_cq_init_attr_ex cq_attr = { .cqe = 8, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &cq_attr) && errno == EOPNOTSUPP, "create_cq_ex with timestamps: EOPNOTSUPP");
	cq_attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cq_attr);
	CHECK(cqx != NULL, "create_cq_ex");
	struct ibv_poll_cq_attr pattr = { 0 };
	CHECK(ibv_start_poll(cqx, &pattr) == ENOENT, "start_poll on an empty CQ: ENOENT");
	struct ibv_qp_init_attr xi = init;
	xi.send_cq = xi.recv_cq = ibv_cq_ex_to_cq(cqx);
	struct ibv_qp *xqp = ibv_create_qp(pd, &xi);
	struct ibv_qp_attr xa = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(xqp && !ibv_modify_qp(xqp, &xa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "a QP on the ibv_cq_ex, in INIT");
	struct ibv_recv_wr rwr = { .wr_id = 42, .sg_list = &sge, .num_sge = 1 }, *bad_rwr = NULL;
	CHECK(ibv_post_recv(xqp, &rwr, &bad_rwr) == 0, "post_recv");
	xa.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(xqp, &xa, IBV_QP_STATE) == 0, "to ERR: the receive is flushed");
	int got_one = ENOENT;
	for (int i = 0; i < 1000 && got_one == ENOENT; i++)
		got_one = ibv_start_poll(cqx, &pattr);
	CHECK(got_one == 0 && cqx->wr_id == 42 && cqx->status == IBV_WC_WR_FLUSH_ERR &&
		      ibv_wc_read_opcode(cqx) == IBV_WC_RECV && ibv_wc_read_qp_num(cqx) == xqp->qp_num,
	      "the flushed receive read through start_poll and ibv_wc_read_*");
	CHECK(ibv_next_poll(cqx) == ENOENT, "next_poll: no other completion");
	ibv_end_poll(cqx);
	CHECK(ibv_destroy_qp(xqp) == 0 && ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0, "destroy the QP and the ibv_cq_ex");

	/* ibv_resize_cq as rxe (rxe_cq_chk_attr): the completions waiting survive; a size out of
	 * 1..=max_cqe or below what waits is EINVAL and changes nothing. */
	struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ri = init;
	ri.send_cq = ri.recv_cq = rcq;
	struct ibv_qp *rqp = rcq ? ibv_create_qp(pd, &ri) : NULL;
	xa.qp_state = IBV_QPS_INIT;
	CHECK(rqp && !ibv_modify_qp(rqp, &xa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "a QP on a CQ of 16, in INIT");
	int rposted = 0;
	for (int i = 0; i < 3; i++) {
		struct ibv_recv_wr r = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad_r = NULL;
		rposted += ibv_post_recv(rqp, &r, &bad_r) == 0;
	}
	xa.qp_state = IBV_QPS_ERR;
	CHECK(rposted == 3 && ibv_modify_qp(rqp, &xa, IBV_QP_STATE) == 0, "three receives, flushed into it");
	struct ibv_device_attr dattr;
	CHECK(ibv_query_device(ctx, &dattr) == 0, "query_device for max_cqe");
	CHECK(ibv_resize_cq(rcq, 0) == EINVAL && rcq->cqe == 16, "resize_cq to 0: EINVAL, cqe unchanged");
	CHECK(ibv_resize_cq(rcq, dattr.max_cqe + 1) == EINVAL && rcq->cqe == 16,
	      "resize_cq past max_cqe: EINVAL, cqe unchanged");
	CHECK(ibv_resize_cq(rcq, 2) == EINVAL && rcq->cqe == 16,
	      "resize_cq below the 3 completions waiting: EINVAL, cqe unchanged");
	struct ibv_cq fake_cq;
	memset(&fake_cq, 0, sizeof(fake_cq));
	CHECK(ibv_resize_cq(&fake_cq, 8) == EINVAL, "resize_cq of a CQ not ours: EINVAL");
	CHECK(ibv_resize_cq(rcq, 3) == 0 && rcq->cqe == 3, "resize_cq to exactly what waits");
	CHECK(ibv_resize_cq(rcq, dattr.max_cqe) == 0 && rcq->cqe == dattr.max_cqe, "resize_cq to max_cqe");
	struct ibv_wc rwc[8];
	int rn = ibv_poll_cq(rcq, 8, rwc);
	CHECK(rn == 3 && rwc[0].wr_id == 100 && rwc[1].wr_id == 101 && rwc[2].wr_id == 102 &&
		      rwc[2].status == IBV_WC_WR_FLUSH_ERR,
	      "the three completions queued before the resizes, in order");
	CHECK(ibv_destroy_qp(rqp) == 0 && ibv_destroy_cq(rcq) == 0, "destroy the resized CQ's QP and CQ");

	/* Memory windows (rxe_mw.c; IBTA vol. 1 10.6.7): allocation, type 1 binds through
	 * ibv_bind_mw, type 2 binds and invalidations as send WRs, and their errors. A bind is a
	 * local operation: an RC QP in RTS (its peer never answers: none is needed) completes it. */
	{
		struct ibv_cq *mcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		struct ibv_qp_init_attr mi = init;
		mi.send_cq = mi.recv_cq = mcq;
		struct ibv_qp *mqp = mcq ? ibv_create_qp(pd, &mi) : NULL;
		struct ibv_qp_attr ma = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
		int up = mqp && !ibv_modify_qp(mqp, &ma, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
								     IBV_QP_ACCESS_FLAGS);
		memset(&ma, 0, sizeof(ma));
		ma.qp_state = IBV_QPS_RTR;
		ma.path_mtu = IBV_MTU_1024;
		ma.dest_qp_num = 0x11;
		ma.max_dest_rd_atomic = 1;
		ma.min_rnr_timer = 12;
		ma.ah_attr.is_global = 1;
		ma.ah_attr.grh.sgid_index = 1;
		ma.ah_attr.grh.hop_limit = 1;
		ma.ah_attr.port_num = 1;
		union ibv_gid self;
		up = up && ibv_query_gid(ctx, 1, 1, &self) == 0;
		ma.ah_attr.grh.dgid = self;
		up = up && !ibv_modify_qp(mqp, &ma, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
							    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
		memset(&ma, 0, sizeof(ma));
		ma.qp_state = IBV_QPS_RTS;
		ma.timeout = 14;
		ma.retry_cnt = 7;
		ma.rnr_retry = 7;
		ma.max_rd_atomic = 1;
		up = up && !ibv_modify_qp(mqp, &ma, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
							    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
		CHECK(up, "an RC QP in RTS for binds");

		struct ibv_mr *wmr = ibv_reg_mr(pd, buf, 4096,
					       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
		struct ibv_mr *nomw = ibv_reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
		errno = 0;
		CHECK(!ibv_alloc_mw(pd, 3) && errno == EINVAL, "alloc_mw of type 3: EINVAL");
		struct ibv_pd fake_pd;
		memset(&fake_pd, 0, sizeof(fake_pd));
		fake_pd.context = ctx;
		errno = 0;
		CHECK(!ibv_alloc_mw(&fake_pd, IBV_MW_TYPE_1) && errno == EINVAL, "alloc_mw on a PD not ours: EINVAL");
		struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
		struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		CHECK(mw1 && mw2 && mw1->type == IBV_MW_TYPE_1 && mw2->type == IBV_MW_TYPE_2 && mw1->pd == pd &&
			      (mw1->rkey >> 8) != (mw2->rkey >> 8),
		      "alloc_mw of types 1 and 2, each its own index");

		struct ibv_mw_bind mb = { .wr_id = 51, .send_flags = IBV_SEND_SIGNALED,
					  .bind_info = { .mr = wmr, .addr = (uintptr_t)buf + 256, .length = 512,
							 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } };
		CHECK(ibv_bind_mw(mqp, mw2, &mb) == EINVAL, "ibv_bind_mw of a type 2 window: EINVAL (libibverbs)");
		uint32_t before = mw1->rkey;
		CHECK(ibv_bind_mw(mqp, mw1, &mb) == 0 && mw1->rkey != before && (mw1->rkey >> 8) == (before >> 8),
		      "ibv_bind_mw of a type 1 window: a new key byte, the same index");
		struct ibv_wc mwc;
		int got = 0;
		for (int i = 0; i < 100000 && got == 0; i++)
			got = ibv_poll_cq(mcq, 1, &mwc);
		CHECK(got == 1 && mwc.wr_id == 51 && mwc.status == IBV_WC_SUCCESS && mwc.opcode == IBV_WC_BIND_MW,
		      "... completes IBV_WC_BIND_MW");
		CHECK(ibv_dereg_mr(wmr) == EINVAL && wmr->lkey != 0, "dereg_mr of a region with a bound window: EINVAL");
		CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd with windows: EBUSY");

		uint32_t key2 = ibv_inc_rkey(mw2->rkey);
		struct ibv_send_wr bw = { .wr_id = 52, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
					  .bind_mw = { .mw = mw2, .rkey = key2, .bind_info = mb.bind_info } };
		struct ibv_send_wr *bad_bw = NULL;
		CHECK(ibv_post_send(mqp, &bw, &bad_bw) == 0, "post IBV_WR_BIND_MW of the type 2 window");
		got = 0;
		for (int i = 0; i < 100000 && got == 0; i++)
			got = ibv_poll_cq(mcq, 1, &mwc);
		CHECK(got == 1 && mwc.wr_id == 52 && mwc.status == IBV_WC_SUCCESS && mwc.opcode == IBV_WC_BIND_MW,
		      "... completes IBV_WC_BIND_MW");
		mw2->rkey = key2;
		struct ibv_send_wr iw = { .wr_id = 53, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
					  .invalidate_rkey = key2 };
		CHECK(ibv_post_send(mqp, &iw, &bad_bw) == 0, "post IBV_WR_LOCAL_INV of it");
		got = 0;
		for (int i = 0; i < 100000 && got == 0; i++)
			got = ibv_poll_cq(mcq, 1, &mwc);
		CHECK(got == 1 && mwc.wr_id == 53 && mwc.status == IBV_WC_SUCCESS && mwc.opcode == IBV_WC_LOCAL_INV,
		      "... completes IBV_WC_LOCAL_INV");
		struct ibv_mw fake_mw;
		memset(&fake_mw, 0, sizeof(fake_mw));
		fake_mw.context = ctx;
		CHECK(ibv_dealloc_mw(&fake_mw) == EINVAL, "dealloc_mw of a window not ours: EINVAL");
		bw.bind_mw.mw = &fake_mw;
		bad_bw = NULL;
		CHECK(ibv_post_send(mqp, &bw, &bad_bw) == EINVAL && bad_bw == &bw, "IBV_WR_BIND_MW of a window not ours: EINVAL");

		/* A region without IBV_ACCESS_MW_BIND (C10-73): the bind completes IBV_WC_MW_BIND_ERR and
		 * the QP goes to the error state, as rxe_do_local_ops. */
		bw.bind_mw.mw = mw2;
		bw.bind_mw.rkey = ibv_inc_rkey(key2);
		bw.bind_mw.bind_info.mr = nomw;
		bw.bind_mw.bind_info.addr = (uintptr_t)buf + 4096;
		bw.wr_id = 54;
		CHECK(ibv_post_send(mqp, &bw, &bad_bw) == 0, "post a bind to a region without MW_BIND");
		got = 0;
		for (int i = 0; i < 100000 && got == 0; i++)
			got = ibv_poll_cq(mcq, 1, &mwc);
		CHECK(got == 1 && mwc.wr_id == 54 && mwc.status == IBV_WC_MW_BIND_ERR, "... completes IBV_WC_MW_BIND_ERR");
		struct ibv_qp_attr mq;
		struct ibv_qp_init_attr mqi;
		CHECK(ibv_query_qp(mqp, &mq, IBV_QP_STATE, &mqi) == 0 && mq.qp_state == IBV_QPS_ERR, "... and the QP is in ERR");

		CHECK(ibv_dealloc_mw(mw1) == 0 && ibv_dealloc_mw(mw2) == 0, "dealloc_mw, the type 1 window bound");
		CHECK(ibv_dereg_mr(wmr) == 0 && ibv_dereg_mr(nomw) == 0, "dereg_mr once the window is gone");
		CHECK(ibv_destroy_qp(mqp) == 0 && ibv_destroy_cq(mcq) == 0, "destroy the binding QP and its CQ");
	}

	struct ibv_async_event aev;
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	errno = 0;
	CHECK(ctx->async_fd >= 0 && ibv_get_async_event(ctx, &aev) == -1 && errno == EAGAIN,
	      "get_async_event on a non-blocking async_fd: EAGAIN");

	struct ibv_srq_init_attr sinit = { .attr = { .max_wr = 0, .max_sge = 1 } };
	errno = 0;
	CHECK(!ibv_create_srq(pd, &sinit) && errno == EINVAL, "create_srq of 0 WRs: EINVAL");
	sinit.attr.max_wr = 8;
	struct ibv_srq *srq = ibv_create_srq(pd, &sinit);
	CHECK(srq && srq->pd == pd && sinit.attr.max_wr == 8 && sinit.attr.max_sge == 1, "create_srq");
	struct ibv_srq_attr sattr = { .srq_limit = 4 };
	CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == 0, "modify_srq arms a limit of 4");
	sattr.srq_limit = 9;
	CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == EINVAL, "a limit above max_wr: EINVAL");
	memset(&sattr, 0, sizeof(sattr));
	CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.max_wr == 8 && sattr.srq_limit == 4,
	      "query_srq: the refused limit changed nothing");
	struct ibv_recv_wr swr = { .wr_id = 7, .sg_list = &sge, .num_sge = 2000 }, *bad_swr = NULL;
	CHECK(ibv_post_srq_recv(srq, &swr, &bad_swr) != 0 && bad_swr == &swr, "post_srq_recv of 2000 SGEs: refused, bad_wr set");
	swr.num_sge = 1;
	int posted = 0;
	for (int i = 0; i < 8; i++)
		posted += ibv_post_srq_recv(srq, &swr, &bad_swr) == 0;
	CHECK(posted == 8, "post_srq_recv 8 times: the refused WR took none of the 8 slots");
	CHECK(ibv_post_srq_recv(srq, &swr, &bad_swr) == ENOMEM && bad_swr == &swr, "a 9th: the SRQ is full, ENOMEM");
	struct ibv_qp_init_attr sqi = init;
	sqi.srq = srq;
	struct ibv_qp *sqp = ibv_create_qp(pd, &sqi);
	CHECK(sqp && sqp->srq == srq, "create_qp on the SRQ");
	CHECK(ibv_destroy_srq(srq) == EBUSY, "destroy_srq while a QP uses it: EBUSY");
	memset(&sattr, 0, sizeof(sattr));
	CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.max_wr == 8, "... the SRQ still stands");
	xa.qp_state = IBV_QPS_INIT;
	CHECK(!ibv_modify_qp(sqp, &xa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "the SRQ's QP in INIT");
	CHECK(ibv_post_recv(sqp, &rwr, &bad_rwr) == EINVAL && bad_rwr == &rwr, "post_recv on a QP with an SRQ: EINVAL");
	xa.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(sqp, &xa, IBV_QP_STATE) == 0, "the SRQ's QP to ERR");
	memset(&aev, 0, sizeof(aev));
	CHECK(ibv_get_async_event(ctx, &aev) == 0 && aev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED &&
		      aev.element.qp == sqp,
	      "get_async_event: the last WQE of the QP in error");
	ibv_ack_async_event(&aev);
	CHECK(sqp->events_completed == 1, "ack_async_event counts it");
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &aev) == -1 && errno == EAGAIN, "no other event");
	/* An event of a QP destroyed before the event was read is never read (the kernel drops
	 * the queued events of an object it destroys): a program never sees a freed QP. */
	struct ibv_qp *sqp2 = ibv_create_qp(pd, &sqi);
	CHECK(sqp2 != NULL, "a second QP on the SRQ");
	xa.qp_state = IBV_QPS_INIT;
	CHECK(!ibv_modify_qp(sqp2, &xa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "... in INIT");
	xa.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(sqp2, &xa, IBV_QP_STATE) == 0, "... to ERR: its last WQE event is raised");
	struct pollfd apfd = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&apfd, 1, 5000) == 1, "... and waits on the async fd");
	CHECK(ibv_destroy_qp(sqp2) == 0, "... where it stays unread while the QP is destroyed");
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &aev) == -1 && errno == EAGAIN, "get_async_event: the destroyed QP's event is gone");
	CHECK(ibv_destroy_qp(sqp) == 0 && ibv_destroy_srq(srq) == 0, "destroy the QP, then its SRQ");

	CHECK(ibv_destroy_qp(qp) == 0, "destroy_qp");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
	CHECK(ibv_destroy_cq(cq2) == 0 && ibv_destroy_comp_channel(ch) == 0, "destroy_cq, then its channel");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "close_device");
	errno = 0;
	CHECK(ibv_close_device(ctx) == -1 && errno == EINVAL, "close_device twice: -1 EINVAL");
	ibv_free_device_list(list);
	return failures;
}
