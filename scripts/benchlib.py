"""What the server benchmark scripts share: starting redis-server and `strata serve` on
127.0.0.1, a small RESP client, redis-benchmark run and parsed (failing on error replies),
bulk loads through `redis-cli --pipe`, fio's sequential read, the environment header, and
cleanup of every process and scratch directory even on Ctrl-C or SIGTERM.

Imported by `bench-server.py`, `bench-rdb-load.py`, `bench-repl.py` and `bench-cluster.py`
(they sit beside it in `scripts/`, so `import benchlib` finds it).

Every failure a benchmark must not survive (a server that does not start, a wait past its
bound, a redis-benchmark run with error replies, a load with errors) raises `BenchError`
with a message; `main_guard` turns it into that message and exit status 1.
"""

import atexit
import json
import math
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.environ.get("STRATA_BIN", os.path.join(REPO, "target", "release", "strata"))


class BenchError(RuntimeError):
    """A condition that makes the run's figures meaningless: reported, exit status 1."""


# --- cleanup ------------------------------------------------------------------------------

_LIVE = []  # every Proc started and not yet stopped
_DIRS = []  # every scratch directory made by scratch_dir()


def _cleanup():
    for p in list(_LIVE):
        p.stop()
    for d in list(_DIRS):
        shutil.rmtree(d, ignore_errors=True)
        _DIRS.remove(d)


def _on_signal(signum, _frame):
    # Unwinds through every `finally` (which stop their servers), then atexit stops the rest.
    print(f"{os.path.basename(sys.argv[0])}: {signal.Signals(signum).name}: stopping the "
          f"servers", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


atexit.register(_cleanup)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGHUP, _on_signal)
# Ctrl-C raises KeyboardInterrupt even where SIGINT came ignored (a background job of a
# non-interactive shell), so an interrupted run always cleans up.
signal.signal(signal.SIGINT, signal.default_int_handler)


def scratch_dir(prefix, parent=None):
    """A new directory under `parent` (default: the system's temporary directory), removed
    at exit whatever happens."""
    if parent:
        os.makedirs(parent, exist_ok=True)
    d = tempfile.mkdtemp(prefix=prefix, dir=parent)
    _DIRS.append(d)
    return d


def main_guard(main):
    """Runs `main()`; a BenchError or Ctrl-C becomes a message and a non-zero exit after
    every server is stopped and every scratch directory removed."""
    try:
        main()
    except BenchError as e:
        _cleanup()
        sys.exit(f"{os.path.basename(sys.argv[0])}: FAILED: {e}")
    except KeyboardInterrupt:
        _cleanup()
        sys.exit(f"{os.path.basename(sys.argv[0])}: interrupted")


# --- ports and RESP -----------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_cluster_port():
    """A free port whose cluster bus port (port + 10000) is free too; Redis refuses a
    cluster-mode port above 55535."""
    for _ in range(1000):
        port = free_port()
        if port <= 55535 and _bindable(port + 10000):
            return port
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55535)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise BenchError("no free port pair for a cluster-mode server")


class Conn:
    """One RESP2 connection; `call` returns the reply decoded (bulk as str, arrays as
    lists) and raises RuntimeError on an error reply."""

    def __init__(self, port, timeout=600):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return _read(self.f)

    def close(self):
        self.f.close()
        self.sock.close()


def call(port, *args, timeout=600):
    """One command on a new connection."""
    c = Conn(port, timeout)
    try:
        return c.call(*args)
    finally:
        c.close()


