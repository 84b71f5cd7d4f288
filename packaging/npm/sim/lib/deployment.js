'use strict';
// What every deployment class shares: one `sturdy sim` child, its ready
// line, and the fault helpers, which send mongosim the same admin commands
// a test would send mongod (configureFailPoint, replSetStepDown,
// setParameter).

const { EventEmitter } = require('node:events');
const { SimProcess } = require('./process');
const { command } = require('./wire');

class Deployment extends EventEmitter {
  constructor() {
    super();
    this._sim = undefined;
    this._flags = undefined;
  }

  /** Starts the child; the subclass supplies the flags. */
  async _launch(flags) {
    this._flags = flags;
    const sim = new SimProcess(flags.argv);
    this._sim = sim;
    return sim.start({ timeoutMS: flags.timeoutMS ?? 20000 });
  }

  async _halt() {
    const sim = this._sim;
    if (sim) await sim.stop();
  }

  _ready() {
    if (!this._sim?.ready || !this._sim.running) throw new Error('@sturdy-go/sim: the deployment is not running');
    return this._sim.ready;
  }

  _noAuth(helper) {
    if (this._flags?.user) {
      throw new Error(`@sturdy-go/sim: ${helper}() sends unauthenticated admin commands and does not work with auth enabled`);
    }
  }

  /** The replica sets: one, or each shard of a sharded cluster. */
  _sets() {
    const r = this._ready();
    return r.shards?.length ? r.shards : [{ members: r.members, primary: r.primary }];
  }

  /** Asks each member of set which is primary; waits for one. */
  async _primaryOf(set, timeoutMS = 10000) {
    const deadline = Date.now() + timeoutMS;
    for (;;) {
      for (const m of set.members) {
        try {
          const hello = await command(m, 'admin', { hello: 1 });
          if (hello.isWritablePrimary) return m;
        } catch { /* try the next member */ }
      }
      if (Date.now() > deadline) throw new Error(`@sturdy-go/sim: no primary among ${set.members.join(', ')} after ${timeoutMS} ms`);
      await new Promise(res => setTimeout(res, 10));
    }
  }

  /** Where clients' commands arrive: the routers, else the primary. */
  async _entryPoints() {
    const r = this._ready();
    if (r.routers?.length) return r.routers;
    return [await this._primaryOf(this._sets()[0])];
  }

  /**
   * Makes the next commands fail as the failCommand fail point says:
   * data is its data document ({failCommands: ['insert'], errorCode: 91,
   * closeConnection, errorLabels, blockConnection, blockTimeMS, ...}),
   * mode {times: n}, 'alwaysOn', {skip: n} or 'off'. It is set where
   * clients' commands arrive: every router of a sharded cluster, else the
   * current primary.
   */
  async failCommand(data, mode = { times: 1 }) {
    this._noAuth('failCommand');
    if (!data || !Array.isArray(data.failCommands)) throw new TypeError('failCommand(data): data.failCommands must be an array of command names');
    for (const host of await this._entryPoints()) {
      await command(host, 'admin', { configureFailPoint: 'failCommand', mode, data });
    }
  }

  /** Turns the failCommand fail point off again. */
  async clearFailCommand() {
    this._noAuth('clearFailCommand');
    for (const host of await this._entryPoints()) {
      await command(host, 'admin', { configureFailPoint: 'failCommand', mode: 'off' });
    }
  }

  /**
   * Steps the primary down (replSetStepDown with force) and waits until
   * another member is primary; resolves with its address. The old primary
   * cannot be elected again for stepDownSecs (default 1). shard picks the
   * replica set of a sharded cluster.
   */
  async stepDown({ stepDownSecs = 1, shard = 0, timeoutMS = 10000 } = {}) {
    this._noAuth('stepDown');
    const set = this._sets()[shard];
    if (!set) throw new RangeError(`stepDown: no shard ${shard}`);
    if (!this._ready().replicaSet) throw new Error('stepDown: a standalone server has no replica set to step down');
    const old = await this._primaryOf(set, timeoutMS);
    await command(old, 'admin', { replSetStepDown: stepDownSecs, secondaryCatchUpPeriodSecs: 0, force: true });
    return this._primaryOf(set, timeoutMS + stepDownSecs * 1000);
  }

  /**
   * Simulates overload: every member admits requestsPerSecond (with burst
   * requests of capacity) and answers the rest with error 462
   * SystemOverloadedError, as MongoDB's ingress admission control does.
   * overload(false) turns it off.
   */
  async overload(opts) {
    this._noAuth('overload');
    const on = opts !== false && opts !== undefined && opts !== null;
    const cmd = { setParameter: 1, ingressRequestRateLimiterEnabled: on };
    if (on) {
      const rps = opts.requestsPerSecond ?? 0;
      if (!(rps > 0)) throw new RangeError('overload({requestsPerSecond}) needs a positive rate');
      cmd.ingressRequestAdmissionRatePerSec = rps;
      if (opts.burst !== undefined) cmd.ingressRequestRateLimiterBurstCapacity = opts.burst;
      if (opts.baseBackoffMS !== undefined) cmd.externalClientBaseBackoffMS = opts.baseBackoffMS;
    }
    for (const set of this._sets()) {
      for (const m of set.members) await command(m, 'admin', cmd);
    }
  }

  // `await using server = await MongoMemoryServer.create()` stops it at the
  // end of the block unless dispose.enabled is false, as in
  // mongodb-memory-server.
  async [Symbol.asyncDispose]() {
    const dispose = this.opts?.dispose ?? this.opts?.replSet?.dispose;
    if (dispose?.enabled === false) return;
    await this.stop(dispose?.cleanup);
  }
}

/** host:port of an address, with ip replaced when the caller asks. */
function hostPort(addr, otherIp) {
  const port = addr.slice(addr.lastIndexOf(':') + 1);
  const ip = otherIp ?? addr.slice(0, addr.lastIndexOf(':'));
  return `${ip === '0.0.0.0' || ip === '[::]' ? '127.0.0.1' : ip}:${port}`;
}

module.exports = { Deployment, hostPort };
