#!/usr/bin/python3
# A connection upgraded before fork() (tests/rdma/fork.sh).
#
#   fork.py server ADDR PORT echo|fork|forkfirst|forkhold OUT
#       accepts one connection and echoes every byte until EOF, then
#       writes "BYTES SHA256" of what it received to OUT.  "fork": after
#       the first phase it forks; the child echoes the rest, the parent
#       closes its copy at once and waits.  "forkfirst": it forks right
#       after accept() (a server that forks per connection): the child
#       echoes everything, the parent closes its copy at once.
#       "forkhold": the same, but the parent keeps its copy open, never
#       touching it, until the child is done.
#   fork.py client ADDR PORT BIND SCENARIO OUT
#       three phases of echoed records on one connection, with a fork
#       after the first:
#         plain   no fork (the server forks)
#         paced   no fork, a pause before every record, so that an
#                 upgrade out of band comes while the stream goes on
#         slow    as paced, but with longer pauses in the first phase,
#                 so that the upgrade comes before the server's fork
#         slowdaemon  daemon, paced as slow: upgraded before the fork
#         child   the child runs phase 2 and exits; the parent phase 3
#         idle    the child never touches the socket; the parent runs
#                 phases 2 and 3 meanwhile
#         daemon  the parent exits at once; the child runs phases 2 and 3
#         reader  a thread of the parent sleeps in recv() for phase 2's
#                 echo while the child sends phase 2 (the parent takes
#                 the connection back to TCP under that sleeping thread);
#                 then the parent runs phase 3
#       and two that fork 0.1 s after connect(), before the first phase,
#       while the request of the upgrade is out; every record then waits
#       0.1 s:
#         early   the child exits 0.3 s later, never touching the socket;
#                 the parent runs the phases
#         earlydaemon  the parent exits at once; the child runs them
#       Whoever ends last writes "BYTES SHA256" of all it sent to OUT, or
#       "FAIL why".
#
# The client sends a record, then reads its echo: nothing waits in a ring
# at the fork but what the peer's echo has not taken yet.
import hashlib
import os
import random
import socket
import sys
import threading
import time

from exec import recv_exact  # tests/rdma/exec.py, beside this script

PHASE = [300000, 200000, 250000]
REC = 16384


def phase_bytes(n):
    return random.Random(n).randbytes(PHASE[n])


def echo_phase(s, n, pause=0):
    data = phase_bytes(n)
    for off in range(0, len(data), REC):
        rec = data[off:off + REC]
        time.sleep(pause)
        s.sendall(rec)
        got = b""
        while len(got) < len(rec):
            b = s.recv(len(rec) - len(got))
            if not b:
                raise RuntimeError("phase %d: EOF at %d" % (n, off))
            got += b
        if got != rec:
            raise RuntimeError("phase %d: echo differs at %d" % (n, off))


def finish(s, out):
    s.shutdown(socket.SHUT_WR)
    if s.recv(1) != b"":
        raise RuntimeError("bytes after the last echo")
    h = hashlib.sha256()
    for n in range(3):
        h.update(phase_bytes(n))
    with open(out, "w") as f:
        f.write("%d %s\n" % (sum(PHASE), h.hexdigest()))


def fail(out, why):
    with open(out, "w") as f:
        f.write("FAIL %s\n" % why)


def client(addr, port, bind, scen, out):
    s = socket.create_connection((addr, port), source_address=(bind, 0))
    if scen in ("early", "earlydaemon"):
        return early(s, scen, out)
    pause = 0.04 if scen in ("paced", "slow", "slowdaemon") else 0
    echo_phase(s, 0, 0.1 if scen.startswith("slow") else pause)
    if scen == "slowdaemon":
        scen = "daemon"
    if scen in ("plain", "paced", "slow"):
        echo_phase(s, 1, pause)
        echo_phase(s, 2, pause)
        finish(s, out)
        return 0
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            if scen == "child":
                echo_phase(s, 1)
            elif scen == "idle":
                time.sleep(0.5)
            elif scen == "reader":
                time.sleep(0.5)     # the parent's reader is asleep by now
                s.sendall(phase_bytes(1))
            elif scen == "daemon":
                deadline = time.time() + 20
                while os.getppid() == parent and time.time() < deadline:
                    time.sleep(0.01)
                echo_phase(s, 1, pause)
                echo_phase(s, 2, pause)
                finish(s, out)
        except Exception as e:      # noqa: BLE001 (reported to the shell)
            fail(out, "child: %s" % e)
            sys.exit(1)
        sys.exit(0)                 # exit(): rsockx writes its counters
    if scen == "daemon":
        return 0                    # exit: the child goes on alone
    if scen == "child":
        _, st = os.waitpid(pid, 0)
        if st != 0:
            return 1
    elif scen == "reader":
        got = []
        t = threading.Thread(target=lambda: got.append(
            recv_exact(s, PHASE[1])))
        t.start()
        _, st = os.waitpid(pid, 0)
        t.join(60)
        if st != 0 or got != [phase_bytes(1)]:
            fail(out, "reader: child exit %d, %s" % (
                st, "no echo" if not got else "%d bytes of echo, %s" % (
                    len(got[0]), "right" if got[0] == phase_bytes(1)
                    else "wrong")))
            return 1
    else:
        echo_phase(s, 1)
    echo_phase(s, 2)
    if scen == "idle":
        _, st = os.waitpid(pid, 0)
        if st != 0:
            fail(out, "idle child failed")
            return 1
    finish(s, out)
    return 0


def early(s, scen, out):
    time.sleep(0.1)                 # the request is out
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            if scen == "early":
                time.sleep(0.3)
                sys.exit(0)
            deadline = time.time() + 20
            while os.getppid() == parent and time.time() < deadline:
                time.sleep(0.01)
            for n in range(3):
                echo_phase(s, n, 0.1)
            finish(s, out)
        except Exception as e:      # noqa: BLE001 (reported to the shell)
            fail(out, "child: %s" % e)
            sys.exit(1)
        sys.exit(0)
    if scen == "earlydaemon":
        return 0
    for n in range(3):
        echo_phase(s, n, 0.1)
    _, st = os.waitpid(pid, 0)
    if st != 0:
        fail(out, "early child failed")
        return 1
    finish(s, out)
    return 0


def serve(c, h):
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            return n
        h.update(b)
        n += len(b)
        c.sendall(b)


def server(addr, port, mode, out):
    lst = socket.create_server((addr, port), family=socket.AF_INET)
    # the listener stays open: its port answers the client's probe
    c, _ = lst.accept()
    h = hashlib.sha256()
    n = 0
    if mode in ("forkfirst", "forkhold"):
        pid = os.fork()
        if pid:
            if mode == "forkfirst":
                c.close()           # the child alone holds it now
            _, st = os.waitpid(pid, 0)
            c.close()
            return 0 if st == 0 else 1
    elif mode == "fork":
        while n < PHASE[0]:
            b = c.recv(min(65536, PHASE[0] - n))
            if not b:
                break
            h.update(b)
            n += len(b)
            c.sendall(b)
        pid = os.fork()
        if pid:
            c.close()               # the child holds the connection
            _, st = os.waitpid(pid, 0)
            return 0 if st == 0 else 1
    n += serve(c, h)
    c.close()
    with open(out, "w") as f:
        f.write("%d %s\n" % (n, h.hexdigest()))
    return 0


def main():
    if sys.argv[1] == "server":
        return server(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                      sys.argv[5])
    try:
        return client(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                      sys.argv[5], sys.argv[6])
    except Exception as e:          # noqa: BLE001
        fail(sys.argv[6], "client: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