def _read(f):
    line = f.readline()
    if not line:
        raise ConnectionError("closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        return [_read(f) for _ in range(max(int(rest), 0))]
    raise RuntimeError(f"bad reply {line!r}")


def parse_info(text):
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def info(port, section):
    return parse_info(call(port, "INFO", section))


def wait_until(what, cond, timeout, poll=0.005):
    """Polls `cond` until it is true; BenchError after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(poll)
    raise BenchError(f"timed out after {timeout} s waiting for {what}")


# --- servers ------------------------------------------------------------------------------


class Proc:
    """A server process; its output goes to `<dir>.log` beside its directory (Strata wants
    its directory its own). Registered for cleanup until `stop()`."""

    def __init__(self, argv, port, cwd, name=None):
        self.port = port
        self.dir = cwd
        self.name = name or os.path.basename(argv[0])
        self.log = open(cwd.rstrip("/") + ".log", "wb")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd)
        self.pid = self.p.pid
        _LIVE.append(self)

    def log_tail(self, n=20):
        try:
            with open(self.log.name, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def wait_listening(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.p.poll() is not None:
                raise BenchError(f"{self.name} on port {self.port} exited with status "
                                 f"{self.p.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.01)
        raise BenchError(f"{self.name} did not listen on port {self.port} within {timeout} s:\n"
                         f"{self.log_tail()}")

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        if not self.log.closed:
            self.log.close()
        if self in _LIVE:
            _LIVE.remove(self)


# The server configurations the benchmarks compare (docs/benchmarks.md): Strata with its
# WAL synced every second, redis-server with AOF synced every second (the peer) and
# redis-server in memory (the ceiling).
KINDS = ("strata", "redis-aof", "redis-mem")


def server_argv(kind, port, dir_, strata=STRATA, extra=()):
    if kind == "strata":
        # Absolute: servers run with their own directory as the working directory.
        argv = [os.path.abspath(strata), "serve", "--bind", "127.0.0.1", "--port", str(port), "--dir", dir_,
                "--appendfsync", "everysec"]
    elif kind in ("redis-aof", "redis-mem"):
        argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", dir_,
                "--save", "", "--daemonize", "no"]
        if kind == "redis-aof":
            argv += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            argv += ["--appendonly", "no"]
    else:
        raise ValueError(f"unknown server kind {kind!r}")
    return argv + [str(x) for x in extra]


def start_server(kind, dir_, port=None, strata=STRATA, extra=(), timeout=60):
    """Starts a server of `kind` on `dir_` and waits until it listens."""
    port = port or free_port()
    return Proc(server_argv(kind, port, dir_, strata, extra), port, dir_,
                name=f"{kind} :{port}").wait_listening(timeout)


def redis_server(dir_, dbfile=None, port=None):
    """A redis-server in memory with DEBUG allowed and no wait before a diskless transfer
    (Redis waits 5 s for more replicas by default); not yet listening."""
    port = port or free_port()
    extra = ["--enable-debug-command", "local", "--repl-diskless-sync-delay", "0"]
    if dbfile:
        extra += ["--dbfilename", dbfile]
    return Proc(server_argv("redis-mem", port, dir_, extra=extra), port, dir_,
                name=f"redis-server :{port}")


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def dir_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


# --- redis-benchmark ----------------------------------------------------------------------


def parse_benchmark_csv(out):
    """redis-benchmark --csv output -> {test: {"rps", "p50_ms", "p99_ms", ...}}, columns by
    the header's names. A line "Error from server..." (redis-benchmark prints at most one a
    second when a reply is an error) is a BenchError."""
    errors = [l for l in out.splitlines() if l.startswith("Error from server")]
    if errors:
        raise BenchError(f"redis-benchmark got error replies, e.g. {errors[0]!r}")
    header = None
    res = {}
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] == "test":
            header = cells
            continue
        if header is None or len(cells) != len(header):
            continue
        # "LPUSH (needed to benchmark LRANGE)" fills the list for LRANGE: not a result.
        if "needed to" in cells[0]:
            continue
        name = cells[0].split(" (")[0].lower()
        row = dict(zip(header[1:], (float(c) for c in cells[1:])))
        res[name] = {"rps": row["rps"], "p50_ms": row.get("p50_latency_ms"),
                     "p99_ms": row.get("p99_latency_ms"), "avg_ms": row.get("avg_latency_ms")}
    if not res:
        raise BenchError(f"redis-benchmark printed no results:\n{out[-2000:]}")
    return res


def redis_benchmark(port, args, timeout=3600):
    """Runs `redis-benchmark -p port --csv ARGS` and returns its parsed results; fails on a
    non-zero exit, an error reply, or a timeout."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "--csv"] + [str(a) for a in args]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(argv)} did not finish within {timeout} s")
    if r.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited with {r.returncode}:\n{r.stdout[-1000:]}"
                         f"{r.stderr[-1000:]}")
    return parse_benchmark_csv(r.stdout + "\n" + r.stderr)


# --- bulk loads ---------------------------------------------------------------------------


def value_pool(seed=1):
    """1 MiB of seeded random bytes: values are slices of it, distinct per key and not
    compressible (so neither an RDB's LZF nor a block compressor shrinks the transfer)."""
    return random.Random(seed).randbytes(1 << 20)


def value_of(pool, i, size):
    off = (i * 4099) % (len(pool) - size)
    return pool[off:off + size]


