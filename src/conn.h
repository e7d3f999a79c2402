/* SPDX-License-Identifier: MIT */
#ifndef RSX_CONN_H
#define RSX_CONN_H

#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "dev.h"
#include "transport.h"
#include "wire.h"

/*
 * An upgraded connection: one RC queue pair and one ring per direction.
 *
 * Each side owns a receive ring in memory registered for REMOTE_WRITE only
 * (its own MR over exactly the ring and control area, deregistered at
 * close; the memory comes from the device's ring pool), followed by a
 * 64-byte control area that the peer writes cumulative counters into.  The
 * sender keeps a mirror of the peer's ring (the staging buffer, local
 * access only, a block of a registered pool chunk): a byte that
 * goes to ring offset o is copied to staging offset o first, so staging space
 * is free exactly when ring space is, and no send completion is needed to
 * reuse it.
 *
 * Every message is an RDMA WRITE WITH IMMEDIATE; the 32-bit immediate says
 * what it is:
 *
 *   bits 31..28  type: 0 DATA, 1 CREDIT, 2 CUTOVER, 3 FIN, 4 DOWNGRADE
 *   bits 27..0   DATA: bytes written at the producer cursor (never across
 *                the end of the ring); others: 0
 *
 * CREDIT and CUTOVER write their values into the receiver's control area
 * (struct rsx_ctrl) in the same message; the completion guarantees they have
 * landed.  All counters are cumulative, so a later message supersedes an
 * earlier one, and each is checked against what was really sent before use.
 * Every message consumes one posted receive: the peer's rq_depth is a window
 * of messages, returned with the CREDIT counters like bytes are.
 *
 * After an out-of-band upgrade (oob.h) CUTOVER also carries cutover_sum,
 * the CRC-32C (crc.h, in the low 32 bits) of the bytes the sender sent
 * over TCP; the reader
 * checks it against what it read before it takes the ring, and a server
 * moves its own sends to the ring only once it holds.  The request that
 * started the upgrade came from outside the TCP connection: this ties it
 * to a party that knows the stream.  (The message writes the control
 * area from cutover to cutover_sum; down_rx and down_tx in between are
 * read only with a DOWNGRADE, which writes them anew.)
 *
 * DOWNGRADE is the last message of a side that is about to lose its RDMA
 * resources (exec): it carries down_rx, the ring bytes its application has
 * read, and down_tx, the bytes it wrote into the peer's ring.  The peer
 * reads its ring up to down_tx and then TCP again; it sends again over TCP,
 * starting with its ring bytes from down_rx on, which its staging mirror
 * still holds (nothing past the peer's credits is ever overwritten).
 *
 * The client cuts over right after the ACK, or never (and then it destroys
 * its QP); an out-of-band client whose program sleeps in poll() keeps its
 * QP connected until it does (midstream.c).  So a server that has had no
 * CUTOVER RSX_CUT_WAIT_MS after its ACK sends a zero-length RDMA WRITE:
 * a client QP that does not take it within the transport's retries never
 * cut over and never will (an in-band client that reads the ACK more than
 * a third of that after its HELLO stays TCP rather than cut over), and the
 * server goes back to plain TCP, its ring freed; a QP that takes it is
 * waited for as long again.  A HELLO alone pins nothing for longer.
 */
enum rsx_imm_type {
	RSX_IMM_DATA = 0,
	RSX_IMM_CREDIT = 1,
	RSX_IMM_CUTOVER = 2,
	RSX_IMM_FIN = 3,
	RSX_IMM_DOWN = 4,
};

struct rsx_ctrl {
	uint64_t credit_bytes;	/* ring bytes the peer has consumed */
	uint64_t credit_msgs;	/* messages the peer has taken in */
	uint64_t cutover;	/* bytes the peer sent over TCP after the handshake */
	uint64_t down_rx;	/* DOWNGRADE: our ring bytes the peer has read */
	uint64_t down_tx;	/* DOWNGRADE: bytes the peer wrote into our ring */
	uint64_t cutover_sum;	/* out of band: CRC-32C of those bytes */
	uint64_t pad[2];
};

