/* SPDX-License-Identifier: MIT */
#ifndef RSX_TRACK_H
#define RSX_TRACK_H

#include <sys/socket.h>

#include "sock.h"

/*
 * Descriptor lifetime events, reported by the shim after (or, for close,
 * before) the real call.  All of them are async-signal-safe.
 */
void rsx_on_socket(int fd, int domain, int type, int protocol);
void rsx_on_untracked(int fd);
void rsx_on_accept_prepare(int lfd);
void rsx_on_accept(int lfd, int fd, int flags);
void rsx_on_listen(int fd);
void rsx_on_connect_prepare(int fd, const struct sockaddr *sa,
			    socklen_t len);
void rsx_on_connect_done(int fd);
void rsx_on_connect(int fd, const struct sockaddr *sa, socklen_t len,
		    int connected);
void rsx_on_dup(int oldfd, int newfd);
void rsx_on_setfl(int fd, int flags);
void rsx_on_fionbio(int fd, int on);

int rsx_close_begin(int fd, struct rsx_sock **old);
void rsx_close_end(struct rsx_sock *old);
int rsx_close_range(unsigned int first, unsigned int last, int flags);
int rsx_closefrom(int lowfd);

int rsx_dup2_begin(int newfd, struct rsx_sock **prev);
void rsx_dup2_end(int oldfd, int newfd, int ok, struct rsx_sock *prev);

void rsx_on_fork_prepare(void);
void rsx_on_fork_parent(int failed);
void rsx_on_fork_child(void);
void rsx_on_daemon_child(void);
void rsx_on_exec(void);
void rsx_on_vfork(void);
char **rsx_exec_env(char *const envp[], int self);
void rsx_adopt_inherited(const char *list);
void rsx_adopt_listen_fds(const char *nfds, const char *pid);

#endif
