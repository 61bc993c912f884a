/*
 * A spinning UDP ping-pong of 64-byte datagrams, one socket call at a time, to take apart what
 * the kernel's side of a spinning one-way latency costs for each way of using a UDP socket that
 * the UDP backend uses (bench/pingpong/anatomy.sh runs it; docs/benchmarks.md has the figures).
 *
 *   udp_pingpong [-c] [-m] [-g] [-s] [-t] [-y] server
 *   udp_pingpong [-c] [-m] [-g] [-s] [-t] [-y] [-n EXCHANGES] client SERVER_IPV4
 *
 *   -c  connected sockets (the client from the start, the server after the first datagram):
 *       a send reuses the socket's route, a receive finds the socket by early demux
 *   -m  receive with recvmmsg(2), 8 messages with room for control messages, as quinn-udp
 *       does, instead of recvfrom(2)
 *   -g  UDP_GRO on the socket (the backend's receive offload)
 *   -s  each send with a UDP_SEGMENT control message (the backend's send offload)
 *   -t  each send with an IP_TOS control message (ECT(0), as the backend marks ECN), and
 *       IP_RECVTOS on the socket
 *   -y  sched_yield(2) after each empty receive (the busy-polling NIC's loop)
 *   -u  receive through io_uring (built with -DWITH_IO_URING, liburing): one multishot
 *       receive into a ring of provided buffers, armed once; an empty receive is a look at
 *       the completion queue, no system call. Completions are posted by task work that the
 *       kernel runs in this thread, so the task is notified (the default, an IPI if it spins
 *       in user space) ...
 *   -U  ... or, with IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG, not interrupted: an empty
 *       receive that finds the ring's TASKRUN flag set enters the kernel to run it
 *       (io_uring_get_events), else makes no system call
 *
 * Both sides spin on non-blocking receives. The client prints the median and the 99th
 * percentile of half the round trip, in microseconds. UDP port 4792 on both sides.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_IO_URING
#include <liburing.h>
#endif

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

enum { PORT = 4792, SIZE = 64, BATCH = 8, ROOM = 65536 };

static int connected, mmsg, gro, gso, tos, yield, uring, coop;
static int sock;
static struct sockaddr_in peer;
static char bufs[BATCH][ROOM];
static char controls[BATCH][128];

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

#ifdef WITH_IO_URING
enum { NBUF = 64, BUFSZ = 2048, BGID = 7 };
static struct io_uring ring;
static struct io_uring_buf_ring *br;
static char (*ubufs)[BUFSZ];

static void arm(void) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    io_uring_prep_recv_multishot(sqe, sock, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    if (io_uring_submit(&ring) < 0) { perror("io_uring_submit"); exit(1); }
}

static void uring_setup(void) {
    struct io_uring_params p = {0};
    if (coop) p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    int ret = io_uring_queue_init_params(64, &ring, &p);
    if (ret < 0) { fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret)); exit(1); }
    if (posix_memalign((void **)&br, 4096, NBUF * sizeof(struct io_uring_buf))) exit(1);
    ubufs = malloc(NBUF * BUFSZ);
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = NBUF, .bgid = BGID};
    ret = io_uring_register_buf_ring(&ring, &reg, 0);
    if (ret < 0) { fprintf(stderr, "io_uring_register_buf_ring: %s\n", strerror(-ret)); exit(1); }
    for (int i = 0; i < NBUF; i++)
        io_uring_buf_ring_add(br, ubufs[i], BUFSZ, i, io_uring_buf_ring_mask(NBUF), i);
    io_uring_buf_ring_advance(br, NBUF);
    arm();
}

static int uring_receive(void) {
    struct io_uring_cqe *cqe;
    if (coop && (IO_URING_READ_ONCE(*ring.sq.kflags) & IORING_SQ_TASKRUN))
        io_uring_get_events(&ring);
    if (io_uring_peek_cqe(&ring, &cqe) != 0) return 0;
    int res = cqe->res, flags = cqe->flags;
    io_uring_cqe_seen(&ring, cqe);
    if (flags & IORING_CQE_F_BUFFER) {
        int id = flags >> IORING_CQE_BUFFER_SHIFT;
        io_uring_buf_ring_add(br, ubufs[id], BUFSZ, id, io_uring_buf_ring_mask(NBUF), 0);
        io_uring_buf_ring_advance(br, 1);
    }
    if (!(flags & IORING_CQE_F_MORE)) arm();
    return res > 0;
}
#endif

/* One non-blocking receive; whether anything came (the sender's address lands in `peer`). */
static int receive(void) {
#ifdef WITH_IO_URING
    if (uring) return uring_receive();
#endif
    if (mmsg) {
        struct mmsghdr msgs[BATCH];
        struct iovec iov[BATCH];
        struct sockaddr_in from[BATCH];
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){bufs[i], ROOM};
            memset(&msgs[i], 0, sizeof msgs[i]);
            msgs[i].msg_hdr = (struct msghdr){
                .msg_name = &from[i], .msg_namelen = sizeof from[i],
                .msg_iov = &iov[i], .msg_iovlen = 1,
                .msg_control = controls[i], .msg_controllen = sizeof controls[i]};
        }
        int n = recvmmsg(sock, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n > 0) peer = from[0];
        return n > 0;
    }
    socklen_t len = sizeof peer;
    return recvfrom(sock, bufs[0], ROOM, MSG_DONTWAIT, (struct sockaddr *)&peer, &len) > 0;
}

