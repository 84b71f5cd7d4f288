'use strict';
// Translates mongodb-memory-server options into `sturdy sim` flags. Options
// mongosim has no use for (binary versions, storage engines, dbPath, ...)
// are accepted and noted when debugging is on; names neither package knows
// are warned about, by name, and ignored.

const DEBUG = /^(1|true|yes|on)$/i.test(process.env.MONGOMS_DEBUG ?? '') ||
  /^(1|true|yes|on)$/i.test(process.env.STURDY_SIM_DEBUG ?? '') ||
  /(^|,)\s*(sturdy|MongoMS)/i.test(process.env.DEBUG ?? '');

function debug(msg) {
  if (DEBUG) process.stderr.write(`[@sturdy-go/sim] ${msg}\n`);
}

const warned = new Set();
function warnUnknown(path) {
  if (warned.has(path)) return;
  warned.add(path);
  process.emitWarning(`unknown option "${path}": neither mongodb-memory-server nor @sturdy-go/sim knows it; ignored`, { code: 'STURDY_SIM_UNKNOWN_OPTION' });
}

// Option names by place: honoured (h) or accepted and ignored (i).
const KNOWN = {
  server: { instance: 'h', binary: 'i', spawn: 'i', auth: 'h', dispose: 'h', loadBalanced: 'h', simArgs: 'h' },
  instance: {
    args: 'h', port: 'h', ip: 'h', dbName: 'h', replSet: 'h', auth: 'h', launchTimeout: 'h',
    dbPath: 'i', storageEngine: 'i', replicaMemberConfig: 'i', keyfileLocation: 'i', portGeneration: 'i',
  },
  binary: { version: 'i', downloadDir: 'i', platform: 'i', arch: 'i', checkMD5: 'i', systemBinary: 'i', os: 'i' },
  auth: { enable: 'h', customRootName: 'h', customRootPwd: 'h', extraUsers: 'i', force: 'i', keyfileContent: 'i' },
  dispose: { enabled: 'h', cleanup: 'i' },
  replSetTop: { instanceOpts: 'h', binary: 'i', replSet: 'h', simArgs: 'h' },
  replSet: {
    auth: 'h', args: 'h', count: 'h', dbName: 'h', ip: 'h', name: 'h',
    spawn: 'i', storageEngine: 'i', configSettings: 'i', dispose: 'h',
  },
  sharded: { shards: 'h', routers: 'h', members: 'h', loadBalanced: 'h', auth: 'h', ip: 'h', dbName: 'h', args: 'h', simArgs: 'h', binary: 'i', launchTimeout: 'h' },
};

// check warns about unknown names in obj and notes ignored ones.
function check(obj, table, path) {
  if (obj === undefined || obj === null) return;
  if (typeof obj !== 'object') throw new TypeError(`option "${path}" must be an object`);
  for (const [k, v] of Object.entries(obj)) {
    const kind = KNOWN[table][k];
    const name = path ? `${path}.${k}` : k;
    if (!kind) warnUnknown(name);
    else if (kind === 'i' && v !== undefined) debug(`option "${name}" has no meaning for mongosim; ignored`);
  }
  if (obj.binary) check(obj.binary, 'binary', path ? `${path}.binary` : 'binary');
  if (obj.auth && typeof obj.auth === 'object') check(obj.auth, 'auth', path ? `${path}.auth` : 'auth');
}

// parseArgs reads the mongod arguments mongosim can honour and notes the rest.
function parseArgs(args = []) {
  const out = {};
  for (let i = 0; i < args.length; i++) {
    let a = String(args[i]);
    let val;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) {
      val = a.slice(eq + 1);
      a = a.slice(0, eq);
    }
    const next = () => (val !== undefined ? val : args[++i]);
    switch (a) {
      case '--replSet': out.replSet = String(next()).split('/')[0]; break;
      case '--port': out.port = Number(next()); break;
      case '--bind_ip': out.ip = String(next()).split(',')[0].trim(); break;
      case '--bind_ip_all': out.ip = '0.0.0.0'; break;
      case '--auth': out.auth = true; break;
      case '--noauth': out.auth = false; break;
      case '--setParameter': {
        const p = String(next());
        const m = /^ttlMonitorSleepSecs=(\d+)$/.exec(p);
        if (m) out.ttlSecs = Number(m[1]);
        else debug(`mongod argument "--setParameter ${p}" has no meaning for mongosim; ignored`);
        break;
      }
      default:
        debug(`mongod argument "${args[i]}" has no meaning for mongosim; ignored`);
    }
  }
  return out;
}

