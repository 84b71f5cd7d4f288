// Recording the driver's monitoring events (SDAM, CMAP, command) so tests
// can assert on what the driver saw, not just on what an operation returned.

import { MongoClient } from 'mongodb';
import { setTimeout as sleep } from 'node:timers/promises';

const sdam = [
  'serverOpening', 'serverClosed', 'serverDescriptionChanged', 'topologyDescriptionChanged',
  'serverHeartbeatStarted', 'serverHeartbeatSucceeded', 'serverHeartbeatFailed',
];
const cmap = [
  'connectionPoolCreated', 'connectionPoolReady', 'connectionPoolCleared', 'connectionPoolClosed',
  'connectionCreated', 'connectionReady', 'connectionClosed',
  'connectionCheckOutStarted', 'connectionCheckOutFailed', 'connectionCheckedOut', 'connectionCheckedIn',
];
const command = ['commandStarted', 'commandSucceeded', 'commandFailed'];

/**
 * A MongoClient whose events are recorded, in order, in `events` as
 * {name, at, event} (at: Date.now() when it was emitted).
 * monitorCommands is on unless the caller says otherwise.
 */
export function recordingClient(uri, options = {}) {
  const client = new MongoClient(uri, { monitorCommands: true, ...options });
  const events = [];
  for (const name of [...sdam, ...cmap, ...command]) {
    client.on(name, event => events.push({ name, at: Date.now(), event }));
  }
  return {
    client,
    events,
    /** A position in the event log, for of(name, mark) later. */
    mark: () => events.length,
    /** Events called name recorded at or after mark. */
    of: (name, mark = 0) => events.slice(mark).filter(e => e.name === name),
  };
}

/** Polls pred every 50 ms until it returns a truthy value or timeoutMS passes. */
export async function waitFor(what, pred, timeoutMS = 10_000) {
  const deadline = Date.now() + timeoutMS;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMS} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** A short, readable line for an event (for assertion messages). */
export function describe(e) {
  const ev = e.event;
  const bits = [e.name];
  if (ev.address) bits.push(ev.address);
  if (ev.reason) bits.push(`reason=${ev.reason}`);
  if (ev.failure) bits.push(`failure=${ev.failure.message ?? ev.failure}`);
  if (ev.newDescription) bits.push(`${ev.previousDescription?.type}->${ev.newDescription.type}${ev.newDescription.error ? ` error=${ev.newDescription.error.message}` : ''}`);
  if (ev.commandName) bits.push(ev.commandName);
  return bits.join(' ');
}
