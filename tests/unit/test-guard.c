// SPDX-License-Identifier: MIT
/* The pass-through guard, including the vfork child/parent distinction. */
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guard.h"
#include "tap.h"

static void on_signal(int sig)
{
	(void)sig;
}

static void on_siginfo(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
}

static void set_handler(int sig, void (*fn)(int), int flags)
{
	struct sigaction sa = { .sa_handler = fn, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* When a blocking call interrupted by a signal is restarted (signal(7)). */
static void test_restartable(void)
{
	struct sigaction sa = { .sa_sigaction = on_siginfo,
				.sa_flags = SA_SIGINFO };
	sigset_t mask;

	ok(rsx_guard_restartable(NULL), "default dispositions: restarted");
	set_handler(SIGUSR1, on_signal, SA_RESTART);
	ok(rsx_guard_restartable(NULL), "an SA_RESTART handler: restarted");
	set_handler(SIGUSR2, on_signal, 0);
	ok(!rsx_guard_restartable(NULL), "a handler without SA_RESTART: EINTR");
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR2);
	ok(rsx_guard_restartable(&mask), "... unless the mask blocks it");
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	ok(rsx_guard_restartable(NULL), "... the thread's mask (NULL) too");
	pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
	set_handler(SIGUSR2, SIG_IGN, 0);
	ok(rsx_guard_restartable(NULL), "an ignored signal: restarted");
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	ok(!rsx_guard_restartable(NULL), "SA_SIGINFO without SA_RESTART: EINTR");
	set_handler(SIGUSR2, SIG_DFL, 0);
	set_handler(SIGSEGV, on_signal, 0);
	ok(rsx_guard_restartable(NULL), "a fault handler is not looked at");
	set_handler(SIGSEGV, SIG_DFL, 0);
	set_handler(SIGUSR1, SIG_DFL, 0);
}

int main(void)
{
	volatile int child_guarded = -1;
	pid_t pid;
	int st;

	ok(!rsx_guarded(), "not guarded by default");
	rsx_guard_enter();
	ok(rsx_guarded(), "guarded inside rsockx");
	rsx_guard_enter();
	rsx_guard_leave();
	ok(rsx_guarded(), "nesting");
	rsx_guard_leave();
	ok(!rsx_guarded(), "released");
	test_restartable();

	/*
	 * Under valgrind (tests/unit/valgrind.test) vfork() is a fork(): the
	 * child's memory is its own, and what it sees cannot be observed.
	 */
	if (getenv("RSOCKX_TEST_VALGRIND")) {
		printf("ok %d # SKIP vfork is a fork under valgrind\n", ++tap_n);
		return done_testing();
	}

	/* what the vfork stub does, then the real vfork */
	fflush(stdout);
	rsx_guard_vfork_begin();
	pid = vfork();
	if (pid == 0) {
		child_guarded = rsx_guarded();	/* shared memory: parent sees it */
		_exit(0);
	}
	waitpid(pid, &st, 0);
	is_int(child_guarded, 1, "vfork child passes straight through");
	ok(!rsx_guarded(), "parent resumes unguarded");
	is_int(rsx_guard, 0, "parent cleared the vfork mark");
	return done_testing();
}
