"""Failover under faults, over six Strata nodes made into three masters with a replica
each by `redis-cli --cluster create --cluster-replicas 1`: a master killed with SIGKILL,
stopped with SIGSTOP, or cut off from the others' cluster bus and from its clients. In
each case the others flag it failing, its replica is elected within twice the node timeout
(plus a slack stated below), clients follow the redirections to the new master, and the
old master, restarted on its nodes.conf, continued, or reconnected, rejoins as a replica
of the new one with `--cluster check` clean. Every write a client saw acknowledged by a
replica with WAIT is there after the failover. A master cut off from the majority refuses
writes once it has not heard from the other masters for the node timeout.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_cluster_failover.py
"""

import os
import signal
import socket
import tempfile
import threading
import time

import pytest

redis = pytest.importorskip("redis")
from redis.backoff import NoBackoff  # noqa: E402 (after the skip without redis-py)
from redis.retry import Retry  # noqa: E402

from cluster_nodes import (
    CLUSTER, NODE_TIMEOUT_MS, addr, call, cli, cluster_client, info_of, need_strata,
    nodes_of, stop_all, text_of, wait_check_clean, wait_until)
from servers import STRATA_BIN, Client, Server, free_cluster_port, start_strata

# Twice the node timeout is what the issue asks of a promotion. Redis itself needs up to
# the node timeout plus half of it (a ping is sent once the last pong is half a timeout
# old; the node is PFAIL once that ping waits a whole timeout), a gossip round for a
# majority of masters to agree on FAIL, and its election delay (0.5-1 s): close to twice
# the timeout at 2 s. The tests run on a 2-core machine shared with builds, where a 100 ms
# cron step or a Python poll can be late by a second: this slack covers that, not a slower
# failure detection.
SLACK_S = 1.5
PROMOTION_LIMIT_S = 2 * NODE_TIMEOUT_MS / 1000 + SLACK_S


def strata_argv(port, tmpdir, extra=()):
    return [STRATA_BIN, "serve", "--bind", "127.0.0.1", "--port", str(port), "--dir",
            tmpdir, *CLUSTER, *extra]


def restart(old):
    """The node `old` (killed) started again on its port and directory: its nodes.conf."""
    tmpdir, old.tmpdir = old.tmpdir, None
    return Server("strata serve", strata_argv(old.port, tmpdir), old.port, tmpdir=tmpdir)


def roles_settled(port):
    lines = nodes_of(port)
    masters = [n for n in lines if "master" in n[2] and len(n) > 8]
    replicas = [n for n in lines if "slave" in n[2]]
    return (len(masters) == 3 and len(replicas) == 3
            and all(n[3] in {m[0] for m in masters} for n in replicas))


def make_cluster(servers):
    """`--cluster create --cluster-replicas 1` over `servers`, then waits until every node
    sees three masters with a replica each, all six connected, and replicas' links up."""
    code, out = cli("--cluster", "create", *[addr(s) for s in servers],
                    "--cluster-replicas", "1", "--cluster-yes", timeout=120)
    assert code == 0, out
    assert "[OK] All 16384 slots covered." in out, out
    for s in servers:
        wait_until(f"node {s.port} sees three masters with a replica each",
                   lambda s=s: roles_settled(s.port), timeout=60)
        wait_until(f"node {s.port} sees six connected nodes and an ok cluster",
                   lambda s=s: info_of(s.port).get("cluster_state") == "ok" and len(
                       [n for n in nodes_of(s.port) if n[7] == "connected"]) == 6,
                   timeout=60)
    for s in servers:
        if call(s.port, "ROLE")[0] == b"slave":
            wait_until(f"replica {s.port}'s link is up", lambda s=s: "master_link_status:up"
                       in text_of(call(s.port, "INFO", "replication")))


def victim_and_replica(servers):
    """A master and its replica (Server, id) pairs, read from the first node's view."""
    lines = nodes_of(servers[0].port)
    by_id = {n[0]: n for n in lines}
    replica_line = next(n for n in lines if "slave" in n[2])
    master_line = by_id[replica_line[3]]
    by_port = {s.port: s for s in servers}
    master = by_port[ports_of(servers)[master_line[0]]]
    replica = by_port[ports_of(servers)[replica_line[0]]]
    return (master, master_line[0]), (replica, replica_line[0])


