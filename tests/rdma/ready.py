"""Event-driven patterns for tests/rdma/ready.sh.

    ready.py SCENARIO server|client HOST PORT [SEED]

Each side checks every byte itself and prints "ready.py: ok SCENARIO ROLE"
last; anything else is a failure (exit status 1).  Scenarios:

  asyncio   asyncio echo server and client (epoll, level-triggered)
  et        server: epoll edge-triggered + EPOLLONESHOT, non-blocking, echo
            with partial writes; client: poll() on a non-blocking socket,
            sending and reading the echo at once (both rings fill)
  select    client: select() with timeouts; server: blocking echo
  epmisc    client: epoll on a socket upgraded before it was added;
            level- and edge-triggered sets at once, an epoll set inside
            another and inside poll(), a dup()ed descriptor, one-shot,
            exclusive, DEL, the program's data preserved, timeouts, RDHUP
  threads   client: a writer thread, a reader thread and a poll() thread
            on one blocking socket; server: blocking echo
  aliases   client: the connection through dup2, dup3, F_DUPFD_CLOEXEC
            aliases, its first descriptor closed, close_range around it
  prefork   server: two fork()ed workers accept on the inherited listener
            (two connections each); client: four connections in a row
  forkconn  server: accept, fork, the child talks (three connections)
  forkgap   forkconn, for a server whose forks leave a gap where its CM
            thread answers requests (RSOCKX_TEST_FORK_GAP_MS)
  forkheld  forkconn, the server forking 0.3 s after accept() while its
            CM thread holds the socket to answer the request for it
            (RSOCKX_TEST_ANSWER_HOLD_MS): the fork waits for the answer
  forkinherit  server: fork after 50 kB went over the ring; the child
            echoes the next 1000 bytes on the parent's connection, then the
            parent the rest
  timing    poll() timeouts on an idle upgraded socket, POLLOUT going away
            when the peer's ring is full and back when it reads, POLLRDHUP
            and EOF after the peer's shutdown
  lowat     client: SO_RCVLOWAT on an upgraded socket: poll() and epoll
            report it readable only with that many bytes in, a blocking
            recv() waits for them, a non-blocking one takes what is there
  direct    server: level-triggered epoll for input on a non-blocking
            socket, echo, and a count of wakes that found nothing to read
            ("spurious N" in its last line but one); client: 64-byte
            ping-pongs, then bytes of its own sent to the server's
            stand-ins (another process may send to them: a wake that
            finds nothing must not make the server spin), ping-pongs again
"""
import asyncio
import errno
import hashlib
import os
import random
import select
import signal
import socket
import sys
import threading
import time

TOTAL = 3 << 20


def fail(msg):
    print("ready.py: FAIL %s" % msg, flush=True)
    sys.exit(1)


def chunks(seed):
    rnd = random.Random(seed)
    left = TOTAL
    while left:
        n = min(left, rnd.choice((1, 7, 100, 1500, 4096, 65536, 200000)))
        left -= n
        yield rnd.randbytes(n)


