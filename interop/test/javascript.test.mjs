// Server-side JavaScript as the Node.js driver uses it: $where in find
// (string, function code, code with scope), the $where sleep drivers' own
// timeout tests hold a connection with, $function, mapReduce, and a sim
// started with -noscripting answering as mongod --noscripting does.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Code, MongoServerError } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { MongoClient } from 'mongodb';

let sim, client, db;
before(async () => {
  sim = await startSim({ members: 1 });
  client = new MongoClient(sim.uri);
  await client.connect();
  db = client.db('js');
  await db.collection('w').insertMany([{ _id: 1, a: 1, b: 1 }, { _id: 2, a: 2, b: 3 }, { _id: 3, a: 3, b: 3 }]);
});
after(async () => {
  await client?.close();
  await sim?.stop();
});

const ids = async filter => (await db.collection('w').find(filter).sort({ _id: 1 }).toArray()).map(d => d._id);

test('$where as a string, a function, Code and Code with scope', withSimLog(() => sim, async () => {
  assert.deepEqual(await ids({ $where: 'this.a == this.b' }), [1, 3]);
  assert.deepEqual(await ids({ $where: 'return obj.a > 1' }), [2, 3]);
  assert.deepEqual(await ids({ $where: new Code('function() { return this.b == 3 && this._id != 3; }') }), [2]);
  assert.deepEqual(await ids({ $where: new Code('function() { return this.a == want; }', { want: 3 }) }), [3]);
  assert.deepEqual(await ids({ $where: 'false' }), []);
  assert.deepEqual(await ids({ _id: { $gt: 1 }, $where: 'function() { sleep(1); return true; }' }), [2, 3]);
}));

test('a script error is JSInterpreterFailure (139) naming the JavaScript error', withSimLog(() => sim, async () => {
  const err = await ids({ $where: 'function myFunction() { return a(); }' }).then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `got ${err}`);
  assert.equal(err.code, 139);
  assert.equal(err.codeName, 'JSInterpreterFailure');
  assert.match(err.message, /ReferenceError/);
}));

test('$where sleep ends with MaxTimeMSExpired (50) and holds only its own operation', withSimLog(() => sim, async () => {
  const started = Date.now();
  const slow = db.collection('w').find({ $where: 'function() { sleep(60000); return true; }' }, { maxTimeMS: 300 }).toArray()
    .then(() => null, e => e);
  // While the find sleeps, the member answers others: wait until the find
  // shows in currentOp, then ping and read.
  for (;;) {
    const { inprog } = await client.db('admin').command({ currentOp: 1, 'command.filter.$where': { $exists: true } });
    if (inprog.length > 0) break;
    await new Promise(r => setTimeout(r, 5)); // polling interval
  }
  assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
  assert.equal(await db.collection('w').countDocuments({}), 3);
  const err = await slow;
  assert.ok(err instanceof MongoServerError, `got ${err}`);
  assert.equal(err.code, 50);
  assert.equal(err.codeName, 'MaxTimeMSExpired');
  assert.ok(Date.now() - started >= 300, 'the sleep lasted until maxTimeMS');
}));

test('$function and mapReduce', withSimLog(() => sim, async () => {
  const [doc] = await db.collection('w').aggregate([
    { $match: { _id: 2 } },
    { $project: { _id: 0, s: { $function: { body: 'function(a, b) { return a + b; }', args: ['$a', '$b'], lang: 'js' } } } },
  ]).toArray();
  assert.deepEqual(doc, { s: 5 });
  const res = await db.command({
    mapReduce: 'w', map: 'function() { emit(this.b, this.a); }', reduce: 'function(k, vs) { return Array.sum(vs); }',
    out: { inline: 1 },
  });
  assert.deepEqual(res.results, [{ _id: 1, value: 1 }, { _id: 3, value: 5 }]);
}));

test('-noscripting: $where answers as mongod with scripting disabled', async () => {
  const off = await startSim({ members: 1, args: ['-noscripting'] });
  const c = new MongoClient(off.uri);
  try {
    await c.connect();
    const coll = c.db('js').collection('w');
    await coll.insertOne({ _id: 1 });
    const err = await coll.find({ $where: 'true' }).toArray().then(() => null, e => e);
    assert.ok(err instanceof MongoServerError, `got ${err}`);
    assert.equal(err.code, 6108304);
    assert.equal(err.message, 'no globalScriptEngine in $where parsing');
  } finally {
    await c.close();
    await off.stop();
  }
});
