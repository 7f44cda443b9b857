#!/usr/bin/env python3
"""volley-h3peer: an HTTP/3 server on aioquic (PyPI) for volley's tests: a
second HTTP/3 and QUIC implementation beside quic-go's (tests/server/h3),
and, as its mode says, a QUIC peer that misbehaves.

Usage: h3peer.py --cert FILE --key FILE [--mode MODE] [--after N] [--code C]
                 [--transport] [--window N] [--stats FILE] [--max-time S]

Once listening on 127.0.0.1 it prints "port N" on stdout. SIGTERM or
SIGINT (and --max-time, default 300) write the stats and exit 0.

Modes:
  normal               a working server: 200 "Hello world\\n" to every request
  stateless-reset      after --after N requests answered (over all
                       connections), forgets every connection it has and
                       answers their every later datagram with a stateless
                       reset (RFC 9000 §10.3); new connections are served
  close                answers the --after Nth request of each connection
                       (default 1) with its head and half its body, then
                       closes the connection: CONNECTION_CLOSE with --code C
                       (default 0x102, H3_INTERNAL_ERROR), an application's,
                       or a transport's with --transport
  tiny-window          request streams get a window of --window bytes
                       (default 16) that never opens, nor the connection's:
                       a body past it never arrives (requests without one
                       are answered)
  max-streams-0        allows no bidirectional stream at all
  garbage              after --after N handshakes (default 1: volley's
                       start-up check), answers every datagram of a new
                       connection with as many random bytes
  version-negotiation  after --after N handshakes (default 1), answers every
                       Initial of a new connection with a Version Negotiation
                       packet that offers only an unknown version
  no-alpn              after --after N handshakes (default 0), offers ALPN
                       h3-29 only: every handshake fails on TLS alert 120
                       (no_application_protocol)
  reject               refuses every request unprocessed: resets its stream
                       with H3_REQUEST_REJECTED (RFC 9114 §4.1.1)

The stats JSON: connections (handshakes completed), requests (request heads
received), answered (complete responses sent), and what the mode sent:
stateless_resets, closes, garbage, version_negotiations, rejected.
SPDX-License-Identifier: MIT
"""
import argparse
import asyncio
import json
import os
import signal
import sys

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.buffer import Buffer
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import HandshakeCompleted
from aioquic.quic.packet import (QuicPacketType, encode_quic_version_negotiation,
                                 pull_quic_header)

BODY = b"Hello world\n"
UNKNOWN_VERSION = 0x1A2A3A4A  # reserved for negotiation tests (RFC 9000 §15)
H3_REQUEST_REJECTED = 0x10B

stats = {"connections": 0, "requests": 0, "answered": 0, "stateless_resets": 0, "closes": 0,
         "garbage": 0, "version_negotiations": 0, "rejected": 0}


