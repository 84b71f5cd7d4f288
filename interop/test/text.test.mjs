// Text search as the Node.js driver sees it: a text index as listIndexes
// reports it, $text queries with stemming, phrases and negations, and
// textScore values in mongod's formula in find and aggregate.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';

let sim, client, coll;
before(async () => {
  sim = await startSim({ members: 1 });
  client = new MongoClient(sim.uri);
  await client.connect();
  coll = client.db('text').collection('articles');
  await coll.createIndex({ title: 'text', body: 'text' }, { weights: { title: 3 } });
  await coll.insertMany([
    { _id: 1, title: 'Coffee', body: 'I like coffee and tea' },
    { _id: 2, title: 'Tea time', body: 'coffee coffee coffee' },
    { _id: 3, title: 'Tea', body: 'black tea, green tea and a biscuit' },
    { _id: 4, title: 'Espresso', body: 'espresso is coffee' },
  ]);
});
after(async () => {
  await client?.close();
  await sim?.stop();
});

// mongod's score of one term in one string: weight × (1 + 1/2 + … per
// repeat) × (0.5 + 0.5 × count / tokens) × (1.1 if the term is the whole string).
function termScore(weight, count, tokens, whole = false) {
  let freq = 0, exp = 0;
  for (let i = 0; i < count; i++) { exp = exp === 0 ? 1 : exp * 2; freq += 1 / exp; }
  return weight * freq * (0.5 * count / tokens + 0.5) * (whole ? 1.1 : 1);
}

test('the text index as listIndexes reports it', withSimLog(() => sim, async () => {
  const ix = (await coll.listIndexes().toArray()).find(i => i.name === 'title_text_body_text');
  assert.ok(ix, 'index title_text_body_text');
  assert.deepEqual(ix.key, { _fts: 'text', _ftsx: 1 });
  assert.deepEqual(ix.weights, { body: 1, title: 3 });
  assert.equal(ix.default_language, 'english');
  assert.equal(ix.language_override, 'language');
  assert.equal(ix.textIndexVersion, 3);
  const err = await coll.createIndex({ other: 'text' }).then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `got ${err}`);
  assert.equal(err.code, 85);
}));

test('textScore values and order match mongod\'s formula', withSimLog(() => sim, async () => {
  const docs = await coll.find({ $text: { $search: 'coffees' } })
    .project({ score: { $meta: 'textScore' } })
    .sort({ score: { $meta: 'textScore' } })
    .toArray();
  assert.deepEqual(docs, [
    { _id: 1, title: 'Coffee', body: 'I like coffee and tea', score: termScore(3, 1, 1) + termScore(1, 1, 3) },
    { _id: 2, title: 'Tea time', body: 'coffee coffee coffee', score: termScore(1, 3, 3) },
    { _id: 4, title: 'Espresso', body: 'espresso is coffee', score: termScore(1, 1, 2) },
  ]);
  const tea = await coll.find({ $text: { $search: 'TEA' } }, { projection: { _id: 1, s: { $meta: 'textScore' } } })
    .sort({ s: { $meta: 'textScore' } }).toArray();
  assert.deepEqual(tea, [
    { _id: 3, s: termScore(3, 1, 1, true) + termScore(1, 2, 5) },
    { _id: 2, s: termScore(3, 1, 2) },
    { _id: 1, s: termScore(1, 1, 3) },
  ]);
}));

test('phrases, negations and stop words', withSimLog(() => sim, async () => {
  const ids = async search => (await coll.find({ $text: { $search: search } }).sort({ _id: 1 }).toArray()).map(d => d._id);
  assert.deepEqual(await ids('"green tea"'), [3]);
  assert.deepEqual(await ids('coffee -espresso'), [1, 2]);
  assert.deepEqual(await ids('coffee -"tea time"'), [1, 4]);
  assert.deepEqual(await ids('the and is'), []);
}));

test('$text and textScore in an aggregation', withSimLog(() => sim, async () => {
  const out = await coll.aggregate([
    { $match: { $text: { $search: 'espresso' } } },
    { $project: { title: 1, score: { $meta: 'textScore' } } },
  ]).toArray();
  // "Espresso" is the whole title: × 1.1; body: espresso coffe.
  assert.deepEqual(out, [{ _id: 4, title: 'Espresso', score: termScore(3, 1, 1, true) + termScore(1, 1, 2) }]);
  const err = await coll.aggregate([{ $match: {} }, { $match: { $text: { $search: 'tea' } } }]).toArray().then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `got ${err}`);
  assert.equal(err.code, 17313);
}));

test('$text errors: no text index, two $text', withSimLog(() => sim, async () => {
  const plain = client.db('text').collection('plain');
  await plain.insertOne({ a: 'coffee' });
  let err = await plain.find({ $text: { $search: 'coffee' } }).toArray().then(() => null, e => e);
  assert.ok(err instanceof MongoServerError, `got ${err}`);
  assert.equal(err.code, 27);
  assert.equal(err.codeName, 'IndexNotFound');
  assert.equal(err.message, 'text index required for $text query');
  err = await coll.find({ $and: [{ $text: { $search: 'a' } }, { $text: { $search: 'b' } }] }).toArray().then(() => null, e => e);
  assert.equal(err?.code, 2);
  assert.equal(err.message, 'Too many text expressions');
}));