/* Callers serialise on the owning rsx_sock's lock. */
struct rsx_conn {
	/*
	 * Several threads may wait on one connection (a reader and a
	 * writer).  Only one of them sleeps in poll() on the completion
	 * channel at a time: a completion event is consumed once, and a
	 * second sleeper would never hear of it.  The others wait for the
	 * poller's news on wake_gen, a futex (rsx_conn_nap): unlike a
	 * condition variable, a signal ends that wait the way it ends the
	 * kernel's own socket wait (EINTR, or a restart under SA_RESTART).
	 * One that needs more events than the poller watches kicks it
	 * through kick_fd (an eventfd), made at the first sleep in poll():
	 * a connection that an evented program only waits for through its
	 * stand-in never has one (a descriptor fewer, issue 20).
	 */
	int kick_fd;
	uint8_t polling;	/* a thread sleeps in poll() */
	const void *poller;	/* which (its &rsx_sig_hold), while polling */
	uint32_t waiters;	/* threads in rsx_conn_nap */
	short want;		/* TCP events the waiters want */
	uint32_t wake_gen;	/* bumped by rsx_conn_wake */
	const struct rsx_transport *tp;	/* RDMA or shared memory */
	/* the RDMA transport's (rdma.h) */
	struct rsx_dev *dev;
	struct ibv_comp_channel *chan;	/* own; NULL: the device's */
	struct ibv_cq *cq;
	/*
	 * On the device's channel (rsx_dev_chan): set by the thread that
	 * takes this CQ's event off it (rsx_rdma_chan_drain), under
	 * rsx_cq_lock and without our socket's lock, which then kicks
	 * kick_fd and gives watch_key to the readiness watcher.  Folded into
	 * armed by the owner (__atomic).
	 */
	int cq_fired;
	uint64_t watch_key;	/* the watcher's for our CQ; 0: unwatched */
	struct ibv_pd *pd;		/* this connection's alone */
	struct ibv_qp *qp;
	struct ibv_mr *ring_mr;		/* the peer's grant: this ring only */
	struct ibv_mr *stage_mr;	/* the staging buffer, LOCAL_WRITE */
	struct rsx_mp_block rxblk;	/* ring + control area, pooled */
	struct rsx_mp_block txblk;	/* staging + control source, pooled */
	uint8_t *rxmem;
	size_t rxmem_len;
	uint8_t *txmem;
	size_t txmem_len;
	uint8_t *ring;
	uint32_t ring_size;
	volatile struct rsx_ctrl *ctrl;	/* written by the peer */
	uint8_t *stage;			/* mirror of the peer's ring */
	struct rsx_ctrl *ctrl_out;	/* source of our control writes */
	uint32_t max_inline;
	uint32_t psn;
	uint64_t nonce;
	struct rsx_hello peer;

	/* sending */
	uint64_t tx_head;	/* bytes written into the peer's ring */
	uint64_t tx_acked;	/* ... of which the peer has consumed */
	uint64_t tx_msgs;	/* messages sent */
	uint64_t tx_msgs_acked;
	uint64_t sq_posted;	/* work requests posted (wr_id of each) */
	uint64_t sq_done;	/* ... known complete */
	uint32_t unsignaled;
	uint64_t fin_wr;	/* wr_id of our FIN */
	uint64_t tx_tcp;	/* application bytes sent over TCP */
	uint64_t tx_resend;	/* after the peer's DOWNGRADE: staging bytes
				   from here to tx_head go again over TCP */
	uint64_t down_wr;	/* wr_id of our DOWNGRADE */
	uint64_t ping_wr;	/* wr_id of the cut-over deadline's ping */
	int64_t hello_at;	/* ms: a client's HELLO (or request) went */
	int64_t cut_by;		/* ms: a server's next look for a CUTOVER */

	/* receiving */
	uint64_t rx_head;	/* bytes the peer has written into our ring */
	uint64_t rx_tail;	/* ... of which the application has read */
	uint64_t rx_msgs;	/* messages taken in */
	uint64_t credit_bytes_sent;
	uint64_t credit_msgs_sent;
	uint64_t rx_tcp;	/* application bytes read over TCP */
	int64_t rx_tcp_limit;	/* the peer's CUTOVER; -1 until it came */
	uint32_t rq_repost;	/* receives to post again (before a CREDIT) */

