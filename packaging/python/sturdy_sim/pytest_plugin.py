"""pytest plugin (entry point pytest11 "mongosim"): fixtures yielding
connection strings to mongosim deployments.

    def test_insert(mongosim_uri):
        client = pymongo.MongoClient(mongosim_uri)
"""

import pytest

import sturdy_sim


@pytest.fixture(scope="session")
def mongosim_uri():
    """A 3-member replica set shared by the session."""
    with sturdy_sim.start(members=3) as d:
        yield d.uri


@pytest.fixture(scope="session")
def mongosim_standalone_uri():
    """A standalone server shared by the session."""
    with sturdy_sim.start(standalone=True) as d:
        yield d.uri


@pytest.fixture(scope="session")
def mongosim_sharded_uri():
    """Two one-member shards behind two mongos routers, shared by the session."""
    with sturdy_sim.start(members=1, shards=2) as d:
        yield d.uri


@pytest.fixture
def mongosim():
    """A factory for fresh deployments, stopped when the test ends:
    mongosim(members=1, standalone=True, ...) takes sturdy_sim.start's
    arguments and returns the Deployment (use .uri)."""
    started = []

    def factory(**kwargs):
        d = sturdy_sim.start(**kwargs)
        started.append(d)
        return d

    yield factory
    for d in started:
        d.stop()
