"""Fault scenarios for tests/rdma/faults.sh that need more than rsx-stream.

    faults.py SCENARIO server|client HOST PORT

Both sides print "faults.py: ok SCENARIO ROLE ..." last when all went as
it must; anything else (a FAIL line, a timeout) is a failure.  Timings
are printed as "key=value" words for the test to report.

  fd        client: one connection (upgraded), then every free descriptor
            but one is taken, a second connection (must stay TCP), then
            both connections are used again, every byte checked
  memlock   the same with RLIMIT_MEMLOCK lowered to 64 KiB after the first
            connection (run without CAP_IPC_LOCK, which ignores the limit)
  shutrd    client: a thread blocks in recv(); another thread calls
            shutdown(SHUT_RDWR); the recv must return (within 5 s) while
            the peer keeps the connection open
  shutrdonly  the same with shutdown(SHUT_RD): nothing goes to the peer
  closerd   client: a thread blocks in recv(); another thread closes the
            socket.  Linux lets the recv go on until the peer sends or
            closes (the server closes after HOLD s) and returns EOF; so
            must rsockx (the call goes on with a descriptor of its own)
  closesend client: reads part of a stream the server keeps sending, closes
            with unread data; the server's send must fail (EPIPE or
            ECONNRESET) soon after, not hang
  qplimit   client: connections A and B (upgraded under RSOCKX_MAX_QPS=2 on
            one side), C (must stay TCP), A closed, D (upgraded again:
            A's queue pair was given back), every connection echoed
  closesnd  client: a thread blocks in send() of SNDN bytes (the server
            reads nothing yet); another thread closes the socket.  As on
            Linux the send goes on: the server, once told of the close,
            reads the whole stream, which must be every byte, then EOF
  closesndrst  the same, but the server closes without reading: the
            blocked send must fail (EPIPE, ECONNRESET, or EBADF from
            python's next send), not hang
  killsnd   the same, but the client does not close, and the server, which
            has not sent or received since its upgrade (not cut over),
            is killed (SIGKILL): the send must fail (ECONNRESET or
            EPIPE) within 10 s
  killsndev  the same as killsnd, evented: a non-blocking socket whose
            program waits in epoll (selectors) for room to write; the wait
            must end and the next send fail within 10 s
  flap      client: connection A (upgraded) echoes; the port goes down
            (FAULTS_FLAG.want-down, the test answers FAULTS_FLAG.down):
            A must fail within 10 s, never end cleanly; connection B,
            made while the port is down, echoes twice 0.5 s apart (on
            TCP, counted fallback_nodev: it lives to be asked); the port comes
            back (FAULTS_FLAG.want-up, then FAULTS_FLAG.up) and connection
            C echoes (upgraded again, in the same processes)
  flapfork  client: connection A (upgraded), then fork; the child makes B
            (upgraded: it opens the devices anew); the port goes down
            while the test holds the server stopped (SIGSTOP), so that
            only the port can break them: the parent's A (a blocking
            recv) and the child's B (a recv with a timeout: poll and the
            readiness watcher) must both fail within 15 s; once the port
            is back, C upgrades in the parent and echoes
"""
import errno
import os
import resource
import selectors
import signal
import socket
import sys
import threading
import time

HOLD = 4.0            # closerd/shutrd: the server keeps the socket this long
PIECE = 200000
SNDN = 8 << 20        # closesnd: far more than a ring and the TCP buffers


def fail(msg):
    print("faults.py: FAIL %s" % msg, flush=True)
    sys.exit(1)


