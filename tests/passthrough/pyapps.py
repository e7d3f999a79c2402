"""Small Python programs for python.test (run by /usr/bin/python3).

  echo-server PORT N   asyncio echo server on 127.0.0.1:PORT, exits after
                       N connections
  echo-client PORT     asyncio client: 1 MiB in chunks, prints what came back
  http-get URL OUT     urllib GET, body to OUT, prints status and length
  subprocess           subprocess (vfork/posix_spawn) children, one of them
                       talking on an inherited TCP socket
  spawn                a child spawned with an inheritable accepted socket
                       0.3 s after accept(), while the request for it may
                       be under way (RSOCKX_TEST_ANSWER_HOLD_MS)
  child-talk FD        (that child) answer 100000 bytes XORed with 0x55
"""
import asyncio
import hashlib
import os
import socket
import subprocess
import sys
import time
import urllib.request


def echo_server(port, n):
    async def main():
        done = asyncio.Event()
        left = [n]

        async def handle(reader, writer):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()
            await writer.wait_closed()
            left[0] -= 1
            if not left[0]:
                done.set()

        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await done.wait()

    asyncio.run(main())
    print("echo-server: served", n)


def echo_client(port):
    data = bytes((i * 7 + i // 251) & 0xFF for i in range(1 << 20))

    async def main():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def send():
            for i in range(0, len(data), 50000):
                writer.write(data[i:i + 50000])
                await writer.drain()
            writer.write_eof()

        task = asyncio.create_task(send())
        got = b""
        while chunk := await reader.read(65536):
            got += chunk
        await task
        writer.close()
        await writer.wait_closed()
        return got

    got = asyncio.run(main())
    print("echo-client: sent %d got %d same %s sha256 %s" % (
        len(data), len(got), got == data, hashlib.sha256(got).hexdigest()))


def http_get(url, out):
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
        print("http-get: status", r.status, "length", len(body),
              "content-length", r.headers["Content-Length"])
    with open(out, "wb") as f:
        f.write(body)


def child_talk(fd, client=0):
    # the child: fd is an inherited connected TCP socket; client: a pid
    # of ours to wait for, which prints its own verdict
    s = socket.socket(fileno=fd)
    data = b""
    while len(data) < 100000:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.sendall(bytes(b ^ 0x55 for b in data))
    s.close()
    if client:
        _, st = os.waitpid(client, 0)
        print("self-exec client:", os.waitstatus_to_exitcode(st))


def talk_to_child(c, payload, sent=0):
    # payload to a child-talk child on c; True when its answer is right.
    # sent: all that was sent before (which the answer starts with)
    c.sendall(payload)
    want = sent or len(payload)
    got = b""
    while len(got) < want:
        chunk = c.recv(65536)
        if not chunk:
            break
        got += chunk
    return got[want - len(payload):] == bytes(b ^ 0x55 for b in payload)


def splices():
    # os.splice between a connected TCP pair and pipes, both ways, after a
    # pause in which a same-host upgrade has time to happen
    lsock = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(lsock.getsockname())
    a, _ = lsock.accept()
    c.sendall(b"x")
    assert a.recv(1) == b"x"
    time.sleep(0.3)
    payload = bytes((i * 7 + i // 251) & 0xFF for i in range(300000))
    # socket to pipe: what c sends, a's end splices into a pipe
    r, w = os.pipe()
    got = b""
    c.sendall(payload[:100000])
    while len(got) < 100000:
        n = os.splice(a.fileno(), w, 100000 - len(got))
        assert n > 0, n
        got += os.read(r, n)
    # pipe to socket: a pipe's bytes spliced into c, read at a
    back = b""
    left = payload[100000:]
    while left or len(back) < 200000:
        if left:
            k = os.write(w, left[:32768])
            left = left[k:]
            while True:
                try:
                    n = os.splice(r, c.fileno(), 65536,
                                  flags=os.SPLICE_F_NONBLOCK)
                except BlockingIOError:
                    break
                if n == 0:
                    break
        back += a.recv(65536)
    print("splice socket to pipe:", got == payload[:100000])
    print("splice pipe to socket:", back == payload[100000:])
    for f in (r, w):
        os.close(f)
    for x in (a, c, lsock):
        x.close()


def subprocesses():
    # plain children: subprocess uses vfork (or posix_spawn)
    r = subprocess.run(["/bin/echo", "child", "output"], capture_output=True)
    print("subprocess echo:", r.returncode, r.stdout)
    r = subprocess.run([sys.executable, "-c", "import sys; print(sys.argv[1])",
                        "python child"], capture_output=True)
    print("subprocess python:", r.returncode, r.stdout)
    # a child that inherits a TCP connection
    lsock = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(lsock.getsockname())
    a, _ = lsock.accept()
    p = subprocess.Popen([sys.executable, __file__, "child-talk",
                          str(a.fileno())], pass_fds=(a.fileno(),))
    a.close()
    ok = talk_to_child(c, bytes(i & 0xFF for i in range(100000)))
    print("inherited socket child:", p.wait(), ok)
    c.close()
    lsock.close()


def spawn():
    # subprocess (vfork) with close_fds=False: the new program inherits
    # the accepted socket by number; the parent looks at it on the way
    lsock = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(lsock.getsockname())
    a, _ = lsock.accept()
    os.set_inheritable(a.fileno(), True)
    time.sleep(0.3)
    p = subprocess.Popen([sys.executable, __file__, "child-talk",
                          str(a.fileno())], close_fds=False)
    a.close()
    ok = talk_to_child(c, bytes((i * 3) & 0xFF for i in range(100000)))
    print("spawned child:", p.wait(), ok)
    c.close()
    lsock.close()


def selfexec():
    # the server executes itself 0.3 s after accept(), the socket kept
    # open for the new program, which answers the client
    lsock = socket.create_server(("127.0.0.1", 0))
    p = subprocess.Popen([sys.executable, __file__, "talk-to",
                          str(lsock.getsockname()[1])])
    a, _ = lsock.accept()
    os.set_inheritable(a.fileno(), True)
    time.sleep(0.3)
    os.execv(sys.executable, [sys.executable, __file__, "child-talk",
                              str(a.fileno()), str(p.pid)])


def talk_to(port):
    # half before the server's exec, half after: the client has cut over
    # by then when the server's answer came before the exec
    c = socket.create_connection(("127.0.0.1", port))
    payload = bytes((i * 5) & 0xFF for i in range(100000))
    c.sendall(payload[:50000])
    time.sleep(1.5)
    ok = talk_to_child(c, payload[50000:], len(payload))
    print("self-exec talk:", ok)
    sys.exit(0 if ok else 1)


def thread_wakes(pid):
    # each of pid's threads but its first: (voluntary context switches,
    # CPU time in clock ticks); a thread that spins never sleeps
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        if int(t) == pid:
            continue
        try:
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        wakes = int(line.split()[1])
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[t] = (wakes, int(fields[11]) + int(fields[12]))
        except FileNotFoundError:
            pass
    return out


def idle(secs, client_stats):
    # an upgraded connection nobody uses: the server waits in epoll, the
    # client in a blocking recv(); how often do rsockx's threads wake?
    # IDLE_HOST: the server's address, IDLE_BIND: the client's (the VM)
    import select
    lsock = socket.create_server((os.environ.get("IDLE_HOST", "127.0.0.1"),
                                  0))
    env = dict(os.environ, RSOCKX_STATS_FILE=client_stats)
    p = subprocess.Popen([sys.executable, __file__, "idle-client",
                          str(lsock.getsockname()[1])], env=env)
    a, _ = lsock.accept()
    for _ in range(2):
        got = b""
        while len(got) < 100:
            got += a.recv(100 - len(got))
        a.sendall(got)
    time.sleep(0.5)
    ep = select.epoll()
    ep.register(a.fileno(), select.EPOLLIN)
    before = (thread_wakes(os.getpid()), thread_wakes(p.pid))
    events = ep.poll(secs)
    after = (thread_wakes(os.getpid()), thread_wakes(p.pid))
    used = [[sum(v[k] - b.get(t, (0, 0))[k] for t, v in a_.items())
             for k in (0, 1)] for b, a_ in zip(before, after)]
    a.sendall(b"bye")
    ok = a.recv(2) == b"ok"
    print("idle: epoll events %d, client %s, rc %d" % (len(events), ok,
                                                      p.wait()))
    print("idle: threads woke: server %d (%d threads, %d ticks of CPU), "
          "client %d (%d threads, %d ticks), in %g s"
          % (used[0][0], len(after[0]), used[0][1], used[1][0],
             len(after[1]), used[1][1], secs))
    print("idle: server threads:", " ".join(sorted(thread_names(os.getpid()))))


def thread_names(pid):
    # the names of pid's threads but its first
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        if int(t) != pid:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                out.append(f.read().strip())
    return out


def idle_client(port):
    # the second round after the upgrade: both ends cut over by then
    bind = os.environ.get("IDLE_BIND")
    c = socket.create_connection((os.environ.get("IDLE_HOST", "127.0.0.1"),
                                  port), source_address=bind and (bind, 0))
    for i in range(2):
        time.sleep(0.5 * i)
        c.sendall(bytes(range(100)))
        got = b""
        while len(got) < 100:
            got += c.recv(100 - len(got))
        assert got == bytes(range(100))
    got = b""
    while len(got) < 3:
        got += c.recv(3 - len(got))
    c.sendall(b"ok")
    c.close()


def main():
    cmd = sys.argv[1]
    if cmd == "echo-server":
        echo_server(int(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "echo-client":
        echo_client(int(sys.argv[2]))
    elif cmd == "http-get":
        http_get(sys.argv[2], sys.argv[3])
    elif cmd == "subprocess":
        subprocesses()
    elif cmd == "spawn":
        spawn()
    elif cmd == "splice":
        splices()
    elif cmd == "idle":
        idle(float(sys.argv[2]), sys.argv[3])
    elif cmd == "idle-client":
        idle_client(int(sys.argv[2]))
    elif cmd == "child-talk":
        child_talk(*map(int, sys.argv[2:4]))
    elif cmd == "self-exec":
        selfexec()
    elif cmd == "talk-to":
        talk_to(int(sys.argv[2]))
    else:
        sys.exit("pyapps.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
