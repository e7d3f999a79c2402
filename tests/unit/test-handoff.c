// SPDX-License-Identifier: MIT
/*
 * Upgraded connections that fork() shared (src/handoff.c), with real
 * forks: a child that asks is answered through the parent's page; where
 * the parent's downgrade says where the stream stands, the child reads
 * exactly those counts, and never those of a slot the parent has taken
 * again for another socket since.
 */
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handoff.h"
#include "sock.h"
#include "tap.h"

static const struct rsx_ho_counts want = {
	.tx = 123456789, .rx = 42, .tx_sum = 0x1122334455667788ull,
	.rx_sum = 0x8877665544332211ull,
};

static void sock_init(struct rsx_sock *s)
{
	memset(s, 0, sizeof(*s));
	s->kind = RSX_SOCK_TCP;
	s->ho_slot = -1;
	s->share_slot = -1;
}

static pid_t ho_fork(void)
{
	pid_t pid = fork();

	if (pid == 0)
		rsx_handoff_fork_child();
	return pid;
}

static int child_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* In the child: 1 when it got TCP and exactly want, 2 TCP and no counts. */
static int child_verdict(struct rsx_sock *s)
{
	struct rsx_ho_counts n;

	if (rsx_handoff_ask(s, 5000))
		return 0;
	if (rsx_handoff_recount(s, &n))
		return 2;
	return !memcmp(&n, &want, sizeof(n));
}

int main(void)
{
	struct rsx_ho_counts other = want;
	struct rsx_sock s, t;
	int bell, go[2], slot;
	uint64_t v;
	pid_t pid;
	char c;

	bell = eventfd(0, EFD_CLOEXEC);
	if (bell < 0 || pipe(go))
		return 1;

	/* the child asks; the parent's downgrade answers with its counts */
	sock_init(&s);
	ok(!rsx_handoff_share(&s, 5, bell) && s.ho_slot >= 0,
	   "a hand-off slot before the fork");
	pid = ho_fork();
	if (pid == 0)
		_exit(child_verdict(&s));
	ok(read(bell, &v, sizeof(v)) == sizeof(v), "the child rang");
	rsx_handoff_counts(&s, &want);
	rsx_handoff_done(&s, 1);
	is_int(child_status(pid), 1,
	       "the child, answered TCP, reads the parent's counts");
	ok(!rsx_handoff_live(&s), "the parent is done with it");
	rsx_handoff_release(&s);

	/* a downgrade that says nothing of the counts: plain TCP */
	sock_init(&s);
	rsx_handoff_share(&s, 5, bell);
	pid = ho_fork();
	if (pid == 0)
		_exit(child_verdict(&s));
	rsx_handoff_done(&s, 1);
	is_int(child_status(pid), 2, "no counts: the child goes on, uncounted");
	rsx_handoff_release(&s);

	/* counts of a slot taken again (another socket's) are not trusted */
	sock_init(&s);
	rsx_handoff_share(&s, 5, bell);
	pid = ho_fork();
	if (pid == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(9);
		_exit(child_verdict(&s));
	}
	rsx_handoff_counts(&s, &want);
	rsx_handoff_done(&s, 1);
	slot = s.ho_slot;
	rsx_handoff_release(&s);		/* the parent closes it */
	sock_init(&t);
	rsx_handoff_share(&t, 6, bell);	/* ... and shares another */
	is_int(t.ho_slot, slot, "the next socket takes the same slot");
	other.tx++;
	rsx_handoff_counts(&t, &other);
	rsx_handoff_done(&t, 1);
	if (write(go[1], "x", 1) != 1)
		return 1;
	is_int(child_status(pid), 2,
	       "the child of the first socket reads no counts of the second");
	rsx_handoff_release(&t);

	/* the parent could not take it back: the child is told so */
	sock_init(&s);
	rsx_handoff_share(&s, 5, bell);
	pid = ho_fork();
	if (pid == 0)
		_exit(child_verdict(&s));
	rsx_handoff_counts(&s, &want);	/* then the downgrade failed */
	rsx_handoff_done(&s, 0);
	is_int(child_status(pid), 0, "a lost connection is not the child's");
	return done_testing();
}
