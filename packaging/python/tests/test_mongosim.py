"""The installed sturdy-sim wheel through its pytest fixtures and API, with
pymongo. packaging_test.go runs this in a fresh virtual environment where
only the wheel was installed (pip install --no-index)."""

import os
import signal
import socket
import subprocess
import sys
import time

import pymongo
import pytest

import sturdy_sim


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False  # exited; its new parent has not reaped it yet
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of this process still answers kill(0).
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def wait_gone(pid, seconds=10):
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_installed_from_the_wheel(pytestconfig):
    assert sturdy_sim.__file__.startswith(sys.prefix), sturdy_sim.__file__
    assert pytestconfig.pluginmanager.hasplugin("mongosim")


def test_replica_set_fixture(mongosim_uri):
    client = pymongo.MongoClient(mongosim_uri, serverSelectionTimeoutMS=5000)
    hello = client.admin.command("hello")
    assert hello["setName"] == "rs0" and len(hello["hosts"]) == 3
    client.t.c.insert_one({"_id": 1})
    assert client.t.c.find_one({"_id": 1}) == {"_id": 1}
    client.close()


def test_standalone_fixture(mongosim_standalone_uri):
    client = pymongo.MongoClient(mongosim_standalone_uri, serverSelectionTimeoutMS=5000)
    assert "setName" not in client.admin.command("hello")
    client.t.c.insert_one({"_id": 1})
    client.close()


def test_sharded_fixture(mongosim_sharded_uri):
    client = pymongo.MongoClient(mongosim_sharded_uri, serverSelectionTimeoutMS=5000)
    assert client.admin.command("hello")["msg"] == "isdbgrid"
    assert len(client.admin.command("listShards")["shards"]) == 2
    client.t.c.insert_one({"_id": 1})
    assert client.t.c.count_documents({}) == 1
    client.close()


def test_factory_gives_a_fresh_deployment(mongosim):
    a = mongosim(members=1)
    b = mongosim(members=1, ttl_interval=1)
    assert a.uri != b.uri
    client = pymongo.MongoClient(b.uri, serverSelectionTimeoutMS=5000)
    client.t.ttl.create_index("at", expireAfterSeconds=0)
    client.t.ttl.insert_one({"at": __import__("datetime").datetime.utcnow()})
    deadline = time.monotonic() + 10
    while client.t.ttl.count_documents({}):
        assert time.monotonic() < deadline, "ttl_interval=1 was not honoured"
        time.sleep(0.05)
    client.close()


def test_start_and_stop_leave_nothing():
    sim = sturdy_sim.start(members=3)
    assert sim.uri.endswith("replicaSet=rs0") and len(sim.members) == 3
    assert pymongo.MongoClient(sim.uri, serverSelectionTimeoutMS=5000).admin.command("ping")["ok"] == 1
    pid = sim.pid
    sim.stop()
    assert not alive(pid)


def test_port_in_use_is_a_clear_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    with pytest.raises(sturdy_sim.PortInUseError) as e:
        sturdy_sim.start(standalone=True, port=port)
    assert e.value.port == port and "already in use" in str(e.value)
    s.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_parent_killed_leaves_no_sim():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sturdy_sim, time; d = sturdy_sim.start(); print(d.pid, flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE)
    pid = int(child.stdout.readline())
    assert alive(pid)
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert wait_gone(pid), "the sim outlived its SIGKILLed parent"
