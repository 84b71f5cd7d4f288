// The driver's default server monitoring (streaming: awaitable hello with
// exhaustAllowed, replies streamed with moreToCome) against a 3-member set,
// idle for 20 s and then busy for 20 s. As with mongod: every heartbeat
// succeeds, the awaited replies come once per maxAwaitTimeMS (not in a busy
// loop), no member ever turns Unknown, and no pool is ever cleared.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { recordingClient, describe } from '../lib/events.mjs';

const PHASE_MS = 20_000;
const HEARTBEAT_MS = 10_000; // the driver's default heartbeatFrequencyMS, stated for the arithmetic below

let sim, rec;
before(async () => {
  sim = await startSim({ members: 3 });
  // Default options apart from the app name: serverMonitoringMode 'auto' is
  // streaming outside FaaS environments.
  rec = recordingClient(sim.uri, { appName: 'interop-monitoring' });
  await rec.client.connect();
  await rec.client.db('admin').command({ ping: 1 });
});
after(async () => {
  await rec?.client.close();
  await sim?.stop();
});

// What must hold in any window: nothing failed, nothing turned Unknown,
// no pool was cleared and no connection closed.
function assertQuiet(mark, phase) {
  const bad = [
    ...rec.of('serverHeartbeatFailed', mark),
    ...rec.of('connectionPoolCleared', mark),
    ...rec.of('connectionClosed', mark),
    ...rec.of('serverDescriptionChanged', mark).filter(e => e.event.newDescription.type === 'Unknown'),
  ];
  assert.deepEqual(bad.map(describe), [], `${phase}: no failed heartbeat, Unknown member, pool clear or closed connection`);
}

// Streaming in use on every member: awaited heartbeats arrive, but about
// once per maxAwaitTimeMS rather than as fast as the server can answer.
function assertStreamed(mark, phase) {
  const awaited = rec.of('serverHeartbeatSucceeded', mark).filter(e => e.event.awaited);
  for (const host of sim.hosts) {
    const n = awaited.filter(e => e.event.connectionId === host).length;
    assert.ok(n >= 1, `${phase}: ${host} sent awaited (streamed) heartbeats (got ${n})`);
    assert.ok(n <= Math.ceil(PHASE_MS / HEARTBEAT_MS) + 2, `${phase}: ${host} streamed ${n} heartbeats in ${PHASE_MS} ms; expected about one per ${HEARTBEAT_MS} ms`);
  }
}

test('idle for 20 s: streamed heartbeats, nothing cleared', withSimLog(() => sim, async () => {
  const mark = rec.mark();
  await sleep(PHASE_MS); // the test is the passage of time itself
  assertQuiet(mark, 'idle');
  assertStreamed(mark, 'idle');
}));

test('busy for 20 s: every operation succeeds, pools only grow', withSimLog(() => sim, async t => {
  const mark = rec.mark();
  const coll = rec.client.db('mon').collection('busy');
  const deadline = Date.now() + PHASE_MS;
  const latencies = [];
  const failures = [];
  let id = 0;
  const worker = async (w) => {
    while (Date.now() < deadline) {
      const t0 = Date.now();
      try {
        const _id = id++;
        await coll.insertOne({ _id, w });
        await coll.updateOne({ _id }, { $inc: { n: 1 } });
        // Half the readers use secondaries so every member's pool is busy.
        await coll.findOne({ _id: { $lte: _id } }, { readPreference: w % 2 ? 'secondaryPreferred' : 'primary' });
      } catch (err) {
        failures.push(err);
      }
      latencies.push(Date.now() - t0);
    }
  };
  const WORKERS = 8;
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));

  assert.deepEqual(failures.map(String).slice(0, 5), [], `every operation succeeded (${failures.length} failed)`);
  assertQuiet(mark, 'busy');
  assertStreamed(mark, 'busy');
  const created = rec.of('connectionCreated', mark);
  for (const host of sim.hosts) {
    const n = created.filter(e => e.event.address === host).length;
    assert.ok(n <= WORKERS, `${host}: ${n} connections created for ${WORKERS} workers; a pool never cleared needs no more`);
  }
  latencies.sort((a, b) => a - b);
  const pct = p => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))];
  t.diagnostic(`busy: ${latencies.length} iterations (insert+update+find), latency p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms, max ${latencies.at(-1)} ms; ${created.length} connections created`);
}));
