// SPDX-License-Identifier: MIT
/* Processes: fork, vfork (see vfork.S), daemon, exec, spawn. */
#include "shim.h"
#include "track.h"
#include "upgrade.h"

RSX_EXPORT pid_t fork(void)
{
	pid_t pid;

	rsx_trace_call("fork", -1);
	pid = RSX_REAL(fork)();
	if (pid == 0 && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_fork_child());
	return pid;
}

RSX_EXPORT pid_t _Fork(void)
{
	pid_t pid;

	rsx_trace_call("_Fork", -1);
	pid = RSX_REAL(_Fork)();
	if (pid == 0 && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_fork_child());
	return pid;
}

/* glibc's daemon() forks internally, past our fork(): 0 means the child. */
RSX_EXPORT int daemon(int nochdir, int noclose)
{
	int ret;

	rsx_trace_call("daemon", -1);
	ret = RSX_REAL(daemon)(nochdir, noclose);
	if (ret == 0 && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_fork_child());
	return ret;
}

/*
 * vfork() is in vfork.S: a wrapper cannot call the real vfork() and return,
 * because the child would return through (and the parent then resume in) a
 * stack frame that the child has already popped.  The assembly stub calls
 * this and jumps to the real vfork() with the caller's frame untouched.
 */
void *rsx_vfork_prepare(void);

void *rsx_vfork_prepare(void)
{
	rsx_trace_call("vfork", -1);
	rsx_guard_vfork_begin();
	return (void *)RSX_REAL(vfork);
}

RSX_EXPORT int execve(const char *path, char *const argv[],
		      char *const envp[])
{
	rsx_trace_call("execve", -1);
	if (!rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_exec());
	return RSX_REAL(execve)(path, argv, envp);
}

RSX_EXPORT int posix_spawn(pid_t *pid, const char *path,
			   const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[],
			   char *const envp[])
{
	rsx_trace_call("posix_spawn", -1);
	return RSX_REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

/*
 * _exit() skips atexit handlers and destructors, but bytes the program sent
 * over an upgraded connection must still reach the peer (TCP would deliver
 * them after the process is gone; a destroyed QP would not).
 */
RSX_EXPORT void _exit(int status)
{
	rsx_trace_call("_exit", -1);
	if (rsx_fdtab_hiwater() && !rsx_guarded())
		rsx_exit_flush();
	RSX_REAL(_exit)(status);
	__builtin_unreachable();
}

RSX_EXPORT void _Exit(int status)
{
	rsx_trace_call("_Exit", -1);
	if (rsx_fdtab_hiwater() && !rsx_guarded())
		rsx_exit_flush();
	RSX_REAL(_Exit)(status);
	__builtin_unreachable();
}
