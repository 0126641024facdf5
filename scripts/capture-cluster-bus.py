#!/usr/bin/env python3
"""Capture Redis Cluster bus messages from real redis-server nodes as test fixtures.

Starts four redis-server nodes (three masters, one replica) with `cluster-enabled yes` on
free loopback ports, each in its own temporary directory. Every node's cluster bus is
reached through a recording TCP proxy: the node announces the proxy's port as its bus port
(`cluster-announce-bus-port`), and `CLUSTER MEET ip port cport` names the proxy, so every
bus connection between the nodes passes through a proxy that splits the byte stream into
messages by their `totlen` field.

The run walks the cluster through the events that produce every Redis 7.0 message type
but MODULE (no module is loaded): MEET, PING/PONG with gossip and the hostname extension,
PUBLISH, PUBLISHSHARD (SPUBLISH), a manual CLUSTER FAILOVER on the replica (MFSTART,
FAILOVER_AUTH_REQUEST/ACK, the paused master's flag), then the new master stopped
(SIGSTOP) until it is marked failed (FAIL), a CLUSTER FAILOVER TAKEOVER by its replica and
the stopped master resumed with its stale slots (UPDATE).

Output (default `crates/strata-server/src/cluster/bus/fixtures/`): a few messages of each
type as `<type>-<n>.bin`, and `manifest.json` with the nodes (CLUSTER MYID, ports, the
proxy port each announces, hostname, assigned slot range) and, per fixture, its type.

Usage: python3 scripts/capture-cluster-bus.py [--out DIR] [--redis-server PATH]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import redis

TYPE_NAMES = {
    0: "ping", 1: "pong", 2: "meet", 3: "fail", 4: "publish", 5: "auth-req",
    6: "auth-ack", 7: "update", 8: "mfstart", 9: "module", 10: "publishshard",
}
PER_TYPE = 4  # fixtures kept per message type
HOSTNAMES = ["alpha.strata.test", "b.test", "", None]  # None: the replica, no hostname
RANGES = [(0, 5460), (5461, 10922), (10923, 16383)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """Collects whole bus messages, in arrival order, from every proxied stream."""

    def __init__(self):
        self.lock = threading.Lock()
        self.messages = []  # (direction label, bytes)

    def add(self, label, msg):
        with self.lock:
            self.messages.append((label, msg))


def pump(src, dst, recorder, label):
    buf = b""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
            buf += data
            while len(buf) >= 8:
                if buf[:4] != b"RCmb":
                    print(f"{label}: bad signature, stop splitting", file=sys.stderr)
                    buf = b""
                    break
                (totlen,) = struct.unpack(">I", buf[4:8])
                if len(buf) < totlen:
                    break
                recorder.add(label, buf[:totlen])
                buf = buf[totlen:]
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def proxy(listener, upstream_port, recorder, name):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        try:
            up = socket.create_connection(("127.0.0.1", upstream_port))
        except OSError:
            client.close()
            continue
        threading.Thread(target=pump, args=(client, up, recorder, f"to-{name}"), daemon=True).start()
        threading.Thread(target=pump, args=(up, client, recorder, f"from-{name}"), daemon=True).start()


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if pred():
                return
        except redis.RedisError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="crates/strata-server/src/cluster/bus/fixtures")
    ap.add_argument("--redis-server", default="redis-server")
    args = ap.parse_args()

    recorder = Recorder()
    tmp = tempfile.mkdtemp(prefix="strata-bus-capture-")
    procs, nodes, listeners = [], [], []
    try:
        for i, hostname in enumerate(HOSTNAMES):
            port, proxy_port = free_port(), free_port()
            bus_port = free_port()
            d = os.path.join(tmp, f"n{i}")
            os.mkdir(d)
            cmd = [args.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                   "--dir", d, "--cluster-enabled", "yes", "--cluster-port", str(bus_port),
                   "--cluster-announce-bus-port", str(proxy_port),
                   "--cluster-node-timeout", "1000", "--save", "", "--appendonly", "no",
                   "--logfile", os.path.join(d, "log")]
            if hostname:
                cmd += ["--cluster-announce-hostname", hostname]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL))
            lst = socket.socket()
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lst.bind(("127.0.0.1", proxy_port))
            lst.listen(16)
            listeners.append(lst)
            threading.Thread(target=proxy, args=(lst, bus_port, recorder, f"n{i}"), daemon=True).start()
            nodes.append({"port": port, "cport": proxy_port, "hostname": hostname or ""})
        clients = [redis.Redis(port=n["port"], decode_responses=True) for n in nodes]
        for c in clients:
            wait_for(c.ping, 10, "redis-server start")
        for n, c in zip(nodes, clients):
            n["id"] = c.execute_command("CLUSTER", "MYID")
        for n in nodes[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", n["port"], n["cport"])
        wait_for(lambda: all(len(c.execute_command("CLUSTER", "NODES").splitlines()) == len(nodes)
                             and "handshake" not in c.execute_command("CLUSTER", "NODES")
                             for c in clients), 20, "every node to know every other")
        for (lo, hi), c, n in zip(RANGES, clients, nodes):
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            n["slots"] = [lo, hi]
        replica, master = clients[3], clients[0]
        replica.execute_command("CLUSTER", "REPLICATE", nodes[0]["id"])
        nodes[3]["slots"] = None
        wait_for(lambda: all(c.execute_command("CLUSTER", "INFO").find("cluster_state:ok") >= 0
                             for c in clients), 30, "cluster_state:ok")
        wait_for(lambda: replica.info("replication").get("master_link_status") == "up", 30,
                 "replica link up")
        master.publish("news", "hello from the bus")
        # A shard channel whose slot n0 owns: "{user1000}" hashes to slot 1649.
        master.execute_command("SPUBLISH", "{user1000}.events", "sharded hello")
        time.sleep(1.5)

        replica.execute_command("CLUSTER", "FAILOVER")
        wait_for(lambda: replica.info("replication")["role"] == "master", 20, "manual failover")
        wait_for(lambda: master.info("replication").get("master_link_status") == "up", 30,
                 "old master following")
        time.sleep(1.5)

        # Stop the new master until the others mark it failed, take over from its replica,
        # then resume it: it claims slots with a stale configEpoch and is sent an UPDATE.
        procs[3].send_signal(signal.SIGSTOP)
        wait_for(lambda: " fail " in " ".join(
            l for l in clients[1].execute_command("CLUSTER", "NODES").splitlines()
            if l.startswith(nodes[3]["id"])).replace(",", " "), 20, "FAIL of the stopped node")
        master.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        wait_for(lambda: master.info("replication")["role"] == "master", 20, "takeover")
        time.sleep(1.0)
        procs[3].send_signal(signal.SIGCONT)
        time.sleep(3.0)
    finally:
        for p in procs:
            p.send_signal(signal.SIGCONT)
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
        for lst in listeners:
            lst.close()
        shutil.rmtree(tmp, ignore_errors=True)

    write_fixtures(args.out, nodes, recorder.messages)


def pick(messages):
    """Up to PER_TYPE messages per type, each differing from the others kept in length or
    in its first message-flags byte (extension data, a paused master)."""
    by_type = {}
    for label, msg in messages:
        (mtype,) = struct.unpack(">H", msg[12:14])
        by_type.setdefault(mtype, []).append((label, msg))
    chosen = []
    for mtype, lst in sorted(by_type.items()):
        seen, keep = set(), []
        for label, msg in lst:
            key = (len(msg), msg[2253])
            if key not in seen and len(keep) < PER_TYPE:
                seen.add(key)
                keep.append((label, msg))
        chosen.append((mtype, keep))
    return chosen


def write_fixtures(out, nodes, messages):
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".bin"):
            os.remove(os.path.join(out, f))
    files = []
    for mtype, keep in pick(messages):
        name = TYPE_NAMES.get(mtype, f"type{mtype}")
        for n, (label, msg) in enumerate(keep):
            fname = f"{name}-{n}.bin"
            with open(os.path.join(out, fname), "wb") as fh:
                fh.write(msg)
            files.append({"file": fname, "type": mtype, "stream": label, "bytes": len(msg)})
    manifest = {
        "redis": subprocess.run(["redis-server", "--version"], capture_output=True,
                                text=True).stdout.strip(),
        "nodes": nodes,
        "publish": {"channel": "news", "message": "hello from the bus"},
        "publishshard": {"channel": "{user1000}.events", "message": "sharded hello"},
        "fixtures": files,
    }
    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")
    counts = {}
    for f in files:
        counts[TYPE_NAMES.get(f["type"], f["type"])] = counts.get(TYPE_NAMES.get(f["type"], f["type"]), 0) + 1
    print(f"{len(messages)} messages captured; wrote {len(files)} fixtures: {counts}")


if __name__ == "__main__":
    main()
