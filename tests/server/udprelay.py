#!/usr/bin/env python3
"""volley-udprelay: a UDP relay that loses and reorders datagrams, for
volley's HTTP/3 tests: a lossy path between volley and a real server, all
on 127.0.0.1.

Usage: udprelay.py --to PORT [--drop P] [--reorder P] [--garbage P]
                   [--seed N] [--stats FILE] [--max-time S]

Once listening it prints "port N" on stdout. Each client address gets a
socket of its own towards 127.0.0.1:PORT. Every datagram, either way, is
dropped with probability --drop, else held back with probability --reorder
and sent after the next datagram that flow sends the same way (or 2 ms
later); with --garbage, a datagram of random bytes follows one with that
probability. It relays payloads only: what it sends carries no ECN mark,
but it counts the datagrams that came marked ECN-capable (ECT(0), ECT(1)
or CE). SIGTERM or SIGINT (and --max-time, default 300) write the stats
and exit 0:
  {"to_server": {"relayed": n, "dropped": n, "reordered": n, "garbage": n,
                 "ecn_marked": n},
   "to_client": {...}}
SPDX-License-Identifier: MIT
"""
import argparse
import json
import os
import random
import selectors
import signal
import socket
import time

HOLD = 0.002  # seconds a held-back datagram waits at most


class Direction:
    def __init__(self, name, options, rng):
        self.stats = {"relayed": 0, "dropped": 0, "reordered": 0, "garbage": 0, "ecn_marked": 0}
        self.name, self.options, self.rng = name, options, rng

    def pass_on(self, data, send, flow, tos):
        """Relay data with send(bytes), losing or holding it back."""
        o = self.options
        if tos & 3:
            self.stats["ecn_marked"] += 1
        if self.rng.random() < o.drop:
            self.stats["dropped"] += 1
            return
        held = flow.held.pop(self.name, None)
        if held is None and self.rng.random() < o.reorder:
            flow.held[self.name] = (data, send, time.monotonic() + HOLD)
            self.stats["reordered"] += 1
            return
        send(data)
        self.stats["relayed"] += 1
        if held is not None:
            held[1](held[0])
            self.stats["relayed"] += 1
        if self.rng.random() < o.garbage:
            send(os.urandom(len(data)))
            self.stats["garbage"] += 1


class Flow:
    """One client: its address and its socket towards the server."""

    def __init__(self, client, upstream):
        self.client, self.upstream, self.held = client, upstream, {}


def main():
    p = argparse.ArgumentParser(description="a lossy UDP relay on 127.0.0.1")
    p.add_argument("--to", type=int, required=True)
    p.add_argument("--drop", type=float, default=0)
    p.add_argument("--reorder", type=float, default=0)
    p.add_argument("--garbage", type=float, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stats")
    p.add_argument("--max-time", type=float, default=300)
    o = p.parse_args()
    rng = random.Random(o.seed)
    up, down = Direction("to_server", o, rng), Direction("to_client", o, rng)
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    listener.bind(("127.0.0.1", 0))
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    flows = {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    print("port", listener.getsockname()[1], flush=True)
    deadline = time.monotonic() + o.max_time
    while not stop and time.monotonic() < deadline:
        for key, _ in sel.select(HOLD):
            sock, flow = key.fileobj, key.data
            while True:
                try:
                    data, ancillary, _, addr = sock.recvmsg(65536, socket.CMSG_SPACE(4))
                except (BlockingIOError, ConnectionRefusedError):
                    break
                tos = next((d[0] for level, kind, d in ancillary
                            if level == socket.IPPROTO_IP and kind == socket.IP_TOS and d), 0)
                if flow is None:  # from a client
                    f = flows.get(addr)
                    if f is None:
                        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        u.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
                        u.connect(("127.0.0.1", o.to))
                        u.setblocking(False)
                        f = flows[addr] = Flow(addr, u)
                        sel.register(u, selectors.EVENT_READ, f)
                    up.pass_on(data, lambda d, u=f.upstream: send(u.send, d), f, tos)
                else:  # from the server
                    down.pass_on(data, lambda d, c=flow.client: send(
                        lambda b: listener.sendto(b, c), d), flow, tos)
        now = time.monotonic()
        for f in flows.values():
            for name, (data, sender, due) in list(f.held.items()):
                if due <= now:
                    del f.held[name]
                    sender(data)
                    (up if name == "to_server" else down).stats["relayed"] += 1
    if o.stats:
        with open(o.stats + ".tmp", "w") as f:
            json.dump({"to_server": up.stats, "to_client": down.stats}, f)
        os.replace(o.stats + ".tmp", o.stats)


def send(fn, data):
    try:
        fn(data)
    except (BlockingIOError, ConnectionRefusedError):
        pass


if __name__ == "__main__":
    main()