def ports_of(servers):
    """Node id -> the real client port of the server (not an announced proxy port)."""
    return {text_of(call(s.port, "CLUSTER", "MYID")): s.port for s in servers}


def slots_of(s, node):
    """The slot fields of `node`'s line in CLUSTER NODES of server `s`."""
    return next(n for n in nodes_of(s.port) if n[0] == node)[8:]


def is_master_with_slots(port, node):
    line = next((n for n in nodes_of(port) if n[0] == node), None)
    return line is not None and "master" in line[2] and len(line) > 8


def wait_promoted(survivors, replica_id, since):
    """Polls the survivors until one reports `replica_id` a master serving slots; the
    seconds from `since`. Polled every 50 ms: the measure is what the test asserts."""
    deadline = since + PROMOTION_LIMIT_S + 30
    while True:
        for s in survivors:
            try:
                if is_master_with_slots(s.port, replica_id):
                    return time.time() - since
            except OSError:
                pass
        assert time.time() < deadline, "the replica was not promoted"
        time.sleep(0.05)


def wait_taken_over(survivors, new, new_id, since, what):
    """Waits until `new` (id `new_id`) is a master serving slots for the survivors, asserts
    it took at most PROMOTION_LIMIT_S from `since` (`what`: the fault, for the log), then
    waits until every survivor reports the cluster ok again."""
    took = wait_promoted([s for s in survivors if s is not new], new_id, since)
    print(f"promoted {took:.2f} s after {what}")
    assert took <= PROMOTION_LIMIT_S, f"promoted after {took:.2f} s"
    wait_until("the cluster is ok again", lambda: all(
        info_of(s.port)["cluster_state"] == "ok" for s in survivors))


def wait_rejoined(servers, old_id, new_id):
    """Every node sees the old master as a replica of the new one."""
    def rejoined(s):
        by_id = {n[0]: n for n in nodes_of(s.port)}
        return ("slave" in by_id[old_id][2] and by_id[old_id][3] == new_id
                and is_master_with_slots(s.port, new_id))

    for s in servers:
        wait_until(f"node {s.port} sees the old master as a replica of the new one",
                   lambda s=s: rejoined(s), timeout=30)


def slot_of(port, key):
    return call(port, "CLUSTER", "KEYSLOT", key)


def keys_of_slots(port, ranges, count, prefix):
    """`count` keys whose slots fall in `ranges` (CLUSTER NODES slot fields)."""
    spans = []
    for r in ranges:
        if r.startswith("["):
            continue
        a, _, b = r.partition("-")
        spans.append((int(a), int(b or a)))
    keys, i = [], 0
    while len(keys) < count:
        k = f"{prefix}{i}"
        s = slot_of(port, k)
        if any(a <= s <= b for a, b in spans):
            keys.append(k)
        i += 1
    return keys


@pytest.fixture
def six():
    need_strata()
    servers = []
    try:
        for _ in range(6):
            servers.append(start_strata(CLUSTER))
        make_cluster(servers)
        yield servers
    finally:
        stop_all(servers)


