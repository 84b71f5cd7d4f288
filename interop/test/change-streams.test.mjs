// Change streams through the Node.js driver: event shapes for insert,
// update (dotted updatedFields, removedFields, truncatedArrays), replace and
// delete; resuming with resumeAfter and startAtOperationTime; an automatic
// resume after the server closes the connection; drop, rename and
// dropDatabase followed by invalidate, and startAfter past an invalidate.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Timestamp } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { recordingClient } from '../lib/events.mjs';

let sim, rec, db;
before(async () => {
  sim = await startSim({ members: 3 });
  rec = recordingClient(sim.uri);
  await rec.client.connect();
  db = rec.client.db('cs');
});
after(async () => {
  await rec?.client.close();
  await sim?.stop();
});

// Opens a stream and makes sure its aggregate has run (watch is lazy), so
// writes that follow are seen.
async function open(target, pipeline = [], options = {}) {
  const cs = target.watch(pipeline, { maxAwaitTimeMS: 200, ...options });
  assert.equal(await cs.tryNext(), null, 'a new stream has nothing yet');
  return cs;
}

async function nextWithin(cs, ms = 5_000) {
  let timer;
  try {
    return await Promise.race([
      cs.next(),
      new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`no change event within ${ms} ms`)), ms); }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function assertCommon(ev, op, coll) {
  assert.equal(ev.operationType, op, `operationType (${JSON.stringify(ev)})`);
  assert.ok(ev._id?._data, 'resume token {_data}');
  assert.ok(ev.clusterTime instanceof Timestamp, 'clusterTime is a Timestamp');
  assert.ok(ev.wallTime instanceof Date, 'wallTime is a Date');
  if (coll) assert.deepEqual(ev.ns, { db: 'cs', coll });
}

// After invalidate the server closes the cursor; the stream is finished.
async function assertClosedAfterInvalidate(cs) {
  const more = await cs.tryNext().then(v => v, e => e);
  assert.ok(more === null || more instanceof Error, `nothing after invalidate (${JSON.stringify(more)})`);
  assert.equal(cs.closed, true, 'the stream is closed after invalidate');
}

test('insert, update, replace and delete events have mongod\'s shape', withSimLog(() => sim, async () => {
  const coll = db.collection('crud');
  const cs = await open(coll);
  try {
    await coll.insertOne({ _id: 1, a: { b: 1 }, arr: [1, 2, 3, 4], x: 'gone soon' });
    let ev = await nextWithin(cs);
    assertCommon(ev, 'insert', 'crud');
    assert.deepEqual(ev.documentKey, { _id: 1 });
    assert.deepEqual(ev.fullDocument, { _id: 1, a: { b: 1 }, arr: [1, 2, 3, 4], x: 'gone soon' });

    await coll.updateOne({ _id: 1 }, { $set: { 'a.b': 2, 'arr.1': 20 }, $unset: { x: '' } });
    ev = await nextWithin(cs);
    assertCommon(ev, 'update', 'crud');
    assert.deepEqual(ev.documentKey, { _id: 1 });
    assert.equal(ev.fullDocument, undefined, 'no fullDocument without updateLookup');
    assert.deepEqual(ev.updateDescription.updatedFields, { 'a.b': 2, 'arr.1': 20 });
    assert.deepEqual(ev.updateDescription.removedFields, ['x']);
    assert.deepEqual(ev.updateDescription.truncatedArrays, []);

    await coll.updateOne({ _id: 1 }, { $pop: { arr: 1 } });
    ev = await nextWithin(cs);
    assertCommon(ev, 'update', 'crud');
    assert.deepEqual(ev.updateDescription.truncatedArrays, [{ field: 'arr', newSize: 3 }]);
    assert.deepEqual(ev.updateDescription.updatedFields, {});

    await coll.replaceOne({ _id: 1 }, { y: 1 });
    ev = await nextWithin(cs);
    assertCommon(ev, 'replace', 'crud');
    assert.deepEqual(ev.fullDocument, { _id: 1, y: 1 });

    await coll.deleteOne({ _id: 1 });
    ev = await nextWithin(cs);
    assertCommon(ev, 'delete', 'crud');
    assert.deepEqual(ev.documentKey, { _id: 1 });
    assert.equal(ev.fullDocument, undefined);
  } finally {
    await cs.close();
  }
}));

test('fullDocument: updateLookup and a $match pipeline', withSimLog(() => sim, async () => {
  const coll = db.collection('lookup');
  const cs = await open(coll, [{ $match: { operationType: 'update' } }], { fullDocument: 'updateLookup' });
  try {
    await coll.insertOne({ _id: 'k', n: 1 });
    await coll.updateOne({ _id: 'k' }, { $inc: { n: 1 } });
    const ev = await nextWithin(cs);
    assertCommon(ev, 'update', 'lookup');
    assert.deepEqual(ev.fullDocument, { _id: 'k', n: 2 });
    assert.deepEqual(ev.updateDescription.updatedFields, { n: 2 });
  } finally {
    await cs.close();
  }
}));

