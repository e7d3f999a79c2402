// SPDX-License-Identifier: MIT
/*
 * The family's board of out-of-band requests (src/board.c): the slot
 * protocol between a poster (the listener's CM thread) and a taker (the
 * process that holds the socket), in one process and across fork(), and
 * the ways a request ends: answered, expired untaken, taken and never
 * answered, answered too late.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "board.h"
#include "oob.h"
#include "sock.h"
#include "tap.h"

static struct rsx_oob_pend *req(uint16_t peer_port, int64_t expires)
{
	struct rsx_oob_pend *p = rsx_oob_pend_new();

	p->type = RSX_MSG_HELLO;
	p->peer_port = peer_port;
	p->local_port = 80;
	p->peer_addr[15] = 7;
	p->expires = expires;
	p->h.nonce = 0x1234 + peer_port;
	p->h.qpn = 17;
	return p;
}

static void sock_for(struct rsx_sock *s, uint16_t peer_port)
{
	memset(s, 0, sizeof(*s));
	s->peer_port = peer_port;
	s->local_port = 80;
	s->peer_addr[15] = 7;
}

static uint64_t bell_count(int bell)
{
	uint64_t v = 0;

	if (read(bell, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

int main(void)
{
	int bell = eventfd(0, EFD_NONBLOCK), status;
	struct rsx_oob_pend *p, *q, *t, *all[RSX_BOARD_SLOTS];
	struct rsx_sock s, other;
	uint32_t seen = 0;
	pid_t pid;

	ok(!rsx_board_have(), "no board before a listener makes one");
	ok(rsx_board_news(&seen) == 0, "no news without a board");
	is_int(rsx_board_create(bell), 0, "board made");
	ok(rsx_board_have(), "board there");

	/* answered in the same process */
	p = req(1000, 1000);
	is_int(rsx_board_post(p), 0, "posted");
	ok(p->slot >= 0, "has a slot (%d)", p->slot);
	ok(rsx_board_news(&seen), "news after a post");
	ok(!rsx_board_news(&seen), "and no more news after that");
	sock_for(&other, 2000);
	ok(!rsx_board_take(&other), "another socket does not take it");
	sock_for(&s, 1000);
	t = rsx_board_take(&s);
	ok(t && t->slot == p->slot && t->h.nonce == p->h.nonce &&
	   t->h.qpn == 17 && t->type == RSX_MSG_HELLO,
	   "its socket takes it, with the request's fields");
	ok(!rsx_board_take(&s), "taken once only");
	is_int(rsx_board_collect(p, 10), 0, "not answered yet: wait");
	memset(t->answer, 0xab, sizeof(t->answer));
	rsx_board_answer(t);
	is_int(bell_count(bell), 1, "the answer rang the poster's bell");
	is_int(rsx_board_collect(p, 10), 1, "collected");
	ok(p->answer[0] == 0xab && p->answer[RSX_WIRE_LEN - 1] == 0xab,
	   "with the taker's answer");
	is_int(p->slot, -1, "the slot is given back");
	free(t);
	free(p);

	/* nobody takes it: refused at its time */
	p = req(1001, 100);
	is_int(rsx_board_post(p), 0, "posted again");
	is_int(rsx_board_collect(p, 50), 0, "before its time: wait");
	is_int(rsx_board_collect(p, 100), -1, "at its time, untaken: refuse");
	sock_for(&s, 1001);
	ok(!rsx_board_take(&s), "an expired request cannot be taken");
	free(p);

	/* taken, never answered: a grace, then refused; the late answer dropped */
	p = req(1002, 100);
	rsx_board_post(p);
	sock_for(&s, 1002);
	t = rsx_board_take(&s);
	ok(t != NULL, "taken");
	is_int(rsx_board_collect(p, 200), 0, "taken: the taker gets a grace");
	is_int(rsx_board_collect(p, 100 + 2000), -1, "then it is refused");
	q = req(1003, 5000);
	rsx_board_post(q);
	is_int(q->slot, t->slot, "the slot serves the next request");
	rsx_board_answer(t);
	is_int(bell_count(bell), 0, "a late answer rings no bell");
	is_int(rsx_board_collect(q, 10), 0, "and is not the next request's");
	free(t);
	free(p);

	/* the poster takes its own request back (its process accepted) */
	is_int(rsx_board_unpost(q), 0, "unposted");
	sock_for(&s, 1003);
	ok(!rsx_board_take(&s), "not on the board any more");
	free(q);

	/* a fork child takes and answers: the poster, in the parent, gets it */
	p = req(1004, 100000);
	rsx_board_post(p);
	pid = fork();
	if (pid == 0) {
		sock_for(&s, 1004);
		t = rsx_board_take(&s);
		if (!t)
			_exit(2);
		memset(t->answer, 0x5a, sizeof(t->answer));
		rsx_board_answer(t);
		free(t);
		free(p);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "the child took the request");
	is_int(bell_count(bell), 1, "the child rang the family's bell");
	is_int(rsx_board_collect(p, 10), 1, "the parent collects its answer");
	ok(p->answer[0] == 0x5a, "the child's answer");
	free(p);

	/* full: the 65th request finds no slot */
	for (status = 0; status < RSX_BOARD_SLOTS; status++) {
		all[status] = req(3000 + status, 100);
		rsx_board_post(all[status]);
	}
	p = req(5000, 100);
	ok(rsx_board_post(p) < 0 && p->slot == -1, "a full board says so");
	free(p);
	for (status = 0; status < RSX_BOARD_SLOTS; status++)
		free(all[status]);
	return done_testing();
}