class WaitWriter(threading.Thread):
    """SET then `WAIT 1 <ms>` on the same connection (WAIT counts the replicas that have
    this connection's last write), key after key; a key is recorded as acknowledged only
    if WAIT said a replica has it. It keeps its own slot map from CLUSTER SLOTS and follows
    MOVED replies and dead nodes as a cluster client does, so it goes on writing to the new
    master after a failover. `watched_ok` counts the writes accepted in the `watched` slots
    (a new master without a replica yet accepts writes that WAIT cannot acknowledge)."""

    def __init__(self, entry_ports, keys, watched=(), wait_ms=200):
        super().__init__(daemon=True)
        self.redis = redis
        self.entry_ports = list(entry_ports)
        self.keys = keys
        self.watched = set(watched)
        self.watched_ok = 0
        self.wait_ms = wait_ms
        self.conns = {}
        self.slot_port = {}
        self.acked = {}
        self.unacked = 0
        self.errors = 0
        self.stopping = threading.Event()
        self.refresh()

    def refresh(self):
        for p in self.entry_ports:
            try:
                c = self.redis.Redis(port=p, socket_timeout=2, retry=Retry(NoBackoff(), 0))
                try:
                    slots = c.execute_command("CLUSTER", "SLOTS")
                finally:
                    c.close()
            except self.redis.RedisError:
                continue
            for start, end, master, *_ in slots:
                for s in range(start, end + 1):
                    self.slot_port[s] = int(master[1])
            return

    def conn(self, port):
        if port not in self.conns:
            # No retries of its own (redis-py retries a timed-out command three times by
            # default): a node that does not answer is a reason to ask for the slots.
            self.conns[port] = self.redis.Redis(port=port, socket_timeout=2,
                                                retry=Retry(NoBackoff(), 0))
        return self.conns[port]

    def write(self, key, value, slot):
        port = self.slot_port.get(slot)
        if port is None:
            self.refresh()
            return False
        try:
            p = self.conn(port).pipeline(transaction=False)
            p.set(key, value)
            p.execute_command("WAIT", 1, self.wait_ms)
            _, acks = p.execute()
        except self.redis.ResponseError as e:
            self.errors += 1
            if str(e).startswith("MOVED"):
                _, s, to = str(e).split()
                self.slot_port[int(s)] = int(to.rsplit(":", 1)[1])
            else:
                time.sleep(0.05)
            return False
        except (self.redis.ConnectionError, self.redis.TimeoutError):
            self.errors += 1
            self.conns.pop(port, None)
            self.refresh()
            time.sleep(0.05)
            return False
        if slot in self.watched:
            self.watched_ok += 1
        if acks >= 1:
            self.acked[key] = value
        else:
            self.unacked += 1
        return True

    def run(self):
        n = 0
        while not self.stopping.is_set():
            key, slot = self.keys[n % len(self.keys)]
            self.write(key, f"v{n}", slot)
            n += 1

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the writer did not stop"
        for c in self.conns.values():
            c.close()


def keys_with_slots(port, count):
    return [(f"w{i}", slot_of(port, f"w{i}")) for i in range(count)]


def slot_set(ranges):
    out = set()
    for r in ranges:
        if not r.startswith("["):
            a, _, b = r.partition("-")
            out.update(range(int(a), int(b or a) + 1))
    return out


class StaleProbe(threading.Thread):
    """SET of `key` on the node at `port` again and again until it redirects (MOVED: it
    knows the slot's new owner), recording every reply. A master whose slots were taken
    while it was cut off or down must not acknowledge such a write: its data is replaced
    by the new master's when it becomes a replica, and the write would be lost. On
    loopback the UPDATE that demotes it usually arrives with the first messages after the
    heal or restart, before its own state would turn ok: the probe then passes even without
    Redis's rejoin and start delays (`cluster/health.rs`, whose unit tests check them), and
    guards the outcome rather than the delays."""

    def __init__(self, port, key):
        super().__init__(daemon=True)
        self.port = port
        self.key = key
        self.replies = []
        self.stopping = threading.Event()

    def run(self):
        c = Client(self.port, timeout=5)
        try:
            while not self.stopping.is_set():
                r = c.call("SET", self.key, "stale")
                self.replies.append(r)
                if "MOVED" in repr(r):
                    return
                time.sleep(0.01)
        finally:
            c.close()

    def finish(self):
        wait_until("the stale master redirects", lambda: not self.is_alive(), timeout=30)
        kinds = {}
        for r in self.replies:
            k = repr(r).split()[0]
            kinds[k] = kinds.get(k, 0) + 1
        print(f"replies of the stale master: {kinds}")
        oks = [r for r in self.replies if r == ("+", "OK")]
        assert not oks, f"{len(oks)} writes acknowledged by a stale master: {self.replies[:5]}"
        return self.replies


def check_acked(port, writer):
    """Every write WAIT acknowledged reads back, through a cluster client (redirects
    followed). A key written again later without an acknowledgement may hold that newer
    value or the acknowledged one, never an older one: each key's values only grow."""
    from redis.cluster import RedisCluster

    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=10)
    try:
        wrong = []
        for key, want in writer.acked.items():
            got = rc.get(key)
            if got is None or int(got[1:]) < int(want[1:]):
                wrong.append((key, want, got))
        assert not wrong, f"{len(wrong)} acknowledged writes lost, e.g. {wrong[:3]}"
    finally:
        rc.close()


