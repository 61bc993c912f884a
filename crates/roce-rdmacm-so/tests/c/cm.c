/* roce-emu's librdmacm.so.1 from C, through Debian's <rdma/rdma_cma.h>: what works before the
 * connection manager (channels, ids, address and route resolution with their events, QPs on
 * ids, getaddrinfo), how the connecting calls refuse misuse, and how the rest fails (-1, ENOSYS). Each CHECK prints "ok <what>" or
 * "FAIL <what>"; the exit status is the number of failures. Where a call is refused, the test
 * also checks that nothing happened (no event queued, the id unchanged). Run by tests/cm.rs
 * with ROCE_VERBS_IP=127.0.13.80. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <signal.h>
#include <sys/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "check.h"

static struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static volatile sig_atomic_t alarms;
static volatile int interrupted_waits_done;

/* Fails the program, rather than let it hang, if a wait the alarm should interrupt does not
 * return. */
static void *watchdog(void *arg)
{
	(void)arg;
	sleep(10);
	if (!interrupted_waits_done) {
		printf("FAIL a wait a signal should interrupt did not return within 10 s\n");
		fflush(stdout);
		_exit(99);
	}
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Readable within ms milliseconds: an event reported after the call returned (address and
 * route resolution, as the kernel's work queues report them). */
static int readable_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp, uint32_t *qkey)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	memset(&a, 0, sizeof(a));
	if (ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY, &i))
		return -1;
	if (qkey)
		*qkey = a.qkey;
	return a.qp_state;
}

