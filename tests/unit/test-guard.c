// SPDX-License-Identifier: MIT
/* The pass-through guard, including the vfork child/parent distinction. */
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guard.h"
#include "tap.h"

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