def test_killed_master_is_replaced_in_time_and_rejoins_as_replica(six):
    """SIGKILL of a master while a client writes with WAIT: its replica reports itself a
    master on the survivors within the limit, the writer follows it and no acknowledged
    write is lost; the old master, restarted on its nodes.conf, becomes the new master's
    replica and `--cluster check` is clean."""
    (old, old_id), (new, new_id) = victim_and_replica(six)
    survivors = [s for s in six if s is not old]
    slots = slot_set(next(n for n in nodes_of(old.port) if n[0] == old_id)[8:])
    writer = WaitWriter([s.port for s in survivors], keys_with_slots(six[0].port, 300), slots)
    writer.start()
    restarted = None
    try:
        wait_until("the writer has acknowledged writes", lambda: len(writer.acked) > 200)
        old.proc.kill()
        killed = time.time()
        old.proc.wait()
        wait_taken_over(survivors, new, new_id, killed, "SIGKILL")
        ok = writer.watched_ok
        wait_until("the new master takes the writer's writes",
                   lambda: writer.watched_ok > ok + 20)
    finally:
        writer.stop()
    try:
        check_acked(new.port, writer)
        restarted = restart(old)
        six[six.index(old)] = restarted
        # Restarted on a configuration that makes it the slots' master, it refuses writes
        # until it learns that its replica took them.
        probe = StaleProbe(restarted.port, keys_of_slots(new.port, slots_of(new, new_id), 1,
                                                         "stale")[0])
        probe.start()
        probe.finish()
        wait_rejoined(six, old_id, new_id)
        assert call(restarted.port, "ROLE")[0] == b"slave"
        wait_check_clean(six)
    finally:
        if restarted is None:
            old.tmpdir = None


def test_stopped_master_is_replaced_in_time_and_rejoins_as_replica(six):
    """SIGSTOP of a master (first refusing a script's undeclared key of another master's
    slot): its replica is promoted within the limit and serves the
    slots with the master's data; on SIGCONT the old master sees a newer config epoch for
    its slots and becomes the new master's replica, with the write made after the
    failover."""
    (old, old_id), (new, new_id) = victim_and_replica(six)
    survivors = [s for s in six if s is not old]
    slots = next(n for n in nodes_of(old.port) if n[0] == old_id)[8:]
    key = keys_of_slots(old.port, slots, 1, "stop")[0]
    # A script reaching a key it did not declare, of a slot another master serves, is
    # refused on this one (Redis's `scriptVerifyClusterState`).
    other = next(n for n in nodes_of(old.port) if "master" in n[2] and n[0] != old_id)
    foreign = keys_of_slots(old.port, other[8:], 1, "foreign")[0]
    r = call(old.port, "EVAL", "return redis.call('set', ARGV[1], 'x')", "0", foreign)
    assert "Script attempted to access a non local key in a cluster node" in repr(r), r
    assert call(old.port, "SET", key, "before") == ("+", "OK")
    assert call(old.port, "WAIT", "1", "5000") == 1
    os.kill(old.proc.pid, signal.SIGSTOP)
    stopped = time.time()
    try:
        wait_taken_over(survivors, new, new_id, stopped, "SIGSTOP")
        rc = cluster_client(survivors[0])
        try:
            assert rc.get(key) == "before"
            rc.set(key, "after")
        finally:
            rc.close()
    finally:
        os.kill(old.proc.pid, signal.SIGCONT)
    wait_rejoined(six, old_id, new_id)
    assert call(old.port, "ROLE")[0] == b"slave"
    c = Client(old.port)
    try:
        assert c.call("READONLY") == ("+", "OK")
        wait_until("the old master has the new master's write",
                   lambda: c.call("GET", key) == b"after")
    finally:
        c.close()
    wait_check_clean(six)


