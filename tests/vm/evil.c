// SPDX-License-Identifier: MIT
/*
 * evil: a hostile rsockx peer that speaks verbs directly (issue 7).
 *
 *   evil -d DEV -g GIDX -c HOST -p PORT [-b ADDR] -m MODE
 *
 * It connects over TCP to a server under librsockx and upgrades like an
 * honest client (HELLO from the project's own encoder, the ACK, its QP to
 * RTS toward the server's, a CUTOVER into the control area), then does one
 * thing a peer must not be able to do:
 *
 *   outside  RDMA WRITE 4096 bytes past the end of the server's ring+ctrl
 *   edge     RDMA WRITE of 16 bytes straddling the end of the control
 *            area (8 in, 8 out; the page behind it is the server's too)
 *   read     RDMA READ of the server's ring (it grants REMOTE_WRITE only)
 *   oldkey   upgrade, close, upgrade again, then write with the first
 *            connection's rkey and address (after a control write with
 *            the current key, which must succeed)
 *   bigimm   a DATA immediate longer than the whole ring
 *   credit   a CREDIT whose counters claim bytes that were never sent
 *   neighbour  two connections to the same server process: the victim
 *            places 64 bytes in its ring; the attacker, knowing the
 *            victim's grant (its ring's address and rkey: the worst case
 *            of a guess), writes 64 others over them from its own QP; then
 *            the victim announces its 64 bytes (the server's application
 *            must get the victim's, never the attacker's)
 *   norecv   upgrade and cut over with no receive posted: every message
 *            of the server's gets an RNR NAK, retried for ever, its FIN
 *            too; prints when the server's TCP end closed, timed from the
 *            CUTOVER (tests/rdma/linger.sh)
 *   nocut    the HELLO and the ACK only: its QP never gets ready and
 *            goes, no CUTOVER; 8 s later 64 bytes over TCP, whose echo
 *            must come back over TCP ("nocut echo ok"), the server back
 *            on plain TCP by then (tests/rdma/cutwait.sh)
 *   nocutshut  as nocut, but at once 64 bytes over TCP and shutdown
 *            (SHUT_WR): the server sees the end before any CUTOVER, its
 *            ping finds no QP, and what it sends after the end must come
 *            over TCP, no reset ("nocutshut echo ok"; tests/rdma/cutwait.sh)
 *
 * Then it waits (at most 15 s) for the server to close the TCP connection.
 * Output lines, one fact each, for tests/rdma/evil.sh:
 *   upgraded qpn=N ring=N        the handshake worked
 *   acked qpn=N                  (nocut) the server's ACK came
 *   cutover ok                   the legitimate CUTOVER completed
 *   control ok                   (oldkey) a write with the live key completed
 *   bad-op status=NAME           completion status of the forbidden op
 *   qp-state NAME                our QP afterwards
 *   server-closed eof|reset|timeout
 *   victim placed|echoed NAME    (neighbour) the victim's write; the echo
 *                                of its 64 bytes came back (or timeout)
 * Exit 0 when it got that far, 2 on a setup error.
 */
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "wire.h"

#define EVIL_RING	65536u
#define EVIL_RQ		256
#define EVIL_BUF	(1u << 20)

struct evil {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
	int gid_index;
	enum ibv_mtu mtu;
	uint8_t *ring;		/* our ring + ctrl: REMOTE_WRITE */
	struct ibv_mr *ring_mr;
	uint8_t *buf;		/* source/target of our own requests */
	struct ibv_mr *buf_mr;
};

struct link {
	int fd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct rsx_hello peer;
};

static struct evil ev;

static void die(const char *what, int err)
{
	fprintf(stderr, "evil: %s: %s\n", what, strerror(err));
	exit(2);
}

