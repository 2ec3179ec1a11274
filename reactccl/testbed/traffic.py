"""Bulk TCP sender and receiver for the emulated cluster (standard library only).

Run as a script inside a namespace (``ip netns exec NS python traffic.py ...``),
so it starts fast and imports nothing from ``reactccl`` (and hence no torch):

``sink --port P [--count N] --seconds T``
    listen on P, print ``ready`` once listening, read and discard from any number
    of connections. With ``--count N`` it exits after N connections closed and
    prints one JSON line per connection: ``{"peer", "bytes", "first", "last"}``
    (``time.monotonic()``, i.e. CLOCK_MONOTONIC, which every network namespace
    shares, so it compares with the sender's clock). Always exits after T s.
``source --to ADDR --port P (--bytes N | --seconds T)``
    connect (bounded retries), send N bytes or for T seconds, print
    ``{"bytes", "start", "end"}`` (start taken before connect).

Every loop is bounded by a deadline; SIGTERM ends either side cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import sys
import time

BUF = 256 * 1024
SCRIPT = os.path.abspath(__file__)
"""This file's path, as the testbed runs it (``python SCRIPT sink|source ...``) and finds its processes."""


def _sink(port: int, count: int | None, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", port))
    lsock.listen(64)
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    print("ready", flush=True)
    done: list[dict] = []
    buf = bytearray(BUF)
    while time.monotonic() < deadline and (count is None or len(done) < count):
        for key, _ in sel.select(timeout=min(0.5, max(0.0, deadline - time.monotonic()))):
            if key.data is None:
                conn, peer = lsock.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ,
                             {"peer": peer[0], "bytes": 0, "first": None, "last": None})
                continue
            stats = key.data
            try:
                n = key.fileobj.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                continue
            except ConnectionError:
                n = 0
            now = time.monotonic()
            if n:
                stats["bytes"] += n
                stats["first"] = stats["first"] or now
                stats["last"] = now
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                done.append(stats)
    if count is not None:
        for stats in done:
            print(json.dumps(stats), flush=True)
        return 0 if len(done) >= count else 3
    return 0


def _source(addr: str, port: int, nbytes: int | None, seconds: float | None) -> int:
    start = time.monotonic()
    sock = None
    while sock is None and time.monotonic() < start + 15.0:  # the sink may still be starting
        try:
            sock = socket.create_connection((addr, port), timeout=5)
        except OSError:
            time.sleep(0.025)
    if sock is None:
        print(f"source: could not connect to {addr}:{port}", file=sys.stderr)
        return 2
    payload = memoryview(bytes(BUF))
    sent = 0
    deadline = start + seconds if seconds is not None else None
    limit = nbytes if nbytes is not None else float("inf")
    try:
        while sent < limit and (deadline is None or time.monotonic() < deadline):
            n = int(min(BUF, limit - sent))
            sock.sendall(payload[:n])
            sent += n
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(30)
        sock.recv(1)  # wait for the sink's close: every byte has arrived
    except OSError:
        pass
    finally:
        sock.close()
    print(json.dumps({"bytes": sent, "start": start, "end": time.monotonic()}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--count", type=int, default=None)
    s.add_argument("--seconds", type=float, required=True)
    c = sub.add_parser("source")
    c.add_argument("--to", required=True)
    c.add_argument("--port", type=int, required=True)
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--bytes", type=int)
    g.add_argument("--seconds", type=float)
    a = ap.parse_args(argv)
    if a.role == "sink":
        return _sink(a.port, a.count, a.seconds)
    return _source(a.to, a.port, a.bytes, a.seconds)


if __name__ == "__main__":
    sys.exit(main())