# A network partition on loopback. There is no firewall to drop packets between local
# processes, so every node's cluster bus port and client port are announced as the ports
# of proxies (`cluster-announce-bus-port`, `cluster-announce-port`): every bus link,
# replication link and redirected client reaches a node through its proxies. A node's
# outbound bus link reaches another node's proxy from an ephemeral port that does not say
# who opened it, so the bus proxy reads the first message's header, whose `sender` field
# (bytes 40-80 of a bus header, after signature, length, version, port, type, count and
# three 8-byte epochs/offsets) names the node that opened the link: the proxy of node B
# then knows a link from A to B. Cutting node V holds every connection with V at either
# end: bytes read are kept, not forwarded, until the cut heals, as a partitioned network
# delays segments (TCP retransmits them) rather than losing them; a connection opened
# meanwhile is accepted and held the same way, as a SYN that is not answered yet.
BUS_SENDER = slice(40, 80)


class Partition:
    """The node ids cut off (`cut`: bus and client ports; `cut_clients`: client port only,
    which holds its replication links and redirected clients but not its bus); the proxies
    consult it for each chunk."""

    def __init__(self):
        self.cut = set()
        self.cut_clients = set()
        self.closing = threading.Event()
        self.lock = threading.Lock()

    def blocked(self, bus, *ends):
        with self.lock:
            cut = self.cut if bus else self.cut | self.cut_clients
            return any(e is not None and e in cut for e in ends)


class Proxy(threading.Thread):
    """Carries TCP connections from `listen_port` to `target_port` on 127.0.0.1. `bus`:
    the connections are cluster bus links, whose opener is read from the first header."""

    def __init__(self, partition, target_port, bus):
        super().__init__(daemon=True)
        self.partition = partition
        self.target_port = target_port
        self.bus = bus
        self.node_id = None  # the id of the node behind it, once known
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]

    def run(self):
        while not self.partition.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()
        self.sock.close()

    def serve(self, down):
        state = {"opener": None, "known": not self.bus}
        try:
            up = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
        except OSError:
            down.close()
            return
        for s in (down, up):
            s.settimeout(0.2)
        threading.Thread(target=self.pump, args=(down, up, state, True), daemon=True).start()
        self.pump(up, down, state, False)

    def held(self, state):
        """Whether this connection is cut now (or its opener is not known yet)."""
        if not state["known"]:
            return True
        return self.partition.blocked(self.bus, self.node_id, state["opener"])

    def pump(self, src, dst, state, from_opener):
        head = b""
        pending = []
        eof = False
        while not self.partition.closing.is_set():
            if not eof:
                try:
                    data = src.recv(65536)
                    if data:
                        pending.append(data)
                        if from_opener and not state["known"]:
                            head += data
                            if len(head) >= BUS_SENDER.stop:
                                state["opener"] = head[BUS_SENDER].decode(errors="replace")
                                state["known"] = True
                    else:
                        eof = True
                except socket.timeout:
                    pass
                except OSError:
                    eof = True
            if pending and not self.held(state):
                try:
                    dst.sendall(b"".join(pending))
                except OSError:
                    break
                pending = []
            if eof and not pending and not self.held(state):
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def start_proxied_strata(partition, extra=()):
    """A Strata node whose bus and client ports are announced as its proxies' ports."""
    port = free_cluster_port()
    bus = Proxy(partition, port + 10000, bus=True)
    client = Proxy(partition, port, bus=False)
    bus.start()
    client.start()
    tmp = tempfile.mkdtemp(prefix="strata-serve-")
    extra = ["--cluster-announce-bus-port", str(bus.port),
             "--cluster-announce-port", str(client.port), *extra]
    s = Server("strata serve", strata_argv(port, tmp, extra), port, tmpdir=tmp)
    bus.node_id = client.node_id = text_of(call(port, "CLUSTER", "MYID"))
    return s