def pattern(tag, n):
    """n bytes that depend on tag, so that a mix-up shows."""
    unit = bytes((tag * 31 + i * 7) & 0xff for i in range(251))
    return (unit * (n // 251 + 1))[:n]


def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            fail("EOF after %d of %d bytes" % (len(out), n))
        out += b
    return bytes(out)


def echo_check(s, tag, n=PIECE):
    data = pattern(tag, n)
    s.sendall(data)
    if recv_exact(s, n) != data:
        fail("echo of connection %d differs" % tag)


def connect(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    bind = os.environ.get("FAULTS_BIND")
    if bind:
        s.bind((bind, 0))
    s.connect((host, port))
    return s


def echo_conn(c):
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
    except OSError as e:
        print("faults.py: server connection ended: %s" % e, flush=True)
    c.close()


# --- servers --------------------------------------------------------------
def serve(scenario, ls):
    if scenario in ("fd", "memlock", "flap", "flapfork", "qplimit"):
        threads = []
        for _ in range({"flap": 3, "flapfork": 3,
                        "qplimit": 4}.get(scenario, 2)):
            c, _ = ls.accept()
            t = threading.Thread(target=echo_conn, args=(c,))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        return "served %d" % len(threads)
    c, _ = ls.accept()
    if scenario == "closerd":
        # not waiting for the client's end: a close that another thread's
        # recv outlives ends nothing (the socket lives on in that call)
        recv_exact(c, 1000)
        c.sendall(b"k")
        time.sleep(HOLD)
        c.close()
        return "closed after %.0f s" % HOLD
    if scenario in ("shutrd", "shutrdonly"):
        recv_exact(c, 1000)
        c.sendall(b"k")
        rest = 0
        try:
            while True:       # until the client's end of stream
                b = c.recv(65536)
                if not b:
                    break
                rest += len(b)
        except OSError as e:
            print("faults.py: server read ended: %s" % e, flush=True)
        time.sleep(HOLD)      # the connection stays open meanwhile
        c.close()
        return "held"
    if scenario in ("closesnd", "closesndrst", "killsnd", "killsndev"):
        recv_exact(c, 1000)
        c.sendall(b"k")
        t0 = time.monotonic()
        while not os.path.exists(CLOSED_FLAG):
            if time.monotonic() - t0 > 30:
                fail("the client did not close in 30 s")
            time.sleep(0.05)
        if scenario == "closesndrst":
            time.sleep(HOLD)
            c.close()
            return "closed unread after %.0f s" % HOLD
        if scenario.startswith("killsnd"):
            print("faults.py: ok %s server killing itself" % scenario,
                  flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        want = pattern(7, SNDN)
        got = 0
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            if b != want[got:got + len(b)]:
                fail("bytes %d-%d differ" % (got, got + len(b)))
            got += len(b)
        c.close()
        if got != SNDN:
            fail("EOF after %d of %d bytes" % (got, SNDN))
        return "got=%d" % got
    if scenario == "closesend":
        recv_exact(c, 1000)
        c.sendall(b"k")
        sent = 0
        buf = pattern(9, 65536)
        t0 = time.monotonic()
        tend = None
        try:
            while time.monotonic() - t0 < 60:
                sent += c.send(buf)
                if tend is None and os.path.exists(CLOSED_FLAG):
                    tend = time.monotonic()
        except OSError as e:
            if e.errno not in (errno.EPIPE, errno.ECONNRESET):
                fail("send ended with %s" % e)
            if tend is None:
                tend = time.monotonic()
            return "send_err=%s sent=%d err_after_close_s=%.2f" % (
                errno.errorcode[e.errno], sent, time.monotonic() - tend)
        fail("sent %d bytes for 60 s to a closed socket" % sent)
    fail("unknown scenario")


CLOSED_FLAG = os.environ.get("FAULTS_FLAG", "/tmp/faults.closed")


# --- clients --------------------------------------------------------------
def take_fds(keep):
    """Opens /dev/null until EMFILE, then frees keep descriptors."""
    fds = []
    try:
        while True:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
    for _ in range(keep):
        os.close(fds.pop())
    return fds


def await_flag(name, limit=30):
    """Asks the test for something (CLOSED_FLAG.want-NAME), then waits
    for its answer (CLOSED_FLAG.NAME)."""
    open("%s.want-%s" % (CLOSED_FLAG, name), "w").close()
    t0 = time.monotonic()
    while not os.path.exists("%s.%s" % (CLOSED_FLAG, name)):
        if time.monotonic() - t0 > limit:
            fail("no %s from the test after %d s" % (name, limit))
        time.sleep(0.05)


def flap(host, port):
    a = connect(host, port)
    echo_check(a, 1)
    await_flag("down")
    t0 = time.monotonic()
    a.settimeout(10)
    try:
        echo_check(a, 2)
        fail("connection A still echoes with its port down")
    except socket.timeout:
        fail("connection A neither failed nor echoed within 10 s")
    except OSError as e:
        if e.errno not in (errno.ECONNRESET, errno.EPIPE):
            raise
        a_err = "%s after %.2f s" % (errno.errorcode[e.errno],
                                     time.monotonic() - t0)
    a.close()
    b = connect(host, port)
    echo_check(b, 3)
    # long enough to be asked for: one that closes first is never counted
    time.sleep(0.5)
    echo_check(b, 3)
    b.close()
    await_flag("up")
    c = connect(host, port)
    echo_check(c, 4)
    echo_check(c, 5)
    c.close()
    return "a_broke=%s" % a_err.replace(" ", "_")


def qplimit(host, port):
    a = connect(host, port)
    echo_check(a, 1)
    b = connect(host, port)
    echo_check(b, 2)
    c = connect(host, port)
    echo_check(c, 3)
    echo_check(a, 4)
    # the server's end of A is closed too (its echo thread ends at EOF and
    # closes), then a moment for its queue pair to be given back after
    a.shutdown(socket.SHUT_WR)
    if a.recv(1):
        fail("connection A: bytes after the echo")
    a.close()
    time.sleep(0.3)
    d = connect(host, port)
    for s, tag in ((d, 5), (b, 6), (c, 7), (d, 8)):
        echo_check(s, tag)
    for s in (b, c, d):
        s.close()
    return "four connections checked"


def in_thread(call):
    """Runs call() in a thread of its own; res["got"] is what it returned,
    or "errno NAME" for the error it raised."""
    res = {}

    def run():
        try:
            res["got"] = call()
        except OSError as e:
            res["got"] = "errno %s" % errno.errorcode.get(e.errno, e.errno)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, res


def broken_within(s, tag, limit):
    """Echoes on s (the port is down): it must fail (ECONNRESET or EPIPE)
    within limit seconds; returns the seconds it took."""
    def late(signum, frame):
        raise TimeoutError()
    t0 = time.monotonic()
    old = signal.signal(signal.SIGALRM, late)
    signal.alarm(limit)
    try:
        echo_check(s, tag)
        fail("connection %d still echoes with its port down" % tag)
    except TimeoutError:
        fail("connection %d neither failed nor echoed within %d s" %
             (tag, limit))
    except OSError as e:
        if e.errno not in (errno.ECONNRESET, errno.EPIPE):
            raise
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return time.monotonic() - t0


def flapfork(host, port):
    a = connect(host, port)
    echo_check(a, 1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            a.close()            # the parent's
            b = connect(host, port)
            echo_check(b, 2)
            os.write(w, b"r")
            t0 = time.monotonic()
            while not os.path.exists(CLOSED_FLAG + ".down"):
                if time.monotonic() - t0 > 30:
                    fail("child: the port did not go down in 30 s")
                time.sleep(0.05)
            b.settimeout(30)     # poll, the readiness watcher
            print("faults.py: child's B broke after %.2f s" %
                  broken_within(b, 3, 15), flush=True)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    if os.read(r, 1) != b"r":
        fail("the child did not make its connection")
    await_flag("down")
    took = broken_within(a, 4, 15)  # a blocking recv: rsx_sleep
    a.close()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        fail("the child's connection did not break (status %#x)" % status)
    await_flag("up")
    c = connect(host, port)
    echo_check(c, 5)
    c.close()
    return "a_broke_after_s=%.2f" % took


def killsndev(s):
    """killsnd for a program that waits in epoll: sends until the socket
    is full, has the server killed, and waits for room or an error."""
    s.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(s, selectors.EVENT_WRITE)
    buf = pattern(7, 65536)
    sent, full, t0 = 0, None, time.monotonic()
    while True:
        try:
            sent += s.send(buf)
            continue
        except BlockingIOError:
            pass
        except OSError as e:
            if full is None:
                fail("send failed before the kill: %s" % e)
            if e.errno not in (errno.EPIPE, errno.ECONNRESET):
                fail("send to a peer killed: %s" % e)
            return "send=errno_%s after_kill_s=%.2f sent=%d" % (
                errno.errorcode[e.errno], time.monotonic() - full, sent)
        if full is None and time.monotonic() - t0 > 1.0:
            full = time.monotonic()
            open(CLOSED_FLAG, "w").close()
        if full is not None and time.monotonic() - full > 10:
            fail("no error %.1f s after the peer's kill (sent %d)" %
                 (time.monotonic() - full, sent))
        sel.select(1.0)


def client(scenario, host, port):
    if scenario == "flap":
        return flap(host, port)
    if scenario == "flapfork":
        return flapfork(host, port)
    if scenario == "qplimit":
        return qplimit(host, port)
    if scenario in ("fd", "memlock"):
        a = connect(host, port)
        echo_check(a, 1)
        # the first connection moves before the limits leave it no room
        # (FAULTS_SETTLE: an out-of-band move comes after the probe)
        time.sleep(float(os.environ.get("FAULTS_SETTLE", "0")))
        if scenario == "fd":
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
            held = take_fds(1)   # room for the socket alone
        else:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (65536, 65536))
            held = []
        b = connect(host, port)
        echo_check(b, 2)
        echo_check(a, 3)
        echo_check(b, 4)
        for fd in held:
            os.close(fd)
        a.close()
        b.close()
        return "two connections checked"
    s = connect(host, port)
    s.sendall(pattern(5, 1000))
    if recv_exact(s, 1) != b"k":
        fail("no answer")
    # FAULTS_SETTLE (s): a pause for an out-of-band move to land first
    time.sleep(float(os.environ.get("FAULTS_SETTLE", "0")))
    if scenario in ("shutrd", "shutrdonly", "closerd"):
        th, res = in_thread(lambda: s.recv(100))
        time.sleep(0.5)      # the reader is asleep in recv now
        t0 = time.monotonic()
        if scenario.startswith("shutrd"):
            s.shutdown(socket.SHUT_RDWR if scenario == "shutrd"
                       else socket.SHUT_RD)
            th.join(HOLD - 1.5)
            if th.is_alive():
                fail("recv still blocked %.1f s after shutdown(%s)"
                     % (time.monotonic() - t0, "SHUT_RDWR"
                        if scenario == "shutrd" else "SHUT_RD"))
            s.close()
        else:
            fd = s.detach()
            os.close(fd)
            th.join(HOLD + 10)
            if th.is_alive():
                fail("recv still blocked %.1f s after close, server closed "
                     "after %.0f s" % (time.monotonic() - t0, HOLD))
            # Linux: EOF when the peer closes, and rsockx the same
            if res["got"] != b"":
                fail("recv after close returned %r" % (res["got"],))
        return "recv_returned=%r after_s=%.2f" % (res["got"],
                                                   time.monotonic() - t0)
    if scenario == "killsndev":
        return killsndev(s)
    if scenario in ("closesnd", "closesndrst", "killsnd"):
        th, res = in_thread(lambda: s.sendall(pattern(7, SNDN)) or "sent")
        time.sleep(1.0)      # the sender is asleep in send now
        if not th.is_alive():
            fail("sendall of %d bytes to a peer that reads nothing returned"
                 " %s" % (SNDN, res.get("got")))
        t0 = time.monotonic()
        if scenario != "killsnd":
            fd = s.detach()
            os.close(fd)
        open(CLOSED_FLAG, "w").close()
        th.join(10 if scenario == "killsnd" else HOLD + 20)
        if th.is_alive():
            fail("send still blocked %.1f s after %s" %
                 (time.monotonic() - t0, "the peer's kill"
                  if scenario == "killsnd" else "close"))
        if scenario == "killsnd" and res["got"] not in (
                "errno EPIPE", "errno ECONNRESET"):
            fail("send to a peer killed: %s" % res["got"])
        if scenario == "closesnd" and res["got"] != "sent":
            fail("send after close: %s, the peer read everything" %
                 res["got"])
        # Linux: a send that queued some bytes before the reset returns
        # their count, and sendall's next send finds the descriptor gone
        if scenario == "closesndrst" and res["got"] not in (
                "errno EPIPE", "errno ECONNRESET", "errno EBADF"):
            fail("send to a peer that closed unread: %s" % res["got"])
        return "send=%s after_close_s=%.2f" % (
            res["got"].replace(" ", "_"), time.monotonic() - t0)
    if scenario == "closesend":
        got = 0
        while got < 300000:
            b = s.recv(65536)
            if not b:
                fail("EOF from a server that sends")
            got += len(b)
        t0 = time.monotonic()
        s.close()
        open(CLOSED_FLAG, "w").close()
        return "read=%d close_s=%.2f" % (got, time.monotonic() - t0)
    fail("unknown scenario")


def main():
    scenario, role, host, port = sys.argv[1], sys.argv[2], sys.argv[3], \
        int(sys.argv[4])
    if role == "server":
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, port))
        ls.listen(4)
        what = serve(scenario, ls)
    else:
        what = client(scenario, host, port)
    print("faults.py: ok %s %s %s" % (scenario, role, what), flush=True)


main()