// authUser returns the user auth options name, or undefined when auth is off.
function authUser(auth, forced) {
  const on = auth && typeof auth === 'object' ? (auth.enable ?? true) : false;
  if (!on && !forced) return undefined;
  return {
    username: auth?.customRootName ?? 'mongodb-memory-server-root',
    password: auth?.customRootPwd ?? 'rootuser',
  };
}

// commonFlags turns a resolved description into sturdy sim flags.
function commonFlags({ ip, port, user, ttlSecs, simArgs }) {
  const argv = ['-host', ip, '-port', String(port ?? 0)];
  if (user) argv.push('-user', user.username, '-password', user.password);
  if (ttlSecs !== undefined) argv.push('-ttl-interval', `${ttlSecs}s`);
  if (simArgs) argv.push(...simArgs.map(String));
  return argv;
}

/** MongoMemoryServer options → { argv, ip, dbName, user, replSet, timeoutMS }. */
function serverFlags(opts = {}) {
  check(opts, 'server', '');
  const inst = opts.instance ?? {};
  check(inst, 'instance', 'instance');
  const a = parseArgs(inst.args);
  const ip = a.ip ?? inst.ip ?? '127.0.0.1';
  const port = a.port ?? inst.port;
  const replSet = a.replSet ?? inst.replSet;
  const user = authUser(opts.auth, a.auth ?? inst.auth);
  const argv = commonFlags({ ip, port, user, ttlSecs: a.ttlSecs, simArgs: opts.simArgs });
  if (opts.loadBalanced) argv.push('-load-balanced');
  else if (replSet) argv.push('-replset', replSet, '-members', '1');
  else argv.push('-standalone');
  return { argv, ip, dbName: inst.dbName, user, timeoutMS: inst.launchTimeout };
}

/** MongoMemoryReplSet options → flags for an N-member set. */
function replSetFlags(opts = {}) {
  check(opts, 'replSetTop', '');
  const rs = opts.replSet ?? {};
  check(rs, 'replSet', 'replSet');
  const instanceOpts = opts.instanceOpts ?? [];
  instanceOpts.forEach((o, i) => check(o, 'instance', `instanceOpts[${i}]`));
  const a = parseArgs([...(rs.args ?? []), ...(instanceOpts[0]?.args ?? [])]);
  const count = rs.count ?? Math.max(1, instanceOpts.length);
  const port = a.port ?? instanceOpts[0]?.port;
  instanceOpts.forEach((o, i) => {
    if (i > 0 && o.port !== undefined && o.port !== port + i) {
      debug(`instanceOpts[${i}].port ${o.port}: mongosim members listen on consecutive ports from the first (${port + i})`);
    }
  });
  const ip = a.ip ?? rs.ip ?? '127.0.0.1';
  const name = rs.name ?? a.replSet ?? 'testset';
  const user = authUser(rs.auth, a.auth ?? instanceOpts.some(o => o.auth));
  const argv = [...commonFlags({ ip, port, user, ttlSecs: a.ttlSecs, simArgs: opts.simArgs }), '-members', String(count), '-replset', name];
  return { argv, ip, dbName: rs.dbName, user, name, count, timeoutMS: instanceOpts[0]?.launchTimeout };
}

/** MongoMemorySharded options → flags for shards behind routers. */
function shardedFlags(opts = {}) {
  check(opts, 'sharded', '');
  const a = parseArgs(opts.args);
  const shards = opts.shards ?? 2;
  const routers = opts.routers ?? 2;
  if (!(shards >= 1) || !(routers >= 1)) throw new RangeError('MongoMemorySharded needs shards >= 1 and routers >= 1');
  const ip = a.ip ?? opts.ip ?? '127.0.0.1';
  const user = authUser(opts.auth, a.auth);
  const argv = [...commonFlags({ ip, port: a.port, user, ttlSecs: a.ttlSecs, simArgs: opts.simArgs }),
    '-members', String(opts.members ?? 1), '-routers', String(routers)];
  if (shards > 1) argv.push('-shards', String(shards));
  if (opts.loadBalanced) argv.push('-load-balanced');
  return { argv, ip, dbName: opts.dbName, user, timeoutMS: opts.launchTimeout };
}

module.exports = { serverFlags, replSetFlags, shardedFlags, debug, parseArgs };