def pipe_load(port, n, value_size, key_of=lambda i: b"key:%012d" % i, timeout=7200,
              log_dir=None):
    """SETs keys key_of(0..n-1) to `value_size`-byte values through `redis-cli --pipe` (one
    connection, no wait per command: a bulk import). Returns the user bytes loaded (keys +
    values). BenchError on any error reply or a reply count short of n."""
    pool = value_pool()
    out_file = tempfile.TemporaryFile(dir=log_dir)
    # redis-cli prints every error reply: to a file, or a full pipe would stall the load.
    pipe = subprocess.Popen(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--pipe",
                             "--pipe-timeout", "120"], stdin=subprocess.PIPE,
                            stdout=out_file, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout
    user = 0
    vhead = b"\r\n$%d\r\n" % value_size
    try:
        chunk = 50_000
        for start in range(0, n, chunk):
            parts = []
            for i in range(start, min(n, start + chunk)):
                k = key_of(i)
                user += len(k) + value_size
                parts.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s%s%s\r\n"
                             % (len(k), k, vhead, value_of(pool, i, value_size)))
            pipe.stdin.write(b"".join(parts))
            if time.time() > deadline:
                raise BenchError(f"loading {n} keys took over {timeout} s")
        pipe.stdin.close()
        pipe.wait(timeout=max(1, deadline - time.time()))
    except (subprocess.TimeoutExpired, BrokenPipeError) as e:
        raise BenchError(f"redis-cli --pipe into port {port} failed: {e!r}")
    finally:
        if pipe.poll() is None:
            pipe.kill()
            pipe.wait()
    out_file.seek(0)
    out = out_file.read().decode(errors="replace")
    out_file.close()
    counts = [l for l in out.splitlines() if "errors:" in l and "replies:" in l]
    if not counts:
        raise BenchError(f"redis-cli --pipe printed no summary:\n{out[-1000:]}")
    parts = counts[-1].replace(",", "").split()
    errors = int(parts[parts.index("errors:") + 1])
    replies = int(parts[parts.index("replies:") + 1])
    if errors or replies < n:
        first = next((l for l in out.splitlines() if l.startswith(("ERR", "-"))), "")
        raise BenchError(f"load into port {port}: {errors} errors, {replies} replies for {n} "
                         f"SETs; first error: {first!r}")
    return user


# --- the device ---------------------------------------------------------------------------


def fio_seq_read(dir_, size_bytes, timeout=600):
    """fio's sequential read bandwidth (bytes/s) of a `size_bytes` file under `dir_`: 1 MiB
    blocks, direct I/O, libaio at queue depth 16 (docs/benchmarks.md's device limits)."""
    if shutil.which("fio") is None:
        raise BenchError("fio is not installed (apt-get install -y fio)")
    path = os.path.join(dir_, "fio-seqread.dat")
    argv = ["fio", "--name=seqread", f"--filename={path}", f"--size={size_bytes}", "--bs=1M",
            "--rw=read", "--direct=1", "--ioengine=libaio", "--iodepth=16",
            "--output-format=json"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"fio did not finish within {timeout} s")
    finally:
        if os.path.exists(path):
            os.remove(path)
    if r.returncode != 0:
        raise BenchError(f"fio exited with {r.returncode}: {r.stderr[-1000:]}")
    # fio may print notes before the JSON document.
    doc = json.loads(r.stdout[r.stdout.index("{"):])
    return doc["jobs"][0]["read"]["bw_bytes"]


def drop_page_cache():
    """Writes back and drops the page cache (root only), so a read measures the device."""
    subprocess.run(["sync"], check=True, timeout=600)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        raise BenchError(f"cannot drop the page cache (needs root): {e}")


# --- reporting ----------------------------------------------------------------------------


def env_header(args, strata=STRATA):
    """Cores, memory, kernel, commit, server versions and the run's options."""
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass

    def run(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=30,
                                  cwd=REPO).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "?"

    commit = run(["git", "rev-parse", "--short", "HEAD"])
    if run(["git", "status", "--porcelain", "--untracked-files=no"]):
        commit += " (uncommitted changes)"
    return {
        "cores": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "commit": commit,
        "strata": strata,
        "redis_server": run(["redis-server", "--version"]),
        "nice": os.nice(0),
        "options": {k: v for k, v in vars(args).items()},
    }


def print_header(env, out=sys.stdout):
    print(f"# {env['cores']} cores, {env['memory']} memory, kernel {env['kernel']}, "
          f"commit {env['commit']}, nice {env['nice']}", file=out)
    print(f"# {env['redis_server']}", file=out)
    print("# options: " + " ".join(f"{k}={v}" for k, v in env["options"].items()), file=out)
    if env["nice"] > 0:
        print("# niced: figures of this run are not comparable with a quiet run", file=out)



def begin_run(args, prefix, tools=("redis-server", "redis-cli", "redis-benchmark")):
    """The start every benchmark shares: the binary and the tools are there, the
    environment header is printed (and returned), and a scratch directory made; returns
    (env, work)."""
    if not os.path.exists(args.strata):
        sys.exit(f"{args.strata} missing: cargo build --release -p strata-cli")
    for tool in tools:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} missing: apt-get install -y redis-server redis-tools")
    env = env_header(args, args.strata)
    print_header(env)
    if getattr(args, "smoke", False):
        print("# --smoke: tiny sizes; the figures only show that the script works")
    return env, scratch_dir(prefix, args.scratch)

def median_spread(xs):
    """(median, min, max) of a non-empty list."""
    return statistics.median(xs), min(xs), max(xs)


def percentile(xs, q):
    """The q-th percentile (0..100) by nearest rank of a non-empty list."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]