int main(void)
{
	int n = -1;
	struct ibv_context **devs = rdma_get_devices(&n);
	CHECK(devs && n == 1 && devs[0] && !devs[1], "rdma_get_devices: one device");
	if (!devs || n != 1)
		return 100;

	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch && ch->fd >= 0, "create_event_channel");
	if (!ch)
		return 100;
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0, "the channel fd can be made non-blocking");
	struct rdma_cm_event *ev = (void *)0x1;
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN && ev == (void *)0x1, "get_cm_event on an empty non-blocking channel: EAGAIN");

	int tag;
	struct rdma_cm_id *id = NULL, *bad = (void *)0x1;
	errno = 0;
	CHECK(rdma_create_id(ch, &bad, NULL, 0x9999) == -1 && errno == EINVAL && bad == (void *)0x1, "create_id of an unknown port space: EINVAL, nothing written");
	CHECK(rdma_create_id(ch, &id, &tag, RDMA_PS_TCP) == 0 && id, "create_id RDMA_PS_TCP");
	if (!id)
		return 100;
	CHECK(id->context == &tag && id->channel == ch && !id->verbs && id->qp_type == IBV_QPT_RC && id->ps == RDMA_PS_TCP, "... context, channel, RC, no device yet");

	/* getaddrinfo: numeric hosts and ports. */
	struct rdma_addrinfo *ai = NULL, hints;
	CHECK(rdma_getaddrinfo("127.0.13.81", "7471", NULL, &ai) == 0 && ai, "getaddrinfo 127.0.13.81:7471");
	if (!ai)
		return 100;
	struct sockaddr_in *d = (struct sockaddr_in *)ai->ai_dst_addr;
	CHECK(d && d->sin_family == AF_INET && ntohs(d->sin_port) == 7471 && d->sin_addr.s_addr == sin4("127.0.13.81", 0).sin_addr.s_addr && !ai->ai_src_addr, "... the destination, no source");
	CHECK(ai->ai_port_space == RDMA_PS_TCP && ai->ai_qp_type == IBV_QPT_RC && !ai->ai_next, "... TCP port space, RC");
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_UDP;
	struct rdma_addrinfo *pai = NULL;
	CHECK(rdma_getaddrinfo(NULL, "7472", &hints, &pai) == 0 && pai && pai->ai_src_addr && !pai->ai_dst_addr && pai->ai_qp_type == IBV_QPT_UD, "getaddrinfo NULL node, RAI_PASSIVE: a source, UD");
	struct sockaddr_in *s4 = pai ? (struct sockaddr_in *)pai->ai_src_addr : NULL;
	CHECK(s4 && s4->sin_family == AF_INET && s4->sin_addr.s_addr == htonl(INADDR_ANY) && s4->sin_port == htons(7472) && pai->ai_flags == RAI_PASSIVE, "... the wildcard address, the port");
	rdma_freeaddrinfo(pai);
	/* libfabric's verbs provider asks this of every device (vrb_get_rai_id). */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	pai = NULL;
	CHECK(rdma_getaddrinfo("localhost", NULL, &hints, &pai) == 0 && pai && pai->ai_src_addr && !pai->ai_dst_addr, "getaddrinfo localhost, RAI_PASSIVE: a source");
	s4 = pai ? (struct sockaddr_in *)pai->ai_src_addr : NULL;
	CHECK(s4 && s4->sin_family == AF_INET && s4->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && pai->ai_src_len == sizeof(*s4) && pai->ai_family == AF_INET && pai->ai_qp_type == IBV_QPT_RC && pai->ai_port_space == RDMA_PS_TCP, "... 127.0.0.1, RC, TCP port space");
	rdma_freeaddrinfo(pai);
	pai = NULL;
	CHECK(rdma_getaddrinfo("localhost", "7473", NULL, &pai) == 0 && pai && pai->ai_dst_addr && !pai->ai_src_addr && ((struct sockaddr_in *)pai->ai_dst_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ((struct sockaddr_in *)pai->ai_dst_addr)->sin_port == htons(7473), "getaddrinfo localhost:7473: the destination");
	rdma_freeaddrinfo(pai);
	struct rdma_addrinfo *none = (void *)0x1;
	hints.ai_flags = RAI_NUMERICHOST;
	errno = 0;
	CHECK(rdma_getaddrinfo("localhost", NULL, &hints, &none) == -1 && errno == EAI_NONAME && none == (void *)0x1, "getaddrinfo of a name with RAI_NUMERICHOST: -1, errno EAI_NONAME, nothing written");

	/* A refused resolve changes nothing. */
	errno = 0;
	CHECK(rdma_resolve_route(id, 1000) == -1 && errno == EINVAL, "resolve_route before resolve_addr: EINVAL");
	struct sockaddr_in6 six;
	memset(&six, 0, sizeof(six));
	six.sin6_family = AF_INET6;
	errno = 0;
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&six, 1000) == -1 && errno == EINVAL, "resolve_addr to the IPv6 wildcard: EINVAL");
	CHECK(!readable(ch->fd) && !id->verbs && !id->pd && id->route.num_paths == 0 && rdma_get_src_port(id) == 0, "... no event, the id unchanged");
	struct sockaddr_storage ib;
	memset(&ib, 0, sizeof(ib));
	ib.ss_family = 27; /* AF_IB */
	errno = 0;
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&ib, 1000) == -1 && errno == EAFNOSUPPORT, "resolve_addr to an AF_IB address: EAFNOSUPPORT");
	CHECK(!readable(ch->fd) && !id->verbs && !id->pd && id->route.num_paths == 0 && rdma_get_src_port(id) == 0, "... no event, the id unchanged");

	/* resolve_addr -> ADDR_RESOLVED. */
	CHECK(rdma_resolve_addr(id, NULL, ai->ai_dst_addr, 2000) == 0, "resolve_addr");
	CHECK(readable_within(ch->fd, 10000), "... the channel fd becomes readable");
	ev = NULL;
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && ev->id == id && ev->status == 0, "... ADDR_RESOLVED for the id");
	CHECK(!readable(ch->fd), "... and nothing more");
	CHECK(id->verbs == devs[0] && id->port_num == 1, "... the id has the device");
	/* ucma_get_device: the device's PD comes with it (UCX's rdmacm CM makes a UD QP on it
	 * before any rdma_create_qp). */
	struct ibv_pd *devpd = id->pd;
	CHECK(devpd && devpd->context == id->verbs, "... and the device's PD in id->pd");
	{
		struct ibv_cq *dcq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
		struct ibv_qp_init_attr da;
		memset(&da, 0, sizeof(da));
		da.send_cq = da.recv_cq = dcq;
		da.qp_type = IBV_QPT_UD;
		da.cap.max_send_wr = da.cap.max_recv_wr = 2;
		da.cap.max_send_sge = da.cap.max_recv_sge = 1;
		struct ibv_qp *dqp = dcq ? ibv_create_qp(id->pd, &da) : NULL;
		CHECK(dqp && dqp->pd == devpd, "... a UD QP made with ibv_create_qp(id->pd), as UCX does");
		if (dqp)
			ibv_destroy_qp(dqp);
		if (dcq)
			ibv_destroy_cq(dcq);
	}
	struct sockaddr_in *l = (struct sockaddr_in *)rdma_get_local_addr(id);
	struct sockaddr_in *p = (struct sockaddr_in *)rdma_get_peer_addr(id);
	CHECK(l->sin_family == AF_INET && l->sin_addr.s_addr == sin4("127.0.13.80", 0).sin_addr.s_addr && l->sin_port != 0, "... local address: the device's, a port");
	CHECK(p->sin_port == htons(7471) && rdma_get_dst_port(id) == htons(7471) && rdma_get_src_port(id) == l->sin_port, "... peer port, get_src_port/get_dst_port");
	CHECK(rdma_ack_cm_event(ev) == 0, "ack_cm_event");
	errno = 0;
	CHECK(rdma_ack_cm_event(ev) == -1 && errno == EINVAL, "a second ack: EINVAL");
	CHECK(!strcmp(rdma_event_str(RDMA_CM_EVENT_ROUTE_RESOLVED), "RDMA_CM_EVENT_ROUTE_RESOLVED"), "event_str");

	/* resolve_route -> ROUTE_RESOLVED, on a blocking fd. */
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) & ~O_NONBLOCK) == 0, "the channel fd blocking again");
	CHECK(rdma_resolve_route(id, 2000) == 0, "resolve_route");
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED && ev->id == id, "... ROUTE_RESOLVED (blocking get)");
	union ibv_gid want;
	memset(&want, 0, sizeof(want));
	want.raw[10] = want.raw[11] = 0xff;
	memcpy(&want.raw[12], &d->sin_addr, 4);
	CHECK(id->route.num_paths == 1 && id->route.path_rec && !memcmp(&id->route.path_rec->dgid, &want, 16) && id->route.path_rec->pkey == htons(0xffff), "... one path to ::ffff:127.0.13.81");
	CHECK(rdma_ack_cm_event(ev) == 0, "... acked");

	/* rdma_create_qp on the id: the program's PD and CQ. */
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	CHECK(pd && cq, "alloc_pd and create_cq on id->verbs");
	struct ibv_qp_init_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	errno = 0;
	CHECK(rdma_create_qp(id, pd, NULL) == -1 && errno == EINVAL && !id->qp, "create_qp without attributes: EINVAL, no QP");
	CHECK(rdma_create_qp(id, pd, &qa) == 0 && id->qp && id->qp->pd == pd && id->pd == pd, "create_qp");
	CHECK(id->qp && qp_state(id->qp, NULL) == IBV_QPS_INIT, "... the QP is in INIT");
	struct ibv_qp *first = id->qp;
	errno = 0;
	CHECK(rdma_create_qp(id, pd, &qa) == -1 && errno == EINVAL && id->qp == first, "a second create_qp: EINVAL, the QP kept");

	/* rdma_set_option. */
	uint8_t tos = 32;
	int one = 1;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)) == 0, "set_option TOS");
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)) == 0, "set_option REUSEADDR");
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, sizeof(one)) == -1 && errno == EINVAL, "set_option TOS of the wrong size: EINVAL");
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &one, sizeof(one)) == -1 && errno == ENOSYS, "set_option IB_PATH: ENOSYS");

	/* The connecting calls refuse what they cannot do, and change nothing: no event, the QP
	 * still in INIT. (Connections themselves: tools/roce/tests/exec_rdmacm.rs.) */
	struct rdma_conn_param cp;
	memset(&cp, 0, sizeof(cp));
	char big[64] = {0};
	cp.private_data = big;
	cp.private_data_len = 57;
	errno = 0;
	CHECK(rdma_connect(id, &cp) == -1 && errno == EINVAL, "connect with 57 bytes of private data: EINVAL");
	CHECK(qp_state(id->qp, NULL) == IBV_QPS_INIT && !readable(ch->fd), "... the QP still in INIT, no event");
	cp.private_data_len = 0;
	errno = 0;
	CHECK(rdma_accept(id, &cp) == -1 && errno == EINVAL, "accept without a connection request: EINVAL");
	errno = 0;
	CHECK(rdma_reject(id, NULL, 0) == -1 && errno == EINVAL, "reject without a connection request: EINVAL");
	errno = 0;
	CHECK(rdma_disconnect(id) == -1 && errno == EINVAL, "disconnect before a connection: EINVAL");
	struct rdma_cm_id *child = (struct rdma_cm_id *)&cp;
	errno = 0;
	CHECK(rdma_get_request(id, &child) == -1 && errno == EINVAL && child == (struct rdma_cm_id *)&cp, "get_request on an id not listening: EINVAL, nothing written");
	CHECK(qp_state(id->qp, NULL) == IBV_QPS_INIT && !readable(ch->fd), "... the QP still in INIT, no event");
	errno = 0;
	CHECK(rdma_join_multicast(id, ai->ai_dst_addr, NULL) == -1 && errno == ENOSYS, "join_multicast: ENOSYS");
	errno = 0;
	CHECK(rsocket(AF_INET, SOCK_STREAM, 0) == -1 && errno == ENOSYS, "rsocket: ENOSYS");

	rdma_destroy_qp(id);
	CHECK(!id->qp, "destroy_qp");
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0, "... the program's CQ and PD are free again");

	/* A UD id with no PD or CQs: the library makes them; the QP reaches RTS. */
	struct rdma_cm_id *ud = NULL;
	CHECK(rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP) == 0 && ud->qp_type == IBV_QPT_UD, "create_id RDMA_PS_UDP: UD");
	CHECK(rdma_resolve_addr(ud, NULL, ai->ai_dst_addr, 2000) == 0 && rdma_get_cm_event(ch, &ev) == 0 && ev->id == ud && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED, "... resolve_addr");
	rdma_ack_cm_event(ev);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	uint32_t qkey = 0;
	CHECK(ud->pd == devpd, "... the same device PD in the second id");
	CHECK(rdma_create_qp(ud, NULL, &qa) == 0 && ud->qp && ud->qp->pd == devpd && ud->pd == devpd && ud->send_cq && ud->recv_cq && qa.send_cq == ud->send_cq, "create_qp with no PD or CQs");
	CHECK(ud->qp && qp_state(ud->qp, &qkey) == IBV_QPS_RTS && qkey == RDMA_UDP_QKEY, "... RTS with RDMA_UDP_QKEY");
	rdma_destroy_qp(ud);
	CHECK(!ud->qp && !ud->send_cq && !ud->recv_cq, "... destroy_qp takes the library's CQs too");
	CHECK(rdma_destroy_id(ud) == 0, "destroy_id (UD)");

	/* Binding and listening. */
	struct rdma_cm_id *srv = NULL, *other = NULL;
	rdma_create_id(ch, &srv, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &other, NULL, RDMA_PS_TCP);
	struct sockaddr_in a = sin4("127.0.13.99", 7471);
	errno = 0;
	CHECK(rdma_bind_addr(srv, (struct sockaddr *)&a) == -1 && errno == EADDRNOTAVAIL && rdma_get_src_port(srv) == 0 && !srv->verbs && !srv->pd, "bind to an address not the device's: EADDRNOTAVAIL, unbound, no device");
	struct sockaddr_in any = sin4("0.0.0.0", 0);
	CHECK(rdma_bind_addr(other, (struct sockaddr *)&any) == 0 && !other->verbs && !other->pd, "bind to the wildcard address: no device, no PD yet");
	CHECK(rdma_destroy_id(other) == 0 && rdma_create_id(ch, &other, NULL, RDMA_PS_TCP) == 0, "... destroyed, a fresh id");
	a = sin4("127.0.13.80", 7471);
	CHECK(rdma_bind_addr(srv, (struct sockaddr *)&a) == 0 && rdma_get_src_port(srv) == htons(7471) && srv->verbs == devs[0] && srv->pd == devpd, "bind to the device's address: the device and its PD");
	errno = 0;
	CHECK(rdma_bind_addr(other, (struct sockaddr *)&a) == -1 && errno == EADDRINUSE && rdma_get_src_port(other) == 0, "a second bind to the port: EADDRINUSE");
	CHECK(rdma_listen(srv, 4) == 0 && !readable(ch->fd), "listen: recorded, no event");
	errno = 0;
	CHECK(rdma_listen(srv, 4) == -1 && errno == EINVAL, "listen twice: EINVAL");
	CHECK(rdma_destroy_id(other) == 0 && rdma_destroy_id(srv) == 0, "destroy the listener");

	/* A synchronous id (no channel): resolve completes in the call. */
	struct rdma_cm_id *sync = NULL;
	CHECK(rdma_create_id(NULL, &sync, NULL, RDMA_PS_TCP) == 0 && !sync->channel, "create_id without a channel");
	CHECK(rdma_resolve_addr(sync, NULL, ai->ai_dst_addr, 2000) == 0 && sync->verbs && sync->pd == devpd && rdma_resolve_route(sync, 2000) == 0 && sync->route.num_paths == 1 && !readable(ch->fd), "... resolve_addr and resolve_route complete at once, no event");
	CHECK(rdma_destroy_id(sync) == 0, "... destroyed");

	/* rdma_create_ep: a synchronous id with its QP. */
	struct rdma_cm_id *ep = NULL;
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	CHECK(rdma_create_ep(&ep, ai, NULL, &qa) == 0 && ep && ep->qp && ep->qp->qp_type == IBV_QPT_RC && ep->route.num_paths == 1, "create_ep: resolved, with an RC QP");
	if (ep)
		rdma_destroy_ep(ep);

	/* rdma_migrate_id: the id's queued event moves with it to the new channel. */
	struct rdma_event_channel *ch2 = rdma_create_event_channel();
	struct rdma_cm_id *mig = NULL;
	rdma_create_id(ch, &mig, NULL, RDMA_PS_TCP);
	CHECK(ch2 && mig && rdma_resolve_addr(mig, NULL, ai->ai_dst_addr, 2000) == 0 && readable_within(ch->fd, 10000), "an id with ADDR_RESOLVED queued");
	errno = 0;
	CHECK(rdma_migrate_id(mig, (struct rdma_event_channel *)&cp) == -1 && errno == EINVAL && mig->channel == ch, "migrate_id to a channel not ours: EINVAL, the id stays");
	CHECK(rdma_migrate_id(mig, ch2) == 0 && mig->channel == ch2, "migrate_id to a second channel");
	fcntl(ch2->fd, F_SETFL, fcntl(ch2->fd, F_GETFL) | O_NONBLOCK);
	ev = NULL;
	CHECK(readable_within(ch2->fd, 10000) && rdma_get_cm_event(ch2, &ev) == 0 && ev->id == mig && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED, "... its event comes on the new channel");
	if (ev)
		rdma_ack_cm_event(ev);
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN, "... and not on the old one");
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) & ~O_NONBLOCK);
	/* RDMA_MAX_INIT_DEPTH / RDMA_MAX_RESP_RES ask for the device's maximum; more is EINVAL. */
	CHECK(rdma_resolve_route(mig, 2000) == 0 && readable_within(ch2->fd, 10000) && rdma_get_cm_event(ch2, &ev) == 0 && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED && rdma_ack_cm_event(ev) == 0, "... its route resolved");
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	CHECK(rdma_create_qp(mig, NULL, &qa) == 0, "... a QP");
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 200;
	cp.initiator_depth = 1;
	errno = 0;
	CHECK(rdma_connect(mig, &cp) == -1 && errno == EINVAL && !readable(ch2->fd) && qp_state(mig->qp, NULL) == IBV_QPS_INIT, "connect asking for 200 responder resources: EINVAL, nothing sent");
	rdma_destroy_qp(mig);
	CHECK(rdma_destroy_id(mig) == 0, "... destroyed");
	rdma_destroy_event_channel(ch2);

	/* A queued event of a destroyed id is not delivered. */
	struct rdma_cm_id *gone = NULL;
	rdma_create_id(ch, &gone, NULL, RDMA_PS_TCP);
	CHECK(rdma_resolve_addr(gone, NULL, ai->ai_dst_addr, 2000) == 0 && readable_within(ch->fd, 10000) && rdma_destroy_id(gone) == 0, "destroy an id with an event queued");
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN, "... its event is gone");

	/* A signal whose handler has no SA_RESTART interrupts the waits, as the kernel's read(2)
	 * of the rdma_cm file and of a completion channel: qperf's timer ends its tests so. */
	{
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, NULL);
		struct itimerval t;
		memset(&t, 0, sizeof(t));
		t.it_value.tv_usec = 100000;
		fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) & ~O_NONBLOCK);
		pthread_t dog;
		pthread_create(&dog, NULL, watchdog, NULL);
		pthread_detach(dog);
		setitimer(ITIMER_REAL, &t, NULL);
		errno = 0;
		ev = (void *)0x1;
		CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EINTR && alarms == 1 && ev == (void *)0x1, "get_cm_event interrupted by a signal: EINTR");
		struct ibv_comp_channel *cc = ibv_create_comp_channel(devs[0]);
		struct ibv_cq *ccq = cc ? ibv_create_cq(devs[0], 4, NULL, cc, 0) : NULL;
		struct ibv_cq *got = NULL;
		void *gctx = NULL;
		CHECK(ccq && ibv_req_notify_cq(ccq, 0) == 0, "a CQ on a completion channel, armed");
		setitimer(ITIMER_REAL, &t, NULL);
		errno = 0;
		CHECK(ccq && ibv_get_cq_event(cc, &got, &gctx) == -1 && errno == EINTR && alarms == 2 && !got, "get_cq_event interrupted by a signal: EINTR");
		if (ccq)
			ibv_destroy_cq(ccq);
		if (cc)
			ibv_destroy_comp_channel(cc);
		interrupted_waits_done = 1;
		signal(SIGALRM, SIG_DFL);
	}

	rdma_freeaddrinfo(ai);
	CHECK(rdma_destroy_id(id) == 0, "destroy_id");
	errno = 0;
	CHECK(rdma_destroy_id(id) == -1 && errno == EINVAL, "destroy_id twice: EINVAL");
	rdma_destroy_event_channel(ch);
	rdma_free_devices(devs);
	printf("%d failures\n", failures);
	return failures;
}