static void send_one(int is_connected) {
    char payload[SIZE] = {0};
    struct iovec iov = {payload, SIZE};
    union {
        char bytes[CMSG_SPACE(sizeof(unsigned short)) + CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (!is_connected) {
        msg.msg_name = &peer;
        msg.msg_namelen = sizeof peer;
    }
    if (gso || tos) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.bytes;
        msg.msg_controllen = sizeof control.bytes;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        size_t used = 0;
        if (gso) {
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(unsigned short));
            *(unsigned short *)CMSG_DATA(c) = SIZE;
            used += CMSG_SPACE(sizeof(unsigned short));
            c = CMSG_NXTHDR(&msg, c);
        }
        if (tos) {
            c->cmsg_level = IPPROTO_IP;
            c->cmsg_type = IP_TOS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            *(int *)CMSG_DATA(c) = 2; /* ECT(0) */
            used += CMSG_SPACE(sizeof(int));
        }
        msg.msg_controllen = used;
    }
    if (sendmsg(sock, &msg, 0) < 0) {
        perror("sendmsg");
        exit(1);
    }
}

static void wait_for_one(void) {
    while (!receive())
        if (yield) sched_yield();
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long exchanges = 100000;
    int opt;
    while ((opt = getopt(argc, argv, "cmgstyuUn:")) != -1) {
        switch (opt) {
        case 'c': connected = 1; break;
        case 'm': mmsg = 1; break;
        case 'g': gro = 1; break;
        case 's': gso = 1; break;
        case 't': tos = 1; break;
        case 'y': yield = 1; break;
        case 'u': uring = 1; break;
        case 'U': uring = 1; coop = 1; break;
        case 'n': exchanges = atol(optarg); break;
        default: fprintf(stderr, "usage: see the comment at the top of udp_pingpong.c\n"); return 2;
        }
    }
    if (optind >= argc) { fprintf(stderr, "server or client SERVER_IPV4\n"); return 2; }
    int server = strcmp(argv[optind], "server") == 0;
    if (!server && optind + 1 >= argc) { fprintf(stderr, "client needs SERVER_IPV4\n"); return 2; }

    sock = socket(AF_INET, SOCK_DGRAM, 0);
    int one = 1;
    if (gro && setsockopt(sock, SOL_UDP, UDP_GRO, &one, sizeof one) < 0) perror("UDP_GRO");
    if (tos && setsockopt(sock, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) < 0) perror("IP_RECVTOS");
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    if (bind(sock, (struct sockaddr *)&local, sizeof local) < 0) { perror("bind"); return 1; }

#ifdef WITH_IO_URING
    if (uring && server) {
        /* The first datagram by a plain receive, for the client's address. */
        socklen_t len = sizeof peer;
        if (recvfrom(sock, bufs[0], ROOM, 0, (struct sockaddr *)&peer, &len) < 0) { perror("recvfrom"); return 1; }
        uring_setup();
        send_one(0);
    } else if (uring) {
        uring_setup();
    }
#else
    if (uring) { fprintf(stderr, "-u needs a build with -DWITH_IO_URING -luring\n"); return 2; }
#endif
    if (server) {
        int is_connected = 0;
        for (;;) {
            wait_for_one();
            if (connected && !is_connected) {
                if (connect(sock, (struct sockaddr *)&peer, sizeof peer) < 0) { perror("connect"); return 1; }
                is_connected = 1;
            }
            send_one(is_connected);
        }
    }

    peer = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(PORT)};
    if (inet_pton(AF_INET, argv[optind + 1], &peer.sin_addr) != 1) { fprintf(stderr, "bad address\n"); return 2; }
    if (connected && connect(sock, (struct sockaddr *)&peer, sizeof peer) < 0) { perror("connect"); return 1; }
    double *one_way = malloc(exchanges * sizeof *one_way);
    if (!one_way) return 1;
    for (long i = 0; i < exchanges; i++) {
        double start = now_ns();
        send_one(connected);
        wait_for_one();
        one_way[i] = (now_ns() - start) / 2000.0;
    }
    qsort(one_way, exchanges, sizeof *one_way, by_value);
    printf("%.2f %.2f\n", one_way[exchanges / 2], one_way[exchanges * 99 / 100]);
    return 0;
}
