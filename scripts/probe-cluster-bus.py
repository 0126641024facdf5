#!/usr/bin/env python3
"""Record which crafted cluster bus messages a real redis-server accepts.

Starts one redis-server with `cluster-enabled yes` on free loopback ports (temporary
directory), sends each crafted message on a fresh connection to its bus port, and records
the verdict:

- PING: accepted if the server answers with a PONG on the same connection;
- other types: refused if the server logs why (`Received invalid ...`, `... without
  proper padding`, `... missing null terminator`), accepted otherwise.

Output (default `crates/strata-server/src/cluster/bus/fixtures/probes/`): each message as
`<name>.bin` and `probes.json` with the verdicts, the log line for refusals, and
`over_read: true` for the messages redis-server accepts although its own processing would
read past them (Strata's decoder refuses those; `docs/format/cluster-bus.md`).

Usage: python3 scripts/probe-cluster-bus.py [--out DIR] [--redis-server PATH]
"""

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

HDR = 2256
EXT_DATA = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def header(typ, totlen, count=0, exts=0, mflag0=0, version=1):
    h = bytearray(HDR)
    h[0:4] = b"RCmb"
    h[4:8] = struct.pack(">I", totlen)
    h[8:10] = struct.pack(">H", version)
    h[10:12] = struct.pack(">H", 7000)
    h[12:14] = struct.pack(">H", typ)
    h[14:16] = struct.pack(">H", count)
    h[40:80] = b"0123456789abcdef0123456789abcdef01234567"
    h[2214:2216] = struct.pack(">H", exts)
    h[2248:2250] = struct.pack(">H", 17000)
    h[2250:2252] = struct.pack(">H", 1)  # master
    h[2253] = mflag0
    return bytes(h)


def gossip(i):
    g = bytearray(104)
    g[0:40] = (b"%040x" % (0xabc0 + i))
    g[48:57] = b"127.0.0.1"
    g[94:96] = struct.pack(">H", 7001 + i)
    g[96:98] = struct.pack(">H", 17001 + i)
    g[98:100] = struct.pack(">H", 1)
    return bytes(g)


def ext(length, typ, data):
    return struct.pack(">IHH", length, typ, 0) + data


def ping(body=b"", count=0, exts=0, mflag0=0, totlen=None, version=1):
    total = HDR + len(body) if totlen is None else totlen
    return header(0, total, count, exts, mflag0, version) + body