def listen(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(8)
    return ls


def connect(host, port):
    src = os.environ.get("READY_BIND")
    return socket.create_connection((host, port), timeout=60,
                                    source_address=(src, 0) if src else None)


# asyncio ----------------------------------------------------------------
async def aecho_server(host, port, done):
    async def handle(r, w):
        while True:
            data = await r.read(100000)
            if not data:
                break
            w.write(data)
            await w.drain()
        w.close()
        done.set_result(True)
    srv = await asyncio.start_server(handle, host, port)
    async with srv:
        await asyncio.wait_for(done, 120)


async def aecho_client(host, port, seed):
    src = os.environ.get("READY_BIND")
    r, w = await asyncio.open_connection(
        host, port, local_addr=(src, 0) if src else None)
    want = hashlib.sha256()
    got = hashlib.sha256()
    sent = recvd = 0

    async def reader():
        nonlocal recvd
        while recvd < TOTAL:
            data = await r.read(100000)
            if not data:
                fail("asyncio client: EOF after %d bytes" % recvd)
            got.update(data)
            recvd += len(data)
    rt = asyncio.ensure_future(reader())
    for c in chunks(seed):
        want.update(c)
        sent += len(c)
        w.write(c)
        await w.drain()
    await asyncio.wait_for(rt, 120)
    w.close()
    if want.digest() != got.digest():
        fail("asyncio client: echo differs")


# epoll edge-triggered one-shot server, poll() client --------------------
def et_server(ls):
    conn, _ = ls.accept()
    conn.setblocking(False)
    ep = select.epoll()
    mask = select.EPOLLIN | select.EPOLLET | select.EPOLLONESHOT | \
        select.EPOLLRDHUP
    ep.register(conn.fileno(), mask)
    pending = b""
    eof = False
    wakeups = 0
    while not (eof and not pending):
        evs = ep.poll(30)
        if not evs:
            fail("et server: no event in 30 s")
        wakeups += 1
        # edge-triggered: read until EAGAIN
        while not eof and len(pending) < 1 << 20:
            try:
                data = conn.recv(65536)
            except BlockingIOError:
                break
            if not data:
                eof = True
                break
            pending += data
        while pending:
            try:
                n = conn.send(pending[:262144])
            except BlockingIOError:
                break
            pending = pending[n:]
        want = select.EPOLLET | select.EPOLLONESHOT | select.EPOLLRDHUP
        if pending:
            want |= select.EPOLLOUT
        if len(pending) < 1 << 20 and not eof:
            want |= select.EPOLLIN
        ep.modify(conn.fileno(), want)
    conn.close()
    print("ready.py: et server wakeups %d" % wakeups)


def poll_client(host, port, seed):
    s = connect(host, port)
    s.setblocking(False)
    p = select.poll()
    data = b"".join(chunks(seed))
    want = hashlib.sha256(data).digest()
    got = hashlib.sha256()
    off = recvd = 0
    while recvd < TOTAL:
        ev = select.POLLIN | (select.POLLOUT if off < len(data) else 0)
        p.register(s, ev)
        r = p.poll(30000)
        if not r:
            fail("poll client: nothing in 30 s (sent %d, got %d)" %
                 (off, recvd))
        rev = r[0][1]
        if rev & select.POLLOUT:
            try:
                off += s.send(data[off:off + 300000])
            except BlockingIOError:
                pass
            if off == len(data):
                s.shutdown(socket.SHUT_WR)
        if rev & (select.POLLIN | select.POLLHUP):
            try:
                b = s.recv(200000)
            except BlockingIOError:
                continue
            if not b:
                fail("poll client: EOF after %d bytes" % recvd)
            got.update(b)
            recvd += len(b)
    if got.digest() != want:
        fail("poll client: echo differs")
    s.close()


# select client, blocking echo server ------------------------------------
def blocking_echo(ls):
    conn, _ = ls.accept()
    while True:
        b = conn.recv(65536)
        if not b:
            break
        conn.sendall(b)
    conn.close()


def select_client(host, port, seed):
    s = connect(host, port)
    s.setblocking(False)
    data = b"".join(chunks(seed))
    got = hashlib.sha256()
    off = recvd = 0
    while recvd < TOTAL:
        w = [s] if off < len(data) else []
        r, w, _ = select.select([s], w, [], 30)
        if not r and not w:
            fail("select client: nothing in 30 s")
        if w:
            try:
                off += s.send(data[off:off + 100000])
            except BlockingIOError:
                pass
            if off == len(data):
                s.shutdown(socket.SHUT_WR)
        if r:
            try:
                b = s.recv(100000)
            except BlockingIOError:
                continue
            if not b:
                fail("select client: EOF after %d" % recvd)
            got.update(b)
            recvd += len(b)
    if got.digest() != hashlib.sha256(data).digest():
        fail("select client: echo differs")
    s.close()


# epoll details -----------------------------------------------------------
def expect(what, got, want):
    if got != want:
        fail("epmisc: %s: got %r, want %r" % (what, got, want))


def epmisc_client(host, port):
    s = connect(host, port)
    s.sendall(b"hello")             # upgraded before any epoll sees it
    if s.recv(5) != b"hello":
        fail("epmisc: no echo")
    fd = s.fileno()
    IN, ET, RDHUP = select.EPOLLIN, select.EPOLLET, select.EPOLLRDHUP
    s.sendall(b"pre!")
    time.sleep(0.5)                 # the echo waits in the ring
    pre = select.epoll()            # the first registration: x is made
    pre.register(fd, IN)
    expect("data already in the ring", pre.poll(10), [(fd, IN)])
    expect("read", s.recv(4), b"pre!")
    pre.close()
    lt, et, outer = select.epoll(), select.epoll(), select.epoll()
    lt.register(fd, IN)
    et.register(fd, IN | ET)
    outer.register(lt.fileno(), IN)
    p = select.poll()
    p.register(et.fileno(), select.POLLIN)
    expect("idle lt", lt.poll(0), [])
    expect("idle outer", outer.poll(0), [])
    expect("idle poll of et", p.poll(0), [])
    s.sendall(b"ping")
    expect("outer sees lt", outer.poll(10), [(lt.fileno(), IN)])
    expect("poll sees et", p.poll(10000), [(et.fileno(), select.POLLIN)])
    expect("lt", lt.poll(0), [(fd, IN)])
    expect("lt again (level)", lt.poll(0), [(fd, IN)])
    expect("et", et.poll(0), [(fd, IN)])
    expect("et again (no new edge)", et.poll(0), [])
    expect("read", s.recv(4), b"ping")
    expect("lt drained", lt.poll(0), [])
    s.sendall(b"more")
    expect("et new edge", et.poll(10), [(fd, IN)])
    expect("read", s.recv(4), b"more")

    d = os.dup(fd)                  # same connection through an alias
    ep3 = select.epoll()
    ep3.register(d, IN)
    s.sendall(b"x")
    expect("dup in its own set", ep3.poll(10), [(d, IN)])
    expect("read via dup", os.read(d, 1), b"x")
    ep3.close()
    os.close(d)                     # the connection stays

    lt.modify(fd, IN | select.EPOLLONESHOT)
    s.sendall(b"a")
    expect("one-shot fires", lt.poll(10), [(fd, IN)])
    expect("one-shot disabled", lt.poll(0.3), [])
    lt.modify(fd, IN | select.EPOLLONESHOT)
    expect("re-armed", lt.poll(10), [(fd, IN)])
    expect("read", s.recv(1), b"a")
    lt.unregister(fd)
    s.sendall(b"c")
    expect("after DEL", lt.poll(0.3), [])
    expect("read", s.recv(1), b"c")
    ex = select.epoll()
    ex.register(fd, IN | select.EPOLLEXCLUSIVE)
    s.sendall(b"e")
    expect("exclusive", ex.poll(10), [(fd, IN)])
    expect("read", s.recv(1), b"e")
    lt.register(fd, IN | RDHUP)
    t = time.monotonic()
    expect("timeout", lt.poll(0.3), [])
    dt = time.monotonic() - t
    if dt < 0.29 or dt > 2:
        fail("epmisc: epoll_wait(300 ms) took %.3f s" % dt)
    s.shutdown(socket.SHUT_WR)      # the echo server closes
    r = lt.poll(10)
    if not r or not r[0][1] & RDHUP:
        fail("epmisc: no EPOLLRDHUP at the end: %r" % r)
    expect("EOF", s.recv(10), b"")
    s.close()


# threads -----------------------------------------------------------------
def threads_client(host, port, seed):
    s = connect(host, port)
    # a first exchange, and time for the upgrade to land: on a loaded
    # host the whole stream could otherwise be echoed over TCP before it
    s.sendall(b"h")
    if s.recv(1) != b"h":
        fail("threads: first echo")
    time.sleep(0.3)
    data = b"".join(chunks(seed))
    got = hashlib.sha256()
    errors = []
    stop = threading.Event()
    polls = [0]

    def writer():
        try:
            off = 0
            rnd = random.Random(seed)
            while off < len(data):
                n = rnd.choice((1, 100, 5000, 70000))
                s.sendall(data[off:off + n])
                off += n
        except OSError as e:
            errors.append("writer: %s" % e)

    def reader():
        n = 0
        try:
            while n < len(data):
                b = s.recv(rnd_size())
                if not b:
                    errors.append("reader: EOF after %d" % n)
                    return
                got.update(b)
                n += len(b)
        except OSError as e:
            errors.append("reader: %s" % e)

    def poller():
        p = select.poll()
        p.register(s, select.POLLIN | select.POLLOUT)
        while not stop.is_set():
            p.poll(10)
            polls[0] += 1
            time.sleep(0.005)

    rnd = random.Random(seed + 1)

    def rnd_size():
        return rnd.choice((1, 1000, 65536))
    ts = [threading.Thread(target=f) for f in (writer, reader, poller)]
    for t in ts:
        t.start()
    ts[0].join(120)
    ts[1].join(120)
    stop.set()
    ts[2].join(10)
    if errors:
        fail("threads: %s" % "; ".join(errors))
    if got.digest() != hashlib.sha256(data).digest():
        fail("threads: echo differs")
    print("ready.py: threads: %d polls meanwhile" % polls[0])
    s.close()


# aliases -----------------------------------------------------------------
def aliases_client(host, port):
    import fcntl
    s = connect(host, port)
    s.sendall(b"hello")
    if s.recv(5, socket.MSG_WAITALL) != b"hello":
        fail("aliases: no echo")
    fd = s.detach()
    os.set_blocking(fd, True)       # create_connection(timeout=) set it
    a = os.dup2(fd, 100)
    b = os.dup2(fd, 101, inheritable=False)          # dup3(O_CLOEXEC)
    c = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 200)
    os.close(fd)                    # the first descriptor goes
    os.closerange(102, 200)         # close_range around the aliases
    rnd = random.Random(7)
    for i, d in enumerate((a, b, c, a)):
        data = rnd.randbytes(50000 + i)
        off = 0
        while off < len(data):
            off += os.write(d, data[off:])
        got = b""
        while len(got) < len(data):
            part = os.read((a, b, c)[(i + 1) % 3], 65536)
            if not part:
                fail("aliases: EOF after closing one alias")
            got += part
        if got != data:
            fail("aliases: round %d differs" % i)
    for d in (a, b):
        os.close(d)
    os.write(c, b"!")               # the last alias still works
    if os.read(c, 1) != b"!":
        fail("aliases: last alias")
    os.close(c)


