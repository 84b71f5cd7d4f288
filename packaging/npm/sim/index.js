'use strict';
// @sturdy-go/sim: mongodb-memory-server's API on mongosim, the in-memory
// MongoDB-compatible server of github.com/sturdy-go/sturdy. No mongod
// download: the `sturdy` binary comes in a platform package.

const { Deployment, hostPort } = require('./lib/deployment');
const { serverFlags, replSetFlags, shardedFlags } = require('./lib/options');
const { binaryPath } = require('./lib/binary');
const { CommandError } = require('./lib/wire');

const MongoMemoryServerStates = Object.freeze({ new: 'new', starting: 'starting', running: 'running', stopped: 'stopped' });
const MongoMemoryReplSetStates = Object.freeze({ init: 'init', running: 'running', stopped: 'stopped' });

function stateError(want, have) {
  return new Error(`Incorrect State for operation: "${have}", allowed States: "[${want.join(',')}]"`);
}

class MongoMemoryServer extends Deployment {
  constructor(opts = {}) {
    super();
    this.opts = { ...opts };
    this._state = MongoMemoryServerStates.new;
    this._instanceInfo = undefined;
  }

  static async create(opts) {
    const s = new this(opts);
    await s.start();
    return s;
  }

  get state() { return this._state; }

  get instanceInfo() { return this._instanceInfo; }

  _setState(s) {
    this._state = s;
    this.emit('stateChange', s);
  }

  /** Starts the server; forceSamePort restarts a stopped one on its old port. */
  async start(forceSamePort = false) {
    if (this._state === MongoMemoryServerStates.starting || this._state === MongoMemoryServerStates.running) {
      throw stateError([MongoMemoryServerStates.new, MongoMemoryServerStates.stopped], this._state);
    }
    this._setState(MongoMemoryServerStates.starting);
    let opts = this.opts;
    if (forceSamePort && this._instanceInfo) {
      opts = { ...opts, instance: { ...opts.instance, port: this._instanceInfo.port } };
    }
    const flags = serverFlags(opts);
    let ready;
    try {
      ready = await this._launch(flags);
    } catch (err) {
      this._setState(MongoMemoryServerStates.stopped);
      throw err;
    }
    const addr = ready.loadBalancer || ready.routers?.[0] || ready.members[0];
    this._instanceInfo = {
      port: Number(addr.slice(addr.lastIndexOf(':') + 1)),
      ip: flags.ip,
      dbName: flags.dbName ?? '',
      dbPath: undefined,
      storageEngine: 'inMemory',
      replSet: ready.replicaSet || undefined,
      tmpDir: undefined,
      launchTimeout: flags.timeoutMS,
      instance: { mongodProcess: this._sim.proc, pid: ready.pid },
    };
    this._setState(MongoMemoryServerStates.running);
  }

  async ensureInstance() {
    if (this._state !== MongoMemoryServerStates.running) await this.start();
    return this._instanceInfo;
  }

  getUri(otherDb, otherIp) {
    if (this._state !== MongoMemoryServerStates.running && this._state !== MongoMemoryServerStates.starting) {
      throw stateError([MongoMemoryServerStates.running, MongoMemoryServerStates.starting], this._state);
    }
    const r = this._sim?.ready;
    if (!r) throw stateError([MongoMemoryServerStates.running], this._state);
    const db = otherDb || '';
    if (r.loadBalancer) return `mongodb://${hostPort(r.loadBalancer, otherIp)}/${db}?loadBalanced=true`;
    return `mongodb://${hostPort(r.members[0], otherIp)}/${db}`;
  }

  /** Stops the server; nothing is left behind (mongosim keeps no files). */
  async stop(cleanupOptions) {
    if (!this._sim) return false;
    await this._halt();
    this._setState(MongoMemoryServerStates.stopped);
    if (cleanupOptions === undefined || cleanupOptions === true || cleanupOptions?.doCleanup !== false) await this.cleanup();
    return true;
  }

  /** Nothing to remove: mongosim keeps its data in memory. */
  async cleanup() {
    if (this._state === MongoMemoryServerStates.running) throw stateError([MongoMemoryServerStates.stopped], this._state);
  }
}

/** One member of a MongoMemoryReplSet, as replSet.servers lists it. */
class MongoMemoryReplSetMember {
  constructor(set, index) {
    this._set = set;
    this._index = index;
  }

  get _addr() { return this._set._sim.ready.members[this._index]; }

  get state() { return this._set.state === MongoMemoryReplSetStates.running ? MongoMemoryServerStates.running : MongoMemoryServerStates.stopped; }

  get instanceInfo() {
    const a = this._addr;
    return { port: Number(a.slice(a.lastIndexOf(':') + 1)), ip: this._set._flags.ip, dbName: '', replSet: this._set._flags.name, storageEngine: 'inMemory' };
  }

  getUri(otherDb, otherIp) { return `mongodb://${hostPort(this._addr, otherIp)}/${otherDb || ''}`; }

