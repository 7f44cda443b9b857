#!/usr/bin/env python3
"""volley-h2peer: an HTTP/2 server (cleartext, prior knowledge) that
misbehaves on purpose, for the tests of volley's HTTP/2 error handling. It
speaks raw frames (tests/h2frames.py), so it can send what no HTTP/2 library
would, and records what it saw.

usage: h2peer.py [--listen HOST:PORT] [--stats FILE] [--max-time S] [--mode MODE]
                 [--after N] [--code NAME] [--every K] [--count N] [--hold N]
                 [--body-size N] [--kind KIND] [--body-delay MS]

Once listening it prints "port N" on stdout. SIGTERM or SIGINT (and
--max-time, default 300) write the stats and exit 0. One thread per
connection. Requests are answered 200 with "Hello world\\n" (12 bytes; the
peer does not track the client's flow-control window, which a client that
replenishes its window never lets run out) unless the mode says otherwise.

Modes:
  normal              a correct server.
  goaway              after answering --after N requests (default 10) on a
                      connection, GOAWAY with last-stream-id = the stream of
                      the Nth and error --code (default NO_ERROR); requests
                      that arrive after it are counted, never answered; the
                      server closes 200 ms later.
  rst                 every --every K-th request (default 1: all) gets
                      RST_STREAM with --code (default REFUSED_STREAM) instead
                      of an answer.
  zero-window         SETTINGS_INITIAL_WINDOW_SIZE 0 and never a WINDOW_UPDATE:
                      a request body stops at what the client may send before
                      these SETTINGS arrive (at most 65,535 bytes, the initial
                      connection window); requests without one are answered.
  max-streams-0       SETTINGS_MAX_CONCURRENT_STREAMS 0; a stream opened anyway
                      gets RST_STREAM REFUSED_STREAM.
  no-settings-ack     never acknowledges the client's SETTINGS; answers requests.
  ping-flood          sends --count PING frames (default 100000) as fast as the
                      client reads them, from right after its preface; answers
                      requests too.
  continuation-flood  answers each request with a HEADERS frame without
                      END_HEADERS, then up to --count CONTINUATION frames
                      (default 100000) that never end the header block.
  goaway-at-start     right after its SETTINGS, on every connection, GOAWAY
                      with last-stream-id 0 and NO_ERROR, as a server that is
                      shutting down; it answers nothing and closes 100 ms later.
  hpack-bomb          answers each request with a header block that puts one
                      4000-byte field into HPACK's dynamic table, then refers
                      to it --count times (default 100000), one byte each, in
                      a HEADERS frame and CONTINUATION frames; the DATA frame
                      that ends each stream waits until --hold streams (default
                      1) of the connection have had their header blocks.
  big-body            answers 200 with a content-length of --body-size bytes
                      (default 64 MiB + 1 KiB) and as many bytes of DATA.
  malformed           answers each request with a response RFC 9113 §8.1.1
                      calls malformed, as --kind says:
                        cl-more      content-length: 100 and 12 bytes of DATA
                        cl-less      content-length: 1 and 12 bytes of DATA
                        body-204     status 204 and 12 bytes of DATA
                        pseudo-after-regular  :status after a regular field
                        uppercase-name        a field named X-Upper
                        connection-field      connection: keep-alive
                        te           te: gzip
                        status-101   status 101
                        trailers-pseudo       trailers that carry a :status
                        interim-data DATA after a 103 interim head, before the
                                     final one
  slow-body           each response's HEADERS frame, then its DATA frame
                      --body-delay MS later (default 50): its first byte comes
                      that long before its last.
  garbage             after the client's preface, bytes that are no frame
                      (binary junk; not an HTTP/1.1 response, which volley's
                      start-up check would refuse), then reads until the
                      client closes.

Stats JSON:
  connections             connections accepted
  requests                streams the client opened (HEADERS frames that
                          started a stream), in every mode
  answered                responses completed (END_STREAM sent)
  streams_per_connection  requests of each connection, in accept order
  methods, paths          {"GET": n}, {"/x": n} from the request headers
  frames_received         {"HEADERS": n, ...} by type
  frames_sent             {"HEADERS": n, ...} by type (a flood counts every frame)
  rst_sent                {"REFUSED_STREAM": n, ...} by error code
  goaway_sent             GOAWAY frames sent
  requests_after_goaway   streams opened after the GOAWAY was sent
  settings_acks_received  SETTINGS frames with ACK from the client
  ping_acks_received      PING frames with ACK from the client
  data_bytes_in           request body bytes (DATA payloads)
  bad_prefaces            connections that did not start with the preface
  goaways_received        {"PROTOCOL_ERROR": n, ...}: GOAWAY frames from the client
SPDX-License-Identifier: MIT
"""
import argparse
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import h2frames as h2  # noqa: E402