test('resumeAfter and startAtOperationTime replay what followed', withSimLog(() => sim, async () => {
  const coll = db.collection('resume');
  const cs = await open(coll);
  let first;
  try {
    await coll.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
    first = await nextWithin(cs);
    assert.deepEqual(first.documentKey, { _id: 1 });
  } finally {
    await cs.close();
  }
  const resumed = coll.watch([], { resumeAfter: first._id });
  try {
    assert.deepEqual((await nextWithin(resumed)).documentKey, { _id: 2 });
    assert.deepEqual((await nextWithin(resumed)).documentKey, { _id: 3 });
  } finally {
    await resumed.close();
  }
  const at = coll.watch([], { startAtOperationTime: first.clusterTime });
  try {
    // startAtOperationTime is inclusive: the event at that time comes first.
    assert.deepEqual((await nextWithin(at)).documentKey, { _id: 1 });
  } finally {
    await at.close();
  }
}));

test('a closed connection during getMore: the driver resumes without losing events', withSimLog(() => sim, async () => {
  const coll = db.collection('netresume');
  const cs = await open(coll);
  const since = rec.mark();
  try {
    await rec.client.db('admin').command({
      configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['getMore'], closeConnection: true },
    });
    await coll.insertMany([{ _id: 1 }, { _id: 2 }]);
    assert.deepEqual((await nextWithin(cs)).documentKey, { _id: 1 });
    assert.deepEqual((await nextWithin(cs)).documentKey, { _id: 2 });
    const aggs = rec.of('commandStarted', since).filter(e => e.event.commandName === 'aggregate');
    assert.equal(aggs.length, 1, 'the stream was re-opened once');
    const stage = aggs[0].event.command.pipeline[0].$changeStream;
    assert.ok(stage.resumeAfter || stage.startAtOperationTime, `re-opened from where it was (${JSON.stringify(stage)})`);
  } finally {
    await rec.client.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await cs.close();
  }
}));

test('drop emits drop then invalidate, and startAfter resumes past the invalidate', withSimLog(() => sim, async () => {
  const coll = db.collection('dropme');
  await coll.insertOne({ _id: 0 });
  const cs = await open(coll);
  let invalidate;
  try {
    await coll.insertOne({ _id: 1 });
    assertCommon(await nextWithin(cs), 'insert', 'dropme');
    await coll.drop();
    const drop = await nextWithin(cs);
    assertCommon(drop, 'drop', 'dropme');
    invalidate = await nextWithin(cs);
    assertCommon(invalidate, 'invalidate');
    assert.ok(invalidate.clusterTime.equals(drop.clusterTime), 'invalidate has the drop\'s clusterTime');
    await assertClosedAfterInvalidate(cs);
  } finally {
    await cs.close();
  }
  // resumeAfter an invalidate token is refused; startAfter is how to go on.
  const resumeErr = await open(coll, [], { resumeAfter: invalidate._id }).then(() => null, e => e);
  assert.ok(resumeErr, 'resumeAfter an invalidate token fails');
  assert.equal(resumeErr.code, 260, `InvalidResumeToken (${resumeErr})`);
  assert.match(resumeErr.message, /Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification/);
  const again = await open(coll, [], { startAfter: invalidate._id });
  try {
    await coll.insertOne({ _id: 'reborn' });
    const ev = await nextWithin(again);
    assertCommon(ev, 'insert', 'dropme');
    assert.deepEqual(ev.documentKey, { _id: 'reborn' });
  } finally {
    await again.close();
  }
}));

test('rename emits rename (with to) then invalidate', withSimLog(() => sim, async () => {
  const coll = db.collection('renameme');
  await coll.insertOne({ _id: 0 });
  const cs = await open(coll);
  try {
    await coll.rename('renamed');
    const ev = await nextWithin(cs);
    assertCommon(ev, 'rename', 'renameme');
    assert.deepEqual(ev.to, { db: 'cs', coll: 'renamed' });
    assertCommon(await nextWithin(cs), 'invalidate');
    await assertClosedAfterInvalidate(cs);
  } finally {
    await cs.close();
  }
}));

test('dropDatabase on a database stream: drop per collection, dropDatabase, invalidate', withSimLog(() => sim, async () => {
  const other = rec.client.db('cs_dropdb');
  await other.collection('a').insertOne({ _id: 1 });
  const cs = await open(other);
  try {
    await other.dropDatabase();
    const drop = await nextWithin(cs);
    assert.equal(drop.operationType, 'drop', JSON.stringify(drop));
    assert.deepEqual(drop.ns, { db: 'cs_dropdb', coll: 'a' });
    const dd = await nextWithin(cs);
    assert.equal(dd.operationType, 'dropDatabase', JSON.stringify(dd));
    assert.deepEqual(dd.ns, { db: 'cs_dropdb' });
    assert.equal((await nextWithin(cs)).operationType, 'invalidate');
    await assertClosedAfterInvalidate(cs);
  } finally {
    await cs.close();
  }
}));
