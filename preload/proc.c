// SPDX-License-Identifier: MIT
/* Processes: fork, vfork (see vfork.S), daemon, exec, spawn. */
#include <alloca.h>
#include <stdarg.h>
#include <stdlib.h>

#include "shim.h"
#include "stats.h"
#include "track.h"
#include "upgrade.h"

RSX_EXPORT pid_t fork(void)
{
	pid_t pid;

	rsx_trace_call("fork", -1);
	if (rsx_guarded())
		return RSX_REAL(fork)();
	rsx_on_fork_prepare();
	pid = RSX_REAL(fork)();
	if (pid == 0)
		RSX_KEEP_ERRNO(rsx_on_fork_child());
	else
		RSX_KEEP_ERRNO(rsx_on_fork_parent(pid < 0));
	return pid;
}

RSX_EXPORT pid_t _Fork(void)
{
	pid_t pid;

	rsx_trace_call("_Fork", -1);
	if (rsx_guarded())
		return RSX_REAL(_Fork)();
	rsx_on_fork_prepare();
	pid = RSX_REAL(_Fork)();
	if (pid == 0)
		RSX_KEEP_ERRNO(rsx_on_fork_child());
	else
		RSX_KEEP_ERRNO(rsx_on_fork_parent(pid < 0));
	return pid;
}

/* glibc's daemon() forks internally, past our fork(): 0 means the child. */
RSX_EXPORT int daemon(int nochdir, int noclose)
{
	int ret;

	rsx_trace_call("daemon", -1);
	if (rsx_guarded())
		return RSX_REAL(daemon)(nochdir, noclose);
	rsx_on_fork_prepare();
	ret = RSX_REAL(daemon)(nochdir, noclose);
	if (ret == 0)
		RSX_KEEP_ERRNO(rsx_on_daemon_child());
	else
		RSX_KEEP_ERRNO(rsx_on_fork_parent(1));	/* its fork failed */
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
	if (!rsx_guarded())
		rsx_on_vfork();
	rsx_guard_vfork_begin();
	return (void *)RSX_REAL(vfork);
}

/*
 * The exec family.  glibc's execv, execvp, execl... call execve()
 * internally, past our wrapper, so each is wrapped: every one hands the
 * sockets that may still receive a HELLO to the new program (see
 * rsx_exec_env()) through its environment.
 */
static char **rsx_exec_prepare(char *const envp[], int self)
{
	if (self && rsx_guard_vfork_child())
		rsx_vfork_exec();	/* marks, no more */
	if (rsx_guarded())
		return NULL;
	rsx_on_exec();
	return rsx_exec_env(envp, self);
}

/* This process is about to become another program: its statistics
 * region says so until the exec fails (rsx_exec_failed()). */
static char **rsx_exec_self(char *const envp[])
{
	char **env = rsx_exec_prepare(envp, 1);

	if (!rsx_guarded())
		RSX_KEEP_ERRNO(rsx_stats_exec(1));
	return env;
}

static int rsx_exec_done(char **env, int ret)
{
	RSX_KEEP_ERRNO(free(env));	/* only when the exec failed */
	return ret;
}

static int rsx_exec_failed(char **env, int ret)
{
	RSX_KEEP_ERRNO(rsx_stats_exec(0));
	return rsx_exec_done(env, ret);
}

RSX_EXPORT int execve(const char *path, char *const argv[],
		      char *const envp[])
{
	char **env;

	rsx_trace_call("execve", -1);
	env = rsx_exec_self(envp);
	return rsx_exec_failed(env, RSX_REAL(execve)(path, argv,
						     env ? env : envp));
}

RSX_EXPORT int execv(const char *path, char *const argv[])
{
	char **env;

	rsx_trace_call("execv", -1);
	env = rsx_exec_self(environ);
	if (!env)
		return rsx_exec_failed(NULL, RSX_REAL(execv)(path, argv));
	return rsx_exec_failed(env, RSX_REAL(execve)(path, argv, env));
}

RSX_EXPORT int execvpe(const char *file, char *const argv[],
		       char *const envp[])
{
	char **env;

	rsx_trace_call("execvpe", -1);
	env = rsx_exec_self(envp);
	return rsx_exec_failed(env, RSX_REAL(execvpe)(file, argv,
						      env ? env : envp));
}

RSX_EXPORT int execvp(const char *file, char *const argv[])
{
	char **env;

	rsx_trace_call("execvp", -1);
	env = rsx_exec_self(environ);
	if (!env)
		return rsx_exec_failed(NULL, RSX_REAL(execvp)(file, argv));
	return rsx_exec_failed(env, RSX_REAL(execvpe)(file, argv, env));
}

RSX_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char **env;

	rsx_trace_call("fexecve", fd);
	env = rsx_exec_self(envp);
	return rsx_exec_failed(env, RSX_REAL(fexecve)(fd, argv,
						      env ? env : envp));
}

/*
 * execl, execlp, execle: the arguments up to the NULL into an array (on
 * the stack: the exec replaces it), then as execv, execvp, execve.
 */
#define RSX_EXECL_ARGV(argv, arg0, ap)					\
	do {								\
		size_t n_ = 1;						\
		va_list c_;						\
									\
		va_copy(c_, ap);					\
		while (va_arg(c_, char *))				\
			n_++;						\
		va_end(c_);						\
		argv = alloca((n_ + 1) * sizeof(char *));		\
		argv[0] = (char *)(arg0);				\
		for (size_t i_ = 1; i_ <= n_; i_++)			\
			argv[i_] = va_arg(ap, char *);			\
	} while (0)

RSX_EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;

	rsx_trace_call("execl", -1);
	va_start(ap, arg);
	RSX_EXECL_ARGV(argv, arg, ap);
	va_end(ap);
	return execv(path, argv);
}

RSX_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv;
	va_list ap;

	rsx_trace_call("execlp", -1);
	va_start(ap, arg);
	RSX_EXECL_ARGV(argv, arg, ap);
	va_end(ap);
	return execvp(file, argv);
}

RSX_EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv, **envp;
	va_list ap;

	rsx_trace_call("execle", -1);
	va_start(ap, arg);
	RSX_EXECL_ARGV(argv, arg, ap);
	envp = va_arg(ap, char **);	/* after the NULL */
	va_end(ap);
	return execve(path, argv, envp);
}

RSX_EXPORT int posix_spawn(pid_t *pid, const char *path,
			   const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[],
			   char *const envp[])
{
	char **env;

	rsx_trace_call("posix_spawn", -1);
	env = rsx_exec_prepare(envp, 0);
	return rsx_exec_done(env, RSX_REAL(posix_spawn)(pid, path, fa, attr,
							argv, env ? env : envp));
}

/*
 * _exit() skips atexit handlers and destructors, but bytes the program sent
 * over an upgraded connection must still reach the peer (TCP would deliver
 * them after the process is gone; a destroyed QP would not).
 */
RSX_EXPORT void _exit(int status)
{
	rsx_trace_call("_exit", -1);
	if (rsx_fdtab_hiwater() && !rsx_guarded()) {
		rsx_exit_flush();
		rsx_stats_exit();
	}
	RSX_REAL(_exit)(status);
	__builtin_unreachable();
}

RSX_EXPORT void _Exit(int status)
{
	rsx_trace_call("_Exit", -1);
	if (rsx_fdtab_hiwater() && !rsx_guarded()) {
		rsx_exit_flush();
		rsx_stats_exit();
	}
	RSX_REAL(_Exit)(status);
	__builtin_unreachable();
}
