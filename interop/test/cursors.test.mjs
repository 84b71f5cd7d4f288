// Cursors through the Node.js driver, as mongod ends and keeps them: a find
// batch that takes exactly the last documents leaves the cursor open and the
// driver's next getMore answers an empty batch with id 0; tailable cursors
// (dead on an empty capped collection, maxTimeMS on a getMore refused for a
// non-awaitData one, awaitData waking on an insert); change-stream expanded
// DDL events; failCommand data with errmsg (accepted, the message stays
// mongod's) driving a change stream's resume.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoServerError } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { recordingClient } from '../lib/events.mjs';

let sim, rec, db;
before(async () => {
  sim = await startSim({ members: 1 });
  rec = recordingClient(sim.uri);
  await rec.client.connect();
  db = rec.client.db('cursors');
});
after(async () => {
  await rec?.client.close();
  await sim?.stop();
});

const admin = () => rec.client.db('admin');
const succeeded = (name, since) => rec.of('commandSucceeded', since).filter(e => e.event.commandName === name).map(e => e.event.reply);

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

test('a batch filled exactly by the last documents: the next getMore is empty with id 0', withSimLog(() => sim, async () => {
  const c = db.collection('exact');
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }, { _id: 4 }]);
  let since = rec.mark();
  const all = await c.find({}, { batchSize: 2 }).toArray();
  assert.equal(all.length, 4);
  const [find] = succeeded('find', since);
  assert.equal(find.cursor.firstBatch.length, 2);
  assert.notEqual(Number(find.cursor.id), 0, 'find leaves a live cursor');
  const gets = succeeded('getMore', since);
  assert.deepEqual(gets.map(g => g.cursor.nextBatch.length), [2, 0], 'getMore batches');
  assert.notEqual(Number(gets[0].cursor.id), 0, 'the getMore that took the last documents leaves the cursor open');
  assert.equal(Number(gets[1].cursor.id), 0, 'the empty getMore closes it');

  // A limit the results reach: the last batch closes the cursor at once.
  since = rec.mark();
  assert.equal((await c.find({}, { batchSize: 2, limit: 4 }).toArray()).length, 4);
  assert.deepEqual(succeeded('getMore', since).map(g => [g.cursor.nextBatch.length, Number(g.cursor.id)]), [[2, 0]]);

  // aggregate is lazy as find is.
  since = rec.mark();
  assert.equal((await c.aggregate([], { batchSize: 2 }).toArray()).length, 4);
  assert.deepEqual(succeeded('getMore', since).map(g => g.cursor.nextBatch.length), [2, 0]);
}));

test('tailable cursors: dead on an empty capped collection, maxTimeMS only on awaitData getMores, awaitData wakes on an insert', withSimLog(() => sim, async () => {
  const capped = await db.createCollection('log', { capped: true, size: 1 << 20 });
  let since = rec.mark();
  const dead = capped.find({}, { tailable: true });
  assert.equal(await dead.tryNext(), null);
  const [first] = succeeded('find', since);
  assert.equal(Number(first.cursor.id), 0, 'a tailable find on an empty capped collection answers id 0');
  await dead.close();

  await capped.insertOne({ n: 1 });
  const plain = capped.find({}, { tailable: true, maxAwaitTimeMS: 100 });
  assert.equal((await plain.next()).n, 1);
  const err = await plain.tryNext().then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `getMore with maxTimeMS on a non-awaitData cursor: ${err}`);
  assert.equal(err.code, 2);
  assert.equal(err.message, 'cannot set maxTimeMS on getMore command for a non-awaitData cursor');
  await plain.close();

  const tail = capped.find({}, { tailable: true, awaitData: true, maxAwaitTimeMS: 2_000 });
  assert.equal((await tail.next()).n, 1);
  const waiting = tail.next();
  await capped.insertOne({ n: 2 });
  assert.equal((await waiting).n, 2, 'the awaitData getMore returns the inserted document');
  await tail.close();
}));

test('showExpandedEvents: createIndexes, modify, dropIndexes in mongod 8.0\'s shape', withSimLog(() => sim, async () => {
  const c = db.collection('ddl');
  await c.insertOne({ _id: 1 });
  const cs = c.watch([], { showExpandedEvents: true, maxAwaitTimeMS: 200 });
  assert.equal(await cs.tryNext(), null);
  await c.createIndex({ a: 1 });
  await db.command({ collMod: 'ddl', validationLevel: 'moderate' });
  await c.dropIndex('a_1');
  const created = await nextWithin(cs);
  assert.equal(created.operationType, 'createIndexes');
  assert.deepEqual(created.ns, { db: 'cursors', coll: 'ddl' });
  assert.ok(created.collectionUUID, 'collectionUUID');
  assert.deepEqual(created.operationDescription, { indexes: [{ v: 2, key: { a: 1 }, name: 'a_1' }] });
  const modify = await nextWithin(cs);
  assert.equal(modify.operationType, 'modify');
  assert.deepEqual(modify.operationDescription, { validationLevel: 'moderate' });
  assert.ok(modify.stateBeforeChange?.collectionOptions?.uuid, `stateBeforeChange (${JSON.stringify(modify)})`);
  const dropped = await nextWithin(cs);
  assert.equal(dropped.operationType, 'dropIndexes');
  assert.deepEqual(dropped.operationDescription, { indexes: [{ v: 2, key: { a: 1 }, name: 'a_1' }] });
  await cs.close();
}));

test('failCommand with errmsg: accepted, mongod\'s message, and a labelled getMore error resumes the stream', withSimLog(() => sim, async () => {
  const c = db.collection('fp');
  await admin().command({
    configureFailPoint: 'failCommand', mode: { times: 1 },
    data: { failCommands: ['find'], errorCode: 2, errmsg: 'an injected message' },
  });
  const err = await c.findOne({}).then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `find: ${err}`);
  assert.equal(err.code, 2);
  assert.equal(err.message, "Failing command via 'failCommand' failpoint");

  const cs = c.watch([], { maxAwaitTimeMS: 200 });
  assert.equal(await cs.tryNext(), null);
  await admin().command({
    configureFailPoint: 'failCommand', mode: { times: 1 },
    data: { failCommands: ['getMore'], errorCode: 10107, errmsg: 'not primary', errorLabels: ['ResumableChangeStreamError'] },
  });
  const since = rec.mark();
  await c.insertOne({ _id: 'after' });
  const ev = await nextWithin(cs);
  assert.equal(ev.operationType, 'insert');
  assert.equal(ev.documentKey._id, 'after');
  const failed = rec.of('commandFailed', since).filter(e => e.event.commandName === 'getMore');
  assert.equal(failed.length, 1, 'one getMore failed');
  const aggs = rec.of('commandStarted', since).filter(e => e.event.commandName === 'aggregate');
  assert.equal(aggs.length, 1, 'the driver resumed with a new aggregate');
  await cs.close();
}));
