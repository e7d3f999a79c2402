// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the queue-pair side of an upgraded connection (src/conn.c
 * over src/rdma.c):
 * the immediate-data decoder and the checks of the peer's credit and
 * cut-over counters, driven through the public entry points
 * rsx_conn_poll(), rsx_conn_read(), rsx_conn_write(), rsx_conn_cutover()
 * and rsx_conn_fin().
 *
 * No device: the connection is assembled by hand around a fake verbs
 * context whose poll_cq hands out completions that the input makes up,
 * and whose post_send plays a strict peer.  What a hostile peer controls
 * is what the input controls: the 32-bit immediate of every message, the
 * control area it writes (credits, cut-over) and the ring bytes.  Local
 * completions (our sends) come only for requests really posted, as from a
 * real device.
 *
 * The input is a list of operations, one byte of opcode each followed by
 * its arguments (missing bytes read as 0).  The first bytes give our ring
 * size, the peer's ring size and the peer's rq_depth; the peer's values
 * go through rsx_wire_decode() like a real ACK.
 *
 * Checked after every step, beyond ASan/UBSan's memory checks (our ring,
 * the staging buffer and the simulated peer ring are exactly as large as
 * they claim):
 *  - never more unread bytes than our ring holds; never more bytes in
 *    flight than the peer's ring holds; never more messages in flight than
 *    the receives the peer said it keeps posted;
 *  - every request we post writes inside the peer's ring (data never
 *    across its end) or into its control area;
 *  - we never re-post more receives than the queue has room for;
 *  - the bytes the application reads are exactly those the peer's DATA
 *    messages announced, in order.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "fuzz.h"

#define RQ_DEPTH	128	/* conn.c posts this many receives at start */
#define SQ_DEPTH	64
#define MAX_CQE		1024

/* The simulated device and peer. */
static struct {
	struct ibv_wc cqe[MAX_CQE];
	unsigned int ncqe;		/* completions waiting in the CQ */
	uint64_t rq_posted;		/* receives outstanding */
	uint64_t sq_pending;		/* posted requests not yet completed */
	uint64_t last_signaled;		/* wr_id of the last signalled one */
	uint64_t next_wr;
	uint8_t *peer_mem;		/* the peer's ring + control area */
	uint32_t peer_ring;
	uint64_t peer_addr;
	uint32_t peer_rkey;
	uint64_t peer_head;		/* DATA bytes we wrote to the peer */
	uint64_t rx_written;		/* pattern bytes the peer wrote us */
	uint64_t app_read;		/* ... the application has read */
	int rx_unknown;			/* ring contents no longer known */
	int fin_posted;
} sim;

static uint8_t pattern(uint64_t pos)
{
	return (uint8_t)(pos * 131 + (pos >> 8) * 7 + 1);
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	uint64_t off;
	uint32_t imm, type, len;

	for (; wr; wr = wr->next) {
		FUZZ_ASSERT(wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
		FUZZ_ASSERT(wr->wr.rdma.rkey == sim.peer_rkey);
		FUZZ_ASSERT(wr->wr.rdma.remote_addr >= sim.peer_addr);
		off = wr->wr.rdma.remote_addr - sim.peer_addr;
		len = wr->num_sge ? wr->sg_list[0].length : 0;
		FUZZ_ASSERT(wr->num_sge <= 1);
		FUZZ_ASSERT(off + len <= sim.peer_ring + RSX_CTRL_SIZE);
		imm = be32toh(wr->imm_data);
		type = imm >> 28;
		FUZZ_ASSERT(type <= RSX_IMM_FIN);
		if (type == RSX_IMM_DATA) {
			FUZZ_ASSERT(len && len == (imm & 0x0fffffff));
			FUZZ_ASSERT(off + len <= sim.peer_ring);
			FUZZ_ASSERT(off == (sim.peer_head & (sim.peer_ring - 1)));
			sim.peer_head += len;
		} else {
			FUZZ_ASSERT(off >= sim.peer_ring);
		}
		if (type == RSX_IMM_FIN)
			sim.fin_posted = 1;
		/* the device reads the source: ASan checks it is ours */
		if (len)
			memcpy(sim.peer_mem + off,
			       (const void *)(uintptr_t)wr->sg_list[0].addr,
			       len);
		FUZZ_ASSERT(sim.sq_pending < SQ_DEPTH);
		sim.sq_pending++;
		sim.next_wr = wr->wr_id;
		if (wr->send_flags & IBV_SEND_SIGNALED)
			sim.last_signaled = wr->wr_id;
	}
	*bad = NULL;
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next)
		sim.rq_posted++;
	FUZZ_ASSERT(sim.rq_posted <= RQ_DEPTH);
	*bad = NULL;
	return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int n = (unsigned int)num < sim.ncqe ? num : (int)sim.ncqe;

	memcpy(wc, sim.cqe, n * sizeof(*wc));
	memmove(sim.cqe, sim.cqe + n, (sim.ncqe - n) * sizeof(*wc));
	sim.ncqe -= n;
	return n;
}