  async stop() {
    throw new Error('@sturdy-go/sim: stopping one member of a replica set is not supported by mongosim; use replSet.stepDown() to change the primary');
  }
}

class MongoMemoryReplSet extends Deployment {
  constructor(opts = {}) {
    super();
    this.opts = { ...opts };
    this._state = MongoMemoryReplSetStates.init;
    this.servers = [];
  }

  static async create(opts) {
    const s = new this(opts);
    await s.start();
    return s;
  }

  get state() { return this._state; }

  get replSetOpts() { return { ...this.opts.replSet }; }

  _setState(s) {
    this._state = s;
    this.emit('stateChange', s);
  }

  async start() {
    if (this._state === MongoMemoryReplSetStates.running) throw stateError([MongoMemoryReplSetStates.init, MongoMemoryReplSetStates.stopped], this._state);
    const flags = replSetFlags(this.opts);
    await this._launch(flags);
    this.servers = Array.from({ length: flags.count }, (_, i) => new MongoMemoryReplSetMember(this, i));
    this._setState(MongoMemoryReplSetStates.running);
  }

  /** Resolves once the set is running with a primary (start() waits for that already). */
  async waitUntilRunning() {
    if (this._state === MongoMemoryReplSetStates.running) return;
    if (this._state === MongoMemoryReplSetStates.stopped) throw stateError([MongoMemoryReplSetStates.running, MongoMemoryReplSetStates.init], this._state);
    await new Promise((resolve, reject) => {
      const on = s => {
        if (s === MongoMemoryReplSetStates.running) { this.off('stateChange', on); resolve(); }
        if (s === MongoMemoryReplSetStates.stopped) { this.off('stateChange', on); reject(new Error('the replica set stopped before it was running')); }
      };
      this.on('stateChange', on);
    });
  }

  getUri(otherDb, otherIp) {
    if (this._state !== MongoMemoryReplSetStates.running) throw stateError([MongoMemoryReplSetStates.running, MongoMemoryReplSetStates.init], this._state);
    const r = this._sim.ready;
    return `mongodb://${r.members.map(m => hostPort(m, otherIp)).join(',')}/${otherDb || ''}?replicaSet=${r.replicaSet}`;
  }

  async stop(cleanupOptions) {
    if (!this._sim) return false;
    await this._halt();
    this._setState(MongoMemoryReplSetStates.stopped);
    if (cleanupOptions === undefined || cleanupOptions === true || cleanupOptions?.doCleanup !== false) await this.cleanup();
    return true;
  }

  async cleanup() {
    if (this._state === MongoMemoryReplSetStates.running) throw stateError([MongoMemoryReplSetStates.stopped], this._state);
  }
}

/** A sharded cluster: shards (replica sets) behind mongos routers. */
class MongoMemorySharded extends Deployment {
  constructor(opts = {}) {
    super();
    this.opts = { ...opts };
    this._state = MongoMemoryReplSetStates.init;
  }

  static async create(opts) {
    const s = new this(opts);
    await s.start();
    return s;
  }

  get state() { return this._state; }

  /** Router addresses (host:port). */
  get routers() { return [...(this._sim?.ready?.routers ?? [])]; }

  /** Each shard's replica-set URI and members. */
  get shards() {
    const r = this._sim?.ready;
    if (!r) return [];
    return (r.shards?.length ? r.shards : [{ uri: `mongodb://${r.members.join(',')}/?replicaSet=${r.replicaSet}`, members: r.members }])
      .map(s => ({ uri: s.uri, members: [...s.members] }));
  }

  _setState(s) {
    this._state = s;
    this.emit('stateChange', s);
  }

  async start() {
    if (this._state === MongoMemoryReplSetStates.running) throw stateError([MongoMemoryReplSetStates.init, MongoMemoryReplSetStates.stopped], this._state);
    await this._launch(shardedFlags(this.opts));
    this._setState(MongoMemoryReplSetStates.running);
  }

  async waitUntilRunning() {
    if (this._state !== MongoMemoryReplSetStates.running) throw stateError([MongoMemoryReplSetStates.running], this._state);
  }

  getUri(otherDb, otherIp) {
    if (this._state !== MongoMemoryReplSetStates.running) throw stateError([MongoMemoryReplSetStates.running], this._state);
    const r = this._sim.ready;
    if (r.loadBalancer) return `mongodb://${hostPort(r.loadBalancer, otherIp)}/${otherDb || ''}?loadBalanced=true`;
    return `mongodb://${r.routers.map(a => hostPort(a, otherIp)).join(',')}/${otherDb || ''}`;
  }

  async stop() {
    if (!this._sim) return false;
    await this._halt();
    this._setState(MongoMemoryReplSetStates.stopped);
    return true;
  }

  async cleanup() {}
}

module.exports = {
  MongoMemoryServer,
  MongoMemoryReplSet,
  MongoMemorySharded,
  MongoMemoryServerStates,
  MongoMemoryReplSetStates,
  MongoSimCommandError: CommandError,
  binaryPath,
};
module.exports.default = MongoMemoryServer;
