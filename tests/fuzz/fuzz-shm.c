// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the shared-memory transport of a same-host connection
 * (src/shm.c under src/conn.c), as the server has it: a real memfd with
 * both rings, mapped, with the input playing a hostile client that may
 * store anything, at any moment, into the half it can write: our ring, the
 * control area the protocol reads credits and cut-over from, and our
 * message queue (its count, its immediates, the armed, here and woken
 * words); and into its own queue's armed word and stand-in name, which
 * our messages then wake.
 * Between its stores, the input drives our side through rsx_conn_poll(),
 * rsx_conn_read(), rsx_conn_write(), rsx_conn_cutover(), rsx_conn_fin()
 * and rsx_conn_downgrade().
 *
 * The input is a list of operations, one byte of opcode each followed by
 * its arguments (missing bytes read as 0); the first bytes give our ring
 * size and the client's.
 *
 * Checked after every step, beyond the sanitizers' (our stores into the
 * client's half stay inside the mapping, which ends with it):
 *  - never more unread bytes than our ring holds, never more bytes in
 *    flight than the client's ring holds, never more messages in flight
 *    than its queue has entries;
 *  - our own count in the client's queue is the messages we sent;
 *  - the bytes the application reads are the ones the client stored with
 *    the DATA messages that announced them, in order, as long as the
 *    client kept to the protocol (a ring overwritten under unread bytes is
 *    the client's own stream, and the check stops there).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "fuzz.h"
#include "shm.h"

/* The client's side of the stream, as far as it keeps to the protocol. */
static struct {
	uint64_t head;		/* bytes it announced in DATA messages */
	uint32_t msgs;		/* its count of messages in our queue */
	int honest;		/* every store so far kept to the protocol */
	uint8_t *want;		/* what the application must read */
	size_t want_len;
	uint64_t read;		/* bytes the application read */
} cl;

static void client_put(struct rsx_conn *c, uint32_t imm)
{
	struct rsx_shm_q *q = c->shm_rxq;

	q->imm[cl.msgs % RSX_SHM_DEPTH] = imm;
	__atomic_store_n(&q->prod, ++cl.msgs, __ATOMIC_RELEASE);
}

/* A DATA message of n bytes (n from the input, maybe a lie). */
static void client_data(struct rsx_conn *c, struct input *in)
{
	uint32_t n = take(in, 2), off = cl.head & (c->ring_size - 1), i;
	uint8_t b = take(in, 1);

	if (n && n <= c->ring_size - off &&
	    n <= c->ring_size - (cl.head - cl.read)) {
		for (i = 0; i < n; i++)
			c->ring[off + i] = (uint8_t)(b + i);
		if (cl.honest && cl.head + n <= cl.want_len)
			for (i = 0; i < n; i++)
				cl.want[cl.head + i] = (uint8_t)(b + i);
		cl.head += n;
	} else {
		cl.honest = 0;
	}
	client_put(c, RSX_IMM_DATA << 28 | (n & 0x0fffffff));
}

/* Anything into the control area, or a credit that is true. */
static void client_ctrl(struct rsx_conn *c, struct input *in, int honest)
{
	volatile struct rsx_ctrl *x = c->ctrl;

	if (honest) {
		x->credit_bytes = c->tx_head;
		x->credit_msgs = c->tx_msgs;
		client_put(c, RSX_IMM_CREDIT << 28);
		return;
	}
	cl.honest = 0;
	switch (take(in, 1) % 6) {
	case 0: x->credit_bytes = take(in, 8); break;
	case 1: x->credit_msgs = take(in, 8); break;
	case 2: x->cutover = take(in, 8); break;
	case 3: x->down_rx = take(in, 8); break;
	case 4: x->down_tx = take(in, 8); break;
	default: x->cutover_sum = take(in, 8); break;
	}
}

static void check(struct rsx_conn *c)
{
	FUZZ_ASSERT(rsx_conn_readable(c) <= c->ring_size);
	FUZZ_ASSERT(c->tx_head - c->tx_acked <= c->peer.ring_size);
	FUZZ_ASSERT(c->tx_msgs - c->tx_msgs_acked <= RSX_SHM_DEPTH);
	FUZZ_ASSERT(c->shm_txq->prod == (uint32_t)c->tx_msgs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	static uint8_t buf[65536], got[65536];
	struct rsx_hello peer;
	struct rsx_conn *c;
	struct iovec iov;
	uint32_t arm;
	size_t n, i;
	int ret;

	memset(&cl, 0, sizeof(cl));
	cl.honest = 1;
	if (rsx_shm_create(RSX_RING_MIN << (take(&in, 1) % 5), &c))
		return 0;
	memset(&peer, 0, sizeof(peer));
	peer.ring_size = RSX_RING_MIN << (take(&in, 1) % 5);
	peer.rq_depth = RSX_SHM_DEPTH;
	if (rsx_conn_connect(c, &peer)) {
		rsx_conn_destroy(c);
		return 0;
	}
	cl.want_len = 1 << 20;
	cl.want = malloc(cl.want_len);
	if (!cl.want)
		abort();
	c->shm_txq->here = 1;		/* the client has mapped it */
	while (in.left) {
		switch (take(&in, 1) % 12) {
		case 0:
		case 1:
			client_data(c, &in);
			break;
		case 2:
			client_put(c, take(&in, 4));	/* any immediate */
			cl.honest = 0;
			break;
		case 3:
			client_ctrl(c, &in, 0);
			break;
		case 4:
			client_ctrl(c, &in, 1);
			break;
		case 5:		/* the count jumps */
			__atomic_store_n(&c->shm_rxq->prod, take(&in, 4),
					 __ATOMIC_RELEASE);
			cl.honest = 0;
			break;
		case 6:
			ret = rsx_conn_poll(c);
			FUZZ_ASSERT(ret >= 0 || ret == c->err);
			break;
		case 7:
			n = take(&in, 2) % sizeof(got);
			iov.iov_base = got;
			iov.iov_len = n;
			n = rsx_conn_read(c, &iov, 1, 0, n, take(&in, 1) & 1);
			if (cl.honest && cl.read + n <= cl.want_len)
				for (i = 0; i < n; i++)
					FUZZ_ASSERT(got[i] ==
						    cl.want[cl.read + i]);
			cl.read = c->rx_tail;
			break;
		case 8:
			n = take(&in, 2) % sizeof(buf);
			memset(buf, 0xa5, n);
			iov.iov_base = buf;
			iov.iov_len = n;
			rsx_conn_write(c, &iov, 1, 0, n);
			break;
		case 9:
			rsx_conn_cutover(c);
			break;
		case 10:
			rsx_conn_fin(c);
			break;
		default:
			/*
			 * the client lets go of the memory, or takes it back;
			 * it asks for its wake-ups anyhow (on a stand-in of
			 * any name, with any count, or as before 2026-12-07),
			 * and moves our count of them
			 */
			c->shm_txq->here = take(&in, 1) & 1;
			c->shm_txq->xtok = take(&in, 8);
			arm = take(&in, 1) % 4;
			if (arm == 3)
				arm = RSX_SHM_ARM_X | (uint32_t)take(&in, 4);
			__atomic_store_n(&c->shm_txq->armed, arm,
					 __ATOMIC_RELEASE);
			c->shm_rxq->woken = take(&in, 4);
			if (take(&in, 1) & 1)
				rsx_conn_downgrade(c);
			break;
		}
		check(c);
	}
	free(cl.want);
	rsx_conn_destroy(c);
	return 0;
}
