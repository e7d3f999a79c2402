/* SPDX-License-Identifier: MIT */
#ifndef RSX_WIRE_H
#define RSX_WIRE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Negotiation messages on the TCP stream.
 *
 * The client sends HELLO as the very first bytes of the stream; a server
 * that runs rsockx answers with ACK or NAK as its first bytes.  One fixed
 * layout for all three, integers big-endian:
 *
 *   0  magic[8]   D5 'R' 'S' 'X' 0D 0A 1A 0A  (not text, not TLS, not HTTP/2)
 *   8  u8  type   1 HELLO, 2 ACK, 3 NAK
 *   9  u8  version
 *  10  u16 length (RSX_WIRE_LEN; lets a later version grow the message)
 *  12  u32 flags  (none defined; must be 0)
 *  16  u64 nonce  the client's random number; ACK and NAK echo it, so that
 *                 application data can never be mistaken for an answer
 *  24  u32 qpn    RC queue pair number (24 bits)
 *  28  u32 psn    first packet sequence number (24 bits)
 *  32  u8  gid[16] RoCE v2 GID of the sender's port
 *  48  u8  mtu    enum ibv_mtu of the sender's port
 *  49  u8  reason NAK reason (enum rsx_nak), else 0
 *  50  u16 rq_depth receives the sender keeps posted (message credits)
 *  52  u32 ring_size bytes in the receive ring (power of two); the 64-byte
 *                 control area follows the ring at ring_addr + ring_size
 *  56  u64 ring_addr address of the sender's receive ring
 *  64  u32 rkey   remote key of the ring (REMOTE_WRITE only)
 *  68  u32 crc    CRC-32C of bytes 0..67
 *  72
 *
 * A NAK carries only the header, nonce and reason; the other fields are 0.
 */
#define RSX_WIRE_LEN		72
/* 2: the cut-over's sums are CRC-32C (crc.h), FNV-1a in 1 */
#define RSX_WIRE_VERSION	2
#define RSX_WIRE_MAGIC_LEN	8
#define RSX_CTRL_SIZE		64
#define RSX_RING_MIN		4096u
#define RSX_RING_MAX		(1u << 27)
/*
 * Fewest receives a peer may keep posted: a sender holds 64 of the peer's
 * message credits back for control messages, and a receiver returns
 * credits after 32 messages, so a smaller window would stall the stream
 * (and below 64 would give the sender no limit at all).
 */
#define RSX_WIRE_RQ_MIN		128
#define RSX_WIRE_RQ_MAX		16384

extern const uint8_t rsx_wire_magic[RSX_WIRE_MAGIC_LEN];

enum rsx_msg_type {
	RSX_MSG_HELLO = 1,
	RSX_MSG_ACK = 2,
	RSX_MSG_NAK = 3,
};

enum rsx_nak {
	RSX_NAK_NONE = 0,
	RSX_NAK_RULES,		/* the server's rules say tcp */
	RSX_NAK_NODEV,		/* no RDMA device for the server's address */
	RSX_NAK_RESOURCES,	/* memory, QP or registration failed */
	RSX_NAK_VERSION,	/* the server speaks another version */
	RSX_NAK_INTERNAL,
	RSX_NAK_EVENTED,	/* the server socket is in too many epoll sets */
	RSX_NAK_NOTFOUND,	/* out of band: no such connection here */
	RSX_NAK_STATE,		/* out of band: the connection cannot move now */
	RSX_NAK_MAX,
};

struct rsx_hello {
	uint8_t type;
	uint8_t version;
	uint8_t mtu;
	uint8_t reason;
	uint16_t rq_depth;
	uint32_t flags;
	uint32_t qpn;
	uint32_t psn;
	uint32_t ring_size;
	uint32_t rkey;
	uint64_t nonce;
	uint64_t ring_addr;
	uint8_t gid[16];
};

/*
 * The out-of-band request (oob.h): the private data of an RDMA CM
 * connection request that a client sends to the port of its TCP
 * connection's server.  The request's own addresses give the client's IP
 * address and the server's address and port; tcp_port completes the TCP
 * connection's 4-tuple.  The server answers with a reject whose private
 * data is an ACK or NAK in the layout above (it fits: a reject carries up
 * to 148 bytes, a request only 56).  Integers big-endian:
 *
 *   0  magic[4]  D5 'R' 'X' 'Q'
 *   4  u8  version
 *   5  u8  mtu     enum ibv_mtu of the client's port
 *   6  u16 tcp_port  the client's TCP source port
 *   8  u64 nonce   echoed by the answer
 *  16  u32 qpn     (24 bits)
 *  20  u32 psn     (24 bits)
 *  24  u8  gid[16]
 *  40  u64 ring_addr
 *  48  u32 rkey
 *  52  u8  ring_log2  ring size = 1 << ring_log2
 *  53  u8  0
 *  54  u16 rq_depth
 *  56
 */
#define RSX_OOB_REQ_LEN		56
#define RSX_OOB_MAGIC_LEN	4

extern const uint8_t rsx_oob_magic[RSX_OOB_MAGIC_LEN];

uint32_t rsx_crc32c(const void *buf, size_t len);
void rsx_oob_req_encode(const struct rsx_hello *h, uint16_t tcp_port,
			uint8_t out[RSX_OOB_REQ_LEN]);
int rsx_oob_req_decode(const uint8_t *buf, size_t len, struct rsx_hello *h,
		       uint16_t *tcp_port);
void rsx_wire_encode(const struct rsx_hello *h, uint8_t out[RSX_WIRE_LEN]);
int rsx_wire_decode(const uint8_t *buf, size_t len, struct rsx_hello *h);
const char *rsx_nak_str(int reason);

/* How long a server waits for the client's CUTOVER before it asks the
 * client's QP; a client cuts over within a third of it or never (conn.h). */
#define RSX_CUT_WAIT_MS 30000

#endif