# processes ---------------------------------------------------------------
def echo_conn(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()


def reap_kids(kids):
    for pid in kids:
        _, st = os.waitpid(pid, 0)
        if st:
            fail("child %d: status %#x" % (pid, st))


def prefork_server(ls):
    kids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            for _ in range(2):
                echo_conn(ls.accept()[0])
            raise SystemExit(0)     # exit(): the child's counters too
        kids.append(pid)
    ls.close()
    reap_kids(kids)


def forkconn_server(ls, pause=0):
    kids = []
    for _ in range(3):
        c, _ = ls.accept()
        time.sleep(pause)
        pid = os.fork()
        if pid == 0:
            ls.close()
            echo_conn(c)
            raise SystemExit(0)
        c.close()
        kids.append(pid)
    reap_kids(kids)


def forkinherit_server(ls):
    c, _ = ls.accept()
    c.sendall(c.recv(5))            # upgraded now
    echo_n(c, 50000)                # over the ring
    pid = os.fork()
    if pid == 0:
        # the child echoes the next 1000 bytes on its parent's connection
        # (which its parent hands back to TCP for it), the parent the rest
        echo_n(c, 1000)
        raise SystemExit(0)
    reap_kids([pid])
    echo_conn(c)


def echo_n(c, left):
    while left:
        b = c.recv(min(left, 65536))
        if not b:
            raise SystemExit(2)
        c.sendall(b)
        left -= len(b)


def echo_rounds(host, port, seed, conns):
    for i in range(conns):
        s = connect(host, port)
        data = random.Random(seed + i).randbytes(100000)
        # a first exchange: the bulk then goes after the cut-over
        s.sendall(data[:5])
        if s.recv(5, socket.MSG_WAITALL) != data[:5]:
            fail("first echo")
        # the server forks meanwhile (one connection), and the answer,
        # relayed by the listener where a worker took the request, lands
        # (the bulk would otherwise be over before it on a loaded host)
        time.sleep(0.5 if conns == 1 else 0.3)
        data = data[5:]
        # no shutdown(SHUT_WR) before the answer: that keeps TCP (BUGS)
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            b = s.recv(65536)
            if not b:
                break
            got += b
        if got != data:
            fail("connection %d: echo differs (%d of %d bytes)" %
                 (i, len(got), len(data)))
        s.close()


# scenarios whose client speaks first, one byte each way -------------------
def accept_hello(ls, who):
    conn, _ = ls.accept()
    if conn.recv(1) != b"h":
        fail("%s server: no hello" % who)
    conn.sendall(b"h")
    return conn


def connect_hello(host, port, who):
    s = connect(host, port)
    s.sendall(b"h")
    if s.recv(1) != b"h":
        fail("%s client: no hello" % who)
    return s


# direct ------------------------------------------------------------------
DIRECT_ROUNDS = 2000
DIRECT_HOSTILE = 200


def direct_server(ls):
    conn, _ = ls.accept()
    conn.sendall(str(os.getpid()).encode().ljust(16))
    conn.setblocking(False)
    ep = select.epoll()
    ep.register(conn, select.EPOLLIN)
    spurious = 0
    while True:
        if not ep.poll(30):
            fail("direct server: no event in 30 s")
        try:
            b = conn.recv(65536)
        except BlockingIOError:
            spurious += 1
            continue
        if not b:
            break
        while b:
            try:
                b = b[conn.send(b):]
            except BlockingIOError:
                select.select([], [conn], [], 5)
    print("spurious %d" % spurious, flush=True)


def stand_ins(pid):
    """The abstract names of the stand-ins that pid's process holds."""
    mine = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[8:-1])
    names = []
    with open("/proc/net/unix") as f:
        for line in f:
            w = line.split()
            if len(w) >= 8 and w[6] in mine and \
                    w[7].startswith("@rsockx-x:"):
                names.append(w[7][1:])
    return names


