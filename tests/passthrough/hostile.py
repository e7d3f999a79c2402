#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile peers and their victims for tests/passthrough/hostile.test.

The victims run under librsockx; the hostile ends run plain and send
malformed, truncated, oversized, replayed or misdirected negotiation
messages (src/wire.h) mixed with application data.

  victim-server PORTFILE OUT    listen on a free port (written to
                                PORTFILE), accept one connection, write
                                every byte received to OUT, then answer
                                "got N\\n"
  victim-client PORT OUT [HOST [BIND]]
                                connect, send PAYLOAD, half-close, write
                                every byte received to OUT
  hostile-client PORT NAME DIR  connect, play scenario NAME; DIR/expect is
                                what the server application must receive,
                                DIR/result what was learnt from its answer
  hostile-server PORTFILE NAME DIR
                                listen as victim-server does, accept, play scenario NAME as the server's
                                first bytes; DIR/expect is what the client
                                application must receive, DIR/got what it
                                sent
  hostile-rsx-server PORTFILE NAME DIR ADDR
                                as hostile-server, but first take the
                                client's HELLO and answer for its nonce
                                (tests/rdma/hostile.sh: a client with a
                                device really sends one)
  scenarios client|server|rsx-server   list the scenario names
"""
import os
import random
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True  # the source tree may be read-only
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'fuzz'))
from mkseeds import MAGIC, VERSION, msg, nak  # noqa: E402

NAK_NODEV = 2
NAK_VERSION = 4
NONCE = 0x0123456789abcdef


def blob(n, seed):
    return random.Random(seed).randbytes(n)


def client_payload():
    return blob(100000, 7)


HELLO = msg(1, nonce=NONCE)
DATA = blob(5000, 1)

# name: (chunks sent with pauses, bytes the application must get,
#        nak reason expected back first or None)
# A chunk is bytes, or a float: sleep that long.
CLIENT_SCENARIOS = {
    # not ours at all: every byte is application data
    'garbage': ([blob(65536, 2)], blob(65536, 2), None),
    'http': ([b'GET / HTTP/1.0\r\n\r\n' * 50], b'GET / HTTP/1.0\r\n\r\n' * 50,
             None),
    'tls': ([bytes([0x16, 3, 1, 0, 0xa5, 1, 0, 0, 0xa1]) + DATA],
            bytes([0x16, 3, 1, 0, 0xa5, 1, 0, 0, 0xa1]) + DATA, None),
    # looks like a HELLO, but is not one: delivered unchanged
    'magic-then-data': ([MAGIC + DATA], MAGIC + DATA, None),
    'bad-crc': ([HELLO[:68] + b'\0\0\0\0' + DATA],
                HELLO[:68] + b'\0\0\0\0' + DATA, None),
    'magic-short': ([MAGIC[:5]], MAGIC[:5], None),
    'truncated-stall': ([HELLO[:40], 0.6, DATA], HELLO[:40] + DATA, None),
    # a real HELLO whose rest comes too late (rsockx waits 200 ms): data
    'trickle': ([bytes([b]) for b in HELLO[:30]] + [0.8] + [HELLO[30:] + DATA],
                HELLO + DATA, None),
    'oversized': ([MAGIC + blob(1 << 20, 3)], MAGIC + blob(1 << 20, 3), None),
    # ours, but from the wrong side: not consumed, no answer
    'ack-from-client': ([msg(2, nonce=NONCE) + DATA], msg(2, nonce=NONCE) + DATA,
                        None),
    'nak-from-client': ([nak(NAK_NODEV, nonce=NONCE) + DATA],
                        nak(NAK_NODEV, nonce=NONCE) + DATA, None),
    # a real HELLO: taken off the stream, answered NAK (no device here)
    'hello': ([HELLO + DATA], DATA, NAK_NODEV),
    'hello-split': ([HELLO[:36], 0.02, HELLO[36:] + DATA], DATA, NAK_NODEV),
    'hello-replayed': ([HELLO + HELLO + DATA], HELLO + DATA, NAK_NODEV),
    'hello-only': ([HELLO], b'', NAK_NODEV),
    # a HELLO with a right checksum and a wrong field: taken off, NAK
    'hello-version-other': ([msg(1, nonce=NONCE, version=VERSION + 1) +
                             DATA], DATA, NAK_VERSION),
    'hello-rq16': ([msg(1, nonce=NONCE, rq=16) + DATA], DATA, NAK_VERSION),
    'hello-ring3': ([msg(1, nonce=NONCE, ring=3 << 12) + DATA], DATA,
                    NAK_VERSION),
    'hello-addr-wraps': ([msg(1, nonce=NONCE, addr=(1 << 64) - 4096) + DATA],
                         DATA, NAK_VERSION),
    'hello-length': ([msg(1, nonce=NONCE, length=4096) + DATA], DATA,
                     NAK_VERSION),
    'empty': ([], b'', None),
    # the client dies in the middle of its HELLO: the server application
    # sees a reset or the bytes that came, nothing else
    'reset-mid-hello': ([HELLO[:30], 'rst'], HELLO[:30], None),
}

SERVER_SCENARIOS = {
    'garbage': [blob(65536, 4)],
    'ack': [msg(2, nonce=NONCE) + DATA],
    'nak': [nak(NAK_NODEV, nonce=NONCE) + DATA],
    'hello': [HELLO + DATA],
    'ack-truncated-stall': [msg(2)[:50], 0.6, DATA],
    'ack-bad-crc': [msg(2)[:68] + b'\xff\xff\xff\xff' + DATA],
    'ack-replayed': [msg(2) * 3 + DATA],
}

# Answers to a real HELLO (nonce n): (chunks, what the client application
# must get, or None when the client is expected to fail with an error).
RSX_SERVER_SCENARIOS = {
    'nak': lambda n: ([nak(1, nonce=n) + DATA], DATA),
    'ack-wrong-nonce': lambda n: ([msg(2, nonce=n ^ 1) + DATA],
                                  msg(2, nonce=n ^ 1) + DATA),
    # our nonce, the checksum right, a field not acceptable: an answer
    # all the same, taken out of the stream
    'ack-bad-field': lambda n: ([msg(2, nonce=n, rq=16) + DATA], DATA),
    'nak-bad-reason': lambda n: ([nak(99, nonce=n) + DATA], DATA),
    'hello-back': lambda n: ([msg(1, nonce=n) + DATA], msg(1, nonce=n) + DATA),
    'garbage': lambda n: ([blob(65536, 5)], blob(65536, 5)),
    'ack-truncated-stall': lambda n: ([msg(2, nonce=n)[:40], 0.6, DATA],
                                      msg(2, nonce=n)[:40] + DATA),
    # a well-formed ACK for a queue pair that does not exist
    'ack-bogus-qp': lambda n: ([msg(2, nonce=n, qpn=0xabcde, ring=4096,
                                    addr=0x10000, rkey=0x5151, gid=bytes(10) +
                                    b'\xff\xff' + bytes([192, 168, 77, 2]))],
                               None),
}


def play(sock, chunks):
    for c in chunks:
        if isinstance(c, float):
            time.sleep(c)
        elif isinstance(c, bytes):
            sock.sendall(c)


def read_all(sock):
    out = bytearray()
    while True:
        b = sock.recv(65536)
        if not b:
            return bytes(out)
        out += b


def listener(portfile, addr='127.0.0.1'):
    s = socket.socket()
    s.bind((addr, 0))
    s.listen(1)
    with open(portfile + '.tmp', 'w') as f:
        f.write('%d\n' % s.getsockname()[1])
    os.rename(portfile + '.tmp', portfile)
    return s


def victim_server(portfile, out):
    lst = listener(portfile)
    c, _ = lst.accept()
    try:
        data = read_all(c)
    except ConnectionResetError:
        with open(out, 'wb') as f:
            f.write(b'')
        print('reset')
        return 0
    with open(out, 'wb') as f:
        f.write(data)
    c.sendall(b'got %d\n' % len(data))
    c.close()
    return 0


def victim_client(port, out, host='127.0.0.1', bind=None):
    c = socket.create_connection((host, port),
                                 source_address=(bind, 0) if bind else None)
    # HOSTILE_TIMEO=s: SO_SNDTIMEO and SO_RCVTIMEO (the socket stays
    # blocking: python's own timeouts would poll it, and a polled socket
    # is never upgraded)
    timeo = int(os.environ.get('HOSTILE_TIMEO', '0'))
    if timeo:
        tv = struct.pack('ll', timeo, 0)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    # HOSTILE_DELAY=s: let the server's answer arrive before the first
    # send, which then takes it (else the answer may find us half-closed)
    time.sleep(float(os.environ.get('HOSTILE_DELAY', '0')))
    try:
        c.sendall(client_payload())
        c.shutdown(socket.SHUT_WR)
        data = read_all(c)
    except OSError as e:
        print('victim-client: %s' % e)
        return 1
    with open(out, 'wb') as f:
        f.write(data)
    return 0


def hostile_client(port, name, d):
    chunks, expect, reason = CLIENT_SCENARIOS[name]
    with open(os.path.join(d, 'expect'), 'wb') as f:
        f.write(expect)
    c = socket.create_connection(('127.0.0.1', port))
    play(c, chunks)
    if chunks and chunks[-1] == 'rst':
        time.sleep(0.1)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack('ii', 1, 0))
        c.close()
        with open(os.path.join(d, 'result'), 'w') as f:
            f.write('reset sent\n')
        return 0
    c.shutdown(socket.SHUT_WR)
    ans = read_all(c)
    if reason is not None:
        # the first bytes back: a NAK for our nonce, with the reason
        n = ans[:72]
        ok = (len(n) == 72 and n[:8] == MAGIC and n[8] == 3 and
              struct.unpack('>Q', n[16:24])[0] == NONCE)
        res = 'nak reason=%d' % n[49] if ok else 'no nak: %r' % ans[:80]
        ans = ans[72:] if ok else ans
    else:
        res = 'no answer message'
    res += '; then %r' % ans
    with open(os.path.join(d, 'result'), 'w') as f:
        f.write(res + '\n')
    return 0


def hostile_server(portfile, name, d):
    chunks = SERVER_SCENARIOS[name]
    with open(os.path.join(d, 'expect'), 'wb') as f:
        f.write(b''.join(c for c in chunks if isinstance(c, bytes)))
    lst = listener(portfile)
    c, _ = lst.accept()
    play(c, chunks)
    got = read_all(c)
    c.close()
    with open(os.path.join(d, 'got'), 'wb') as f:
        f.write(got)
    with open(os.path.join(d, 'payload'), 'wb') as f:
        f.write(client_payload())
    return 0


def hostile_rsx_server(portfile, name, d, addr):
    lst = listener(portfile, addr)
    c, _ = lst.accept()
    c.settimeout(30)
    hello = b''
    while len(hello) < 72:
        b = c.recv(72 - len(hello))
        if not b:
            break
        hello += b
    ok = len(hello) == 72 and hello[:8] == MAGIC and hello[8] == 1
    with open(os.path.join(d, 'hello'), 'w') as f:
        f.write('hello %s\n' % ('ok' if ok else 'missing: %r' % hello))
    nonce = struct.unpack('>Q', hello[16:24])[0] if ok else 0
    chunks, expect = RSX_SERVER_SCENARIOS[name](nonce)
    with open(os.path.join(d, 'expect'), 'wb') as f:
        f.write(expect if expect is not None else b'')
    play(c, chunks)
    try:
        got = read_all(c)
    except (ConnectionResetError, socket.timeout):
        got = b''
    c.close()
    with open(os.path.join(d, 'got'), 'wb') as f:
        f.write(got)
    with open(os.path.join(d, 'payload'), 'wb') as f:
        f.write(client_payload())
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == 'scenarios':
        print(' '.join({'client': CLIENT_SCENARIOS,
                        'server': SERVER_SCENARIOS,
                        'rsx-server': RSX_SERVER_SCENARIOS}[argv[2]]))
        return 0
    if cmd == 'victim-server':
        return victim_server(argv[2], argv[3])
    if cmd == 'victim-client':
        return victim_client(int(argv[2]), argv[3], *argv[4:6])
    if cmd == 'hostile-client':
        return hostile_client(int(argv[2]), argv[3], argv[4])
    if cmd == 'hostile-server':
        return hostile_server(argv[2], argv[3], argv[4])
    if cmd == 'hostile-rsx-server':
        return hostile_rsx_server(argv[2], argv[3], argv[4], argv[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
