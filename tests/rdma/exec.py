#!/usr/bin/python3
# An upgraded connection across execve() (tests/rdma/exec.sh).
#
#   exec.py server ADDR PORT block|epoll OUT
#       accepts one connection, sends DOWN bytes and then shuts down its
#       side, and writes all it receives until EOF to OUT.  "block": a
#       sender thread and a blocking reader; "epoll": one non-blocking
#       loop on selectors (epoll).
#   exec.py client ADDR PORT BIND exec|fail OUT
#       reads HEAD bytes, sends UP1 bytes, then executes this script again
#       on the same descriptor ("exec"), or tries to execute a file that
#       does not exist and goes on itself ("fail"); the rest of the stream
#       goes to OUT, then UP2 bytes go out and the write side is shut.
#   exec.py rest FD OUT     (the new program of "exec")
#   exec.py server ADDR PORT quiet OUT
#       accepts one connection, reads "hello" and then "go", answers "x",
#       and writes all it receives until EOF to OUT.
#   exec.py client ADDR PORT BIND failsleep OUT
#       sends "hello"; once the connection is upgraded, a thread sleeps in
#       recv() on it while an exec fails; then "go" goes out, the thread
#       must get the "x", and the process ends with the connection closed
#       (its counters tell whether the connection was freed).
#
# The byte streams are fixed (random.Random seeds) so that the shell can
# compare OUT with exec.py expect up|down.
import os
import random
import selectors
import socket
import struct
import sys
import threading
import time

DOWN = 3 << 20          # server to client: many rings' worth
HEAD = 100000           # read before the exec: the rest waits in the ring
UP1 = 300000
UP2 = 200000
TCP_BUF = 65536         # SO_SNDBUF / SO_RCVBUF (the kernel doubles them)


def stream(seed, n):
    return random.Random(seed).randbytes(n)


def down_bytes():
    return stream(1, DOWN)


def up_bytes():
    return stream(2, UP1 + UP2)


def server(addr, port, mode, out):
    lst = socket.create_server((addr, port), family=socket.AF_INET)
    c, _ = lst.accept()
    if mode == "quiet":
        got = recv_exact(c, 7)
        c.sendall(b"x")
        got += recv_exact(c, 1 << 20)
        with open(out, "wb") as f:
            f.write(got)
        c.close()
        return
    # Small TCP buffers (the client's too): the server's bytes must not all
    # fit in them before the client's CUTOVER comes, or none goes over RDMA
    # (CI's slowed VM: the whole 3 MiB went over TCP first, into buffers
    # that loopback autotunes to megabytes).
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TCP_BUF)
    data = down_bytes()
    got = bytearray()
    if mode == "block":
        def send():
            c.sendall(data)
            c.shutdown(socket.SHUT_WR)
        t = threading.Thread(target=send)
        t.start()
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
        t.join()
    else:
        c.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(c, selectors.EVENT_READ | selectors.EVENT_WRITE)
        off, eof = 0, False
        while not eof or off < len(data):
            for key, ev in sel.select(timeout=30):
                if ev & selectors.EVENT_READ:
                    try:
                        b = c.recv(65536)
                    except BlockingIOError:
                        b = None
                    if b == b"":
                        eof = True
                    elif b:
                        got += b
                if ev & selectors.EVENT_WRITE and off < len(data):
                    try:
                        off += c.send(data[off:off + 65536])
                    except BlockingIOError:
                        pass
                    if off == len(data):
                        c.shutdown(socket.SHUT_WR)
            want = (0 if eof else selectors.EVENT_READ) | \
                   (selectors.EVENT_WRITE if off < len(data) else 0)
            if want:
                sel.modify(c, want)
            else:
                break
    with open(out, "wb") as f:
        f.write(got)
    c.close()


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            break
        buf += b
    return buf


def rest(s, out):
    """The part of the client after the exec (or the failed exec)."""
    with open(out, "ab") as f:
        while True:
            b = s.recv(65536)
            if not b:
                break
            f.write(b)
    s.sendall(up_bytes()[UP1:])
    s.shutdown(socket.SHUT_WR)


def own_counter(name):
    """One of this process's rsockx counters, from the statistics region
    the library publishes (src/statshm.h: the header's counter count, name
    length and the offsets of the names and of the values)."""
    with open("/dev/shm/rsockx.%d" % os.getpid(), "rb") as f:
        b = f.read()
    n, nlen, noff, coff = struct.unpack_from("<4I", b, 16)
    for i in range(n):
        if b[noff + i * nlen:noff + (i + 1) * nlen].rstrip(b"\0") == \
                name.encode():
            return struct.unpack_from("<Q", b, coff + 8 * i)[0]
    raise KeyError(name)


def wait_server_cutover(s):
    """Waits until a byte of the server came over RDMA: the exec must find
    server bytes in our ring.  The server's sender sleeps on a full TCP
    buffer (TCP_BUF) until our CUTOVER wakes it, which under CI's load can
    take longer than our sends.  A peek lets the library take its
    completions in."""
    deadline = time.monotonic() + 60
    while own_counter("rdma_rx_bytes") == 0:
        if time.monotonic() > deadline:
            sys.exit("exec.py client: no server byte over RDMA in 60 s")
        try:
            s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        time.sleep(0.02)


def client_failsleep(addr, port, bind, out):
    s = socket.create_connection((addr, port), source_address=(bind, 0))
    s.sendall(b"hello")
    got = []
    t = threading.Thread(target=lambda: got.append(s.recv(1)))
    t.start()
    deadline = time.monotonic() + 60
    while own_counter("upgraded") == 0:
        if time.monotonic() > deadline:
            sys.exit("exec.py client: not upgraded in 60 s")
        time.sleep(0.02)
    time.sleep(0.5)     # the thread asleep on the upgraded connection
    s.set_inheritable(True)
    try:
        os.execv("/nonexistent/program", ["x"])
    except OSError:
        pass
    s.sendall(b"go")
    t.join(60)
    with open(out, "wb") as f:
        f.write(b"".join(got))
    s.close()
    sys.exit(0 if got == [b"x"] else 1)


def client(addr, port, bind, mode, out):
    if mode == "failsleep":
        client_failsleep(addr, port, bind, out)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TCP_BUF)
    s.bind((bind, 0))
    s.connect((addr, port))
    head = recv_exact(s, HEAD)
    with open(out, "wb") as f:
        f.write(head)
    s.sendall(up_bytes()[:UP1])
    wait_server_cutover(s)
    s.set_inheritable(True)
    if mode == "exec":
        os.execv(sys.executable, [sys.executable, __file__, "rest",
                                  str(s.fileno()), out])
    try:
        os.execv("/nonexistent/program", ["x"])
    except OSError:
        pass
    rest(s, out)


def main(argv):
    if argv[1] == "server":
        server(argv[2], int(argv[3]), argv[4], argv[5])
    elif argv[1] == "client":
        client(argv[2], int(argv[3]), argv[4], argv[5], argv[6])
    elif argv[1] == "rest":
        rest(socket.socket(fileno=int(argv[2])), argv[3])
    elif argv[1] == "expect":
        sys.stdout.buffer.write(up_bytes() if argv[2] == "up"
                                else down_bytes())


if __name__ == "__main__":
    main(sys.argv)
