// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the negotiation decoder (src/wire.c).  The input is what a
 * peer sent as the first bytes of a TCP stream.  Besides surviving any
 * input, the decoder must keep its promises (wire.h):
 *
 *  - it reads nothing beyond len (the buffer is exactly len bytes);
 *  - a verdict on a prefix never contradicts the verdict on the whole:
 *    "not ours" stays "not ours", "ours so far" means the prefix matches
 *    the magic;
 *  - a message of ours with a bad field still yields its nonce, which the
 *    NAK echoes (each input is decoded as is, and once more with its
 *    magic and checksum made right, so that the fields get explored);
 *  - an accepted HELLO or ACK satisfies every range the QP set-up relies on,
 *    and encodes back to the very same 72 bytes; an accepted NAK carries a
 *    known reason and survives encode/decode.
 *
 * The same input is also taken as the private data of an out-of-band
 * request (oob.h), which a client on the fabric sends to any port that
 * answers probes: accepted only whole, with the same ranges as a HELLO and
 * a TCP port, and encoding back to the same 56 bytes.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "fuzz.h"

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void check_prefixes(const uint8_t *data, size_t size, int whole)
{
	struct rsx_hello h;
	size_t n, m;
	uint8_t *copy;
	int ret;

	for (n = 1; n < RSX_WIRE_LEN && n < size; n++) {
		/* exactly n bytes, so that ASan sees any read past them */
		copy = malloc(n);
		if (!copy)
			return;
		memcpy(copy, data, n);
		ret = rsx_wire_decode(copy, n, &h);
		free(copy);
		m = n < RSX_WIRE_MAGIC_LEN ? n : RSX_WIRE_MAGIC_LEN;
		if (memcmp(data, rsx_wire_magic, m))
			FUZZ_ASSERT(ret == -EPROTO);
		else
			FUZZ_ASSERT(ret == -EAGAIN);
		if (ret == -EPROTO)
			FUZZ_ASSERT(whole == -EPROTO);
	}
}

static void check_hello(const uint8_t *data, const struct rsx_hello *h)
{
	uint8_t out[RSX_WIRE_LEN];
	struct rsx_hello back;

	FUZZ_ASSERT(h->version == RSX_WIRE_VERSION);
	FUZZ_ASSERT(h->flags == 0 && h->reason == 0);
	FUZZ_ASSERT(h->qpn && h->qpn <= 0xffffff && h->psn <= 0xffffff);
	FUZZ_ASSERT(h->mtu >= 1 && h->mtu <= 5);
	FUZZ_ASSERT(h->rq_depth >= RSX_WIRE_RQ_MIN &&
		    h->rq_depth <= RSX_WIRE_RQ_MAX);
	FUZZ_ASSERT(h->ring_size >= RSX_RING_MIN &&
		    h->ring_size <= RSX_RING_MAX &&
		    !(h->ring_size & (h->ring_size - 1)));
	FUZZ_ASSERT(h->ring_addr &&
		    h->ring_addr + h->ring_size + RSX_CTRL_SIZE > h->ring_addr);
	rsx_wire_encode(h, out);
	FUZZ_ASSERT(!memcmp(out, data, RSX_WIRE_LEN));
	FUZZ_ASSERT(rsx_wire_decode(out, sizeof(out), &back) == 0);
	FUZZ_ASSERT(!memcmp(&back, h, sizeof(back)));
}

static void check_nak(const struct rsx_hello *h)
{
	uint8_t out[RSX_WIRE_LEN];
	struct rsx_hello back;

	FUZZ_ASSERT(h->reason > RSX_NAK_NONE && h->reason < RSX_NAK_MAX);
	FUZZ_ASSERT(strlen(rsx_nak_str(h->reason)) > 0);
	rsx_wire_encode(h, out);
	FUZZ_ASSERT(rsx_wire_decode(out, sizeof(out), &back) == 0);
	FUZZ_ASSERT(back.type == RSX_MSG_NAK && back.nonce == h->nonce &&
		    back.reason == h->reason);
}

