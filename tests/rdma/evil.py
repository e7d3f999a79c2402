#!/usr/bin/env python3
"""The victim side of tests/rdma/evil.sh (run under librsockx).

  evil.py server ADDR PORT N [together]
      accept N connections one after the other; echo each until EOF or an
      error; one line per connection: "conn K: eof bytes=B head=H" or
      "conn K: error ENAME bytes=B head=H" (H: hex of its first 8 bytes);
      then "server done".  together: all N at once, a thread each (K is
      still the order of accept).
  evil.py client HOST PORT BIND NBYTES
      an honest client: send NBYTES of random data, read the echo, compare;
      prints "honest ok" when every byte came back right (echoed(), which
      tests/rdma/cutwait.sh imports too).
"""
import errno
import os
import socket
import struct
import sys
import threading


def echo(k, s):
    # a stuck connection must not hang the test: 30 s per read
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                 struct.pack("ll", 30, 0))
    got = 0
    head = b""
    what = "eof"
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
            head = (head + b)[:8]
            s.sendall(b)
    except OSError as e:
        what = "error " + errno.errorcode.get(e.errno, str(e.errno))
    print("conn %d: %s bytes=%d head=%s" % (k, what, got, head.hex()),
          flush=True)
    s.close()


def server(addr, port, n, together):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(8)
    threads = []
    for k in range(1, n + 1):
        s, _ = ls.accept()
        if not together:
            echo(k, s)
            continue
        t = threading.Thread(target=echo, args=(k, s))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    print("server done", flush=True)


def echoed(s, nbytes):
    """Sends nbytes of random data on s, reads the echo as it comes: True
    when every byte came back right."""
    data = os.urandom(nbytes)
    back = bytearray()
    off = 0
    while off < len(data) or len(back) < len(data):
        if off < len(data):
            off += s.send(data[off:off + 65536])
        while len(back) < off:
            b = s.recv(65536)
            if not b:
                print("honest: early EOF after %d bytes" % len(back))
                return False
            back += b
    return bytes(back) == data


def client(host, port, bind, nbytes):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.bind((bind, 0))
    s.connect((host, port))
    ok = echoed(s, nbytes)
    s.shutdown(socket.SHUT_WR)
    tail = s.recv(1)
    s.close()
    if ok and tail == b"":
        print("honest ok %d bytes" % nbytes, flush=True)
        return 0
    print("honest: wrong data", flush=True)
    return 1


def main():
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
               sys.argv[5:] == ["together"])
        return 0
    return client(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                  int(sys.argv[5]))


if __name__ == "__main__":
    sys.exit(main())