static void evil_open(struct evil *e, const char *dev, int gidx)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	int i;

	if (!list)
		die("ibv_get_device_list", errno);
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			break;
	if (!list[i])
		die(dev, ENODEV);
	e->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!e->ctx)
		die("ibv_open_device", errno);
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd)
		die("ibv_alloc_pd", errno);
	if (ibv_query_port(e->ctx, 1, &pa))
		die("ibv_query_port", errno);
	e->mtu = pa.active_mtu;
	e->gid_index = gidx;
	if (ibv_query_gid(e->ctx, 1, gidx, &e->gid))
		die("ibv_query_gid", errno);
	e->ring = aligned_alloc(4096, EVIL_RING + 4096);
	e->buf = aligned_alloc(4096, EVIL_BUF);
	if (!e->ring || !e->buf)
		die("alloc", ENOMEM);
	memset(e->ring, 0, EVIL_RING + 4096);
	memset(e->buf, 0xee, EVIL_BUF);
	e->ring_mr = ibv_reg_mr(e->pd, e->ring, EVIL_RING + RSX_CTRL_SIZE,
				IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE);
	e->buf_mr = ibv_reg_mr(e->pd, e->buf, EVIL_BUF,
			       IBV_ACCESS_LOCAL_WRITE);
	if (!e->ring_mr || !e->buf_mr)
		die("ibv_reg_mr", errno);
}

static int tcp_connect(const char *host, const char *port, const char *bind_to)
{
	struct addrinfo hints, *ai, *bi;
	int fd, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "evil: %s: %s\n", host, gai_strerror(rc));
		exit(2);
	}
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket", errno);
	if (bind_to) {
		hints.ai_flags = AI_PASSIVE;
		if (getaddrinfo(bind_to, NULL, &hints, &bi))
			die("bind address", EINVAL);
		if (bind(fd, bi->ai_addr, bi->ai_addrlen))
			die("bind", errno);
		freeaddrinfo(bi);
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect", errno);
	freeaddrinfo(ai);
	return fd;
}

static void read_full(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("reading the ACK", r ? errno : EPIPE);
		p += r;
		n -= r;
	}
}

static const char *qp_state_str(struct ibv_qp *qp)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD",
					 "SQE", "ERR" };
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) || a.qp_state > 6)
		return "?";
	return n[a.qp_state];
}

/*
 * A completion (at most 20 s): of our own requests (recv 0; those of the
 * receives flushed from a QP in error left out), or of the server's
 * writes with immediate (recv 1).  Returns its status, -1 on timeout.
 */
static int wait_wc(struct link *l, int recv)
{
	struct ibv_wc wc;
	int i, n;

	for (i = 0; i < 20000; i++) {
		n = ibv_poll_cq(l->cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq", EIO);
		if (n == 1 && recv && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			return wc.status;
		if (n == 1 && !recv &&
		    wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM &&
		    !(wc.status != IBV_WC_SUCCESS && wc.wr_id == 0))
			return wc.status;
		if (n == 0)
			usleep(1000);
	}
	return -1;
}

static const char *status_str(int st)
{
	return st < 0 ? "timeout" : ibv_wc_status_str(st);
}

static int post(struct link *l, enum ibv_wr_opcode op, uint64_t raddr,
		uint32_t rkey, uint32_t len, uint32_t imm)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)ev.buf;
	sge.length = len;
	sge.lkey = ev.buf_mr->lkey;
	wr.wr_id = 1;
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(l->qp, &wr, &bad);
}

#define IMM(type, val)	(((uint32_t)(type) << 28) | (val))

/*
 * nocut mode: the HELLO, the server's ACK, and nothing more (no QP made
 * ready, no CUTOVER), to see that the server does not keep its ring for
 * it (conn.h, RSX_CUT_WAIT_MS).
 */
static int hello_only;
/* norecv mode: receives never posted, so every message gets an RNR NAK */
static int no_recvs;