	uint8_t qp_ready;	/* our QP is in RTS */
	uint8_t tx_ring;	/* we send through the ring */
	uint8_t rx_ring;	/* we read from the ring */
	uint8_t peer_cutover;	/* the peer's CUTOVER arrived */
	uint8_t peer_fin;
	uint8_t fin_sent;
	uint8_t tcp_eof;	/* the TCP connection was closed by the peer */
	uint8_t err_reported;	/* a send has returned err once */
	uint8_t armed;		/* the CQ will raise an event (not consumed) */
	uint8_t armed_x;	/* ... on the readiness stand-in (transport.h) */
	uint8_t x_off;		/* ... never again: the peer did not count */
	uint8_t peer_down;	/* the peer's DOWNGRADE arrived: no more QP */
	uint8_t down_sent;	/* we sent our DOWNGRADE: no more QP */
	uint8_t down_shut;	/* our FIN went again, as TCP's shutdown */
	uint8_t tcp_reset;	/* broken: the TCP connection was reset */
	uint8_t oob;		/* upgraded out of band: CUTOVER proves */
	uint8_t proved;		/* the peer's CUTOVER proof held */
	uint8_t cut_ping;	/* a ping of a peer that has not cut over is
				 * out (rsx_sock_cut_step, rsx_peer_closed) */
	uint64_t tx_sum;	/* CRC-32C of tx_tcp's bytes (crc.h) */
	uint64_t rx_sum;	/* ... of rx_tcp's */
	uint64_t peer_sum;	/* the peer's CUTOVER proof */
	int err;		/* -errno once the connection broke */
	/* the process's list of connections, for rsx_rdma_port_down() */
	struct rsx_conn *live_next, **live_pprev;
	uint8_t qp_held;	/* counted against RSOCKX_MAX_QPS */

	/* the shared-memory transport instead of a QP (shm.h) */
	uint8_t shm;
	int shm_evfd;		/* ours, which the peer signals: the channel */
	int shm_peer_evfd;	/* the peer's */
	int shm_memfd;		/* the memory, until it is mapped and sent */
	int shm_peer_pid;	/* rsx_shm_alive() */
	void *shm_map;
	size_t shm_map_len;
	struct rsx_shm_q *shm_rxq;	/* written by the peer */
	struct rsx_shm_q *shm_txq;	/* the peer's, which we write */
	uint32_t shm_takes;	/* arms on x that writers took (shm.h) */
	uint32_t shm_lost;	/* ... that we stopped waiting for */
};

/* For logs: the QP's number; 0 for a shared-memory connection. */
static inline uint32_t rsx_conn_id(const struct rsx_conn *c)
{
	return c->qp ? c->qp->qp_num : 0;
}

/*
 * The peer's TCP end closed before its CUTOVER came while our bytes go to
 * its ring: only a ping tells a peer that died (SIGKILL) from one whose
 * CUTOVER is still to come.  A queue pair's ping fails by itself, as a
 * completion that wakes the sleeper; shared memory's is answered at once
 * (ping_now), and a dying peer's TCP end closes before its pid reads as
 * gone (exit closes files first): a sleeper pings again every
 * RSX_GONE_LOOK_MS.
 */
#define RSX_GONE_LOOK_MS 20
static inline int rsx_conn_gone_look(const struct rsx_conn *c)
{
	return c->tp->ping_now && c->tcp_eof && c->tx_ring && !c->peer_cutover &&
	       !c->peer_fin && !c->peer_down && !c->err;
}

/* For the transports' makers: what every connection has. */
struct rsx_conn *rsx_conn_alloc(uint32_t ring_size);
void rsx_conn_destroy(struct rsx_conn *c);
void rsx_conn_hello(struct rsx_conn *c, int type, struct rsx_hello *h);
int rsx_conn_connect(struct rsx_conn *c, const struct rsx_hello *peer);
int rsx_conn_cutover(struct rsx_conn *c);
int rsx_conn_poll(struct rsx_conn *c);
int rsx_conn_fail(struct rsx_conn *c, int err, const char *why);
ssize_t rsx_conn_write(struct rsx_conn *c, const struct iovec *iov,
		       int iovcnt, size_t skip, size_t len);
size_t rsx_conn_tx_room(const struct rsx_conn *c);
size_t rsx_conn_readable(const struct rsx_conn *c);
size_t rsx_conn_read(struct rsx_conn *c, const struct iovec *iov, int iovcnt,
		     size_t skip, size_t len, int peek);
int rsx_conn_fin(struct rsx_conn *c);
int rsx_conn_ping(struct rsx_conn *c);
int rsx_conn_downgrade(struct rsx_conn *c);
int rsx_conn_wait_sent(struct rsx_conn *c, uint64_t wr, int timeout_ms);
int rsx_conn_arm(struct rsx_conn *c);
int rsx_conn_arm_to(struct rsx_conn *c, uint64_t xtok);
int rsx_conn_disarm_x(struct rsx_conn *c);
uint32_t rsx_conn_woken(struct rsx_conn *c);
void rsx_conn_event(struct rsx_conn *c);
int rsx_conn_chan_fd(const struct rsx_conn *c);
int rsx_conn_nap(struct rsx_conn *c, uint32_t gen,
		 const struct timespec *until);
void rsx_conn_wake(struct rsx_conn *c);

#endif
