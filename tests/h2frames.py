"""HTTP/2 frames (RFC 9113 §4, §6) byte by byte, for the tests' own HTTP/2
peers: the hostile server (tests/server/h2peer.py) and the small client the
tests read its frames with. Header blocks are (de)compressed with the hpack
package; everything else is here, so a peer can send what no HTTP/2 library
would let it.
SPDX-License-Identifier: MIT
"""
import socket
import struct
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

TYPES = ("DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING",
         "GOAWAY", "WINDOW_UPDATE", "CONTINUATION")
(DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE,
 CONTINUATION) = range(len(TYPES))

END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# SETTINGS parameters (§6.5.2)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, \
    MAX_HEADER_LIST_SIZE = range(1, 7)

# Error codes (§7)
ERRORS = ("NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
          "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
          "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY",
          "HTTP_1_1_REQUIRED")


def error_code(name):
    """An error code by name ("REFUSED_STREAM") or number ("7")."""
    return int(name) if name.isdigit() else ERRORS.index(name.upper())


def error_name(code):
    return ERRORS[code] if code < len(ERRORS) else str(code)


def frame(ftype, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags,
                                                                stream_id & 0x7fffffff) + payload


def settings(pairs=(), ack=False):
    """pairs: (parameter, value) in the order they go out."""
    return frame(SETTINGS, ACK if ack else 0, 0,
                 b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def ping(opaque=b"\0" * 8, ack=False):
    return frame(PING, ACK if ack else 0, 0, opaque)


def goaway(last_stream_id, code, debug=b""):
    return frame(GOAWAY, 0, 0, struct.pack(">II", last_stream_id, code) + debug)


def rst_stream(stream_id, code):
    return frame(RST_STREAM, 0, stream_id, struct.pack(">I", code))


def window_update(stream_id, increment):
    return frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", increment))


def hpack_int(n, prefix_bits, first=0):
    """An HPACK integer (RFC 7541 §5.1) with a prefix_bits prefix, first's
    high bits set in its first byte."""
    top = (1 << prefix_bits) - 1
    if n < top:
        return bytes([first | n])
    out, n = [first | top], n - top
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + [n])


def hpack_literal(name, value, indexed=False):
    """One field as a literal with a new name (RFC 7541 §6.2), without
    Huffman coding, added to the dynamic table when indexed: any name, any
    case, in any order, which an encoder library would not send."""
    def string(b):
        return hpack_int(len(b), 7) + b
    return (b"\x40" if indexed else b"\x00") + string(name.encode()) + string(value.encode())


def hpack_literals(pairs):
    return b"".join(hpack_literal(n, v) for n, v in pairs)


def header_frames(stream_id, block, end_stream=False, max_frame=16384):
    """A header block as a HEADERS frame and as many CONTINUATION frames as
    it takes."""
    flags = END_STREAM if end_stream else 0
    pieces = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
    out = b""
    for i, piece in enumerate(pieces):
        last = END_HEADERS if i == len(pieces) - 1 else 0
        out += frame(HEADERS if i == 0 else CONTINUATION, (flags if i == 0 else 0) | last,
                     stream_id, piece)
    return out


class Frame:
    def __init__(self, ftype, flags, stream_id, payload):
        self.type, self.flags, self.stream_id, self.payload = ftype, flags, stream_id, payload

    @property
    def name(self):
        return TYPES[self.type] if self.type < len(TYPES) else f"UNKNOWN_{self.type}"

    def settings(self):
        """A SETTINGS frame's parameters as {parameter: value}."""
        p = self.payload
        return dict(struct.unpack(">HI", p[i:i + 6]) for i in range(0, len(p) - 5, 6))

    def goaway(self):
        """(last_stream_id, error code) of a GOAWAY frame."""
        last, code = struct.unpack(">II", self.payload[:8])
        return last & 0x7fffffff, code

    def error_code(self):
        """A RST_STREAM frame's error code."""
        return struct.unpack(">I", self.payload[:4])[0]

    def header_block(self):
        """A HEADERS or CONTINUATION frame's header block fragment."""
        p, start, end = self.payload, 0, len(self.payload)
        if self.type == HEADERS and self.flags & PADDED:
            start, end = 1, end - p[0]
        if self.type == HEADERS and self.flags & PRIORITY_FLAG:
            start += 5
        return p[start:end]

    def __repr__(self):
        return f"<{self.name} flags=0x{self.flags:02x} stream={self.stream_id} " \
               f"len={len(self.payload)}>"


class FrameError(Exception):
    pass


class Reader:
    """Frames from a connected socket, as they arrive."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self, n, deadline):
        while len(self.buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def read_exact(self, n, deadline=None):
        """n bytes, or None at EOF."""
        if not self._fill(n, deadline):
            return None
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def frame(self, deadline=None, max_size=1 << 24):
        """The next frame, or None at EOF. TimeoutError past deadline."""
        head = self.read_exact(9, deadline)
        if head is None:
            return None
        length = int.from_bytes(head[:3], "big")
        if length > max_size:
            raise FrameError(f"frame of {length} bytes")
        ftype, flags, stream_id = struct.unpack(">BBI", head[3:])
        payload = self.read_exact(length, deadline)
        if payload is None:
            return None
        return Frame(ftype, flags, stream_id & 0x7fffffff, payload)


def request_headers(path="/", authority="127.0.0.1", method="GET", scheme="http"):
    return [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)]


def client_exchange(port, requests=1, body=None, duration=1.0, ack_settings=True,
                    host="127.0.0.1", until=None):
    """Speak to an HTTP/2 server on host:port as a minimal client: the
    preface, an empty SETTINGS, then `requests` GET requests (POST with body
    if given), acknowledging the server's SETTINGS and answering nothing else.
    Returns every frame received within `duration` seconds, or until the
    server closes, or until until(frame) is true of a frame that arrived;
    and whether the server closed."""
    sock = socket.create_connection((host, port), timeout=duration)
    enc = hpack.Encoder()
    out = PREFACE + settings()
    for i in range(requests):
        stream_id = 1 + 2 * i
        if body is None:
            out += frame(HEADERS, END_STREAM | END_HEADERS, stream_id,
                         enc.encode(request_headers(f"/{i}")))
        else:
            hdrs = request_headers(f"/{i}", method="POST") + [("content-length", str(len(body)))]
            out += frame(HEADERS, END_HEADERS, stream_id, enc.encode(hdrs))
            out += frame(DATA, END_STREAM, stream_id, body)
    frames, closed = [], False
    reader = Reader(sock)
    deadline = time.monotonic() + duration
    try:
        sock.sendall(out)
        while True:
            f = reader.frame(deadline)
            if f is None:
                closed = True
                break
            frames.append(f)
            if f.type == SETTINGS and not f.flags & ACK and ack_settings:
                sock.sendall(settings(ack=True))
            if until and until(f):
                break
    except TimeoutError:
        pass
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    finally:
        sock.close()
    return frames, closed
