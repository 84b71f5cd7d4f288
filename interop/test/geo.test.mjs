// Geospatial queries through the Node.js driver: a 2dsphere index and the
// write it refuses (16755), $geoWithin with a polygon with a hole,
// $geoIntersects, $near sorted by distance (291 without an index), and the
// $geoNear stage's distances in metres.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { startSim, withSimLog } from '../lib/sim.mjs';

let sim, client, db;
before(async () => {
  sim = await startSim({ members: 1 });
  client = new MongoClient(sim.uri);
  await client.connect();
  db = client.db('geo');
});
after(async () => {
  await client?.close();
  await sim?.stop();
});

const point = (lng, lat) => ({ type: 'Point', coordinates: [lng, lat] });

// Great-circle distance in metres on mongod's sphere (radius 6378.1 km).
function haversine([lng1, lat1], [lng2, lat2]) {
  const rad = Math.PI / 180;
  const a = Math.sin((lat2 - lat1) * rad / 2) ** 2 +
    Math.cos(lat1 * rad) * Math.cos(lat2 * rad) * Math.sin((lng2 - lng1) * rad / 2) ** 2;
  return 2 * 6378100 * Math.asin(Math.sqrt(a));
}

const cities = [
  { _id: 'paris', loc: point(2.3522, 48.8566) },
  { _id: 'london', loc: point(-0.1276, 51.5072) },
  { _id: 'berlin', loc: point(13.405, 52.52) },
  { _id: 'madrid', loc: point(-3.7038, 40.4168) },
];

test('2dsphere index: listIndexes version, invalid GeoJSON refused with 16755', withSimLog(() => sim, async () => {
  const c = db.collection('cities');
  await c.insertMany(cities);
  const near = { loc: { $near: { $geometry: point(2.35, 48.85) } } };
  const noIndex = await c.find(near).toArray().then(() => null, e => e);
  assert.ok(noIndex instanceof MongoServerError, `got ${noIndex}`);
  assert.equal(noIndex.code, 291);
  assert.match(noIndex.message, /unable to find index for \$geoNear query/);

  assert.equal(await c.createIndex({ loc: '2dsphere' }), 'loc_2dsphere');
  const spec = (await c.listIndexes().toArray()).find(ix => ix.name === 'loc_2dsphere');
  assert.equal(spec['2dsphereIndexVersion'], 3);

  const bad = await c.insertOne({ _id: 'nowhere', loc: point(190, 10) }).then(() => null, e => e);
  assert.ok(bad instanceof MongoServerError, `got ${bad}`);
  assert.equal(bad.code, 16755);
  assert.match(bad.message, /^Can't extract geo keys: \{ _id: "nowhere", .*Longitude\/latitude is out of bounds, lng: 190 lat: 10/);
  assert.equal(await c.countDocuments({ _id: 'nowhere' }), 0);
}));

test('$near sorts by distance, $maxDistance in metres', withSimLog(() => sim, async () => {
  const c = db.collection('cities');
  const all = await c.find({ loc: { $near: { $geometry: point(2.3522, 48.8566) } } }).toArray();
  assert.deepEqual(all.map(d => d._id), ['paris', 'london', 'berlin', 'madrid']);
  const within500km = await c.find({ loc: { $near: { $geometry: point(2.3522, 48.8566), $maxDistance: 500_000 } } }).toArray();
  assert.deepEqual(within500km.map(d => d._id), ['paris', 'london']);
  const count = await c.countDocuments({ loc: { $near: { $geometry: point(0, 0) } } }).then(() => null, e => e);
  assert.equal(count?.code, 5626500, `$near in count: ${count}`);
}));

test('$geoWithin with a polygon hole and $geoIntersects, no index needed', withSimLog(() => sim, async () => {
  const c = db.collection('shapes');
  await c.insertMany([
    { _id: 1, loc: point(1, 1) },
    { _id: 2, loc: point(5, 5) },
    { _id: 3, loc: [2, 8] },
    { _id: 4, loc: { type: 'LineString', coordinates: [[-5, 5], [2, 5]] } },
  ]);
  const square = [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]];
  const hole = [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]];
  const polygon = { type: 'Polygon', coordinates: [square, hole] };
  const within = await c.find({ loc: { $geoWithin: { $geometry: polygon } } }).sort({ _id: 1 }).toArray();
  assert.deepEqual(within.map(d => d._id), [1, 3]);
  const meets = await c.find({ loc: { $geoIntersects: { $geometry: polygon } } }).sort({ _id: 1 }).toArray();
  assert.deepEqual(meets.map(d => d._id), [1, 3, 4]);
  const cap = await c.find({ loc: { $geoWithin: { $centerSphere: [[1, 1], 0.001] } } }).toArray();
  assert.deepEqual(cap.map(d => d._id), [1]);
}));

test('$geoNear stage: distances in metres, includeLocs, query', withSimLog(() => sim, async () => {
  const c = db.collection('cities');
  const from = [2.3522, 48.8566];
  const out = await c.aggregate([
    { $geoNear: { near: point(...from), distanceField: 'dist', includeLocs: 'at', query: { _id: { $ne: 'paris' } } } },
  ]).toArray();
  assert.deepEqual(out.map(d => d._id), ['london', 'berlin', 'madrid']);
  for (const d of out) {
    const want = haversine(from, d.loc.coordinates);
    assert.ok(Math.abs(d.dist - want) < 1, `${d._id}: ${d.dist} m, want ${want}`);
    assert.deepEqual(d.at, d.loc);
  }
}));
