/* The target of tests/hostile.rs: a verbs program under roce-emu's libibverbs that registers
 * the middle 4 KiB of a 12 KiB buffer for remote writes, with canary bytes on both sides,
 * connects one RC QP per attack to the peer named on the command line, and, when told, says
 * whether the canaries survived. Protocol on stdin/stdout, one line each:
 *   out: "<qpn0> <qpn1> <qpn2> <psn> <rkey> <addr>"   in: "<peer qpn0> <qpn1> <qpn2> <psn>"
 *   out: "ready"                                          in: "check"
 *   out: "canaries intact" or "canary broken at <offset>", then "region <4 bytes in hex>" */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "peer.h"

#define NQP 3
#define PAGE 4096

static void die(const char *what)
{
	printf("error %s\n", what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		die("usage: victim PEER_IPV4");
	static unsigned char buf[3 * PAGE];
	memset(buf, 0xcc, sizeof(buf));
	memset(buf + PAGE, 0, PAGE);
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("no device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf + PAGE, PAGE,
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
			       : NULL;
	struct ibv_cq *cq = mr ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!cq)
		die("setup");
	struct ibv_qp *qp[NQP];
	const char *failed_qp = create_qps(pd, cq, qp, NQP, 1, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (failed_qp)
		die(failed_qp);
	unsigned psn = 0x123456;
	printf("%u %u %u %u %u %llu\n", qp[0]->qp_num, qp[1]->qp_num, qp[2]->qp_num, psn, mr->rkey,
	       (unsigned long long)(uintptr_t)(buf + PAGE));
	fflush(stdout);
	const char *failed = connect_to_peer(qp, NQP, argv[1], psn);
	if (failed)
		die(failed);
	printf("ready\n");
	fflush(stdout);
	char word[16];
	if (scanf("%15s", word) != 1 || strcmp(word, "check"))
		die("check line");
	int broken = -1;
	for (int i = 0; i < PAGE && broken < 0; i++) {
		if (buf[i] != 0xcc)
			broken = i;
		else if (buf[2 * PAGE + i] != 0xcc)
			broken = 2 * PAGE + i;
	}
	if (broken < 0)
		printf("canaries intact\n");
	else
		printf("canary broken at %d\n", broken);
	printf("region %02x%02x%02x%02x\n", buf[PAGE], buf[PAGE + 1], buf[PAGE + 2], buf[PAGE + 3]);
	return broken < 0 ? 0 : 1;
}
