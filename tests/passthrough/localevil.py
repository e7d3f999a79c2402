#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""localevil.py CASE PORT OUT: a TCP server on 127.0.0.1:PORT without
rsockx that answers same-host upgrade requests itself, on the Unix socket
a listener under rsockx would have (src/local.h), with an ACK whose
descriptors a client must refuse:

  squat     the TCP socket that comes with it is not the connection's
            other end (the client's own, sent back): a process that
            squats a listener's rendezvous and never accepted the
            connection;
  unsealed  the real other end, but memory the server could shrink under
            the client's stores (no seals);
  size      the real other end, sealed memory smaller than the two rings;
  mute      no answer at all: it holds the request, writes a line on TCP
            and half-closes, so the client meets the end of the stream
            while its upgrade waits.

It takes one connection, writes what it reads to OUT, prints "answered"
once the answer went, and exits 0 once the client closed.
"""
import os
import socket
import struct
import sys
import time

MAGIC = bytes([0xD5, ord('R'), ord('S'), ord('X'), 0x0D, 0x0A, 0x1A, 0x0A])
RING = 262144


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return ~crc & 0xFFFFFFFF


def ack(nonce):
    m = bytearray(72)
    m[0:8] = MAGIC
    m[8] = 2                    # ACK
    m[9] = 2                    # version (RSX_WIRE_VERSION)
    struct.pack_into(">HIQII", m, 10, 72, 0, nonce, 1, 0)
    m[48] = 5                   # mtu
    struct.pack_into(">HIQI", m, 50, 128, RING, 1, 0)
    struct.pack_into(">I", m, 68, crc32c(bytes(m[:68])))
    return bytes(m)


def area(ring):
    return (ring + 64 + 576 + 4095) & ~4095


def memory(case):
    fd = os.memfd_create("evil", os.MFD_ALLOW_SEALING)
    size = 4096 if case == "size" else 2 * area(RING)
    os.ftruncate(fd, size)
    if case != "unsealed":
        import fcntl
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK |
                    fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def main():
    case, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    lsock = socket.create_server(("127.0.0.1", port))
    addr = bytes(10) + b"\xff\xff" + socket.inet_aton("127.0.0.1")
    name = b"\0rsockx-tcp:%d:%s" % (port, addr.hex().encode())
    usock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    usock.bind(name)
    usock.listen(4)
    conn, _ = lsock.accept()
    u, _ = usock.accept()
    req, fds, _, _ = socket.recv_fds(u, 64, 4)
    nonce = struct.unpack_from(">Q", req, 8)[0]
    client = fds[0]
    if case == "mute":
        time.sleep(0.5)     # the client is asleep in recv() by then
        conn.sendall(b"mute\n")
        conn.shutdown(socket.SHUT_WR)
        print("answered", case, "(not)", flush=True)
        os.close(client)    # the client's own socket: its end must close
        ret = drain(conn, out)
        u.close()
        return ret
    end = client if case == "squat" else conn.fileno()
    give = [end, memory(case), os.eventfd(0), os.eventfd(0)]
    socket.send_fds(u, [ack(nonce)], give)
    print("answered", case, flush=True)
    for fd in fds:
        os.close(fd)
    u.close()
    return drain(conn, out)


def drain(conn, out):
    with open(out, "wb") as f:
        while True:
            b = conn.recv(65536)
            if not b:
                break
            f.write(b)
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
