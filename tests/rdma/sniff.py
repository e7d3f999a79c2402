#!/usr/bin/python3
# RoCE v2 packets on an interface, by the traffic class of their IP header
# (tests/rdma/tclass.sh).  Needs root (AF_PACKET).
#
#   sniff.py IFACE SECONDS OUT
#       counts the RoCE v2 packets (UDP to port 4791) that cross IFACE
#       (on one end of a veth pair each packet shows once, going out or in)
#       until SECONDS have passed or SIGTERM comes, and writes one line per
#       traffic class to OUT: "tclass T qp1 N other M", N the packets to
#       QP 1 (the RDMA CM's), M the others (the connections' own QPs).
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
ROCE_PORT = 4791


def roce(frame):
    """(traffic class, destination QP) of a RoCE v2 frame, else None."""
    if len(frame) < 14:
        return None
    eth = struct.unpack("!H", frame[12:14])[0]
    p = frame[14:]
    if eth == 0x0800 and len(p) >= 20:
        ihl = (p[0] & 0x0f) * 4
        if p[9] != 17:
            return None
        tclass, udp = p[1], p[ihl:]
    elif eth == 0x86dd and len(p) >= 40:
        if p[6] != 17:
            return None
        tclass = ((p[0] & 0x0f) << 4) | (p[1] >> 4)
        udp = p[40:]
    else:
        return None
    if len(udp) < 8 + 12 or struct.unpack("!H", udp[2:4])[0] != ROCE_PORT:
        return None
    bth = udp[8:20]
    return tclass, int.from_bytes(bth[5:8], "big")


def main():
    iface, secs, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.settimeout(0.2)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    counts = {}
    end = time.time() + secs
    print("sniffing", flush=True)
    while not stop and time.time() < end:
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        r = roce(frame)
        if r:
            c = counts.setdefault(r[0], [0, 0])
            c[0 if r[1] == 1 else 1] += 1
    with open(out, "w") as f:
        for t in sorted(counts):
            f.write("tclass %d qp1 %d other %d\n" % (t, *counts[t]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
