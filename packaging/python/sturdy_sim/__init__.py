"""sturdy-sim: mongosim, an in-memory MongoDB-compatible server, for Python
tests. No mongod to download: the wheel carries the `sturdy` binary.

    import sturdy_sim
    with sturdy_sim.start(members=3) as sim:
        client = pymongo.MongoClient(sim.uri)

Under pytest the plugin's fixtures (mongosim_uri, mongosim_standalone_uri,
mongosim_sharded_uri, mongosim) do this for you.
"""

import atexit
import json
import os
import subprocess
import sys
import threading
import time

from ._wire import hello

__all__ = ["start", "Deployment", "MongoSimError", "PortInUseError", "binary_path"]


class MongoSimError(RuntimeError):
    """The sim could not start (the message carries its stderr)."""


class PortInUseError(MongoSimError, OSError):
    """A port the sim was told to use is taken."""

    def __init__(self, message, port):
        super().__init__(message)
        self.port = port


def binary_path():
    """The sturdy binary: STURDY_SIM_BINARY, else the one in this wheel."""
    env = os.environ.get("STURDY_SIM_BINARY")
    if env:
        return env
    name = "sturdy.exe" if sys.platform == "win32" else "sturdy"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.path.exists(path):
        raise MongoSimError(
            "this sturdy-sim installation has no binary at %s; install the wheel built for this platform "
            "(scripts/release) or set STURDY_SIM_BINARY to a sturdy binary" % path)
    if sys.platform != "win32" and not os.access(path, os.X_OK):
        os.chmod(path, 0o755)
    return path


_live = set()


@atexit.register
def _stop_all():
    for d in list(_live):
        d.stop()


class Deployment:
    """A running `sturdy sim`: uri is its connection string; stop() ends it.

    The child exits when its stdin closes, so it dies with this process
    however the process ends, even by SIGKILL."""

    def __init__(self, argv, timeout):
        self.argv = argv
        self._stderr = []
        self._proc = subprocess.Popen(
            [binary_path(), "sim", "-exit-on-eof", "-json"] + argv,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _live.add(self)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        try:
            self._ready = self._read_ready(timeout)
            self._wait_primaries(timeout)
        except BaseException:
            self.stop()
            raise
        r = self._ready
        self.uri = r["uri"]
        self.members = list(r["members"])
        self.primary = r["primary"]
        self.routers = list(r.get("routers") or [])
        self.shards = [s["uri"] for s in r.get("shards") or []]
        self.replica_set = r.get("replicaSet") or None
        self.pid = self._proc.pid

    def _drain_stderr(self):
        for line in self._proc.stderr:
            self._stderr.append(line.decode(errors="replace"))
            del self._stderr[:-200]

    @property
    def stderr(self):
        return "".join(self._stderr)

    def _read_ready(self, timeout):
        box = []
        reader = threading.Thread(target=lambda: box.append(self._proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        line = box[0] if box else b""
        if line.strip():
            return json.loads(line)
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            raise MongoSimError("sturdy sim %s: not ready within %ss\n%s" % (" ".join(self.argv), timeout, self.stderr))
        time.sleep(0.05)  # let the stderr reader catch the last lines
        err = self.stderr
        if "address already in use" in err.lower() or "only one usage of each socket address" in err.lower():
            port = _port_of(err)
            raise PortInUseError("sturdy sim: port %s is already in use; pick another port or use port=0 for an ephemeral one" % port, port)
        raise MongoSimError("sturdy sim %s exited (%s) before it was ready:\n%s" % (" ".join(self.argv), self._proc.returncode, err.strip()))

    def _wait_primaries(self, timeout):
        """Waits until each replica set's primary answers hello as one."""
        r = self._ready
        sets = r.get("shards") or [{"primary": r["primary"]}]
        deadline = time.monotonic() + timeout
        for s in sets:
            while True:
                try:
                    if hello(s["primary"]).get("isWritablePrimary"):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise MongoSimError("sturdy sim: %s is not primary after %ss" % (s["primary"], timeout))
                time.sleep(0.01)

    def stop(self):
        """Ends the sim (closing its stdin) and waits for it to exit."""
        _live.discard(self)
        p = self._proc
        if p.poll() is None:
            try:
                p.stdin.close()
            except OSError:
                pass
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return "<sturdy_sim.Deployment %s>" % getattr(self, "uri", "(starting)")


def _port_of(stderr):
    import re
    m = re.search(r"listen tcp \S+?:(\d+)", stderr)
    return int(m.group(1)) if m else None


def start(members=3, shards=0, routers=None, standalone=False, load_balanced=False,
          replica_set="rs0", host="127.0.0.1", port=0, user=None, password=None,
          ttl_interval=None, args=(), timeout=20.0):
    """Starts a deployment and returns it once it has a primary.

    members: replica-set members (of each shard); standalone: one server
    outside any replica set; shards: more than 1 starts a sharded cluster
    behind routers (default 2); load_balanced: a load balancer in front of
    the routers; port: first port (0: ephemeral); user/password: require
    SCRAM authentication; ttl_interval: seconds between TTL passes; args:
    more `sturdy sim` flags."""
    argv = ["-host", host, "-port", str(port)]
    if standalone:
        argv += ["-standalone", "-members", "1"]
    else:
        argv += ["-members", str(members), "-replset", replica_set]
    if shards and shards > 1:
        argv += ["-shards", str(shards)]
    if routers:
        argv += ["-routers", str(routers)]
    if load_balanced:
        argv += ["-load-balanced"]
    if user:
        argv += ["-user", user, "-password", password or ""]
    if ttl_interval is not None:
        argv += ["-ttl-interval", "%gs" % ttl_interval]
    argv += [str(a) for a in args]
    return Deployment(argv, timeout)
