// Error shapes as the Node.js driver sees them: the fields drivers and
// applications branch on (code, codeName, keyPattern/keyValue, errInfo,
// writeConcernError, errorLabels) must be exactly where mongod puts them.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoServerError, MongoBulkWriteError, MongoWriteConcernError, ObjectId } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { recordingClient } from '../lib/events.mjs';

let sim, rec, db;
before(async () => {
  sim = await startSim({ members: 3 });
  rec = recordingClient(sim.uri);
  await rec.client.connect();
  db = rec.client.db('errs');
});
after(async () => {
  await rec?.client.close();
  await sim?.stop();
});

const admin = () => rec.client.db('admin');
const failPoint = (data, mode = { times: 1 }) => admin().command({ configureFailPoint: 'failCommand', mode, data });
const failPointOff = () => admin().command({ configureFailPoint: 'failCommand', mode: 'off' });

test('duplicate _id: 11000 with keyPattern, keyValue and mongod\'s message', withSimLog(() => sim, async () => {
  const c = db.collection('dup_id');
  await c.insertOne({ _id: 1 });
  const err = await c.insertOne({ _id: 1 }).then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `got ${err}`);
  assert.equal(err.code, 11000);
  assert.deepEqual(err.keyPattern, { _id: 1 });
  assert.deepEqual(err.keyValue, { _id: 1 });
  assert.match(err.message, /^E11000 duplicate key error collection: errs\.dup_id index: _id_ dup key: \{ _id: 1 \}$/);
}));

test('duplicate on a compound unique index, from insertMany and updateOne', withSimLog(() => sim, async () => {
  const c = db.collection('dup_compound');
  await c.createIndex({ a: 1, b: -1 }, { unique: true, name: 'a_b' });
  await c.insertOne({ _id: 1, a: 'x', b: 2 });
  const since = rec.mark();
  const bulk = await c.insertMany([{ _id: 2, a: 'y', b: 1 }, { _id: 3, a: 'x', b: 2 }, { _id: 4 }]).then(() => null, e => e);
  assert.ok(bulk instanceof MongoBulkWriteError, `got ${bulk}`);
  assert.equal(bulk.code, 11000);
  assert.equal(bulk.result.insertedCount, 1, 'ordered insertMany stops at the duplicate');
  assert.equal(bulk.writeErrors.length, 1);
  const we = bulk.writeErrors[0];
  assert.equal(we.index, 1);
  assert.equal(we.code, 11000);
  assert.match(we.errmsg, /index: a_b dup key: \{ a: "x", b: 2 \}/);
  // The driver's BulkWriteError keeps only code/errmsg/errInfo of a write
  // error, so check keyPattern/keyValue on the wire reply itself.
  const [reply] = rec.of('commandSucceeded', since).filter(e => e.event.commandName === 'insert');
  const wire = reply.event.reply.writeErrors?.[0];
  assert.ok(wire, `insert reply has writeErrors (${JSON.stringify(reply.event.reply)})`);
  assert.deepEqual(wire.keyPattern, { a: 1, b: -1 });
  assert.deepEqual(wire.keyValue, { a: 'x', b: 2 });

  const upd = await c.updateOne({ _id: 2 }, { $set: { a: 'x', b: 2 } }).then(() => null, e => e);
  assert.ok(upd instanceof MongoServerError, `got ${upd}`);
  assert.equal(upd.code, 11000);
  assert.deepEqual(upd.keyPattern, { a: 1, b: -1 });
  assert.deepEqual(upd.keyValue, { a: 'x', b: 2 });
}));

test('w larger than the set: writeConcernError 100 UnsatisfiableWriteConcern, the write still applied', withSimLog(() => sim, async () => {
  const c = db.collection('wc_big');
  const err = await c.insertOne({ _id: 'w5' }, { writeConcern: { w: 5 } }).then(() => null, e => e);
  assert.ok(err instanceof MongoWriteConcernError, `expected MongoWriteConcernError, got ${err}`);
  assert.equal(err.code, 100);
  assert.equal(err.codeName, 'UnsatisfiableWriteConcern');
  assert.match(err.message, /Not enough data-bearing nodes/);
  assert.equal(err.result?.n ?? err.errorResponse?.n, 1, 'the reply reports the insert (n: 1)');
  assert.equal(await c.countDocuments({ _id: 'w5' }), 1, 'mongod applies the write before judging its write concern');
}));

test('unknown write concern tag: writeConcernError 79 UnknownReplWriteConcern', withSimLog(() => sim, async () => {
  const c = db.collection('wc_tag');
  const err = await c.insertOne({ _id: 'tag' }, { writeConcern: { w: 'noSuchTag' } }).then(() => null, e => e);
  assert.ok(err instanceof MongoWriteConcernError, `expected MongoWriteConcernError, got ${err}`);
  assert.equal(err.code, 79);
  assert.equal(err.codeName, 'UnknownReplWriteConcern');
}));

