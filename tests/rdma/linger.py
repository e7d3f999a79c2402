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


def main():
    if sys.argv[1] == "server":
        return server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                      float(sys.argv[5]))
    return client(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                  int(sys.argv[5]), sys.argv[6])


if __name__ == "__main__":
    sys.exit(main())
