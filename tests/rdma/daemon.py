#!/usr/bin/env python3
"""Servers that become daemons after listen() (tests/rdma/daemon.sh).

daemon.py serve HOW ADDR PORT FILE PIDFILE N
    Listens on ADDR:PORT, then becomes a daemon HOW: "daemon" (daemon(3),
    through ctypes), "fork" (fork(); the parent exits at once, the child
    calls setsid()) or "double" (fork, setsid, fork again; both parents
    exit).  The daemon writes its pid to PIDFILE, then serves FILE to N
    connections in turn, accepted in a blocking accept(), 32 KiB every
    20 ms, and exits.
    Or it hands its listener on to a program it executes, which serves:
    "activate" as systemd's socket activation does (descriptor 3,
    LISTEN_FDS=1, LISTEN_PID; run it without the library and give the
    library to the server in DAEMON_PRELOAD), "reexec" as a server that
    executes itself (its listener inherited, close-on-exec cleared).
daemon.py get ADDR PORT BIND OUT
    One connection from BIND, everything it receives written to OUT.
"""
import ctypes
import os
import socket
import sys
import time


def become_daemon(how):
    if how == "daemon":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.daemon(1, 1) != 0:
            sys.exit("daemon: %s" % os.strerror(ctypes.get_errno()))
        return
    if os.fork():
        os._exit(0)
    os.setsid()
    if how == "double" and os.fork():
        os._exit(0)


def hand_on(how, ls, argv):
    env = dict(os.environ)
    fd = ls.fileno()
    if how == "activate":
        os.dup2(fd, 3)
        fd = 3
        env["LISTEN_FDS"] = "1"
        env["LISTEN_PID"] = str(os.getpid())
        env["LD_PRELOAD"] = env.pop("DAEMON_PRELOAD")
    os.set_inheritable(fd, True)
    env["DAEMON_FD"] = str(fd)
    argv = [sys.executable, argv[0], "serve", "inherited"] + argv[3:]
    os.execve(sys.executable, argv, env)


def serve(how, addr, port, path, pidfile, n):
    data = open(path, "rb").read()
    if how == "inherited":
        ls = socket.socket(fileno=int(os.environ["DAEMON_FD"]))
    else:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, int(port)))
        ls.listen(16)
    if how in ("activate", "reexec"):
        hand_on(how, ls, sys.argv)
    elif how != "inherited":
        become_daemon(how)
    with open(pidfile + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(pidfile + ".tmp", pidfile)
    for _ in range(int(n)):
        c, _ = ls.accept()
        for off in range(0, len(data), 32768):
            c.sendall(data[off:off + 32768])
            time.sleep(0.02)
        c.close()
    ls.close()


def get(addr, port, bind, out):
    s = socket.create_connection((addr, int(port)), source_address=(bind, 0))
    with open(out, "wb") as f:
        while True:
            b = s.recv(65536)
            if not b:
                break
            f.write(b)
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(*sys.argv[2:8])
    else:
        get(*sys.argv[2:6])