def direct_client(host, port):
    s = connect(host, port)
    pid = int(s.recv(16, socket.MSG_WAITALL))
    time.sleep(0.5)     # the out-of-band upgrade lands
    rnd = random.Random(7)
    for phase in range(2):
        for _ in range(DIRECT_ROUNDS // 2):
            m = rnd.randbytes(64)
            s.sendall(m)
            if s.recv(64, socket.MSG_WAITALL) != m:
                fail("direct client: echo differs")
        if phase:
            break
        names = stand_ins(pid)
        if not names:
            fail("direct client: the server has no stand-in to reach")
        u = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sent = 0
        for _ in range(DIRECT_HOSTILE):
            for n in names:
                try:
                    sent += u.sendto(b"!", socket.MSG_DONTWAIT, b"\0" + n.encode())
                except BlockingIOError:
                    pass
            time.sleep(0.002)
        u.close()
        print("hostile %d bytes to %d stand-in(s)" % (sent, len(names)),
              flush=True)
        if not sent:
            fail("direct client: no byte reached a stand-in")
        time.sleep(0.3)
    s.close()


# timing ------------------------------------------------------------------
def timing_server(ls):
    conn = accept_hello(ls, "timing")
    time.sleep(1.0)                 # client: poll times out
    conn.sendall(b"x")
    if conn.recv(1) != b"f":        # client: ring full now
        fail("timing server: no 'full' note")
    time.sleep(1.0)                 # client: POLLOUT stays off
    n = 0
    conn.setblocking(False)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            b = conn.recv(1 << 20)
        except BlockingIOError:
            select.select([conn], [], [], 0.5)
            continue
        if not b:
            break
        n += len(b)
        if b.endswith(b"E"):
            break
    conn.setblocking(True)
    conn.shutdown(socket.SHUT_WR)
    time.sleep(0.5)
    conn.close()
    print("ready.py: timing server drained %d" % n)


def timing_client(host, port):
    s = connect_hello(host, port, "timing")
    s.setblocking(False)
    p = select.poll()
    p.register(s, select.POLLIN)
    t = time.monotonic()
    r = p.poll(300)
    dt = time.monotonic() - t
    if r:
        fail("timing client: idle socket polled readable: %r" % r)
    if dt < 0.29 or dt > 2.0:
        fail("timing client: poll(300 ms) took %.3f s" % dt)
    r = p.poll(5000)
    if not r or not r[0][1] & select.POLLIN:
        fail("timing client: data not reported: %r" % r)
    if s.recv(10) != b"x":
        fail("timing client: wrong byte")
    if p.poll(0):
        fail("timing client: readable after reading everything")
    s.send(b"f")
    # fill the ring: non-blocking writes until EAGAIN
    total = 0
    blob = b"\0" * 65536
    while True:
        try:
            total += s.send(blob)
        except BlockingIOError:
            break
        if total > 64 << 20:
            fail("timing client: 64 MiB written without EAGAIN")
    p.modify(s, select.POLLOUT)
    r = p.poll(300)
    if r:
        fail("timing client: writable with a full ring: %r" % r)
    t = time.monotonic()
    r = p.poll(10000)
    if not r or not r[0][1] & select.POLLOUT:
        fail("timing client: POLLOUT did not come back: %r" % r)
    # tell the server to stop, then wait for its EOF
    while True:
        try:
            s.send(b"E")
            break
        except BlockingIOError:
            select.select([], [s], [], 1)
    p.modify(s, select.POLLIN | select.POLLRDHUP)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = p.poll(5000)
        if r and r[0][1] & select.POLLRDHUP:
            break
    else:
        fail("timing client: no POLLRDHUP after the peer's shutdown")
    if s.recv(10) != b"":
        fail("timing client: no EOF")
    print("ready.py: timing client filled %d bytes" % total)
    s.close()


def lowat_server(ls):
    conn = accept_hello(ls, "lowat")
    if conn.recv(1) != b"1":
        fail("lowat server: no step 1")
    conn.sendall(b"a" * 500)
    time.sleep(0.6)
    conn.sendall(b"b" * 600)
    if conn.recv(1) != b"2":
        fail("lowat server: no step 2")
    for _ in range(10):
        time.sleep(0.05)
        conn.sendall(b"c" * 100)
    if conn.recv(1) != b"e":
        fail("lowat server: no end")
    conn.close()


def lowat_client(host, port):
    s = connect_hello(host, port, "lowat")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1000)
    s.setblocking(False)
    p = select.poll()
    p.register(s, select.POLLIN)
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN)
    s.sendall(b"1")
    time.sleep(0.3)                 # the first 500 bytes are in
    if p.poll(100) or ep.poll(0.1):
        fail("lowat client: readable with 500 of 1000 bytes")
    r = p.poll(5000)
    if not r or not r[0][1] & select.POLLIN or not ep.poll(1):
        fail("lowat client: 1100 bytes not reported: %r" % r)
    got = s.recv(4096)
    if len(got) < 1000 or got != (b"a" * 500 + b"b" * 600)[:len(got)]:
        fail("lowat client: first recv got %d bytes" % len(got))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
    while len(got) < 1100:          # what is left, if any
        if p.poll(5000):
            got += s.recv(4096)
    if got != b"a" * 500 + b"b" * 600:
        fail("lowat client: wrong bytes")
    ep.close()
    s.setblocking(True)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1000)
    s.sendall(b"2")
    t = time.monotonic()
    got = s.recv(4096)              # ten sends of 100 bytes, 50 ms apart
    dt = time.monotonic() - t
    if len(got) != 1000 or got != b"c" * 1000:
        fail("lowat client: blocking recv returned %d bytes" % len(got))
    if dt < 0.3:
        fail("lowat client: blocking recv back after %.3f s" % dt)
    s.sendall(b"e")
    s.close()


