// replSetStepDown while writers are busy, with the driver's default
// (streaming) monitoring: every write succeeds, the ones sent after the
// step-down land on the new primary, nothing is applied twice, and no pool
// is cleared (for 4.2+ servers a not-primary error does not clear a pool).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSim, withSimLog } from '../lib/sim.mjs';
import { recordingClient, waitFor, describe } from '../lib/events.mjs';

let sim, rec;
before(async () => {
  sim = await startSim({ members: 3 });
  rec = recordingClient(sim.uri, { appName: 'interop-stepdown' });
  await rec.client.connect();
});
after(async () => {
  await rec?.client.close();
  await sim?.stop();
});

const primaryOf = async () => (await rec.client.db('admin').command({ hello: 1 })).primary;

test('writes succeed through two step-downs under load', withSimLog(() => sim, async t => {
  const coll = rec.client.db('sd').collection('load');
  const since = rec.mark();
  const failures = [];
  let next = 0;
  let acked = 0;
  let stop = false;
  let maxLatency = 0;
  const writer = async () => {
    while (!stop) {
      const t0 = Date.now();
      try {
        await coll.insertOne({ _id: next++ });
        acked++;
      } catch (err) {
        failures.push(err);
      }
      maxLatency = Math.max(maxLatency, Date.now() - t0);
    }
  };
  const writers = Array.from({ length: 6 }, writer);

  const stepDowns = [];
  try {
    for (let round = 0; round < 2; round++) {
      await waitFor('500 more acknowledged writes', () => acked >= (round + 1) * 500, 20_000);
      const old = await primaryOf();
      // The step-down period (60 s, longer than the whole test even on a
      // loaded machine) keeps the old primary ineligible, so the second
      // round elects the third member.
      const r = await rec.client.db('admin').command({ replSetStepDown: 60, secondaryCatchUpPeriodSecs: 5 });
      assert.equal(r.ok, 1);
      // From here on the old primary has stepped down: every insert sent
      // after this point must succeed elsewhere.
      const mark = rec.mark();
      const elected = await waitFor('a new primary', async () => {
        const p = await primaryOf();
        return p && p !== old ? p : null;
      }, 15_000);
      stepDowns.push({ old, elected, mark });
      const base = acked;
      await waitFor('200 writes on the new primary', () => acked >= base + 200, 15_000);
    }
  } finally {
    stop = true;
    await Promise.all(writers);
  }

  assert.deepEqual(failures.map(String), [], 'every write succeeded');
  assert.notEqual(stepDowns[1].elected, stepDowns[0].old, 'the member that stepped down stays ineligible');

  // Inserts sent after a step-down's reply all succeeded on its new primary,
  // none on the member that stepped down.
  for (const [i, { old, elected, mark }] of stepDowns.entries()) {
    const endMark = stepDowns[i + 1]?.mark ?? rec.events.length;
    const startedAfter = new Set(rec.events.slice(mark, endMark)
      .filter(e => e.name === 'commandStarted' && e.event.commandName === 'insert')
      .map(e => e.event.requestId));
    const oks = rec.of('commandSucceeded', mark).filter(e => startedAfter.has(e.event.requestId));
    assert.ok(oks.length > 0, `round ${i}: inserts succeeded after the step-down`);
    const wrong = oks.filter(e => e.event.address !== elected);
    assert.equal(wrong.length, 0, `round ${i}: inserts sent after stepping down ${old} succeeded on ${elected} only, not ${[...new Set(wrong.map(e => e.event.address))]}`);
  }

  const cleared = rec.of('connectionPoolCleared', since);
  assert.deepEqual(cleared.map(describe), [], 'no pool was cleared');
  assert.equal(await coll.countDocuments({}), acked, 'every acknowledged write applied exactly once');
  const retries = rec.of('commandFailed', since).filter(e => e.event.commandName === 'insert');
  t.diagnostic(`step-down: ${acked} writes, ${retries.length} retried attempts (${[...new Set(retries.map(e => e.event.failure.codeName ?? e.event.failure.name))]}), max write latency ${maxLatency} ms`);
}));