static int fake_req_notify(struct ibv_cq *cq, int solicited)
{
	return 0;
}

static struct ibv_context ctx;
static struct ibv_qp qp;
static struct ibv_cq cq;
static struct ibv_mr stage_mr;

static void check(const struct rsx_conn *c)
{
	FUZZ_ASSERT(c->rx_head - c->rx_tail <= c->ring_size);
	FUZZ_ASSERT(c->rx_tail <= c->rx_head);
	FUZZ_ASSERT(c->tx_acked <= c->tx_head);
	FUZZ_ASSERT(c->tx_head - c->tx_acked <= c->peer.ring_size);
	FUZZ_ASSERT(c->tx_msgs_acked <= c->tx_msgs);
	FUZZ_ASSERT(c->tx_msgs - c->tx_msgs_acked <= c->peer.rq_depth);
	FUZZ_ASSERT(c->rx_tcp_limit >= -1);
	FUZZ_ASSERT(c->sq_done <= c->sq_posted);
	FUZZ_ASSERT(c->tx_head == sim.peer_head);
	FUZZ_ASSERT(rsx_conn_readable(c) <= c->ring_size);
	FUZZ_ASSERT(sim.rq_posted <= RQ_DEPTH);
}

/* A message from the peer: control area first, then the completion. */
static void peer_message(struct rsx_conn *c, struct input *in)
{
	uint8_t how = take(in, 1);
	uint32_t imm = take(in, 4), len;
	struct ibv_wc *wc;
	uint64_t off, i;

	if (!sim.rq_posted || sim.ncqe == MAX_CQE)
		return;		/* the device drops it (RNR): nothing to see */
	switch (how & 7) {
	case 0:		/* DATA of a plausible length */
		imm = RSX_IMM_DATA << 28 | (imm & (2 * c->ring_size - 1));
		break;
	case 1:		/* CREDIT near what we sent */
		c->ctrl->credit_bytes = c->tx_acked + take(in, 4) % (c->tx_head -
					c->tx_acked + 2);
		c->ctrl->credit_msgs = c->tx_msgs_acked + take(in, 2) %
				       (c->tx_msgs - c->tx_msgs_acked + 2);
		imm = RSX_IMM_CREDIT << 28;
		break;
	case 2:		/* CUTOVER near what we read over TCP */
		c->ctrl->cutover = c->rx_tcp + (int8_t)take(in, 1);
		imm = RSX_IMM_CUTOVER << 28;
		break;
	case 3:		/* anything in the control area */
		c->ctrl->credit_bytes = take(in, 8);
		c->ctrl->credit_msgs = take(in, 8);
		c->ctrl->cutover = take(in, 8);
		break;
	case 4:
		imm = RSX_IMM_FIN << 28;
		break;
	default:	/* the immediate as it came */
		break;
	}
	/*
	 * What a DATA message puts into our ring, at the peer's producer
	 * cursor.  One that does not fit is a protocol error that conn.c
	 * must catch; should the application have made room by the time it
	 * is polled, the ring holds bytes nobody wrote: stop comparing.
	 */
	if (imm >> 28 == RSX_IMM_DATA) {
		len = imm & 0x0fffffff;
		if (len <= c->ring_size - (sim.rx_written - sim.app_read)) {
			for (i = 0; i < len; i++) {
				off = (sim.rx_written + i) & (c->ring_size - 1);
				c->ring[off] = pattern(sim.rx_written + i);
			}
			sim.rx_written += len;
		} else {
			sim.rx_unknown = 1;
		}
	}
	wc = &sim.cqe[sim.ncqe++];
	memset(wc, 0, sizeof(*wc));
	wc->status = (how & 0xf8) == 0xf8 ? IBV_WC_REM_ACCESS_ERR :
		     IBV_WC_SUCCESS;
	wc->opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	wc->wc_flags = IBV_WC_WITH_IMM;
	wc->imm_data = htobe32(imm);
	sim.rq_posted--;
}

/* The device completes our requests up to the last signalled one. */
static void local_completion(void)
{
	struct ibv_wc *wc;

	if (!sim.last_signaled || sim.ncqe == MAX_CQE)
		return;
	wc = &sim.cqe[sim.ncqe++];
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_SUCCESS;
	wc->opcode = IBV_WC_RDMA_WRITE;
	wc->wr_id = sim.last_signaled;
	sim.sq_pending = sim.next_wr - sim.last_signaled;
	sim.last_signaled = 0;
}

static void app_read(struct rsx_conn *c, struct input *in)
{
	uint32_t len = take(in, 3) % (2 * c->ring_size + 1);
	uint8_t split = take(in, 1), peek = split & 1;
	uint8_t *buf = malloc(len + 1);
	struct iovec iov[3];
	size_t n, a, i;
	uint64_t before = rsx_conn_readable(c);

	if (!buf)
		abort();
	a = len ? (split >> 1) % (len + 1) : 0;
	iov[0] = (struct iovec){ buf, a };
	iov[1] = (struct iovec){ NULL, 0 };
	iov[2] = (struct iovec){ buf + a, len - a };
	n = rsx_conn_read(c, iov, 3, 0, len, peek);
	FUZZ_ASSERT(n == (len < before ? len : before));
	if (!c->err && !sim.rx_unknown) {
		for (i = 0; i < n; i++)
			FUZZ_ASSERT(buf[i] == pattern(sim.app_read + i));
	}
	if (!peek)
		sim.app_read += n;
	free(buf);
}