static void check_one(const uint8_t *data, size_t size)
{
	struct rsx_hello h;
	int ret;

	ret = rsx_wire_decode(data, size, &h);
	FUZZ_ASSERT(ret == 0 || ret == -EAGAIN || ret == -EPROTO ||
		    ret == -EINVAL);
	FUZZ_ASSERT((ret == -EAGAIN) == (size < RSX_WIRE_LEN &&
		    !memcmp(data, rsx_wire_magic, size < RSX_WIRE_MAGIC_LEN ?
			    size : RSX_WIRE_MAGIC_LEN)));
	check_prefixes(data, size, ret);
	if (ret == -EINVAL) {
		/* a NAK answers it, and must echo its nonce (wire.h) */
		FUZZ_ASSERT(h.nonce == be64toh(get_u64(data + 16)));
		FUZZ_ASSERT(h.type == data[8] && h.version == data[9]);
	}
	if (ret == 0) {
		FUZZ_ASSERT(size >= RSX_WIRE_LEN);
		if (h.type == RSX_MSG_NAK)
			check_nak(&h);
		else
			check_hello(data, &h);
	}
	/* the peer's reason byte goes into a log line as is */
	FUZZ_ASSERT(rsx_nak_str(size ? data[0] : 0) != NULL);
	FUZZ_ASSERT(rsx_nak_str(-1) != NULL);
}

static void check_oob(const uint8_t *data, size_t size)
{
	struct rsx_hello h, back;
	uint8_t out[RSX_OOB_REQ_LEN];
	uint16_t port, port2;
	int ret;

	ret = rsx_oob_req_decode(data, size, &h, &port);
	FUZZ_ASSERT(ret == 0 || ret == -EPROTO || ret == -EINVAL);
	if (size < RSX_OOB_REQ_LEN ||
	    memcmp(data, rsx_oob_magic, RSX_OOB_MAGIC_LEN))
		FUZZ_ASSERT(ret == -EPROTO);
	if (ret == -EINVAL)
		FUZZ_ASSERT(h.nonce == be64toh(get_u64(data + 8)));
	if (ret)
		return;
	FUZZ_ASSERT(h.type == RSX_MSG_HELLO && port != 0);
	FUZZ_ASSERT(h.qpn && h.qpn <= 0xffffff && h.psn <= 0xffffff);
	FUZZ_ASSERT(h.mtu >= 1 && h.mtu <= 5);
	FUZZ_ASSERT(h.rq_depth >= RSX_WIRE_RQ_MIN &&
		    h.rq_depth <= RSX_WIRE_RQ_MAX);
	FUZZ_ASSERT(h.ring_size >= RSX_RING_MIN &&
		    h.ring_size <= RSX_RING_MAX &&
		    !(h.ring_size & (h.ring_size - 1)));
	FUZZ_ASSERT(h.ring_addr &&
		    h.ring_addr + h.ring_size + RSX_CTRL_SIZE > h.ring_addr);
	rsx_oob_req_encode(&h, port, out);
	FUZZ_ASSERT(!memcmp(out, data, RSX_OOB_REQ_LEN));
	FUZZ_ASSERT(rsx_oob_req_decode(out, sizeof(out), &back, &port2) == 0);
	FUZZ_ASSERT(!memcmp(&back, &h, sizeof(back)) && port2 == port);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint32_t crc;

	if (!size)
		return 0;	/* the callers never decode an empty read */
	check_one(data, size);
	check_oob(data, size);
	if (size >= RSX_OOB_REQ_LEN) {
		fixed = malloc(size);
		if (!fixed)
			abort();
		memcpy(fixed, data, size);
		memcpy(fixed, rsx_oob_magic, RSX_OOB_MAGIC_LEN);
		check_oob(fixed, size);
		free(fixed);
	}
	/*
	 * Random bytes almost never carry the right CRC-32C, which leaves the
	 * field checks behind it unexplored: decode the input once more with
	 * its magic and checksum made right.
	 */
	if (size < RSX_WIRE_LEN)
		return 0;
	fixed = malloc(size);
	if (!fixed)
		abort();
	memcpy(fixed, data, size);
	memcpy(fixed, rsx_wire_magic, RSX_WIRE_MAGIC_LEN);
	crc = htobe32(rsx_crc32c(fixed, 68));
	memcpy(fixed + 68, &crc, 4);
	check_one(fixed, size);
	free(fixed);
	return 0;
}