def test_cut_off_master_stops_writes_is_replaced_and_rejoins_as_replica():
    """A master cut off from every other node (bus, replication and redirected clients)
    while a client writes with WAIT: once it has not heard from the other masters for the
    node timeout, it refuses writes with CLUSTERDOWN (it reaches no majority of masters);
    on the majority side its replica is promoted within the limit and takes the writer's
    keys; when the cut heals the old master sees the newer configuration for its slots,
    becomes the new master's replica, `--cluster check` is clean, and no write WAIT
    acknowledged is lost."""
    need_strata()
    partition = Partition()
    servers = []
    try:
        for _ in range(6):
            servers.append(start_proxied_strata(partition))
        make_cluster(servers)
        (old, old_id), (new, new_id) = victim_and_replica(servers)
        survivors = [s for s in servers if s is not old]
        slots = next(n for n in nodes_of(old.port) if n[0] == old_id)[8:]
        # The writer enters through the survivors' real ports; it reaches the old master
        # through its announced (proxied) port, as redirected clients do.
        writer = WaitWriter([s.port for s in survivors], keys_with_slots(old.port, 300),
                            slot_set(slots))
        writer.start()
        try:
            wait_until("the writer has acknowledged writes", lambda: len(writer.acked) > 200)
            with partition.lock:
                partition.cut.add(old_id)
            cut = time.time()
            # Talking to the old master's real port (not through its proxy), as a client on
            # its side of the partition would.
            key = keys_of_slots(old.port, slots, 1, "minority")[0]

            def refused():
                r = call(old.port, "SET", key, "x")
                return r != ("+", "OK") and str(r).find("CLUSTERDOWN") >= 0

            wait_until("the cut-off master refuses writes", refused,
                       timeout=PROMOTION_LIMIT_S + 30)
            refused_after = time.time() - cut
            print(f"the minority master refused writes {refused_after:.2f} s after the cut")
            assert refused_after <= PROMOTION_LIMIT_S, f"refused after {refused_after:.2f} s"
            wait_taken_over(survivors, new, new_id, cut, "the cut")
            ok = writer.watched_ok
            wait_until("the new master takes the writer's writes",
                       lambda: writer.watched_ok > ok + 20)
            # From its refusal on, and when the cut heals, the old master acknowledges no
            # write until it knows its replica took its slots.
            probe = StaleProbe(old.port, key)
            probe.start()
            time.sleep(0.5)
            with partition.lock:
                partition.cut.clear()
            probe.finish()
            wait_rejoined(servers, old_id, new_id)
            assert call(old.port, "ROLE")[0] == b"slave"
        finally:
            writer.stop()
        check_acked(new.port, writer)
        wait_check_clean(servers)
    finally:
        partition.closing.set()
        stop_all(servers)


def test_replica_with_stale_data_is_not_elected():
    """`cluster-replica-validity-factor 1` with a 1 s replication ping: a replica whose
    link to its master has been silent longer than the node timeout times 1 plus 1 s
    (beyond the node timeout the master takes to fail) does not run when the master
    dies, and the slots stay down; with the factor set to 0 it runs and is elected."""
    need_strata()
    partition = Partition()
    servers = []
    try:
        for _ in range(6):
            servers.append(start_proxied_strata(partition, [
                "--cluster-replica-validity-factor", "1", "--repl-ping-replica-period", "1"]))
        make_cluster(servers)
        (old, old_id), (new, new_id) = victim_and_replica(servers)
        survivors = [s for s in servers if s is not old]
        # The replication link held (the bus is not): the replica hears nothing more.
        with partition.lock:
            partition.cut_clients.add(old_id)
        allowed_s = NODE_TIMEOUT_MS / 1000 * 2 + 1
        time.sleep(allowed_s + 1)
        old.proc.kill()
        killed = time.time()
        old.proc.wait()
        wait_until("the survivors flag the master failing", lambda: all(
            any(n[0] == old_id and "fail" in n[2].split(",") for n in nodes_of(s.port))
            for s in survivors), timeout=PROMOTION_LIMIT_S + 30)
        # Twice the promotion limit: an eligible replica would have been elected.
        deadline = killed + 2 * PROMOTION_LIMIT_S
        while time.time() < deadline:
            assert not is_master_with_slots(survivors[0].port, new_id), "a stale replica won"
            time.sleep(0.2)
        assert info_of(survivors[0].port)["cluster_state"] == "fail"
        assert call(new.port, "CONFIG", "SET", "cluster-replica-validity-factor", "0") == (
            "+", "OK")
        changed = time.time()
        # The master is FAIL already: the election's delay and a vote remain.
        wait_taken_over(survivors, new, new_id, changed, "the factor was set to 0")
    finally:
        partition.closing.set()
        stop_all(servers)