# signal ------------------------------------------------------------------
class Alarm(Exception):
    pass


def late_server(ls, who, rounds):
    """Answers each 'r' with an 'x' 0.3 s later, then waits for the end."""
    conn = accept_hello(ls, who)
    for _ in range(rounds):
        if conn.recv(1) != b"r":
            fail("%s server: no 'r'" % who)
        time.sleep(0.3)
        conn.sendall(b"x")
    if conn.recv(1) != b"":
        fail("%s server: no EOF" % who)
    conn.close()


def recv_signalled(libc, s, who, restart, min_dt):
    """A blocking recv of one byte made straight to libc (Python's own
    retry on EINTR would hide the difference), a signal due during it.
    After a handler with SA_RESTART the call goes on and gets the 'x', at
    min_dt at the earliest; after one without, it fails with EINTR and the
    next recv gets the 'x'."""
    import ctypes
    one = ctypes.create_string_buffer(1)
    t = time.monotonic()
    n = libc.recv(s.fileno(), one, 1, 0)
    err = ctypes.get_errno()
    dt = time.monotonic() - t
    if restart and (n != 1 or one.raw != b"x" or dt < min_dt):
        fail("%s client: SA_RESTART recv returned %d (errno %d) after "
             "%.2f s" % (who, n, err, dt))
    if not restart:
        if n != -1 or err != errno.EINTR:
            fail("%s client: recv without SA_RESTART returned %d (errno "
                 "%d) after %.2f s" % (who, n, err, dt))
        if libc.recv(s.fileno(), one, 1, 0) != 1 or one.raw != b"x":
            fail("%s client: no byte after the EINTR" % who)
    print("ready.py: %s client: ctypes recv, %s SA_RESTART: %d after "
          "%.3f s" % (who, "with" if restart else "without", n, dt))