test('satisfiable write concerns succeed: w:3, w:"majority", j:true, w:0', withSimLog(() => sim, async () => {
  const c = db.collection('wc_ok');
  for (const [i, wc] of [{ w: 3, wtimeoutMS: 5000 }, { w: 'majority' }, { w: 1, journal: true }].entries()) {
    const r = await c.insertOne({ _id: i }, { writeConcern: wc });
    assert.equal(r.acknowledged, true, `writeConcern ${JSON.stringify(wc)}`);
  }
  const r = await c.insertOne({ _id: 'unack' }, { writeConcern: { w: 0 } });
  assert.equal(r.acknowledged, false, 'w:0 is unacknowledged');
  // An unacknowledged write is applied; poll (no sleep-and-hope) for it.
  const deadline = Date.now() + 5000;
  while (await c.countDocuments({ _id: 'unack' }) !== 1) {
    assert.ok(Date.now() < deadline, 'w:0 insert applied within 5 s');
  }
}));

test('a non-retryable server error has no RetryableWriteError label', withSimLog(() => sim, async () => {
  const c = db.collection('labels2');
  await c.insertOne({ _id: 1 });
  const err = await c.insertOne({ _id: 1 }).then(() => null, e => e);
  assert.equal(err.code, 11000);
  assert.ok(!err.hasErrorLabel('RetryableWriteError'), `labels ${JSON.stringify(err.errorLabels)}`);
}));

test('errorLabels given to failCommand replace the server\'s own: no label, no retry', withSimLog(() => sim, async () => {
  // mongod: a failCommand errorLabels array (even empty) is used as-is, so a
  // retryable code without RetryableWriteError is not retried by the driver.
  const since = rec.mark();
  await failPoint({ failCommands: ['insert'], errorCode: 6, errorLabels: [] });
  try {
    const err = await db.collection('labels3').insertOne({ _id: 1 }).then(() => null, e => e);
    assert.ok(err instanceof MongoServerError, `got ${err}`);
    assert.equal(err.code, 6);
    assert.equal(err.codeName, 'HostUnreachable');
    assert.deepEqual(err.errorLabels, []);
    assert.equal(rec.of('commandStarted', since).filter(e => e.event.commandName === 'insert').length, 1, 'not retried');
  } finally {
    await failPointOff();
  }
}));

test('not-primary errors carry topologyVersion', withSimLog(() => sim, async () => {
  // Drivers compare an error's topologyVersion with the server's to ignore
  // stale errors; mongod attaches it to every not-primary/recovering error.
  const hello = await admin().command({ hello: 1 });
  const secondary = hello.hosts.find(h => h !== hello.primary);
  const { client } = recordingClient(`mongodb://${secondary}/?directConnection=true`);
  try {
    const err = await client.db('errs').collection('np').insertOne({ _id: 1 }).then(() => null, e => e);
    assert.ok(err instanceof MongoServerError, `got ${err}`);
    assert.equal(err.code, 10107);
    assert.equal(err.codeName, 'NotWritablePrimary');
    assert.ok(err.topologyVersion, `error has topologyVersion (${JSON.stringify(err.errorResponse ?? err)})`);
    assert.ok(err.topologyVersion.processId instanceof ObjectId, 'topologyVersion.processId is an ObjectId');
    assert.ok(err.topologyVersion.counter !== undefined, 'topologyVersion.counter present');
  } finally {
    await client.close();
  }
  // times: 2 because the driver retries the read once.
  await failPoint({ failCommands: ['find'], errorCode: 13436 }, { times: 2 });
  try {
    const err = await db.collection('np').findOne({}).then(() => null, e => e);
    assert.equal(err?.code, 13436, `got ${err}`);
    assert.ok(err.topologyVersion?.processId instanceof ObjectId, `13436 carries topologyVersion (${JSON.stringify(err)})`);
  } finally {
    await failPointOff();
  }
}));

test('failCommand writeConcernError reaches the driver intact, labelled retryable', withSimLog(() => sim, async () => {
  // The driver retries once on a retryable writeConcernError (91), so the
  // fail point fires twice and the second error is what the caller sees.
  await failPoint({ failCommands: ['insert'], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } }, { times: 2 });
  try {
    const err = await db.collection('wce').insertOne({ _id: 1 }).then(() => null, e => e);
    assert.ok(err instanceof MongoWriteConcernError, `got ${err}`);
    assert.equal(err.code, 91);
    assert.ok(err.hasErrorLabel('RetryableWriteError'), `labels ${JSON.stringify(err.errorLabels)}`);
  } finally {
    await failPointOff();
  }
}));

test('unknown command: 59 CommandNotFound', withSimLog(() => sim, async () => {
  const err = await db.command({ noSuchCommand: 1 }).then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `got ${err}`);
  assert.equal(err.code, 59);
  assert.equal(err.codeName, 'CommandNotFound');
  assert.match(err.message, /no such command: 'noSuchCommand'/);
}));

test('a retryable error carries RetryableWriteError, added by the server', withSimLog(() => sim, async () => {
  // Both attempts fail with 91 ShutdownInProgress; for 4.4+ servers the
  // driver relies on the server to label retryable errors.
  await failPoint({ failCommands: ['insert'], errorCode: 91 }, { times: 2 });
  try {
    const err = await db.collection('labels').insertOne({ _id: 1 }).then(() => null, e => e);
    assert.ok(err instanceof MongoServerError, `got ${err}`);
    assert.equal(err.code, 91);
    assert.equal(err.codeName, 'ShutdownInProgress');
    assert.ok(err.hasErrorLabel('RetryableWriteError'), `labels ${JSON.stringify(err.errorLabels)}`);
  } finally {
    await failPointOff();
  }
}));
