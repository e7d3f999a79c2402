// SPDX-License-Identifier: MIT
/*
 * The program's handlers behind the trampoline (src/sig.c): what the
 * kernel holds, what the program is told, what runs, and what is counted.
 * The unit tests have no shim: libc's sigaction() here is the kernel's
 * view, rsx_sig_action() the program's.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sig.h"
#include "tap.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static volatile int hits1, hits2, info_ok, rearm_hits;

static void h1(int sig)
{
	(void)sig;
	hits1++;
}

static void h2(int sig)
{
	(void)sig;
	hits2++;
}

static void hinfo(int sig, siginfo_t *si, void *uc)
{
	info_ok = sig == SIGUSR2 && si && si->si_signo == SIGUSR2 && uc;
}

/* System V style: the handler puts itself back with signal(). */
static void rearm(int sig)
{
	rearm_hits++;
	rsx_sig_legacy(sig, rearm, signal);
}

static volatile int val_seen, code_seen;

static void hval(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	val_seen = si->si_value.sival_int;
	code_seen = si->si_code;
}

/* The same signals blocked in a and b, every one of them. */
static int same_mask(const sigset_t *a, const sigset_t *b)
{
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(a, sig) != sigismember(b, sig))
			return 0;
	return 1;
}

static struct sigaction act(void (*fn)(int), int flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	return sa;
}

static void *kernel_handler(int sig, int *flags)
{
	struct sigaction k;

	sigaction(sig, NULL, &k);
	if (flags)
		*flags = k.sa_flags;
	return (void *)k.sa_handler;
}

static void *program_handler(int sig, int *flags)
{
	struct sigaction p;

	rsx_sig_action(sig, NULL, &p);
	if (flags)
		*flags = p.sa_flags;
	return (void *)p.sa_handler;
}

static struct rsx_sig_seen other_seen;

static void *other_thread(void *arg)
{
	(void)arg;
	raise(SIGUSR1);
	rsx_sig_snap(&other_seen);
	return NULL;
}