def signal_client(host, port):
    """Run under a 1 s spin (ready.sh).  A signal that comes while a wait
    (epoll, poll, select, or a blocking recv) spins ends it at once with
    EINTR, which lets the handler's exception out: a handler run during
    the spin and a wait asleep after it would hang here.  Data that comes
    during the spin ends it too."""
    s = connect_hello(host, port, "signal")

    def alarm(signum, frame):
        raise Alarm()
    signal.signal(signal.SIGALRM, alarm)
    ep = select.epoll()
    ep.register(s, select.EPOLLIN)
    p = select.poll()
    p.register(s, select.POLLIN)
    waits = (("epoll", ep.poll), ("poll", p.poll),
             ("select", lambda: select.select([s], [], [])[0]),
             ("recv", lambda: s.recv(1)))
    for name, wait in waits:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        t = time.monotonic()
        try:
            r = wait()
            fail("signal client: %s returned %r on an idle socket"
                 % (name, r))
        except Alarm:
            pass
        dt = time.monotonic() - t
        if dt > 0.8:
            fail("signal client: %s: the signal waited %.2f s for the "
                 "spin to end" % (name, dt))
        s.send(b"r")
        r = wait()
        if not r:
            fail("signal client: %s: no data reported" % name)
        if name != "recv":
            r = s.recv(1)
        if r != b"x":
            fail("signal client: %s: wrong byte %r" % (name, r))
        print("ready.py: signal client: %s ended by the signal after "
              "%.3f s" % (name, dt))
    # ppoll with a signal mask of its own, through the library: the
    # thread's mask must be the same after as before
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pfd = ctypes.create_string_buffer(8)
    ctypes.memmove(pfd, (ctypes.c_int * 2)(s.fileno(), select.POLLIN), 8)
    empty = ctypes.create_string_buffer(128)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    s.send(b"r")
    n = libc.ppoll(pfd, 1, None, empty)
    after = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if n != 1 or s.recv(1) != b"x":
        fail("signal client: ppoll returned %d" % n)
    if after != before:
        fail("signal client: ppoll left the signal mask %r (was %r)"
             % (sorted(after), sorted(before)))
    # A blocking recv made straight to libc (Python's own retry on EINTR
    # would hide the difference).  When every handler has SA_RESTART (here
    # SIGALRM's and Python's SIGINT handler), the kernel restarts the call
    # after the handler: the byte comes 0.3 s after the 'r'.  With
    # SIGALRM's without SA_RESTART it fails with EINTR at the alarm.
    hits = []
    signal.signal(signal.SIGALRM, lambda *a: hits.append(1))
    s.settimeout(None)      # a blocking descriptor (timeouts: O_NONBLOCK)
    for restart in (True, False):
        signal.siginterrupt(signal.SIGALRM, not restart)
        signal.siginterrupt(signal.SIGINT, not restart)
        s.send(b"r")
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        recv_signalled(libc, s, "signal", restart, 0.15)
    if len(hits) != 2:
        fail("signal client: %d alarms handled, not 2" % len(hits))
    s.close()


