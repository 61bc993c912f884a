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

static int connected, mmsg, gro, gso, tos, yield;
static int sock;
static struct sockaddr_in peer;
static char bufs[BATCH][ROOM];
static char controls[BATCH][128];

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One non-blocking receive; whether anything came (the sender's address lands in `peer`). */
static int receive(void) {
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
    while ((opt = getopt(argc, argv, "cmgstyn:")) != -1) {
        switch (opt) {
        case 'c': connected = 1; break;
        case 'm': mmsg = 1; break;
        case 'g': gro = 1; break;
        case 's': gso = 1; break;
        case 't': tos = 1; break;
        case 'y': yield = 1; break;
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
