#!/usr/bin/env python3
"""Writes crates/strata-server/src/cmd/redis-commands.json: the metadata of every command of
a running redis-server (COMMAND INFO and COMMAND DOCS over RESP3): arity, flags, ACL
categories, tips, key specs, docs and arguments, subcommands nested.

Strata's command table joins this metadata with its handlers (`cmd/table.rs`), so COMMAND,
COMMAND INFO/DOCS/LIST/GETKEYS, ACL categories, key extraction and routing all derive from
one record per command that is Redis's own. Regenerate only against redis-server 7.0.15,
the version Strata speaks:

    redis-server --port 16500 --save '' --appendonly no &
    python3 scripts/gen-command-table.py --port 16500
"""
import argparse
import json
import os
import socket
import sys


class Resp3:
    """A minimal RESP3 reader keeping the types that COMMAND INFO/DOCS use."""

    def __init__(self, sock):
        self.f = sock.makefile("rb")

    def read(self):
        line = self.f.readline()
        if not line:
            raise EOFError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t in (b"+", b"-"):
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            data = self.f.read(n + 2)[:-2]
            return data.decode()
        if t in (b"*", b"~"):
            return [self.read() for _ in range(int(rest))]
        if t == b"%":
            out = {}
            for _ in range(int(rest)):
                k = self.read()
                out[k] = self.read()
            return out
        if t == b"_":
            return None
        raise ValueError(f"unexpected RESP3 type {t!r}")


def call(conn, sock, *args):
    msg = f"*{len(args)}\r\n".encode()
    for a in args:
        b = str(a).encode()
        msg += f"${len(b)}\r\n".encode() + b + b"\r\n"
    sock.sendall(msg)
    return conn.read()


def key_spec(ks):
    bs, fk = ks["begin_search"], ks["find_keys"]
    out = {"flags": ks["flags"], "begin_search": {"type": bs["type"], **(bs["spec"] or {})},
           "find_keys": {"type": fk["type"], **(fk["spec"] or {})}}
    if "notes" in ks:
        out = {"notes": ks["notes"], **out}
    return out


def command(info, docs):
    name, arity, flags, first, last, step, acl, tips, specs, subs = info
    out = {
        "name": name,
        "arity": arity,
        "flags": flags,
        "legacy_range": [first, last, step],
        "acl_categories": acl,
    }
    if tips:
        out["tips"] = tips
    if specs:
        out["key_specs"] = [key_spec(ks) for ks in specs]
    doc = dict(docs)
    doc.pop("subcommands", None)
    out["docs"] = doc
    if subs:
        sub_docs = docs.get("subcommands", {})
        out["subcommands"] = sorted(
            (command(s, sub_docs[s[0]]) for s in subs), key=lambda c: c["name"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(
        here, "..", "crates", "strata-server", "src", "cmd", "redis-commands.json"))
    a = ap.parse_args()
    sock = socket.create_connection((a.host, a.port))
    conn = Resp3(sock)
    hello = call(conn, sock, "HELLO", "3")
    version = hello["version"]
    if version != "7.0.15":
        print(f"warning: redis-server {version}, Strata speaks 7.0.15", file=sys.stderr)
    infos = call(conn, sock, "COMMAND", "INFO")
    docs = call(conn, sock, "COMMAND", "DOCS")
    commands = sorted((command(i, docs[i[0]]) for i in infos), key=lambda c: c["name"])
    with open(a.out, "w") as f:
        json.dump({"redis_version": version, "commands": commands}, f, indent=None,
                  separators=(",", ":"))
        f.write("\n")
    print(f"{len(commands)} commands from redis-server {version} -> {a.out}")


if __name__ == "__main__":
    main()
