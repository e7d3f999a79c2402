// SPDX-License-Identifier: MIT
/*
 * Encoding and strict validation of negotiation messages (wire.h).  The
 * decoder reads bytes from an unauthenticated peer: it checks every field
 * and never consumes anything itself; the caller removes bytes from the
 * stream only after a message validated completely.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "crc.h"
#include "wire.h"

const uint8_t rsx_wire_magic[RSX_WIRE_MAGIC_LEN] = {
	0xd5, 'R', 'S', 'X', 0x0d, 0x0a, 0x1a, 0x0a,
};

const uint8_t rsx_oob_magic[RSX_OOB_MAGIC_LEN] = { 0xd5, 'R', 'X', 'Q' };

uint32_t rsx_crc32c(const void *buf, size_t len)
{
	return ~rsx_crc32c_update(~0u, buf, len);
}

static void put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

void rsx_wire_encode(const struct rsx_hello *h, uint8_t out[RSX_WIRE_LEN])
{
	memset(out, 0, RSX_WIRE_LEN);
	memcpy(out, rsx_wire_magic, RSX_WIRE_MAGIC_LEN);
	out[8] = h->type;
	out[9] = RSX_WIRE_VERSION;
	put16(out + 10, RSX_WIRE_LEN);
	put32(out + 12, 0);
	put64(out + 16, h->nonce);
	if (h->type != RSX_MSG_NAK) {
		put32(out + 24, h->qpn);
		put32(out + 28, h->psn);
		memcpy(out + 32, h->gid, 16);
		out[48] = h->mtu;
		put16(out + 50, h->rq_depth);
		put32(out + 52, h->ring_size);
		put64(out + 56, h->ring_addr);
		put32(out + 64, h->rkey);
	}
	out[49] = h->reason;
	put32(out + 68, rsx_crc32c(out, 68));
}

/* Fields both message kinds carry, checked alike. */
static int rsx_hello_check(const struct rsx_hello *h)
{
	if (!h->qpn || h->qpn > 0xffffff || h->psn > 0xffffff)
		return -EINVAL;
	if (h->mtu < 1 || h->mtu > 5)	/* IBV_MTU_256 .. IBV_MTU_4096 */
		return -EINVAL;
	if (h->rq_depth < RSX_WIRE_RQ_MIN || h->rq_depth > RSX_WIRE_RQ_MAX)
		return -EINVAL;
	if (h->ring_size < RSX_RING_MIN || h->ring_size > RSX_RING_MAX ||
	    (h->ring_size & (h->ring_size - 1)))
		return -EINVAL;
	if (!h->ring_addr || h->ring_addr + h->ring_size + RSX_CTRL_SIZE <
	    h->ring_addr)
		return -EINVAL;
	return 0;
}

void rsx_oob_req_encode(const struct rsx_hello *h, uint16_t tcp_port,
			uint8_t out[RSX_OOB_REQ_LEN])
{
	memset(out, 0, RSX_OOB_REQ_LEN);
	memcpy(out, rsx_oob_magic, RSX_OOB_MAGIC_LEN);
	out[4] = RSX_WIRE_VERSION;
	out[5] = h->mtu;
	put16(out + 6, tcp_port);
	put64(out + 8, h->nonce);
	put32(out + 16, h->qpn);
	put32(out + 20, h->psn);
	memcpy(out + 24, h->gid, 16);
	put64(out + 40, h->ring_addr);
	put32(out + 48, h->rkey);
	out[52] = (uint8_t)__builtin_ctz(h->ring_size);
	put16(out + 54, h->rq_depth);
}

/*
 * 0: a valid request in h (type HELLO) and *tcp_port.  -EPROTO: not a
 * request of ours.  -EINVAL: ours, but a field is not acceptable; h->nonce
 * and h->version are set, for the NAK.
 */
int rsx_oob_req_decode(const uint8_t *buf, size_t len, struct rsx_hello *h,
		       uint16_t *tcp_port)
{
	if (len < RSX_OOB_REQ_LEN || memcmp(buf, rsx_oob_magic,
					    RSX_OOB_MAGIC_LEN))
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	h->type = RSX_MSG_HELLO;
	h->version = buf[4];
	h->nonce = get64(buf + 8);
	if (h->version != RSX_WIRE_VERSION || buf[53] || buf[52] > 31)
		return -EINVAL;
	h->mtu = buf[5];
	*tcp_port = get16(buf + 6);
	h->qpn = get32(buf + 16);
	h->psn = get32(buf + 20);
	memcpy(h->gid, buf + 24, 16);
	h->ring_addr = get64(buf + 40);
	h->rkey = get32(buf + 48);
	h->ring_size = 1u << buf[52];
	h->rq_depth = get16(buf + 54);
	if (!*tcp_port)
		return -EINVAL;
	return rsx_hello_check(h);
}

/*
 * 0: a complete, valid message in h.
 * -EAGAIN: fewer than RSX_WIRE_LEN bytes, and those are a possible start of
 *          a message (wait for more, within reason).
 * -EPROTO: not a message of ours (leave the bytes to the application).
 * -EINVAL: magic and checksum are right but a field is not acceptable;
 *          h->type, h->version and h->nonce are set (for the NAK).
 */
int rsx_wire_decode(const uint8_t *buf, size_t len, struct rsx_hello *h)
{
	size_t n = len < RSX_WIRE_MAGIC_LEN ? len : RSX_WIRE_MAGIC_LEN;

	if (memcmp(buf, rsx_wire_magic, n))
		return -EPROTO;
	if (len < RSX_WIRE_LEN)
		return -EAGAIN;
	if (get32(buf + 68) != rsx_crc32c(buf, 68))
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	h->type = buf[8];
	h->version = buf[9];
	/* before any -EINVAL: the NAK that answers it must echo the nonce */
	h->nonce = get64(buf + 16);
	if (get16(buf + 10) != RSX_WIRE_LEN || get32(buf + 12) != 0)
		return -EINVAL;
	if (h->type < RSX_MSG_HELLO || h->type > RSX_MSG_NAK)
		return -EINVAL;
	h->reason = buf[49];
	if (h->type == RSX_MSG_NAK)
		return h->reason > RSX_NAK_NONE && h->reason < RSX_NAK_MAX ?
			0 : -EINVAL;
	if (h->version != RSX_WIRE_VERSION)
		return -EINVAL;
	h->qpn = get32(buf + 24);
	h->psn = get32(buf + 28);
	memcpy(h->gid, buf + 32, 16);
	h->mtu = buf[48];
	h->rq_depth = get16(buf + 50);
	h->ring_size = get32(buf + 52);
	h->ring_addr = get64(buf + 56);
	h->rkey = get32(buf + 64);
	if (h->reason)
		return -EINVAL;
	return rsx_hello_check(h);
}

const char *rsx_nak_str(int reason)
{
	static const char *const s[] = {
		[RSX_NAK_NONE] = "none",
		[RSX_NAK_RULES] = "server rules say tcp",
		[RSX_NAK_NODEV] = "server has no RDMA device for its address",
		[RSX_NAK_RESOURCES] = "server out of RDMA resources",
		[RSX_NAK_VERSION] = "server speaks another version",
		[RSX_NAK_INTERNAL] = "server internal error",
		[RSX_NAK_EVENTED] = "server socket in too many epoll sets",
		[RSX_NAK_NOTFOUND] = "server has no such connection",
		[RSX_NAK_STATE] = "server connection cannot move now",
	};

	return reason >= 0 && reason < RSX_NAK_MAX ? s[reason] : "unknown";
}