def cases():
    """(name, message, over_read)"""
    host = ext(16, 0, b"node-1\0\0")
    out = [
        ("ping-plain", ping(), False),
        ("ping-version-2", ping(version=2), False),
        ("ping-gossip-2", ping(gossip(0) + gossip(1), count=2), False),
        ("ping-gossip-count-over", ping(gossip(0), count=2), False),
        ("ping-gossip-count-under", ping(gossip(0) + gossip(1), count=1), False),
        ("ping-hostname", ping(host, exts=1, mflag0=EXT_DATA), False),
        ("ping-gossip-hostname", ping(gossip(0) + host, count=1, exts=1, mflag0=EXT_DATA), False),
        ("ping-flag-no-exts", ping(mflag0=EXT_DATA), False),
        ("ping-flag-zero-count-with-data", ping(host, mflag0=EXT_DATA), False),
        ("ping-ext-len-0", ping(ext(0, 0, b"\0" * 8), exts=1, mflag0=EXT_DATA), False),
        ("ping-ext-len-12", ping(ext(12, 5, b"abcd"), exts=1, mflag0=EXT_DATA), False),
        ("ping-hostname-len-8", ping(ext(8, 0, b""), exts=1, mflag0=EXT_DATA), False),
        ("ping-hostname-no-nul", ping(ext(16, 0, b"abcdefgh"), exts=1, mflag0=EXT_DATA), False),
        ("ping-hostname-nul-inside", ping(ext(16, 0, b"ab\0defg\0"), exts=1, mflag0=EXT_DATA), False),
        ("ping-unknown-ext-no-nul", ping(ext(16, 5, b"abcdefgh"), exts=1, mflag0=EXT_DATA), False),
        ("ping-ext-past-end", ping(ext(24, 5, b"abcdefgh"), exts=1, mflag0=EXT_DATA), False),
        ("ping-ext-header-cut", ping(b"\0\0\0\x10", exts=1, mflag0=EXT_DATA), False),
        ("ping-two-exts-one-counted", ping(host + host, exts=1, mflag0=EXT_DATA), False),
        ("ping-one-ext-two-counted", ping(host, exts=2, mflag0=EXT_DATA), False),
        ("ping-ext-without-flag", ping(host, exts=1), False),
        ("ping-ext-count-without-flag", ping(exts=1), True),
        ("ping-ext-len-65536", ping(ext(65536, 5, b"abcdefgh"), exts=1, mflag0=EXT_DATA), False),
        ("ping-ext-len-65552", ping(ext(65552, 5, b"abcdefgh"), exts=1, mflag0=EXT_DATA), True),
        ("meet-gossip", header(2, HDR + 104, count=1) + gossip(3), False),
        ("pong-plain", header(1, HDR), False),
        ("fail", header(3, HDR + 40) + b"%040x" % 7, False),
        ("fail-short", header(3, HDR + 39) + b"x" * 39, False),
        ("fail-long", header(3, HDR + 41) + b"x" * 41, False),
        ("publish", header(4, HDR + 8 + 5) + struct.pack(">II", 2, 3) + b"chmsg", False),
        ("publish-short", header(4, HDR + 8 + 4) + struct.pack(">II", 2, 3) + b"chms", False),
        ("publish-lengths-cut", header(4, HDR + 4) + struct.pack(">I", 0), False),
        ("publish-length-wraps", header(4, HDR + 9) + struct.pack(">II", 0xFFFFFFFF, 2) + b"a", True),
        ("publishshard", header(10, HDR + 8 + 2) + struct.pack(">II", 1, 1) + b"cm", False),
        ("auth-req", header(5, HDR), False),
        ("auth-ack-long", header(6, HDR + 8) + b"\0" * 8, False),
        ("mfstart", header(8, HDR), False),
        ("update", header(7, HDR + 2096) + b"\0" * 2096, False),
        ("update-short", header(7, HDR + 2095) + b"\0" * 2095, False),
        ("module", header(9, HDR + 13 + 2) + b"\0" * 8 + struct.pack(">I", 2) + b"\x01ab", False),
        ("module-short", header(9, HDR + 13 + 1) + b"\0" * 8 + struct.pack(">I", 2) + b"\x01a", False),
        ("module-length-wraps", header(9, HDR + 12) + b"\0" * 8 + struct.pack(">I", 0xFFFFFFFF), True),
        ("unknown-type", header(99, HDR + 5) + b"hello", False),
    ]
    return out


REFUSALS = ("Received invalid", "without proper padding", "missing null terminator")


def verdict(bus_port, log_path, msg):
    before = os.path.getsize(log_path)
    s = socket.create_connection(("127.0.0.1", bus_port))
    s.settimeout(0.5)
    s.sendall(msg)
    got = b""
    try:
        while len(got) < 8 or len(got) < struct.unpack(">I", got[4:8])[0]:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    s.close()
    time.sleep(0.2)
    with open(log_path, "rb") as fh:
        fh.seek(before)
        new = fh.read().decode(errors="replace").splitlines()
    refusal = next((l.split("# ", 1)[-1] for l in new if any(r in l for r in REFUSALS)), None)
    (typ,) = struct.unpack(">H", msg[12:14])
    if typ in (0, 2):
        answered = len(got) >= 14 and got[:4] == b"RCmb" and struct.unpack(">H", got[12:14])[0] == 1
        return ("accepted" if answered else "refused"), refusal
    return ("refused" if refusal else "accepted"), refusal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="crates/strata-server/src/cluster/bus/fixtures/probes")
    ap.add_argument("--redis-server", default="redis-server")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="strata-bus-probe-")
    port, bus_port = free_port(), free_port()
    log = os.path.join(tmp, "log")
    proc = subprocess.Popen([args.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", tmp, "--cluster-enabled", "yes", "--cluster-port",
                             str(bus_port), "--save", "", "--logfile", log])
    results = []
    try:
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", bus_port)).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("redis-server did not start")
                time.sleep(0.1)
        os.makedirs(args.out, exist_ok=True)
        for f in os.listdir(args.out):
            if f.endswith(".bin"):
                os.remove(os.path.join(args.out, f))
        for name, msg, over_read in cases():
            v, why = verdict(bus_port, log, msg)
            with open(os.path.join(args.out, name + ".bin"), "wb") as fh:
                fh.write(msg)
            results.append({"file": name + ".bin", "redis": v, "log": why, "over_read": over_read})
            print(f"{name:34} {v:8} {why or ''}")
        version = subprocess.run([args.redis_server, "--version"], capture_output=True,
                                 text=True).stdout.strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(args.out, "probes.json"), "w") as fh:
        json.dump({"redis": version, "probes": results}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