class Peer(QuicConnectionProtocol):
    """One connection: HTTP/3 over aioquic, misbehaving as the mode says."""

    def __init__(self, *args, options=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.options = options
        self.h3 = None
        self.answered = 0
        self.bodies = {}

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            stats["connections"] += 1
            self.h3 = H3Connection(self._quic)
        if self.h3 is None:
            return
        for e in self.h3.handle_event(event):
            if isinstance(e, HeadersReceived):
                stats["requests"] += 1
                self.bodies[e.stream_id] = 0
                if e.stream_ended:
                    self.respond(e.stream_id)
            elif isinstance(e, DataReceived) and e.stream_id in self.bodies:
                self.bodies[e.stream_id] += len(e.data)
                if e.stream_ended:
                    self.respond(e.stream_id)

    def respond(self, stream_id):
        del self.bodies[stream_id]
        headers = [(b":status", b"200"), (b"content-type", b"text/plain"),
                   (b"content-length", str(len(BODY)).encode())]
        o = self.options
        if o.mode == "reject":
            self._quic.reset_stream(stream_id, H3_REQUEST_REJECTED)
            stats["rejected"] += 1
            self.transmit()
            return
        if o.mode == "close" and self.answered + 1 == o.after:
            # Half a response, then the connection's end.
            self.h3.send_headers(stream_id, headers)
            self.h3.send_data(stream_id, BODY[:len(BODY) // 2], end_stream=False)
            self._quic.close(error_code=o.code, frame_type=0 if o.transport else None,
                             reason_phrase="volley test: close")
            stats["closes"] += 1
            self.transmit()
            return
        self.h3.send_headers(stream_id, headers)
        self.h3.send_data(stream_id, BODY, end_stream=True)
        self.answered += 1
        stats["answered"] += 1
        self.transmit()
        if o.mode == "stateless-reset" and stats["answered"] >= o.after:
            # Once the datagram being handled is answered whole.
            self.server.forget_soon()


class Server(QuicServer):
    """aioquic's server, with the modes that act below a connection."""

    def __init__(self, *args, options, other_alpn=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.options = options
        self.other_alpn = other_alpn  # no-alpn: the configuration of late handshakes
        self.tokens = {}  # connection ID -> stateless reset token, once forgotten
        self.serving = set()  # destination CIDs of connections served normally
        self.forgetting = False

    def forget_soon(self):
        if not self.forgetting:
            self.forgetting = True
            asyncio.get_running_loop().call_soon(self.forget_all)

    def forget_all(self):
        """Drop every connection without a word; keep their reset tokens."""
        self.forgetting = False
        for protocol in set(self._protocols.values()):
            for cid in protocol._quic._host_cids:
                self.tokens[cid.cid] = cid.stateless_reset_token
            if protocol._timer is not None:
                protocol._timer.cancel()
                protocol._timer = None
            protocol.transmit = lambda: None
        self._protocols.clear()

    def stateless_reset(self, data, addr):
        """RFC 9000 §10.3: looks like a short-header packet, ends in the token,
        and is shorter than what it answers (so that two peers cannot loop)."""
        header = pull_quic_header(Buffer(data=data), host_cid_length=8)
        token = self.tokens.get(header.destination_cid)
        if token is None:
            return False
        size = max(21, min(len(data) - 1, 43))
        packet = bytes([0x40 | (os.urandom(1)[0] & 0x3F)]) + os.urandom(size - 17) + token
        self._transport.sendto(packet, addr)
        stats["stateless_resets"] += 1
        return True

    def late(self, data):
        """Whether this datagram starts a connection past --after handshakes."""
        header = pull_quic_header(Buffer(data=data), host_cid_length=8)
        if header.destination_cid in self.serving:
            return None
        if header.packet_type == QuicPacketType.INITIAL and \
                stats["connections"] < self.options.after and \
                header.destination_cid not in self._protocols:
            self.serving.add(header.destination_cid)
            return None
        if header.destination_cid in self._protocols:
            return None
        return header

    def datagram_received(self, data, addr):
        mode = self.options.mode
        if mode == "no-alpn" and stats["connections"] >= self.options.after:
            self._configuration = self.other_alpn
        try:
            if mode == "stateless-reset" and self.stateless_reset(data, addr):
                return
            if mode in ("garbage", "version-negotiation"):
                header = self.late(data)
                if header is not None and mode == "garbage":
                    self._transport.sendto(os.urandom(len(data)), addr)
                    stats["garbage"] += 1
                    return
                if header is not None and header.packet_type == QuicPacketType.INITIAL:
                    self._transport.sendto(encode_quic_version_negotiation(
                        source_cid=header.destination_cid, destination_cid=header.source_cid,
                        supported_versions=[UNKNOWN_VERSION]), addr)
                    stats["version_negotiations"] += 1
                    return
                if header is not None:
                    return
        except ValueError:
            return
        super().datagram_received(data, addr)


def tiny_windows(window):
    """A connection whose windows are window bytes and never open."""
    original = QuicConnection.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._local_max_stream_data_bidi_remote = window
        self._local_max_data.value = max(window * 4, 1200)

    QuicConnection.__init__ = init
    QuicConnection._write_stream_limits = lambda self, builder, space, stream: None
    QuicConnection._write_connection_limits = lambda self, builder, space: None


def no_streams():
    original = QuicConnection.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._local_max_streams_bidi.value = 0

    QuicConnection.__init__ = init


def write_stats(path):
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(stats, f)
        os.replace(path + ".tmp", path)


async def main(options):
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(options.cert, options.key)
    other_alpn = QuicConfiguration(is_client=False, alpn_protocols=["h3-29"])
    other_alpn.load_cert_chain(options.cert, options.key)
    if options.mode == "tiny-window":
        tiny_windows(options.window)
    if options.mode == "max-streams-0":
        no_streams()
    loop = asyncio.get_running_loop()
    holder = {}

    def create_protocol(*args, **kwargs):
        p = Peer(*args, options=options, **kwargs)
        p.server = holder["server"]
        return p

    _, server = await loop.create_datagram_endpoint(
        lambda: Server(configuration=config, create_protocol=create_protocol, options=options,
                       other_alpn=other_alpn),
        local_addr=("127.0.0.1", 0))
    holder["server"] = server
    print("port", server._transport.get_extra_info("sockname")[1], flush=True)
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    try:
        await asyncio.wait_for(done.wait(), options.max_time)
    except asyncio.TimeoutError:
        pass
    write_stats(options.stats)


def parse():
    p = argparse.ArgumentParser(description="aioquic HTTP/3 server and hostile QUIC peer")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--mode", default="normal",
                   choices=["normal", "stateless-reset", "close", "tiny-window", "max-streams-0",
                            "garbage", "version-negotiation", "no-alpn", "reject"])
    p.add_argument("--after", type=int, default=None)
    p.add_argument("--code", type=lambda s: int(s, 0), default=0x102)
    p.add_argument("--transport", action="store_true")
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--stats")
    p.add_argument("--max-time", type=float, default=300)
    o = p.parse_args()
    if o.after is None:
        o.after = {"stateless-reset": 25, "no-alpn": 0}.get(o.mode, 1)
    return o


if __name__ == "__main__":
    try:
        asyncio.run(main(parse()))
    except KeyboardInterrupt:
        sys.exit(0)
