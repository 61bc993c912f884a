/* fork() in a verbs program, as libibverbs documents it: ibv_fork_init, objects made, a child
 * forked that exits at once (its exit runs the library's at-exit handlers), and the parent's
 * device still works after it. One line per check; exits with the number that failed. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int failed;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	if (!ok)
		failed++;
}

int main(void)
{
	check(ibv_fork_init() == 0, "ibv_fork_init");
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	check(list && n == 1, "one device");
	if (!list || n != 1)
		return failed;
	struct ibv_context *ctx = ibv_open_device(list[0]);
	check(ctx != NULL, "the device opens");
	if (!ctx)
		return failed;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	check(pd && cq && qp, "a PD, a CQ and a QP before the fork");
	fflush(stdout);
	pid_t child = fork();
	if (child == 0)
		exit(0);
	int status = 0;
	check(child > 0 && waitpid(child, &status, 0) == child, "the child is waited for");
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child exits 0");
	struct ibv_qp *second = ibv_create_qp(pd, &init);
	check(second != NULL, "a QP after the child is gone");
	struct ibv_port_attr port;
	check(ibv_query_port(ctx, 1, &port) == 0 && port.state == IBV_PORT_ACTIVE,
	      "the port is still active");
	check(ibv_destroy_qp(second) == 0 && ibv_destroy_qp(qp) == 0, "the QPs are destroyed");
	check(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0, "the CQ and the PD are freed");
	check(ibv_close_device(ctx) == 0, "the device closes");
	ibv_free_device_list(list);
	return failed;
}
