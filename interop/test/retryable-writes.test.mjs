// Retryable writes when the server drops the connection mid-command
// (failCommand closeConnection): the driver retries once on a new
// connection with the same lsid and txnNumber, and the server applies the
// write exactly once.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoNetworkError } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { recordingClient } from '../lib/events.mjs';

let sim, rec, coll;
before(async () => {
  sim = await startSim({ members: 3 });
  rec = recordingClient(sim.uri);
  await rec.client.connect();
  coll = rec.client.db('retry').collection('c');
});
after(async () => {
  await rec?.client.close();
  await sim?.stop();
});

const admin = () => rec.client.db('admin');
const closeOn = (cmd, times = 1) => admin().command({
  configureFailPoint: 'failCommand', mode: { times }, data: { failCommands: [cmd], closeConnection: true },
});
const off = () => admin().command({ configureFailPoint: 'failCommand', mode: 'off' });

// The two attempts of one retried command: same lsid and txnNumber, the
// first failed with a network error, the second succeeded.
function assertRetriedOnce(since, name) {
  const startedEv = rec.of('commandStarted', since).filter(e => e.event.commandName === name);
  const failed = rec.of('commandFailed', since).filter(e => e.event.commandName === name);
  const ok = rec.of('commandSucceeded', since).filter(e => e.event.commandName === name);
  assert.equal(startedEv.length, 2, `${name} sent twice (${startedEv.length})`);
  assert.equal(failed.length, 1, `${name} first attempt failed`);
  assert.ok(failed[0].event.failure instanceof MongoNetworkError, `first failure is a network error: ${failed[0].event.failure}`);
  assert.equal(ok.length, 1, `${name} second attempt succeeded`);
  const [a, b] = startedEv.map(e => e.event.command);
  assert.ok(a.txnNumber !== undefined, `${name} carries txnNumber`);
  assert.equal(String(a.txnNumber), String(b.txnNumber), 'same txnNumber on retry');
  assert.ok(a.lsid.id.buffer.equals(b.lsid.id.buffer), 'same lsid on retry');
  assert.notEqual(startedEv[0].event.connectionId, startedEv[1].event.connectionId, 'retry uses a new connection');
  return ok[0].event.reply;
}

test('insertOne survives a closed connection and inserts exactly once', withSimLog(() => sim, async () => {
  await closeOn('insert');
  const since = rec.mark();
  const r = await coll.insertOne({ _id: 'ins', v: 1 });
  assert.equal(r.insertedId, 'ins');
  const reply = assertRetriedOnce(since, 'insert');
  assert.equal(reply.n, 1);
  assert.equal(await coll.countDocuments({ _id: 'ins' }), 1);
}));

test('insertMany (one batch) is retried as a whole without duplicate-key errors', withSimLog(() => sim, async () => {
  await closeOn('insert');
  const since = rec.mark();
  const docs = Array.from({ length: 50 }, (_, i) => ({ _id: `many-${i}` }));
  const r = await coll.insertMany(docs);
  assert.equal(r.insertedCount, 50);
  assertRetriedOnce(since, 'insert');
  assert.equal(await coll.countDocuments({ _id: /^many-/ }), 50);
}));

test('updateOne with $inc is applied once although the command ran twice', withSimLog(() => sim, async () => {
  await coll.insertOne({ _id: 'ctr', n: 0 });
  await closeOn('update');
  const since = rec.mark();
  const r = await coll.updateOne({ _id: 'ctr' }, { $inc: { n: 1 } });
  assert.equal(r.matchedCount, 1);
  assert.equal(r.modifiedCount, 1);
  assertRetriedOnce(since, 'update');
  assert.equal((await coll.findOne({ _id: 'ctr' })).n, 1, '$inc applied exactly once');
}));

test('findOneAndUpdate returns the pre-image of its single application', withSimLog(() => sim, async () => {
  await coll.insertOne({ _id: 'fam', n: 10 });
  await closeOn('findAndModify');
  const since = rec.mark();
  const before = await coll.findOneAndUpdate({ _id: 'fam' }, { $inc: { n: 5 } }, { returnDocument: 'before' });
  assert.deepEqual(before, { _id: 'fam', n: 10 }, 'the retry answers from the first application');
  assertRetriedOnce(since, 'findAndModify');
  assert.equal((await coll.findOne({ _id: 'fam' })).n, 15);
}));

test('deleteOne and a mixed bulkWrite survive closed connections', withSimLog(() => sim, async () => {
  await coll.insertMany([{ _id: 'd1' }, { _id: 'd2' }, { _id: 'b1', n: 0 }]);
  await closeOn('delete');
  let since = rec.mark();
  assert.equal((await coll.deleteOne({ _id: 'd1' })).deletedCount, 1);
  assertRetriedOnce(since, 'delete');

  await closeOn('update');
  since = rec.mark();
  const r = await coll.bulkWrite([
    { updateOne: { filter: { _id: 'b1' }, update: { $inc: { n: 1 } } } },
    { updateOne: { filter: { _id: 'b2' }, update: { $set: { n: 7 } }, upsert: true } },
  ]);
  assert.equal(r.matchedCount, 1);
  assert.equal(r.upsertedCount, 1);
  assertRetriedOnce(since, 'update');
  assert.equal((await coll.findOne({ _id: 'b1' })).n, 1);
  assert.equal((await coll.findOne({ _id: 'b2' })).n, 7);
}));

test('two closed connections in a row: the error reaches the caller, labelled retryable', withSimLog(() => sim, async () => {
  await closeOn('insert', 2);
  try {
    const err = await coll.insertOne({ _id: 'twice' }).then(() => null, e => e);
    assert.ok(err instanceof MongoNetworkError, `got ${err}`);
    assert.ok(err.hasErrorLabel('RetryableWriteError'), `labels ${JSON.stringify(err.errorLabels)}`);
  } finally {
    await off();
  }
}));

test('with retryWrites=false a closed connection fails the write', withSimLog(() => sim, async () => {
  const { client } = recordingClient(sim.uri, { retryWrites: false });
  try {
    await client.connect();
    await closeOn('insert');
    const err = await client.db('retry').collection('c').insertOne({ _id: 'noretry' }).then(() => null, e => e);
    assert.ok(err instanceof MongoNetworkError, `got ${err}`);
  } finally {
    await off();
    await client.close();
  }
}));

test('a closed connection under 8 concurrent writers: every write succeeds exactly once', withSimLog(() => sim, async () => {
  // One close per round: the op whose connection closed is retried, and
  // the others in flight either finish on their own connections or meet
  // the cleared pool (PoolClearedError, retryable) and are retried after
  // the monitor rediscovers the server. Three rounds, 8 writers x 40.
  const c = rec.client.db('retry').collection('load');
  let id = 0;
  for (let round = 0; round < 3; round++) {
    const since = rec.mark();
    await closeOn('insert');
    const worker = async () => {
      for (let i = 0; i < 40; i++) await c.insertOne({ _id: id++ });
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const closed = rec.of('commandFailed', since).filter(e => e.event.failure instanceof MongoNetworkError);
    assert.equal(closed.length, 1, `round ${round}: one attempt had its connection closed`);
    assert.equal(rec.of('connectionPoolCleared', since).length, 1, `round ${round}: the pool was cleared once`);
  }
  assert.equal(await c.countDocuments({}), 3 * 320, 'every insert applied exactly once');
}));
