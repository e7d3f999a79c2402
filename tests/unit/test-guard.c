// SPDX-License-Identifier: MIT
/* The pass-through guard, including the vfork child/parent distinction. */
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

	/* what the vfork stub does, then the real vfork */
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
