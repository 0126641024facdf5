"""Servers for the Redis tests: a real redis-server and `strata serve`, each on a free
port of 127.0.0.1, and a small RESP2/RESP3 client that returns replies as plain Python
values, so the replies of the two servers can be compared exactly.

Nothing here listens on or talks to any address but 127.0.0.1.
"""

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRATA_BIN = os.environ.get("STRATA_BIN", os.path.join(REPO, "target", "release", "strata"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bindable(port):
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
        if port <= 55535 and bindable(port + 10000):
            return port
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55535)
        if bindable(port) and bindable(port + 10000):
            return port
    raise RuntimeError("no free port pair for a cluster-mode server")


def cluster_mode(extra):
    return "--cluster-enabled" in extra and "yes" in extra


class Server:
    """A server process on 127.0.0.1:`port`; `stop()` ends it (also when it hangs)."""

    def __init__(self, name, argv, port, tmpdir=None):
        self.name = name
        self.port = port
        self.tmpdir = tmpdir
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"{name} exited: {self.log.read().decode(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    self.stop()
                    raise RuntimeError(f"{name} did not listen on port {port}")
                time.sleep(0.05)

    def stop(self):
        """Stops the server with SIGTERM (SIGKILL after 10 s); False if it had to be
        killed or had already exited with an error."""
        clean = True
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                clean = False
        else:
            clean = self.proc.returncode == 0
        self.log.close()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        return clean


def start_redis(extra=()):
    port = free_cluster_port() if cluster_mode(list(extra)) else free_port()
    # A directory of its own: a SAVE must not leave a dump.rdb that the next server loads.
    tmp = tempfile.mkdtemp(prefix="redis-server-")
    argv = [
        "redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
        "--appendonly", "no", "--daemonize", "no", "--logfile", "", "--dir", tmp,
    ]
    return Server("redis-server", argv + list(extra), port, tmpdir=tmp)


def start_strata(extra=()):
    port = free_cluster_port() if cluster_mode(list(extra)) else free_port()
    tmp = tempfile.mkdtemp(prefix="strata-serve-")
    argv = [STRATA_BIN, "serve", "--bind", "127.0.0.1", "--port", str(port), "--dir", tmp]
    return Server("strata serve", argv + list(extra), port, tmpdir=tmp)


class Error:
    """An error reply, compared by its bytes (Redis may send bytes that are not UTF-8)."""

    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, Error) and other.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return f"Error({self.text!r})"


class Nil:
    """A null, remembering how it was sent (`$-1`, `*-1` or `_`)."""

    def __init__(self, kind):
        self.kind = kind

    def __eq__(self, other):
        return isinstance(other, Nil) and other.kind == self.kind

    def __hash__(self):
        return hash(self.kind)

    def __repr__(self):
        return f"Nil({self.kind!r})"


class Client:
    """A raw RESP client: `send` writes commands, `read` parses one reply. Simple strings
    come back as ('+', text), bulk strings as bytes, integers as int, arrays as lists, RESP3
    maps as ('%', [(k, v)...]), sets as ('~', [...]), doubles as (',', text), booleans as
    ('#', text), verbatim strings as ('=', bytes)."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    def close(self):
        self.sock.close()

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def send(self, args):
        self.sock.sendall(self.encode(args))

    def send_raw(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return ("+", rest.decode())
        if t == b"-":
            return Error(rest)
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return Nil("$") if n < 0 else self._exact(n)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return Nil("*")
            items = [self.read() for _ in range(n)]
            return items if t == b"*" else (t.decode(), items)
        if t == b"%":
            return ("%", [(self.read(), self.read()) for _ in range(int(rest))])
        if t == b"_":
            return Nil("_")
        if t in (b",", b"#"):
            return (t.decode(), rest.decode())
        if t == b"=":
            return ("=", self._exact(int(rest)))
        if t == b"(":
            return int(rest)
        raise ValueError(f"bad reply type {line!r}")

    def call(self, *args):
        self.send(args)
        return self.read()
