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


def child_talk(fd):
    # the child: fd is an inherited connected TCP socket
    s = socket.socket(fileno=fd)
    data = b""
    while len(data) < 100000:
        data += s.recv(65536)
    s.sendall(bytes(b ^ 0x55 for b in data))
    s.close()


def talk_to_child(c, payload):
    # payload to a child-talk child on c; True when its answer is right
    c.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = c.recv(65536)
        if not chunk:
            break
        got += chunk
    return got == bytes(b ^ 0x55 for b in payload)


def splices():
    # os.splice between a connected TCP pair and pipes, both ways, after a
    # pause in which a same-host upgrade has time to happen
    import time
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
    import time
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
    elif cmd == "child-talk":
        child_talk(int(sys.argv[2]))
    else:
        sys.exit("pyapps.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