def waiter_client(host, port, who, spin):
    """Two threads in a blocking recv on one socket: the first sleeps on
    the connection, the second (this one) waits for its news.  A signal
    to the second ends that wait as the kernel ends its own: restarted
    after a handler with SA_RESTART, EINTR after one without.  SIGINT's
    handler (Python's) is left without SA_RESTART: a guess from the
    installed handlers (the first thread's kind of wait) would give EINTR
    in both rounds.  With spin (ready.sh sets a 1 s spin) the signal comes
    while the second thread spins, held back: the spin ends, and the wait
    for the first thread's news after it must not swallow the signal (the
    guess decides there, so SIGINT's handler follows SIGUSR1's).  The
    server answers each 'r' 0.3 s later."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    s = connect_hello(host, port, who)
    s.settimeout(None)
    hits = []
    signal.signal(signal.SIGUSR1, lambda *a: hits.append(1))
    me = threading.get_ident()
    for restart in (True, False):
        signal.siginterrupt(signal.SIGUSR1, not restart)
        if spin:
            signal.siginterrupt(signal.SIGINT, not restart)
        first = []

        def sleeper():
            b = ctypes.create_string_buffer(1)
            first.append((libc.recv(s.fileno(), b, 1, 0), b.raw))
        t1 = threading.Thread(target=sleeper)
        t1.start()
        # t1 sleeps on the connection after this (after its spin)
        time.sleep(1.2 if spin else 0.1)
        s.send(b"rr")               # answers 0.3 s and 0.6 s from now
        threading.Timer(0.1, signal.pthread_kill,
                        (me, signal.SIGUSR1)).start()
        recv_signalled(libc, s, who, restart, 0.3)
        t1.join(10)
        if first != [(1, b"x")]:
            fail("%s client: the first thread got %r" % (who, first))
    if len(hits) != 2:
        fail("%s client: %d signals handled, not 2" % (who, len(hits)))
    s.close()


# raw ---------------------------------------------------------------------
def raw_client(host, port):
    """An epoll_wait made as a raw system call, which rsockx does not see:
    no thread sleeps in a wait of its own, so the connection's CQ was left
    unarmed, and the watcher's backstop must arm it for the arrival to
    wake this wait."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    s = connect_hello(host, port, "raw")
    ep = select.epoll()
    ep.register(s, select.EPOLLIN)
    s.send(b"r")
    buf = ctypes.create_string_buffer(12 * 4)   # packed epoll_event[4]
    t = time.monotonic()
    n = libc.syscall(232, ep.fileno(), buf, 4, 5000)   # x86_64 epoll_wait
    dt = time.monotonic() - t
    if n != 1:
        fail("raw client: raw epoll_wait returned %d after %.2f s (errno "
             "%d)" % (n, dt, ctypes.get_errno()))
    if s.recv(1) != b"x":
        fail("raw client: wrong byte")
    print("ready.py: raw client: woken after %.3f s" % dt)
    s.close()