/* Connects and upgrades like rsx_client_start/rsx_client_answer. */
static void upgrade(struct link *l, const char *host, const char *port,
		    const char *bind_to, int rd)
{
	struct ibv_qp_init_attr qia;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_qp_attr qa;
	uint8_t msg[RSX_WIRE_LEN];
	struct rsx_hello h;
	uint64_t nonce;
	uint32_t psn;
	int i, ret, st;

	memset(l, 0, sizeof(*l));
	l->cq = ibv_create_cq(ev.ctx, 2 * EVIL_RQ, NULL, NULL, 0);
	if (!l->cq)
		die("ibv_create_cq", errno);
	memset(&qia, 0, sizeof(qia));
	qia.send_cq = l->cq;
	qia.recv_cq = l->cq;
	qia.qp_type = IBV_QPT_RC;
	qia.cap.max_send_wr = 16;
	qia.cap.max_recv_wr = EVIL_RQ;
	qia.cap.max_send_sge = 1;
	qia.cap.max_recv_sge = 1;
	l->qp = ibv_create_qp(ev.pd, &qia);
	if (!l->qp)
		die("ibv_create_qp", errno);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ret = ibv_modify_qp(l->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		die("RESET->INIT", ret);
	memset(&rwr, 0, sizeof(rwr));
	for (i = 0; i < EVIL_RQ && !no_recvs; i++)
		if (ibv_post_recv(l->qp, &rwr, &rbad))
			die("ibv_post_recv", errno);

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce) ||
	    getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
		die("getrandom", errno);
	memset(&h, 0, sizeof(h));
	h.type = RSX_MSG_HELLO;
	h.version = RSX_WIRE_VERSION;
	h.nonce = nonce;
	h.qpn = l->qp->qp_num;
	h.psn = psn & 0xffffff;
	memcpy(h.gid, ev.gid.raw, 16);
	h.mtu = ev.mtu;
	h.rq_depth = EVIL_RQ;
	h.ring_size = EVIL_RING;
	h.ring_addr = (uintptr_t)ev.ring;
	h.rkey = ev.ring_mr->rkey;
	rsx_wire_encode(&h, msg);

	l->fd = tcp_connect(host, port, bind_to);
	if (write(l->fd, msg, sizeof(msg)) != sizeof(msg))
		die("sending HELLO", errno);
	read_full(l->fd, msg, sizeof(msg));
	ret = rsx_wire_decode(msg, sizeof(msg), &l->peer);
	if (ret || l->peer.type != RSX_MSG_ACK || l->peer.nonce != nonce)
		die("the server's answer is not an ACK for us", EPROTO);
	if (hello_only) {
		printf("acked qpn=%u\n", l->peer.qpn);
		return;
	}

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	qa.path_mtu = l->peer.mtu < ev.mtu ? l->peer.mtu : ev.mtu;
	qa.dest_qp_num = l->peer.qpn;
	qa.rq_psn = l->peer.psn;
	qa.max_dest_rd_atomic = 0;
	qa.min_rnr_timer = 12;
	qa.ah_attr.is_global = 1;
	memcpy(qa.ah_attr.grh.dgid.raw, l->peer.gid, 16);
	qa.ah_attr.grh.sgid_index = ev.gid_index;
	qa.ah_attr.grh.hop_limit = 64;
	qa.ah_attr.port_num = 1;
	ret = ibv_modify_qp(l->qp, &qa, IBV_QP_STATE | IBV_QP_AV |
			    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (ret)
		die("INIT->RTR", ret);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTS;
	qa.timeout = 14;
	qa.retry_cnt = 7;
	qa.rnr_retry = 7;
	qa.sq_psn = h.psn;
	qa.max_rd_atomic = rd;	/* a READ needs one outstanding */
	ret = ibv_modify_qp(l->qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT |
			    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		die("RTR->RTS", ret);
	printf("upgraded qpn=%u ring=%u\n", l->qp->qp_num, l->peer.ring_size);

	/* CUTOVER(0): no byte went over TCP; the counter lands in the ctrl */
	memset(ev.buf, 0, 64);
	ret = post(l, IBV_WR_RDMA_WRITE_WITH_IMM, l->peer.ring_addr +
		   l->peer.ring_size + offsetof(struct rsx_ctrl, cutover),
		   l->peer.rkey, sizeof(uint64_t), IMM(RSX_IMM_CUTOVER, 0));
	if (ret)
		die("posting CUTOVER", ret);
	st = wait_wc(l, 0);
	printf("cutover %s\n", st == IBV_WC_SUCCESS ? "ok" : status_str(st));
	fflush(stdout);
	if (st != IBV_WC_SUCCESS)
		exit(2);
}

static void drop(struct link *l)
{
	close(l->fd);
	ibv_destroy_qp(l->qp);
	ibv_destroy_cq(l->cq);
}

/* Did the server close the TCP connection within 15 s? */
static const char *server_closed(struct link *l);

/* ... and after how long, for norecv: "eof 2103 ms" */
static const char *server_closed_ms(struct link *l)
{
	static char out[64];
	struct timespec a, b;
	const char *what;

	clock_gettime(CLOCK_MONOTONIC, &a);
	what = server_closed(l);
	clock_gettime(CLOCK_MONOTONIC, &b);
	snprintf(out, sizeof(out), "%s %ld ms", what,
		 (long)((b.tv_sec - a.tv_sec) * 1000 +
			(b.tv_nsec - a.tv_nsec) / 1000000));
	return out;
}

static const char *server_closed(struct link *l)
{
	struct pollfd p = { .fd = l->fd, .events = POLLIN };
	char buf[4096];
	ssize_t r;
	int t;

	for (t = 0; t < 150; t++) {
		if (poll(&p, 1, 100) < 0)
			return "poll-error";
		if (!p.revents)
			continue;
		r = read(l->fd, buf, sizeof(buf));
		if (r == 0)
			return "eof";
		if (r < 0)
			return errno == ECONNRESET ? "reset" : "error";
		/* bytes from the server over TCP: ignore */
	}
	return "timeout";
}

/*
 * After the ACK, the TCP connection alone: wait past the server's deadline
 * (its RSOCKX_TEST_CUT_WAIT_MS and the ping's retries), then 64 bytes
 * over TCP must come back over TCP.
 */
static int nocut_tcp(struct link *l)
{
	char out[64], in[64];
	size_t got = 0;
	ssize_t r;

	sleep(8);
	memset(out, 'n', sizeof(out));
	if (write(l->fd, out, sizeof(out)) != sizeof(out))
		die("writing over TCP", errno);
	while (got < sizeof(in)) {
		r = read(l->fd, in + got, sizeof(in) - got);
		if (r <= 0) {
			printf("nocut echo %s after %zu bytes\n",
			       r ? strerror(errno) : "eof", got);
			return 1;
		}
		got += r;
	}
	printf("nocut echo %s\n", memcmp(in, out, sizeof(in)) ? "wrong" : "ok");
	close(l->fd);
	ibv_destroy_cq(l->cq);
	return 0;
}

/*
 * After the ACK: 64 bytes and the end of our stream over TCP at once; the
 * server answers them after our end (tests/rdma/cutwait.sh), then closes.
 */
static int nocutshut_tcp(struct link *l)
{
	char out[64], in[65];
	size_t got = 0;
	ssize_t r;

	memset(out, 's', sizeof(out));
	if (write(l->fd, out, sizeof(out)) != sizeof(out))
		die("writing over TCP", errno);
	if (shutdown(l->fd, SHUT_WR))
		die("shutdown", errno);
	for (;;) {
		r = read(l->fd, in + got, sizeof(in) - got);
		if (r <= 0)
			break;
		got += r;
		if (got == sizeof(in))
			break;
	}
	if (r < 0 || got != sizeof(out) || memcmp(in, out, sizeof(out))) {
		printf("nocutshut echo %s after %zu bytes\n",
		       r < 0 ? strerror(errno) : "wrong", got);
		return 1;
	}
	printf("nocutshut echo ok\n");
	close(l->fd);
	ibv_destroy_cq(l->cq);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: evil -d DEV -g GIDX -c HOST -p PORT [-b ADDR] "
		"-m outside|edge|read|oldkey|bigimm|credit|neighbour|nocut|"
		"nocutshut|norecv\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *host = NULL, *port = NULL, *bind_to = NULL;
	const char *mode = NULL;
	struct link l, old, v;
	uint64_t *ctr;
	int opt, gidx = 1, ret, st;

	while ((opt = getopt(argc, argv, "d:g:c:p:b:m:")) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'c': host = optarg; break;
		case 'p': port = optarg; break;
		case 'b': bind_to = optarg; break;
		case 'm': mode = optarg; break;
		default: usage();
		}
	}
	if (!dev || !host || !port || !mode)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	evil_open(&ev, dev, gidx);

	if (!strcmp(mode, "outside")) {
		upgrade(&l, host, port, bind_to, 0);
		ret = post(&l, IBV_WR_RDMA_WRITE, l.peer.ring_addr +
			   l.peer.ring_size + 4096, l.peer.rkey, 64, 0);
	} else if (!strcmp(mode, "edge")) {
		upgrade(&l, host, port, bind_to, 0);
		ret = post(&l, IBV_WR_RDMA_WRITE, l.peer.ring_addr +
			   l.peer.ring_size + RSX_CTRL_SIZE - 8, l.peer.rkey,
			   16, 0);
	} else if (!strcmp(mode, "read")) {
		upgrade(&l, host, port, bind_to, 1);
		ret = post(&l, IBV_WR_RDMA_READ, l.peer.ring_addr,
			   l.peer.rkey, 4096, 0);
	} else if (!strcmp(mode, "oldkey")) {
		upgrade(&old, host, port, bind_to, 0);
		drop(&old);
		printf("first closed rkey=%#x addr=%#llx\n", old.peer.rkey,
		       (unsigned long long)old.peer.ring_addr);
		upgrade(&l, host, port, bind_to, 0);
		printf("second rkey=%#x addr=%#llx\n", l.peer.rkey,
		       (unsigned long long)l.peer.ring_addr);
		/* control: a plain write (no immediate, no receive taken)
		 * with the live key must go through */
		ret = post(&l, IBV_WR_RDMA_WRITE, l.peer.ring_addr,
			   l.peer.rkey, 64, 0);
		st = ret ? -1 : wait_wc(&l, 0);
		printf("control %s\n", st == IBV_WC_SUCCESS ? "ok" :
		       status_str(st));
		ret = post(&l, IBV_WR_RDMA_WRITE, old.peer.ring_addr,
			   old.peer.rkey, 64, 0);
	} else if (!strcmp(mode, "bigimm")) {
		upgrade(&l, host, port, bind_to, 0);
		/* zero bytes written, but the immediate claims more than the
		 * whole ring */
		ret = post(&l, IBV_WR_RDMA_WRITE_WITH_IMM, l.peer.ring_addr,
			   l.peer.rkey, 0,
			   IMM(RSX_IMM_DATA, l.peer.ring_size + 1));
	} else if (!strcmp(mode, "credit")) {
		upgrade(&l, host, port, bind_to, 0);
		/* the server sent us nothing: claim it sent 1 GiB */
		ctr = (uint64_t *)ev.buf;
		ctr[0] = 1u << 30;
		ctr[1] = 1000;
		ret = post(&l, IBV_WR_RDMA_WRITE_WITH_IMM, l.peer.ring_addr +
			   l.peer.ring_size, l.peer.rkey, 2 * sizeof(uint64_t),
			   IMM(RSX_IMM_CREDIT, 0));
	} else if (!strcmp(mode, "nocut")) {
		hello_only = 1;
		upgrade(&l, host, port, bind_to, 0);
		/* our QP goes, as an honest client's does when it stays TCP */
		ibv_destroy_qp(l.qp);
		return nocut_tcp(&l);
	} else if (!strcmp(mode, "nocutshut")) {
		hello_only = 1;
		upgrade(&l, host, port, bind_to, 0);
		ibv_destroy_qp(l.qp);
		return nocutshut_tcp(&l);
	} else if (!strcmp(mode, "norecv")) {
		no_recvs = 1;
		upgrade(&l, host, port, bind_to, 0);
		printf("server-closed %s\n", server_closed_ms(&l));
		drop(&l);
		return 0;
	} else if (!strcmp(mode, "neighbour")) {
		upgrade(&v, host, port, bind_to, 0);
		upgrade(&l, host, port, bind_to, 0);
		memset(ev.buf, 'v', 64);
		ret = post(&v, IBV_WR_RDMA_WRITE, v.peer.ring_addr,
			   v.peer.rkey, 64, 0);
		st = ret ? -1 : wait_wc(&v, 0);
		printf("victim placed %s\n", status_str(st));
		memset(ev.buf, 0xee, 64);
		ret = post(&l, IBV_WR_RDMA_WRITE, v.peer.ring_addr,
			   v.peer.rkey, 64, 0);
	} else {
		usage();
	}
	if (ret)
		die("posting the bad request", ret);
	st = wait_wc(&l, 0);
	printf("bad-op status=%s\n", status_str(st));
	printf("qp-state %s\n", qp_state_str(l.qp));
	printf("server-closed %s\n", server_closed(&l));
	drop(&l);
	if (!strcmp(mode, "neighbour")) {
		/* zero bytes written: the 64 announced are the ring's */
		ret = post(&v, IBV_WR_RDMA_WRITE_WITH_IMM, v.peer.ring_addr,
			   v.peer.rkey, 0, IMM(RSX_IMM_DATA, 64));
		st = ret ? -1 : wait_wc(&v, 1);
		printf("victim echoed %s\n", st == IBV_WC_SUCCESS ? "ok" :
		       status_str(st));
		drop(&v);
	}
	return 0;
}
