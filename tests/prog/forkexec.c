// SPDX-License-Identifier: MIT
/*
 * Process creation around tracked TCP sockets.  The parent makes two
 * loopback TCP connections, then (MODE):
 *   none   nothing (the reference for the parent's stats)
 *   fork   fork; the child dup2()s and closes the sockets, exits
 *   vfork  vfork; the child dup2()s and closes the sockets in the memory it
 *          shares with the parent, then execs `forkexec child FD`
 *   spawn  posix_spawn of `forkexec child 3` with the socket dup2()ed to 3
 *   exec   fork + execve of `forkexec child FD`: the child inherits it
 * A child given FD receives 64 kB on it and sends them back XORed with
 * 0x55; the parent checks every byte.  Afterwards the parent checks that
 * both of its connections still carry data both ways, and exits (without
 * closing them, so that its exit stats show what it still tracks).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <spawn.h>
#include <sys/wait.h>
#include "pt.h"

#define PT_LEN 65536

extern char **environ;

static char out[PT_LEN], in[PT_LEN];

static void child(int fd)
{
	size_t i;

	pt_check(recv(fd, in, PT_LEN, MSG_WAITALL) == PT_LEN);
	for (i = 0; i < PT_LEN; i++)
		in[i] ^= 0x55;
	pt_check(send(fd, in, PT_LEN, 0) == PT_LEN);
	exit(0);
}

/* The parent's end of a child conversation: send, check the answer. */
static void talk(int fd)
{
	size_t i;

	pt_write_all(fd, out, PT_LEN);
	pt_read_all(fd, in, PT_LEN);
	for (i = 0; i < PT_LEN; i++)
		pt_check((in[i] ^ 0x55) == out[i]);
}

static void wait_ok(pid_t pid)
{
	int st;

	pt_check(pid > 0 && waitpid(pid, &st, 0) == pid);
	pt_check(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Both directions of a connection still work. */
static void echo(int x, int y)
{
	pt_write_all(x, out, PT_LEN);
	pt_read_all(y, in, PT_LEN);
	pt_check(!memcmp(in, out, PT_LEN));
	pt_write_all(y, out, PT_LEN);
	pt_read_all(x, in, PT_LEN);
	pt_check(!memcmp(in, out, PT_LEN));
}

int main(int argc, char **argv)
{
	char fdarg[16];
	char *cargv[] = { argv[0], "child", fdarg, NULL };
	const char *mode = argc > 1 ? argv[1] : "none";
	posix_spawn_file_actions_t fa;
	int c1, a1, c2, a2;
	pid_t pid;
	size_t i;

	if (argc == 3 && !strcmp(mode, "child"))
		child(atoi(argv[2]));
	for (i = 0; i < PT_LEN; i++)
		out[i] = (char)(i * 7 + i / 251);

	pt_tcp_pair(&c1, &a1);
	pt_tcp_pair(&c2, &a2);
	/* tests/passthrough/local.test: the pairs move to shared memory first */
	if (getenv("PT_SETTLE_MS"))
		usleep(1000 * atoi(getenv("PT_SETTLE_MS")));
	snprintf(fdarg, sizeof(fdarg), "%d", a2);

	if (!strcmp(mode, "fork")) {
		pid = fork();
		if (pid == 0) {
			pt_check(dup2(c1, a1) == a1);
			close(c1);
			close(a1);
			close(c2);
			close(a2);
			_exit(0);
		}
		wait_ok(pid);
	} else if (!strcmp(mode, "vfork")) {
		pid = vfork();
		if (pid == 0) {
			/* only dup2/close/execve/_exit are allowed here */
			if (dup2(c1, a1) != a1 || close(c1) || close(a1) ||
			    close(c2))
				_exit(2);
			execve("/proc/self/exe", cargv, environ);
			_exit(127);
		}
		pt_check(pid > 0);
		talk(c2);
		wait_ok(pid);
	} else if (!strcmp(mode, "spawn")) {
		snprintf(fdarg, sizeof(fdarg), "3");
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, a2, 3);
		posix_spawn_file_actions_addclose(&fa, c1);
		posix_spawn_file_actions_addclose(&fa, a1);
		pt_check(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, cargv,
				     environ) == 0);
		posix_spawn_file_actions_destroy(&fa);
		talk(c2);
		wait_ok(pid);
	} else if (!strcmp(mode, "exec")) {
		pid = fork();
		if (pid == 0) {
			execve("/proc/self/exe", cargv, environ);
			_exit(127);
		}
		talk(c2);
		wait_ok(pid);
	} else if (strcmp(mode, "none")) {
		fprintf(stderr, "forkexec: unknown mode %s\n", mode);
		return 2;
	}

	echo(c1, a1);
	echo(c2, a2);
	printf("forkexec %s: ok\n", mode);
	return 0;
}
