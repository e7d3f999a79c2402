// SPDX-License-Identifier: MIT
/*
 * Accepted sockets that fork() shared (src/share.c), with real forks:
 * the process left alone with a socket gets it back only when nobody else
 * moved a byte of it while holding it too; a holder that never lets go
 * (killed, or an exec) or that stopped counting keeps the others from it;
 * a failed fork undoes its share; slots run out cleanly.
 */
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "share.h"
#include "sock.h"
#include "tap.h"

static void sock_init(struct rsx_sock *s)
{
	memset(s, 0, sizeof(*s));
	s->kind = RSX_SOCK_TCP;
	s->share_slot = -1;
}

/* fork() as the shim does it for s: a share first, then the child's part. */
static pid_t share_fork(struct rsx_sock *s)
{
	pid_t pid;

	if (rsx_share_fork(s))
		return -1;
	s->shared = 1;
	pid = fork();
	if (pid == 0)
		rsx_share_fork_child();
	else if (pid < 0)
		rsx_share_unfork(s);
	return pid;
}

/* The child's verdict on s, as its exit status: 1 alone, 0 not. */
static int child_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int main(void)
{
	static struct rsx_sock many[RSX_SHARE_SLOTS + 1];
	int pipefd[2], back[2], i, n;
	struct rsx_sock s;
	pid_t pid;
	char c;

	/* the parent closes at once, the child serves (fork per connection) */
	sock_init(&s);
	if (pipe(pipefd) || pipe(back))
		return 1;
	pid = share_fork(&s);
	if (pid == 0) {
		close(pipefd[1]);
		n = rsx_share_alone(&s);	/* the parent holds it still */
		rsx_share_moved(&s);		/* bytes while it does */
		if (write(back[1], "x", 1) != 1 ||
		    read(pipefd[0], &c, 1) != 1)	/* its close */
			_exit(9);
		_exit(!n && rsx_share_alone(&s) && !s.shared &&
		      s.share_slot < 0);
	}
	close(pipefd[0]);
	ok(pid > 0 && s.share_slot >= 0, "a slot at the fork");
	ok(!rsx_share_alone(&s), "the parent is not alone while the child holds it");
	if (read(back[0], &c, 1) != 1)
		return 1;
	rsx_share_drop(&s);			/* close() */
	is_int(s.share_slot, -1, "the parent's close lets go");
	if (write(pipefd[1], "x", 1) != 1)
		return 1;
	close(pipefd[1]);
	is_int(child_status(pid), 1,
	       "the child, alone after the parent's close, having moved bytes "
	       "while the parent held it, has it back");

	/* the child moved bytes, then exited: the parent's counts are wrong */
	sock_init(&s);
	pid = share_fork(&s);
	if (pid == 0) {
		rsx_share_moved(&s);
		rsx_share_drop(&s);		/* exit */
		_exit(0);
	}
	child_status(pid);
	ok(!rsx_share_alone(&s) && s.shared,
	   "a parent left alone after its child moved bytes stays shared");
	rsx_share_drop(&s);

	/* the child never touched it: the parent has it back */
	sock_init(&s);
	pid = share_fork(&s);
	if (pid == 0) {
		rsx_share_drop(&s);
		_exit(0);
	}
	child_status(pid);
	rsx_share_moved(&s);	/* alone already: moves are its own */
	ok(rsx_share_alone(&s) && !s.shared,
	   "a parent whose child let go untouched has it back");

	/* both moved bytes: neither count holds */
	sock_init(&s);
	if (pipe(pipefd))
		return 1;
	pid = share_fork(&s);
	if (pid == 0) {
		close(pipefd[1]);
		rsx_share_moved(&s);
		if (read(pipefd[0], &c, 1) != 1)
			_exit(9);
		_exit(rsx_share_alone(&s));
	}
	close(pipefd[0]);
	rsx_share_moved(&s);
	rsx_share_drop(&s);
	if (write(pipefd[1], "x", 1) != 1)
		return 1;
	close(pipefd[1]);
	is_int(child_status(pid), 0,
	       "after both moved bytes, the one left is not given it back");

	/* a holder that stopped counting (plain TCP after its window) */
	sock_init(&s);
	pid = share_fork(&s);
	if (pid == 0) {
		rsx_share_taint(&s);
		rsx_share_drop(&s);
		_exit(0);
	}
	child_status(pid);
	ok(!rsx_share_alone(&s) && s.shared,
	   "a parent whose child went to plain TCP stays shared");
	rsx_share_drop(&s);

	/* a holder that never lets go (killed, exec'd) */
	sock_init(&s);
	pid = share_fork(&s);
	if (pid == 0)
		_exit(0);
	child_status(pid);
	ok(!rsx_share_alone(&s), "a child gone without letting go keeps it shared");
	rsx_share_drop(&s);

	/* three holders: the grandchild alone once both others let go */
	sock_init(&s);
	if (pipe(pipefd))
		return 1;
	pid = share_fork(&s);
	if (pid == 0) {
		pid_t g;

		close(pipefd[1]);
		g = share_fork(&s);
		if (g == 0) {
			if (read(pipefd[0], &c, 1) != 1)
				_exit(9);
			rsx_share_moved(&s);
			_exit(10 + rsx_share_alone(&s));
		}
		rsx_share_drop(&s);
		if (write(back[1], "x", 1) != 1)
			_exit(9);
		_exit(child_status(g));
	}
	close(pipefd[0]);
	if (read(back[0], &c, 1) != 1)	/* the child let go */
		return 1;
	rsx_share_drop(&s);
	if (write(pipefd[1], "x", 1) != 1)
		return 1;
	close(pipefd[1]);
	is_int(child_status(pid), 11,
	       "a grandchild left alone by its parent and grandparent has it back");

	/* a fork that failed gives its share back */
	sock_init(&s);
	is_int(rsx_share_fork(&s), 0, "shared for a fork");
	s.shared = 1;
	rsx_share_unfork(&s);
	ok(s.share_slot < 0 && !s.shared, "the fork failed: its own again, no slot");

	/* a socket shared without a slot gets none later */
	sock_init(&s);
	s.shared = 1;
	is_int(rsx_share_fork(&s), -EBUSY, "shared before without a slot: none now");
	ok(!rsx_share_alone(&s), "and it stays shared");

	/*
	 * Slots run out.  The two whose child never let go above stay
	 * taken, as they would for a holder that was killed.
	 */
	for (i = 0; i < RSX_SHARE_SLOTS; i++) {
		sock_init(&many[i]);
		if (rsx_share_fork(&many[i]))
			break;
	}
	is_int(i, RSX_SHARE_SLOTS - 2, "every free slot can be taken");
	sock_init(&many[i]);
	is_int(rsx_share_fork(&many[i]), -ENOSPC, "then none is left");
	for (n = i, i = 0; i < n; i++) {
		rsx_share_unfork(&many[i]);	/* as if the fork failed */
		rsx_share_drop(&many[i]);	/* then closed: slot free */
	}
	sock_init(&s);
	is_int(rsx_share_fork(&s), 0,
	       "a slot whose share ended serves again");
	return done_testing();
}
