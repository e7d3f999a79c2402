#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/*).

The seeds are committed; run this again only to change them:
    python3 tests/fuzz/mkseeds.py tests/fuzz/corpus
Messages follow src/wire.h, operation lists tests/fuzz/fuzz-conn.c and
fuzz-shm.c.
Regression inputs (files named regress-*) are kept by hand, not made here.
"""
import os
import struct
import sys

MAGIC = bytes([0xd5, ord('R'), ord('S'), ord('X'), 0x0d, 0x0a, 0x1a, 0x0a])
VERSION = 2            # RSX_WIRE_VERSION


def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 & -(crc & 1))
    return crc ^ 0xffffffff


def msg(mtype, nonce=0x1122334455667788, qpn=0x11, psn=0x123456, mtu=3,
        reason=0, rq=512, ring=1 << 18, addr=0x7f1234560000, rkey=0x1234,
        version=VERSION, length=72, flags=0, gid=bytes(10) + b'\xff\xff' +
        bytes([192, 168, 77, 1])):
    b = MAGIC + struct.pack('>BBHIQII', mtype, version, length, flags, nonce,
                            qpn, psn)
    b += gid + struct.pack('>BBHIQI', mtu, reason, rq, ring, addr, rkey)
    return b + struct.pack('>I', crc32c(b))


def nak(reason, nonce=0x1122334455667788):
    return msg(3, nonce=nonce, qpn=0, psn=0, mtu=0, reason=reason, rq=0,
               ring=0, addr=0, rkey=0, gid=bytes(16))


def oob_req(nonce=0x1122334455667788, qpn=0x11, psn=0x123456, mtu=3,
            port=40000, addr=0x7f1234560000, rkey=0x1234, ring_log2=18,
            rq=128, version=VERSION, gid=bytes(10) + b'\xff\xff' +
            bytes([192, 168, 77, 1])):
    b = bytes([0xd5, ord('R'), ord('X'), ord('Q'), version, mtu])
    b += struct.pack('>HQII', port, nonce, qpn, psn) + gid
    return b + struct.pack('>QIBBH', addr, rkey, ring_log2, 0, rq)


def wire_seeds():
    s = {
        'oob-req': oob_req(),
        'oob-req-port0': oob_req(port=0),
        'oob-req-ring64': oob_req(ring_log2=64),
        'oob-req-short': oob_req()[:40],
        'hello': msg(1),
        'ack': msg(2, qpn=0x22, ring=1 << 12, mtu=1, rq=128),
        'hello-max': msg(1, qpn=0xffffff, psn=0xffffff, mtu=5, rq=16384,
                         ring=1 << 27, addr=(1 << 64) - (1 << 27) - 65),
        'hello-then-data': msg(1) + b'GET / HTTP/1.1\r\n\r\n',
        'hello-truncated': msg(1)[:40],
        'magic-only': MAGIC,
        'hello-badcrc': msg(1)[:68] + b'\0\0\0\0',
        'hello-version-other': msg(1, version=VERSION + 1),
        'hello-rq16': msg(1, rq=16),
        'http': b'GET / HTTP/1.1\r\nHost: x\r\n\r\n',
        'tls': bytes([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1]),
    }
    for r in range(1, 9):
        s['nak-%d' % r] = nak(r)
    return s


RULES = [
    b'rdma connect * 192.168.77.0/24:5000-5100\n'
    b'tcp any sshd *:22   # trailing comment\n'
    b'probe accept redis* [fd77::]/64:6379\n'
    b'rdma any * [::1]\ntcp connect * 10.1.2.3',
    b'rdma connect * 1.2.3.4;tcp any * *',
    b'# comment only\n\n  \t\n',
    b'rdma\tconnect\t*\t[::ffff:10.0.0.1]/120:1-65535\r\n',
    b'tcp any nginx *;  tcp any redis* *;  tcp any node *',
    b'rdma connect * 10.0.0.0/33',
    b'tcp any * [fd77::/64',
]


def rules_seeds():
    s = {}
    for i, r in enumerate(RULES):
        s['parse-%d' % i] = b'\0' + r
        s['env-%d' % i] = b'\1' + r.replace(b'\n', b';') + b'\0rdma'
        s['file-%d' % i] = b'\2' + r
    for i, v in enumerate([b'256k', b'4096', b'1g', b'128M', b'18446744073709551615']):
        s['size-%d' % i] = b'\3' + v
    return s


def ops(*seq):
    return bytes(b for op in seq for b in op)


def conn_seeds():
    # header: our ring (4 KiB << n), peer ring, peer rq_depth (be16)
    hdr = bytes([2, 1, 0x02, 0x00])
    data = lambda n: bytes([0, 0]) + struct.pack('>I', n)        # DATA n
    credit = lambda b, m: bytes([1, 1, 0, 0, 0, 0]) + struct.pack('>IH', b, m)
    cutover = lambda d: bytes([0, 2, 0, 0, 0, 0, d])
    fin = bytes([0, 4, 0, 0, 0, 0])
    poll = bytes([3])
    read = lambda n, split=0: bytes([4]) + struct.pack('>I', n)[1:] + bytes([split])
    write = lambda n: bytes([5]) + struct.pack('>I', n)[1:] + bytes([0])
    local = bytes([2])
    cut = bytes([6])
    tcp = lambda n: bytes([8, n])
    return {
        'rx-stream': hdr + ops(data(100), data(4000), poll, read(50, 3),
                               read(4100, 1), data(16000), poll,
                               read(20000, 8)),
        'tx-stream': hdr + ops(cut, write(3000), write(9000), local, poll,
                               credit(0xffffffff, 0xffff), poll,
                               write(8192), fin, local, poll),
        'cutover': hdr + ops(tcp(10), cutover(0), poll, cutover(5), poll),
        'fin-then-data': hdr + ops(fin, poll, data(10), poll, read(10)),
        'bad-imm': hdr + ops(bytes([1, 7, 0x70, 0, 0, 0]), poll),
        'wrap': bytes([0, 0, 0x02, 0x00]) + ops(
            data(3000), poll, read(3000), data(3000), poll, read(1000, 5),
            read(2000, 9), write(4000), local, poll, write(4000)),
    }


def shm_seeds():
    # header: our ring (4 KiB << n), the client's; then fuzz-shm.c's ops
    hdr = bytes([2, 1])
    data = lambda n, b=0: bytes([0]) + struct.pack('>HB', n, b)
    imm = lambda v: bytes([2]) + struct.pack('>I', v)
    ctrl = lambda k, v: bytes([3, k]) + struct.pack('>Q', v)
    credit = bytes([4])
    prod = lambda v: bytes([5]) + struct.pack('>I', v)
    poll = bytes([6])
    read = lambda n, peek=0: bytes([7]) + struct.pack('>HB', n, peek)
    write = lambda n: bytes([8]) + struct.pack('>H', n)
    cut, fin = bytes([9]), bytes([10])
    gone = bytes([11, 0, 0])
    down = bytes([11, 1, 1])
    return {
        'rx-stream': hdr + ops(data(100, 1), data(4000, 7), poll,
                               read(50, 1), read(4050), data(8000, 3),
                               poll, read(8000)),
        'tx-stream': hdr + ops(cut, write(3000), write(9000), credit, poll,
                               write(4096), fin, credit, poll),
        'lies': hdr + ops(data(100), imm(0x0fffffff), poll, ctrl(0, 1 << 40),
                          imm(1 << 28), poll, prod(1000), poll, read(100)),
        'cutover': hdr + ops(ctrl(2, 0), imm(2 << 28), poll, ctrl(2, 5),
                             imm(2 << 28), poll),
        'closed': hdr + ops(cut, write(100), gone, write(100), poll,
                            write(10)),
        'downgrade': hdr + ops(cut, write(500), data(10), poll,
                               ctrl(3, 500), ctrl(4, 10), imm(4 << 28), poll,
                               down, write(10)),
    }


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else 'corpus'
    for name, seeds in (('wire', wire_seeds()), ('rules', rules_seeds()),
                        ('conn', conn_seeds()), ('shm', shm_seeds())):
        d = os.path.join(top, name)
        os.makedirs(d, exist_ok=True)
        for k, v in seeds.items():
            with open(os.path.join(d, k), 'wb') as f:
                f.write(v)


if __name__ == '__main__':
    main()
