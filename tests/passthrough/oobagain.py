#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A stale copy of a client's out-of-band request (local.test `again`).

    oobagain.py server PORT OUT   echoes one connection; its bytes to OUT
    oobagain.py client PORT OUT   connects, waits in select() for 2 s (the
                                  ACK waits for the program meanwhile, and
                                  RSOCKX_TEST_OOB_AGAIN sends the request
                                  once more), then streams 1 MB and reads
                                  the echo back; its bytes to OUT
"""
import select
import socket
import sys

N = 1000000


def pattern(n):
    unit = bytes((i * 7 + 3) & 0xff for i in range(251))
    return (unit * (n // 251 + 1))[:n]


def server(port, out):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    c, _ = ls.accept()
    got = bytearray()
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += b
        c.sendall(b)
    c.close()
    open(out, "wb").write(got)


def client(port, out):
    s = socket.create_connection(("127.0.0.1", port))
    r, _, _ = select.select([s], [], [], 2.0)
    if r:
        sys.exit("oobagain.py: the server sent first")
    data = pattern(N)
    got = bytearray()
    for i in range(0, N, 10000):
        s.sendall(data[i:i + 10000])
        while len(got) < i + 10000:
            got += s.recv(65536)
    s.shutdown(socket.SHUT_WR)
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    open(out, "wb").write(data)
    print("oobagain.py: echo %s, %d bytes" %
          ("ok" if bytes(got) == data else "DIFFERS", len(got)))


if __name__ == "__main__":
    (server if sys.argv[1] == "server" else client)(int(sys.argv[2]),
                                                    sys.argv[3])