# a socket made blocking after its upgrade --------------------------------
def turned_client(host, port):
    """Connects in Python's timeout mode (a non-blocking socket, so the
    connection's completions go to its device's channel), then turns the
    socket blocking: each recv of the 300 ping-pongs sleeps (the test runs
    this with RSOCKX_SPIN_US=0) and is woken through the readiness
    thread's kick (chan_kicks)."""
    s = connect(host, port)
    s.sendall(b"x")
    if s.recv(1) != b"x":
        fail("turned client: first byte")
    time.sleep(0.3)             # the upgrade lands before the rounds
    s.settimeout(None)
    for i in range(300):
        msg = (b"%08d" % i) * 8
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = s.recv(len(msg) - len(got))
            if not b:
                fail("turned client: EOF in round %d" % i)
            got += b
        if got != msg:
            fail("turned client: round %d differs" % i)
    s.close()


def main():
    scen, role, host, port = sys.argv[1:5]
    port = int(port)
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    if role == "server":
        if scen == "asyncio":
            async def run():
                await aecho_server(host, port,
                                   asyncio.get_running_loop().create_future())
            asyncio.run(run())
        else:
            ls = listen(host, port)
            {"et": et_server, "select": blocking_echo,
             "epmisc": blocking_echo, "threads": blocking_echo,
             "aliases": blocking_echo,
             "prefork": prefork_server, "forkconn": forkconn_server,
             "forkgap": forkconn_server,
             "forkheld": lambda ls: forkconn_server(ls, 0.3),
             "forkinherit": forkinherit_server,
             "timing": timing_server, "lowat": lowat_server,
             "signal": lambda ls: late_server(ls, "signal", 7),
             "waiter": lambda ls: late_server(ls, "waiter", 4),
             "waiterspin": lambda ls: late_server(ls, "waiterspin", 4),
             "raw": lambda ls: late_server(ls, "raw", 1),
             "direct": direct_server, "turned": blocking_echo}[scen](ls)
    else:
        if scen == "asyncio":
            asyncio.run(aecho_client(host, port, seed))
        elif scen == "et":
            poll_client(host, port, seed)
        elif scen == "select":
            select_client(host, port, seed)
        elif scen == "epmisc":
            epmisc_client(host, port)
        elif scen == "aliases":
            aliases_client(host, port)
        elif scen == "threads":
            threads_client(host, port, seed)
        elif scen in ("prefork", "forkconn", "forkgap", "forkheld",
                      "forkinherit"):
            echo_rounds(host, port, seed, {"prefork": 4, "forkconn": 3,
                                           "forkgap": 3, "forkheld": 3,
                                           "forkinherit": 1}[scen])
        elif scen == "lowat":
            lowat_client(host, port)
        elif scen == "signal":
            signal_client(host, port)
        elif scen in ("waiter", "waiterspin"):
            waiter_client(host, port, scen, scen == "waiterspin")
        elif scen == "raw":
            raw_client(host, port)
        elif scen == "direct":
            direct_client(host, port)
        elif scen == "turned":
            turned_client(host, port)
        else:
            timing_client(host, port)
    print("ready.py: ok %s %s" % (scen, role), flush=True)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        fail("%s: %s" % (type(e).__name__, e))
    sys.exit(0)
