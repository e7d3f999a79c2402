/* SPDX-License-Identifier: MIT */
#ifndef RSX_SHARE_H
#define RSX_SHARE_H

#include "sock.h"

/*
 * Sockets that fork() shared before any upgrade, or that a fork child took
 * back to TCP after one (share.c).
 *
 * An out-of-band upgrade needs the bytes each end moved on TCP (oob.h).
 * Each process counts its own, so a socket that two processes hold is
 * counted right by one of them only as long as the other moves no byte.
 * A server that forks per connection does exactly that: the parent
 * accepts, forks, and closes its copy; the child serves.  So such a
 * socket keeps counting in every holder, and a slot on a page mapped
 * shared before the fork (so only the family sees it) says how many
 * processes still hold it and who moved bytes while another held it too.
 * The process that finds itself the only holder, with no byte moved by
 * anyone else since the fork, knows its counts are the stream's, and may
 * upgrade; every other case stays TCP, as before.
 *
 * A slot's word is (seq << 8 | state); holders changes by atomics, mover
 * by compare-and-swap:
 *   FREE -> USED (the first fork of the socket, holders 2; later forks
 *   add one) -> FREE (the last holder's close or exit, or the one left
 *   alone, which takes the socket back)
 * mover: 0 none yet, the pid of the one process that moved bytes while it
 * was not alone, or -1 (more than one, or a holder that stopped counting
 * and went to plain TCP: nobody's count holds).
 * A holder that ends without close() or exit() (killed, or exec'd: the new
 * program knows no slot) never drops out, so the others stay TCP.
 */
#define RSX_SHARE_SLOTS 1024

int rsx_share_fork(struct rsx_sock *s);
void rsx_share_unfork(struct rsx_sock *s);
void rsx_share_moved(struct rsx_sock *s);
void rsx_share_taint(struct rsx_sock *s);
int rsx_share_alone(struct rsx_sock *s);
void rsx_share_drop(struct rsx_sock *s);
void rsx_share_fork_child(void);
void rsx_share_exit(void);

/*
 * Under s->lock, right before fork(): an accepted socket that may still be
 * upgraded out of band (oob.h), and not yet: it counts on in every holder.
 * One upgraded (in band or out) may come back to TCP for a child (handoff.h),
 * which then counts on too: it needs the holders as well, from the fork
 * on (rsx_fork_share_sockets), in the child's own forks too (RSX_ST_FORKED,
 * its slot inherited; a client's that counts on, RSX_ST_CLIENT_WAIT).  So
 * does a client whose probe or request is out: it asks (again) once one
 * process alone holds it, until its window ends (oob_until).
 */
static inline int rsx_share_may(const struct rsx_sock *s)
{
	if (s->share_slot >= 0 &&
	    (s->state == RSX_ST_FORKED || s->state == RSX_ST_CLIENT_WAIT))
		return 1;
	if (s->state == RSX_ST_CLIENT_WAIT || s->state == RSX_ST_CLIENT_OOB)
		return s->peer_port != 0;
	if (!s->oob_ok)
		return 0;
	return !s->conn &&
	       (s->state == RSX_ST_SERVER_NEW ||
		s->state == RSX_ST_SERVER_STRIP ||
		s->state == RSX_ST_SERVER_WAIT);
}

/* After the fork: s has a slot, so it counts on rather than go to TCP. */
static inline int rsx_share_keeps(const struct rsx_sock *s)
{
	return s->share_slot >= 0;
}

/*
 * Under s->lock: does another process (still) hold s, as far as its
 * counts go?  Finding that none does makes s unshared.
 */
static inline int rsx_sock_shared(struct rsx_sock *s)
{
	return s->shared && !rsx_share_alone(s);
}

#endif
