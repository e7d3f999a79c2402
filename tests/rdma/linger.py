#!/usr/bin/python3
# close() and exit() of connections whose peer does not answer
# (tests/rdma/linger.sh).
#
#   linger.py server ADDR PORT N SECONDS
#       accepts N connections and reads nothing for SECONDS (so its
#       library never sees the clients' HELLOs, nor answers them), then
#       closes them all.
#   linger.py client ADDR PORT BIND N close|exit
#       N connections; on each, sends until one times out (SO_SNDTIMEO
#       0.2 s), with the HELLO still unanswered.  "close":
#       closes the first one and prints "close wall W cpu C" (seconds).
#       "exit": prints "exiting T" (the time of day, s) and exits with
#       all N open.
#   linger.py drain ADDR PORT SECONDS
#       accepts one connection, reads nothing for SECONDS (its library
#       sees no HELLO meanwhile), then reads to the end; prints "got N
#       SHA256 at T" (T: the time of day of the end).
#   linger.py nbclose ADDR PORT BIND SECONDS
#       with the socket non-blocking, sends until EAGAIN (the HELLO that
#       leads the stream still unanswered) and closes; prints "sent N
#       SHA256", "close wall W" (seconds), and "exiting T" after staying
#       SECONDS more.
import hashlib
import os
import resource
import socket
import struct
import sys
import time


def server(addr, port, n, secs):
    ls = socket.create_server((addr, port), family=socket.AF_INET)
    conns = [ls.accept()[0] for _ in range(n)]
    time.sleep(secs)
    for c in conns:
        c.close()


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def stuff(s):
    """Sends until one times out: TCP's buffers full."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                 struct.pack("ll", 0, 200000))
    for i in range(2000):
        try:
            s.send(b"x" if i < 1000 else b"y" * 4096)
        except (BlockingIOError, TimeoutError):
            return i + 1
    raise SystemExit("client: 4 MiB sent and no timeout")


def client(addr, port, bind, n, how):
    socks = []
    for _ in range(n):
        socks.append(socket.create_connection((addr, port),
                                              source_address=(bind, 0)))
    for s in socks:
        print("sent %d" % stuff(s), flush=True)
    if how == "close":
        t, c = time.monotonic(), cpu()
        socks[0].close()
        print("close wall %.3f cpu %.3f" % (time.monotonic() - t, cpu() - c),
              flush=True)
        return 0
    print("exiting %.3f" % time.time(), flush=True)
    os._exit(0)     # straight to exit: no close of the sockets first


def drain(addr, port, secs):
    ls = socket.create_server((addr, port), family=socket.AF_INET)
    c, _ = ls.accept()
    time.sleep(secs)
    h, n = hashlib.sha256(), 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    print("got %d %s at %.3f" % (n, h.hexdigest(), time.time()), flush=True)


def nbclose(addr, port, bind, secs):
    s = socket.create_connection((addr, port), source_address=(bind, 0))
    s.setblocking(False)
    h, n = hashlib.sha256(), 0
    chunk = os.urandom(16384)
    while n < 64 << 20:
        try:
            k = s.send(chunk)
        except BlockingIOError:
            break
        h.update(chunk[:k])
        n += k
    print("sent %d %s" % (n, h.hexdigest()), flush=True)
    t = time.monotonic()
    s.close()
    print("close wall %.3f" % (time.monotonic() - t), flush=True)
    time.sleep(secs)
    print("exiting %.3f" % time.time(), flush=True)


def main():
    if sys.argv[1] == "drain":
        return drain(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    if sys.argv[1] == "nbclose":
        return nbclose(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                       float(sys.argv[5]))
    if sys.argv[1] == "server":
        return server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                      float(sys.argv[5]))
    return client(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                  int(sys.argv[5]), sys.argv[6])


if __name__ == "__main__":
    sys.exit(main())