static void app_write(struct rsx_conn *c, struct input *in)
{
	uint32_t len = take(in, 3) % (2 * c->peer.ring_size + 1);
	uint8_t *buf = malloc(len + 1);
	struct iovec iov[2];
	size_t skip = len ? take(in, 1) % len : 0;
	ssize_t n;

	if (!buf)
		abort();
	memset(buf, 0x5a, len);
	iov[0] = (struct iovec){ buf, len / 3 };
	iov[1] = (struct iovec){ buf + len / 3, len - len / 3 };
	n = rsx_conn_write(c, iov, 2, skip, len - skip);
	FUZZ_ASSERT(n <= (ssize_t)(len - skip));
	FUZZ_ASSERT(n >= 0 || n == c->err);
	free(buf);
}

/*
 * The peer's parameters pass the negotiation decoder first, as in
 * upgrade.c: what it accepts, conn.c must cope with.  Returns -1 for an
 * ACK the decoder refuses (that connection never exists).
 */
static int peer_ack(struct rsx_hello *peer, uint16_t rq_depth)
{
	uint8_t msg[RSX_WIRE_LEN];
	struct rsx_hello h = {
		.type = RSX_MSG_ACK,
		.version = RSX_WIRE_VERSION,
		.nonce = 1,
		.qpn = 0x4321,
		.psn = 1,
		.mtu = 3,
		.rq_depth = rq_depth,
		.ring_size = sim.peer_ring,
		.ring_addr = sim.peer_addr,
		.rkey = sim.peer_rkey,
	};

	rsx_wire_encode(&h, msg);
	return rsx_wire_decode(msg, sizeof(msg), peer) ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct rsx_conn *c;
	uint8_t op;
	int ret;

	memset(&sim, 0, sizeof(sim));
	ctx.ops.post_send = fake_post_send;
	ctx.ops.post_recv = fake_post_recv;
	ctx.ops.poll_cq = fake_poll_cq;
	ctx.ops.req_notify_cq = fake_req_notify;
	qp.context = &ctx;
	qp.qp_num = 0x1234;
	cq.context = &ctx;
	stage_mr.lkey = 0x77;

	c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->ring_size = RSX_RING_MIN << (take(&in, 1) % 5);
	c->rxmem_len = c->ring_size + RSX_CTRL_SIZE;
	c->rxmem = calloc(1, c->rxmem_len);
	c->ring = c->rxmem;
	c->ctrl = (volatile struct rsx_ctrl *)(c->rxmem + c->ring_size);
	sim.peer_ring = RSX_RING_MIN << (take(&in, 1) % 5);
	sim.peer_addr = 0x7f0000000000ull;
	sim.peer_rkey = 0x4242;
	sim.peer_mem = calloc(1, sim.peer_ring + RSX_CTRL_SIZE);
	/* the peer's ACK, as far as rsx_wire_decode() lets a peer go */
	if (peer_ack(&c->peer, take(&in, 2))) {
		free(c->rxmem);
		free(sim.peer_mem);
		free(c);
		return 0;
	}
	c->txmem_len = sim.peer_ring + RSX_CTRL_SIZE;
	c->txmem = malloc(c->txmem_len);
	c->stage = c->txmem;
	c->ctrl_out = (struct rsx_ctrl *)(c->txmem + sim.peer_ring);
	if (!c->rxmem || !c->txmem || !sim.peer_mem)
		abort();
	c->tp = &rsx_rdma_transport;
	c->qp = &qp;
	c->cq = &cq;
	c->stage_mr = &stage_mr;
	c->qp_ready = 1;
	c->rx_tcp_limit = -1;
	sim.rq_posted = RQ_DEPTH;

	while (in.left) {
		op = take(&in, 1);
		switch (op % 9) {
		case 0:
		case 1:
			peer_message(c, &in);
			break;
		case 2:
			local_completion();
			break;
		case 3:
			ret = rsx_conn_poll(c);
			FUZZ_ASSERT(ret >= 0 || ret == c->err);
			break;
		case 4:
			app_read(c, &in);
			break;
		case 5:
			app_write(c, &in);
			break;
		case 6:
			if (!c->tx_ring)
				rsx_conn_cutover(c);
			break;
		case 7:
			rsx_conn_fin(c);
			break;
		case 8:
			/* the application read n more bytes over TCP */
			c->rx_tcp += take(&in, 1);
			break;
		}
		check(c);
	}
	free(c->rxmem);
	free(c->txmem);
	free(sim.peer_mem);
	free(c);
	return 0;
}
