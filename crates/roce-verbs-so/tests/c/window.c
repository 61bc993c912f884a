/* The verbs program of tests/window.rs: under roce-emu's libibverbs it registers the middle
 * 4 KiB of a 12 KiB buffer with IBV_ACCESS_MW_BIND, fills the whole buffer with 0xcc, connects
 * one RC QP per access to the peer named on the command line, binds a type 1 window (through
 * ibv_bind_mw) onto the region's second KiB, binds a type 2 window (IBV_WR_BIND_MW) onto the
 * same KiB and invalidates it (IBV_WR_LOCAL_INV), and, when told, says what changed in the
 * buffer. Protocol on stdin/stdout, one line each:
 *   out: "<qpn0> <qpn1> <qpn2> <psn>"                    in: "<peer qpn0> <qpn1> <qpn2> <psn>"
 *   out: "<type 1 rkey> <invalidated type 2 rkey> <window addr>"
 *   out: "ready"                                          in: "check"
 *   out: "untouched outside 0..4 of the window" or "changed at <offset>",
 *        then "window <4 bytes in hex>" */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "peer.h"

#define NQP 3
#define PAGE 4096
#define WINDOW (PAGE + 1024)

static void die(const char *what)
{
	printf("error %s\n", what);
	exit(1);
}

/* The next completion of cq, which must be a success of wr_id. */
static void completes(struct ibv_cq *cq, uint64_t wr_id, const char *what)
{
	struct ibv_wc wc;
	int n = 0;
	for (long i = 0; i < 100000000 && n == 0; i++)
		n = ibv_poll_cq(cq, 1, &wc);
	if (n != 1 || wc.wr_id != wr_id || wc.status != IBV_WC_SUCCESS)
		die(what);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		die("usage: window PEER_IPV4");
	static unsigned char buf[3 * PAGE];
	memset(buf, 0xcc, sizeof(buf));
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("no device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf + PAGE, PAGE,
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND)
			       : NULL;
	struct ibv_cq *cq = mr ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!cq)
		die("setup");
	struct ibv_qp *qp[NQP];
	const char *failed_qp = create_qps(pd, cq, qp, NQP, 4, IBV_ACCESS_REMOTE_WRITE);
	if (failed_qp)
		die(failed_qp);
	unsigned psn = 0x123456;
	printf("%u %u %u %u\n", qp[0]->qp_num, qp[1]->qp_num, qp[2]->qp_num, psn);
	fflush(stdout);
	const char *failed = connect_to_peer(qp, NQP, argv[1], psn);
	if (failed)
		die(failed);
	struct ibv_mw_bind_info window = { .mr = mr, .addr = (uintptr_t)(buf + WINDOW), .length = 1024,
					   .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	struct ibv_mw_bind bind = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED, .bind_info = window };
	if (!mw1 || ibv_bind_mw(qp[0], mw1, &bind))
		die("type 1 bind");
	completes(cq, 1, "type 1 bind completion");
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!mw2)
		die("type 2 window");
	uint32_t rkey2 = ibv_inc_rkey(mw2->rkey);
	struct ibv_send_wr b2 = { .wr_id = 2, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
				  .bind_mw = { .mw = mw2, .rkey = rkey2, .bind_info = window } };
	struct ibv_send_wr inv = { .wr_id = 3, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
				   .invalidate_rkey = rkey2 };
	b2.next = &inv;
	struct ibv_send_wr *bad = NULL;
	if (ibv_post_send(qp[2], &b2, &bad))
		die("type 2 bind and invalidation");
	completes(cq, 2, "type 2 bind completion");
	completes(cq, 3, "invalidation completion");
	printf("%u %u %llu\n", mw1->rkey, rkey2, (unsigned long long)(uintptr_t)(buf + WINDOW));
	printf("ready\n");
	fflush(stdout);
	char word[16];
	if (scanf("%15s", word) != 1 || strcmp(word, "check"))
		die("check line");
	int changed = -1;
	for (int i = 0; i < (int)sizeof(buf) && changed < 0; i++)
		if (buf[i] != 0xcc && !(i >= WINDOW && i < WINDOW + 4))
			changed = i;
	if (changed < 0)
		printf("untouched outside 0..4 of the window\n");
	else
		printf("changed at %d\n", changed);
	printf("window %02x%02x%02x%02x\n", buf[WINDOW], buf[WINDOW + 1], buf[WINDOW + 2], buf[WINDOW + 3]);
	return changed < 0 ? 0 : 1;
}