import hpack  # noqa: E402

BODY = b"Hello world\n"
GARBAGE = bytes(range(256)) * 4
MODES = ("normal", "goaway", "rst", "zero-window", "max-streams-0", "no-settings-ack",
         "ping-flood", "continuation-flood", "goaway-at-start", "hpack-bomb", "big-body",
         "malformed", "garbage", "slow-body")
KINDS = ("cl-more", "cl-less", "body-204", "pseudo-after-regular", "uppercase-name",
         "connection-field", "te", "status-101", "trailers-pseudo", "interim-data")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.d = {"connections": 0, "requests": 0, "answered": 0, "streams_per_connection": [],
                  "methods": {}, "paths": {}, "frames_received": {}, "frames_sent": {},
                  "rst_sent": {}, "goaway_sent": 0, "requests_after_goaway": 0,
                  "settings_acks_received": 0, "ping_acks_received": 0, "data_bytes_in": 0,
                  "bad_prefaces": 0, "goaways_received": {}}

    def add(self, key, n=1, sub=None):
        with self.lock:
            if sub is None:
                self.d[key] += n
            else:
                self.d[key][sub] = self.d[key].get(sub, 0) + n

    def new_connection(self):
        with self.lock:
            self.d["connections"] += 1
            self.d["streams_per_connection"].append(0)
            return len(self.d["streams_per_connection"]) - 1

    def request(self, conn, headers):
        h = dict(headers)
        with self.lock:
            self.d["requests"] += 1
            self.d["streams_per_connection"][conn] += 1
        self.add("methods", sub=h.get(":method", "?"))
        self.add("paths", sub=h.get(":path", "?").split("?")[0])

    def write(self, path):
        with self.lock:
            text = json.dumps(self.d, sort_keys=True)
        with open(path + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(path + ".tmp", path)


class Connection:
    """One client connection: reads frames, answers as the mode says."""

    def __init__(self, sock, opts, stats):
        self.sock, self.opts, self.stats = sock, opts, stats
        self.conn = stats.new_connection()
        self.send_lock = threading.Lock()
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.block, self.block_stream, self.block_end_stream = b"", 0, False
        self.streams = {}   # stream id -> whether its request is complete
        self.held = []      # hpack-bomb: streams whose DATA waits
        self.answered = 0
        self.goaway_sent = False
        self.requests_seen = 0

    # Everything is counted before it is written: a client that has read a
    # frame and stops the server at once finds it in the stats.
    def send(self, data, ftype, n=1):
        self.stats.add("frames_sent", n, h2.TYPES[ftype])
        with self.send_lock:
            self.sock.sendall(data)

    def run(self):
        reader = h2.Reader(self.sock)
        if reader.read_exact(len(h2.PREFACE)) != h2.PREFACE:
            self.stats.add("bad_prefaces")
            return
        mode = self.opts.mode
        if mode == "garbage":
            with self.send_lock:
                self.sock.sendall(GARBAGE)
            while self.sock.recv(65536):  # until the client closes
                pass
            return
        self.send(h2.settings(self.own_settings()), h2.SETTINGS)
        if mode == "goaway-at-start":
            self.goaway_sent = True
            self.stats.add("goaway_sent")
            self.send(h2.goaway(0, h2.error_code("NO_ERROR")), h2.GOAWAY)
            threading.Timer(0.1, self.close).start()
        if mode == "ping-flood":
            threading.Thread(target=self.ping_flood, daemon=True).start()
        while True:
            f = reader.frame()
            if f is None:
                return
            self.stats.add("frames_received", sub=f.name)
            self.on_frame(f)

    def own_settings(self):
        if self.opts.mode == "zero-window":
            return [(h2.INITIAL_WINDOW_SIZE, 0)]
        if self.opts.mode == "max-streams-0":
            return [(h2.MAX_CONCURRENT_STREAMS, 0)]
        return [(h2.MAX_CONCURRENT_STREAMS, 100)]

    def on_frame(self, f):
        if f.type == h2.SETTINGS:
            if f.flags & h2.ACK:
                self.stats.add("settings_acks_received")
            elif self.opts.mode != "no-settings-ack":
                self.send(h2.settings(ack=True), h2.SETTINGS)
        elif f.type == h2.PING:
            if f.flags & h2.ACK:
                self.stats.add("ping_acks_received")
            else:
                self.send(h2.ping(f.payload, ack=True), h2.PING)
        elif f.type == h2.GOAWAY:
            self.stats.add("goaways_received", sub=h2.error_name(f.goaway()[1]))
        elif f.type in (h2.HEADERS, h2.CONTINUATION):
            self.on_header_block(f)
        elif f.type == h2.DATA:
            self.stats.add("data_bytes_in", len(f.payload))
            if f.flags & h2.END_STREAM:
                self.on_request_complete(f.stream_id)

    def on_header_block(self, f):
        if f.type == h2.HEADERS:
            self.block, self.block_stream = b"", f.stream_id
            self.block_end_stream = bool(f.flags & h2.END_STREAM)
        self.block += f.header_block()
        if not f.flags & h2.END_HEADERS:
            return
        headers = self.dec.decode(self.block)
        stream_id = self.block_stream
        if stream_id in self.streams:  # trailers
            if self.block_end_stream:
                self.on_request_complete(stream_id)
            return
        self.streams[stream_id] = False
        self.stats.request(self.conn, headers)
        self.requests_seen += 1
        if self.goaway_sent:
            self.stats.add("requests_after_goaway")
            return
        if self.opts.mode == "max-streams-0":
            return self.reset(stream_id, h2.error_code("REFUSED_STREAM"))
        if self.opts.mode == "rst" and self.requests_seen % self.opts.every == 0:
            return self.reset(stream_id, h2.error_code(self.opts.code or "REFUSED_STREAM"))
        if self.block_end_stream:
            self.on_request_complete(stream_id)

    def on_request_complete(self, stream_id):
        if self.goaway_sent or self.streams.get(stream_id) is not False:
            return
        self.streams[stream_id] = True
        if self.opts.mode == "continuation-flood":
            return self.continuation_flood(stream_id)
        if self.opts.mode == "hpack-bomb":
            return self.hpack_bomb(stream_id)
        if self.opts.mode == "big-body":
            return self.big_body(stream_id)
        if self.opts.mode == "malformed":
            return self.malformed(stream_id, self.opts.kind)
        self.answer(stream_id)
        if self.opts.mode == "goaway" and self.answered == self.opts.after:
            self.goaway_sent = True
            self.stats.add("goaway_sent")
            self.send(h2.goaway(stream_id, h2.error_code(self.opts.code or "NO_ERROR")),
                      h2.GOAWAY)
            threading.Timer(0.2, self.close).start()

    def answer(self, stream_id):
        block = self.enc.encode([(":status", "200"), ("content-type", "text/plain"),
                                 ("content-length", str(len(BODY)))])
        self.stats.add("frames_sent", sub="HEADERS")
        self.stats.add("frames_sent", sub="DATA")
        self.stats.add("answered")
        self.answered += 1
        head = h2.frame(h2.HEADERS, h2.END_HEADERS, stream_id, block)
        data = h2.frame(h2.DATA, h2.END_STREAM, stream_id, BODY)
        if self.opts.mode == "slow-body":
            with self.send_lock:
                self.sock.sendall(head)
            time.sleep(self.opts.body_delay / 1000)
            head = b""
        with self.send_lock:
            self.sock.sendall(head + data)

    def respond(self, data, ftypes):
        """A response given whole: its frames' types counted, one answered."""
        for t in ftypes:
            self.stats.add("frames_sent", sub=h2.TYPES[t])
        self.stats.add("answered")
        self.answered += 1
        with self.send_lock:
            self.sock.sendall(data)

    def hpack_bomb(self, stream_id):
        # Indexed field 62 is the newest entry of the dynamic table (RFC 7541
        # §2.3.3): the x-bomb field the same block has just added.
        block = (h2.hpack_literals([(":status", "200")]) +
                 h2.hpack_literal("x-bomb", "a" * 4000, indexed=True) +
                 h2.hpack_int(62, 7, 0x80) * self.opts.count)
        frames = h2.header_frames(stream_id, block)
        self.stats.add("frames_sent", sub="HEADERS")
        self.stats.add("frames_sent", (len(block) - 1) // 16384, "CONTINUATION")
        with self.send_lock:
            self.sock.sendall(frames)
        self.held.append(stream_id)
        if len(self.held) < self.opts.hold:
            return
        for held in self.held:
            self.respond(h2.frame(h2.DATA, h2.END_STREAM, held, BODY), [h2.DATA])
        self.held = []

    def big_body(self, stream_id):
        size, chunk = self.opts.body_size, b"b" * 16384
        self.send(h2.header_frames(stream_id, h2.hpack_literals(
            [(":status", "200"), ("content-length", str(size))])), h2.HEADERS)
        sent = 0
        while sent < size:
            n = min(len(chunk), size - sent)
            sent += n
            self.send(h2.frame(h2.DATA, h2.END_STREAM if sent == size else 0, stream_id,
                               chunk[:n]), h2.DATA)
        self.stats.add("answered")
        self.answered += 1

    def malformed(self, stream_id, kind):
        status = [(":status", "200")]
        fields = {
            "cl-more": status + [("content-length", "100")],
            "cl-less": status + [("content-length", "1")],
            "body-204": [(":status", "204")],
            "pseudo-after-regular": [("content-type", "text/plain"), (":status", "200")],
            "uppercase-name": status + [("X-Upper", "1")],
            "connection-field": status + [("connection", "keep-alive")],
            "te": status + [("te", "gzip")],
            "status-101": [(":status", "101")],
            "trailers-pseudo": status,
            "interim-data": status,
        }[kind]
        head = h2.header_frames(stream_id, h2.hpack_literals(fields))
        data = h2.frame(h2.DATA, 0 if kind == "trailers-pseudo" else h2.END_STREAM, stream_id,
                        BODY)
        if kind == "trailers-pseudo":
            data += h2.header_frames(stream_id, h2.hpack_literals([(":status", "500")]),
                                     end_stream=True)
            return self.respond(head + data, [h2.HEADERS, h2.DATA, h2.HEADERS])
        if kind == "interim-data":
            interim = h2.header_frames(stream_id, h2.hpack_literals([(":status", "103")]))
            return self.respond(interim + h2.frame(h2.DATA, 0, stream_id, BODY) + head + data,
                                [h2.HEADERS, h2.DATA, h2.HEADERS, h2.DATA])
        self.respond(head + data, [h2.HEADERS, h2.DATA])

    def reset(self, stream_id, code):
        self.stats.add("rst_sent", sub=h2.error_name(code))
        self.send(h2.rst_stream(stream_id, code), h2.RST_STREAM)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # Floods write in batches, from their own thread or the reading one,
    # until the count is reached or the client goes away.
    def flood(self, one, ftype, count):
        batch = 256
        sent = 0
        try:
            while sent < count:
                n = min(batch, count - sent)
                self.send(one * n, ftype, n)
                sent += n
        except OSError:
            pass

    def ping_flood(self):
        self.flood(h2.ping(b"flooding"), h2.PING, self.opts.count)

    def continuation_flood(self, stream_id):
        first = self.enc.encode([(":status", "200")])
        self.send(h2.frame(h2.HEADERS, 0, stream_id, first), h2.HEADERS)
        # Literal fields without indexing: each CONTINUATION is a whole field.
        field = b"\x00\x07x-flood\x10" + b"a" * 16
        self.flood(h2.frame(h2.CONTINUATION, 0, stream_id, field), h2.CONTINUATION,
                   self.opts.count)


class Live:
    """How many connections are being handled."""

    def __init__(self):
        self.n, self.cond = 0, threading.Condition()

    def add(self, d):
        with self.cond:
            self.n += d
            self.cond.notify_all()

    def wait_idle(self, timeout):
        with self.cond:
            self.cond.wait_for(lambda: self.n == 0, timeout)


def serve(opts, stats, live):
    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            live.add(1)
            try:
                Connection(self.request, opts, stats).run()
            except (OSError, h2.FrameError, hpack.HPACKError):
                pass  # the client went away or sent what cannot be read
            finally:
                live.add(-1)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    host, _, port = opts.listen.rpartition(":")
    server = Server((host.strip("[]"), int(port)), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser(prog="volley-h2peer")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--stats")
    ap.add_argument("--max-time", type=float, default=300)
    ap.add_argument("--mode", choices=MODES, default="normal")
    ap.add_argument("--after", type=int, default=10)
    ap.add_argument("--code")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--hold", type=int, default=1)
    ap.add_argument("--body-size", type=int, default=(64 << 20) + 1024)
    ap.add_argument("--kind", choices=KINDS, default="cl-more")
    ap.add_argument("--body-delay", type=float, default=50)
    opts = ap.parse_args()
    if opts.code:
        try:
            h2.error_code(opts.code)
        except ValueError:
            ap.error(f"unknown error code {opts.code!r}")
    stats = Stats()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    live = Live()
    server = serve(opts, stats, live)
    print(f"port {server.server_address[1]}", flush=True)
    # Waited for in short steps: the kernel may hand SIGTERM to a connection
    # thread, and Python then runs its handler only once the main thread
    # comes back from its wait (a single wait of max_time kept the peer up
    # past its stop, once in a suite run).
    deadline = time.monotonic() + opts.max_time
    while not done.wait(0.1) and time.monotonic() < deadline:
        pass
    # What a client sent before it went away is read to its end first (a
    # connection that is still open, or blocked writing, is not waited for
    # past a second).
    live.wait_idle(1)
    if opts.stats:
        stats.write(opts.stats)
    os._exit(0)  # connection threads may be blocked in a write


if __name__ == "__main__":
    main()
