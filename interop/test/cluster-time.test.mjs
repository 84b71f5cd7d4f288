// Cluster time: every reply from a replica-set member carries $clusterTime
// and operationTime as mongod's do, writes advance them and report opTime and
// electionId, the driver gossips the newest cluster time back, and a
// causally consistent session reads its own writes via afterClusterTime.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Timestamp, Binary, Long, ObjectId } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { recordingClient } from '../lib/events.mjs';

let sim, rec;
before(async () => {
  sim = await startSim({ members: 3 });
  rec = recordingClient(sim.uri);
  await rec.client.connect();
});
after(async () => {
  await rec?.client.close();
  await sim?.stop();
});

const cmp = (a, b) => (a.t - b.t) || (a.i - b.i);
const succeeded = (name, since) => rec.of('commandSucceeded', since).filter(e => e.event.commandName === name);
const started = (name, since) => rec.of('commandStarted', since).filter(e => e.event.commandName === name);

function assertClusterTimeShape(reply, what) {
  assert.ok(reply.operationTime instanceof Timestamp, `${what}: operationTime is a Timestamp (${JSON.stringify(reply)})`);
  const ct = reply.$clusterTime;
  assert.ok(ct, `${what}: reply has $clusterTime (${JSON.stringify(reply)})`);
  assert.ok(ct.clusterTime instanceof Timestamp, `${what}: $clusterTime.clusterTime is a Timestamp`);
  assert.ok(ct.signature, `${what}: $clusterTime.signature present`);
  assert.ok(ct.signature.hash instanceof Binary, `${what}: signature.hash is binary`);
  assert.equal(ct.signature.hash.length(), 20, `${what}: signature.hash is 20 bytes (HMAC-SHA1)`);
  assert.ok(ct.signature.keyId instanceof Long || typeof ct.signature.keyId === 'number', `${what}: signature.keyId is a long`);
  assert.ok(cmp(ct.clusterTime, reply.operationTime) >= 0, `${what}: clusterTime ${ct.clusterTime} >= operationTime ${reply.operationTime}`);
}

test('every reply carries $clusterTime and operationTime', withSimLog(() => sim, async () => {
  const since = rec.mark();
  const db = rec.client.db('ct');
  await db.command({ ping: 1 });
  await db.collection('shape').insertOne({ x: 1 });
  await db.collection('shape').find({}).toArray();
  await db.command({ hello: 1 });
  for (const name of ['ping', 'insert', 'find', 'hello']) {
    const [e] = succeeded(name, since);
    assert.ok(e, `${name} succeeded event recorded`);
    assertClusterTimeShape(e.event.reply, name);
  }
}));

test('write replies carry opTime and electionId; operationTime advances with each write', withSimLog(() => sim, async () => {
  const since = rec.mark();
  const coll = rec.client.db('ct').collection('advance');
  for (let i = 0; i < 5; i++) await coll.insertOne({ i });
  await coll.updateOne({ i: 0 }, { $set: { u: 1 } });
  await coll.deleteOne({ i: 1 });
  const writes = rec.of('commandSucceeded', since).filter(e => ['insert', 'update', 'delete'].includes(e.event.commandName));
  assert.equal(writes.length, 7);
  const hello = await rec.client.db('admin').command({ hello: 1 });
  assert.ok(hello.electionId instanceof ObjectId, `hello on a replica set has electionId (${JSON.stringify(hello)})`);
  let prev;
  for (const { event } of writes) {
    const r = event.reply;
    assertClusterTimeShape(r, event.commandName);
    assert.ok(r.opTime, `${event.commandName} reply has opTime (${JSON.stringify(r)})`);
    assert.ok(r.opTime.ts instanceof Timestamp, 'opTime.ts is a Timestamp');
    assert.ok(r.opTime.t !== undefined, 'opTime.t (term) present');
    assert.equal(cmp(r.opTime.ts, r.operationTime), 0, `opTime.ts ${r.opTime.ts} is the write's operationTime ${r.operationTime}`);
    assert.ok(r.electionId instanceof ObjectId, `${event.commandName} reply has electionId`);
    assert.ok(r.electionId.equals(hello.electionId), `electionId ${r.electionId} matches hello's ${hello.electionId}`);
    if (prev) assert.ok(cmp(r.operationTime, prev) > 0, `operationTime ${r.operationTime} > previous write's ${prev}`);
    prev = r.operationTime;
  }
}));

test('the driver gossips the newest $clusterTime it has seen', withSimLog(() => sim, async () => {
  const coll = rec.client.db('ct').collection('gossip');
  await coll.insertOne({ a: 1 });
  const [last] = succeeded('insert', 0).slice(-1);
  const seen = last.event.reply.$clusterTime.clusterTime;
  const since = rec.mark();
  await coll.findOne({ a: 1 });
  const [find] = started('find', since);
  assert.ok(find.event.command.$clusterTime, 'find sends $clusterTime');
  assert.ok(cmp(find.event.command.$clusterTime.clusterTime, seen) >= 0,
    `sent clusterTime ${find.event.command.$clusterTime.clusterTime} >= last seen ${seen}`);
}));

test('a causally consistent session reads its own write via afterClusterTime', withSimLog(() => sim, async () => {
  const coll = rec.client.db('ct').collection('causal');
  const session = rec.client.startSession({ causalConsistency: true });
  try {
    await coll.insertOne({ _id: 'mine' }, { session });
    const opTime = session.operationTime;
    assert.ok(opTime instanceof Timestamp, 'session.operationTime set by the write');
    assert.ok(session.clusterTime?.clusterTime instanceof Timestamp, 'session.clusterTime set by the write');
    const since = rec.mark();
    const doc = await coll.findOne({ _id: 'mine' }, { session, readPreference: 'secondary' });
    assert.deepEqual(doc, { _id: 'mine' });
    const [find] = started('find', since);
    const rc = find.event.command.readConcern;
    assert.ok(rc?.afterClusterTime instanceof Timestamp, `find sends readConcern.afterClusterTime (${JSON.stringify(rc)})`);
    assert.equal(cmp(rc.afterClusterTime, opTime), 0);
    const [ok] = succeeded('find', since);
    assert.ok(cmp(ok.event.reply.operationTime, opTime) >= 0, 'the read happened at or after the write');
    assert.ok(cmp(session.operationTime, opTime) >= 0, 'session operationTime never goes backwards');
  } finally {
    await session.endSession();
  }
}));

test('afterClusterTime ahead of the server\'s cluster time is refused (72 InvalidOptions)', withSimLog(() => sim, async () => {
  // mongod refuses a read that asks to wait for a cluster time it has not
  // reached: "readConcern afterClusterTime value must not be greater than
  // the current clusterTime".
  const db = rec.client.db('ct');
  const future = new Timestamp({ t: Math.floor(Date.now() / 1000) + 3600, i: 1 });
  const err = await db.command({ find: 'causal', filter: {}, readConcern: { afterClusterTime: future } }).then(() => null, e => e);
  assert.ok(err, 'the read is refused');
  assert.equal(err.code, 72, `InvalidOptions, got ${err.code} ${err.codeName}: ${err.message}`);
  assert.match(err.message, /afterClusterTime value must not be greater than the current clusterTime/);
}));