int main(void)
{
	struct sigaction sa, old;
	struct rsx_sig_seen seen;
	sigset_t cur, after;
	pid_t pid;
	int st;
	void *tramp, *got;
	pthread_t t;
	int flags, vg;

	/* before the first upgrade: the program's handlers are untouched */
	sa = act(h1, SA_RESTART);
	ok(!rsx_sig_action(SIGUSR1, &sa, NULL), "set before wrapping");
	ok(kernel_handler(SIGUSR1, NULL) == (void *)h1,
	   "unwrapped: the kernel holds the handler itself");
	ok(!rsx_sig_wrapped(), "not wrapped before rsx_sig_wrap_all");

	rsx_sig_wrap_all();
	ok(rsx_sig_wrapped(), "wrapped after rsx_sig_wrap_all");
	tramp = kernel_handler(SIGUSR1, &flags);
	ok(tramp != (void *)h1 && (flags & SA_SIGINFO) &&
	   (flags & SA_RESTART), "adopted: the trampoline, SA_RESTART kept");
	ok(program_handler(SIGUSR1, &flags) == (void *)h1 &&
	   !(flags & SA_SIGINFO) && (flags & SA_RESTART),
	   "the program is told its own handler and flags");

	rsx_sig_snap(&seen);
	raise(SIGUSR1);
	is_int(hits1, 1, "the handler ran");
	ok(rsx_sig_ran(&seen), "counted on this thread");
	ok(rsx_sig_restart(&seen), "SA_RESTART: the call would go on");

	sa = act(h2, 0);
	ok(!rsx_sig_action(SIGUSR1, &sa, &old), "replaced");
	ok(old.sa_handler == h1 && (old.sa_flags & SA_RESTART) &&
	   !(old.sa_flags & SA_SIGINFO), "old action: the program's");
	ok(kernel_handler(SIGUSR1, NULL) == tramp,
	   "the kernel keeps the trampoline");
	rsx_sig_snap(&seen);
	raise(SIGUSR1);
	is_int(hits2, 1, "the new handler ran");
	ok(rsx_sig_ran(&seen) && !rsx_sig_restart(&seen),
	   "no SA_RESTART: the call ends with EINTR");

	/* SA_SIGINFO handlers get their arguments */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = hinfo;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	rsx_sig_action(SIGUSR2, &sa, NULL);
	raise(SIGUSR2);
	ok(info_ok, "SA_SIGINFO handler: signal, siginfo and context");

	/* SA_RESETHAND: one run, then the default again on both sides */
	sa = act(h1, SA_RESETHAND);
	rsx_sig_action(SIGUSR2, &sa, NULL);
	raise(SIGUSR2);
	is_int(hits1, 2, "SA_RESETHAND handler ran once");
	ok(kernel_handler(SIGUSR2, NULL) == (void *)SIG_DFL &&
	   program_handler(SIGUSR2, NULL) == (void *)SIG_DFL,
	   "SA_RESETHAND: back to SIG_DFL");

	/* ignored and default: straight to the kernel */
	sa = act(SIG_IGN, 0);
	rsx_sig_action(SIGUSR1, &sa, &old);
	ok(old.sa_handler == h2, "SIG_IGN replaces h2 (old reported)");
	ok(kernel_handler(SIGUSR1, NULL) == (void *)SIG_IGN,
	   "SIG_IGN: the kernel's");
	rsx_sig_snap(&seen);
	raise(SIGUSR1);
	ok(!rsx_sig_ran(&seen), "an ignored signal runs nothing");

	/* signal(), siginterrupt(): libc's semantics, then adopted */
	ok(rsx_sig_legacy(SIGUSR1, h1, signal) == SIG_IGN,
	   "signal() returns the old disposition");
	ok(kernel_handler(SIGUSR1, NULL) == tramp,
	   "signal(): behind the trampoline");
	ok(rsx_sig_legacy(SIGUSR1, h2, signal) == h1,
	   "signal() returns the program's handler, not the trampoline");
	ok(!rsx_sig_interrupt(SIGUSR1, 1, siginterrupt), "siginterrupt");
	ok(program_handler(SIGUSR1, &flags) == (void *)h2 &&
	   !(flags & SA_RESTART), "siginterrupt(1) dropped SA_RESTART");
	rsx_sig_snap(&seen);
	raise(SIGUSR1);
	ok(rsx_sig_ran(&seen) && !rsx_sig_restart(&seen),
	   "... and the trampoline knows it");
	got = (void *)rsx_sig_legacy(SIGUSR1, h1, sigset);
	ok(got == (void *)h2, "sigset() returns the program's handler");
	ok(rsx_sig_legacy(SIGUSR1, SIG_HOLD, sigset) == h1,
	   "sigset(SIG_HOLD) returns the handler");
	sigprocmask(SIG_BLOCK, NULL, &cur);
	ok(sigismember(&cur, SIGUSR1), "... and blocks the signal");
	ok(rsx_sig_legacy(SIGUSR1, h2, sigset) == SIG_HOLD &&
	   (sigprocmask(SIG_BLOCK, NULL, &cur), !sigismember(&cur, SIGUSR1)),
	   "sigset() again: SIG_HOLD, and unblocked");

	/* a handler that sets its own action again stays wrapped */
	rsx_sig_legacy(SIGUSR2, rearm, signal);
	raise(SIGUSR2);
	raise(SIGUSR2);
	is_int(rearm_hits, 2, "a self-re-arming handler ran twice");
	ok(kernel_handler(SIGUSR2, NULL) == tramp,
	   "... and is still behind the trampoline");

	/* counts are per thread: the thread that ran the handler */
	rsx_sig_snap(&seen);
	pthread_create(&t, NULL, other_thread, NULL);
	pthread_join(t, NULL);
	ok(!rsx_sig_ran(&seen), "another thread's handler is not ours");
	ok(other_seen.runs == 1, "it counted on its own thread");

	/* the signals of faults are never wrapped */
	sa = act(h1, 0);
	rsx_sig_action(SIGSEGV, &sa, NULL);
	ok(kernel_handler(SIGSEGV, NULL) == (void *)h1,
	   "a fault handler is the kernel's own");
	sa = act(SIG_DFL, 0);
	rsx_sig_action(SIGSEGV, &sa, NULL);

	sa = act(h1, 0);
	ok(rsx_sig_action(SIGKILL, &sa, NULL) == -1, "SIGKILL refused");

	/* fork(): as the shim's wrapper does it; the child can change
	 * actions, and both get their mask back */
	sigprocmask(SIG_BLOCK, NULL, &cur);
	rsx_sig_fork_prepare();
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		rsx_sig_fork_done();
		sa = act(h1, 0);
		_exit(rsx_sig_action(SIGUSR1, &sa, NULL) ? 1 : 0);
	}
	rsx_sig_fork_done();
	ok(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	   WEXITSTATUS(st) == 0, "fork: the child sets an action");
	sigprocmask(SIG_BLOCK, NULL, &after);
	ok(sigismember(&after, SIGUSR1) == sigismember(&cur, SIGUSR1) &&
	   sigismember(&after, SIGTERM) == sigismember(&cur, SIGTERM),
	   "fork: the parent's mask is back");
	ok(rsx_sig_action(0, NULL, &old) == -1 &&
	   rsx_sig_action(NSIG, NULL, &old) == -1, "bad numbers refused");

	/* under a socket lock (rsx_sock_lock) a handler waits */
	sa = act(h1, 0);
	rsx_sig_action(SIGUSR1, &sa, NULL);
	hits1 = 0;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	rsx_sig_hold_enter();
	rsx_sig_hold_enter();
	raise(SIGUSR1);
	ok(hits1 == 0, "under a lock the handler waits");
	/* valgrind restores a mask of its own after a handler */
	vg = getenv("RSOCKX_TEST_VALGRIND") != NULL;
	sigprocmask(SIG_BLOCK, NULL, &after);
	ok(vg || sigismember(&after, SIGUSR1),
	   "... its signal blocked meanwhile%s", vg ? " # SKIP valgrind" : "");
	sigpending(&after);
	ok(vg || sigismember(&after, SIGUSR1),
	   "... and pending again%s", vg ? " # SKIP valgrind" : "");
	rsx_sig_hold_leave(0);
	ok(hits1 == 0, "... still, under the outer lock");
	rsx_sig_snap(&seen);
	rsx_sig_hold_leave(0);
	ok(hits1 == 1 && rsx_sig_ran(&seen), "the last unlock runs it, counted");
	sigprocmask(SIG_BLOCK, NULL, &after);
	ok(same_mask(&cur, &after), "... and the mask is the program's again");

	/* the siginfo it came with */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = hval;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	rsx_sig_action(SIGUSR2, &sa, NULL);
	rsx_sig_hold_enter();
	sigqueue(getpid(), SIGUSR2, (union sigval){ .sival_int = 42 });
	ok(val_seen == 0, "a queued signal waits too");
	rsx_sig_hold_leave(0);
	ok(vg ? val_seen == 0 : val_seen == 42 && code_seen == SI_QUEUE,
	   "... and its handler gets its siginfo (%d, code %d)%s", val_seen,
	   code_seen, vg ? " # SKIP valgrind: raised again without it" : "");

	/* SA_RESETHAND: the kernel reset it already; it still runs once */
	sa = act(h2, SA_RESETHAND);
	rsx_sig_action(SIGUSR1, &sa, NULL);
	hits2 = 0;
	rsx_sig_hold_enter();
	raise(SIGUSR1);
	rsx_sig_hold_leave(0);
	ok(hits2 == 1 && program_handler(SIGUSR1, NULL) == (void *)SIG_DFL,
	   "SA_RESETHAND: ran once after the lock, then SIG_DFL");

	/* SA_NODEFER: the copy must not come straight back in */
	sa = act(h1, SA_NODEFER);
	rsx_sig_action(SIGUSR1, &sa, NULL);
	hits1 = 0;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	rsx_sig_hold_enter();
	raise(SIGUSR1);
	rsx_sig_hold_leave(0);
	sigprocmask(SIG_BLOCK, NULL, &after);
	ok(hits1 == 1 && same_mask(&cur, &after),
	   "SA_NODEFER: waits, runs once, mask back");

	/* RSOCKX_WRAP_HANDLERS=0: the lock blocks all signals instead */
	sa = act(h1, 0);
	rsx_sig_action(SIGUSR1, &sa, NULL);
	hits1 = 0;
	rsx_sig_masks = 1;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	rsx_sig_hold_enter();
	sigprocmask(SIG_BLOCK, NULL, &after);
	ok(sigismember(&after, SIGUSR1) && sigismember(&after, SIGTERM),
	   "masked: a lock blocks all signals");
	raise(SIGUSR1);
	ok(hits1 == 0, "masked: the handler waits");
	rsx_sig_hold_leave(0);
	sigprocmask(SIG_BLOCK, NULL, &after);
	ok(hits1 == 1 && same_mask(&cur, &after),
	   "masked: the last unlock runs it, the program's mask back");
	rsx_sig_masks = 0;
	return done_testing();
}
