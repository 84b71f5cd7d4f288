// The installed @sturdy-go/sim package, through its public API, with the
// official mongodb driver. packaging_test.go runs this file with node --test
// in a fresh project where the packed tarballs were npm-installed.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient } from 'mongodb';
import { MongoMemoryServer, MongoMemoryReplSet, MongoMemorySharded } from '@sturdy-go/sim';

const require = createRequire(import.meta.url);
const clients = [];
const deployments = [];
after(async () => {
  for (const c of clients) await c.close();
  for (const d of deployments) await d.stop();
});

function client(uri, opts = {}) {
  const c = new MongoClient(uri, { serverSelectionTimeoutMS: 5000, ...opts });
  clients.push(c);
  return c;
}

function alive(pid) {
  try {
    // An exited process its new parent has not reaped yet is a zombie (Z).
    if (readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop().trim().startsWith('Z')) return false;
  } catch { /* no /proc, or no such process */ }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

async function waitGone(pid, ms = 10000) {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

test('CommonJS and ESM entry points export the same classes', () => {
  const cjs = require('@sturdy-go/sim');
  assert.equal(cjs.MongoMemoryServer, MongoMemoryServer);
  assert.equal(cjs.MongoMemoryReplSet, MongoMemoryReplSet);
  assert.equal(typeof cjs.MongoMemorySharded.create, 'function');
});

test('standalone: create, use, stop with no process and no temp file left', async () => {
  const before = readdirSync(tmpdir()).sort();
  const server = await MongoMemoryServer.create();
  assert.equal(server.state, 'running');
  const uri = server.getUri();
  assert.match(uri, /^mongodb:\/\/127\.0\.0\.1:\d+\/$/);
  assert.equal(server.instanceInfo.port, Number(uri.split(':')[2].split('/')[0]));
  assert.equal(server.getUri('app'), uri + 'app');
  const c = client(uri);
  const hello = await c.db('admin').command({ hello: 1 });
  assert.equal(hello.isWritablePrimary, true);
  assert.equal(hello.setName, undefined, 'a MongoMemoryServer is a standalone server');
  await c.db('t').collection('c').insertOne({ _id: 1, x: 'a' });
  assert.deepEqual(await c.db('t').collection('c').findOne({ _id: 1 }), { _id: 1, x: 'a' });
  await c.close();
  const pid = server.instanceInfo.instance.pid;
  assert.ok(alive(pid));
  assert.equal(await server.stop(), true);
  assert.equal(server.state, 'stopped');
  assert.equal(alive(pid), false, 'the sim process outlived stop()');
  assert.deepEqual(readdirSync(tmpdir()).sort(), before, 'stop() left files in the temp directory');
  assert.throws(() => server.getUri(), /State/);
});

test('new MongoMemoryServer() + start(), ensureInstance and cleanup', async () => {
  const server = new MongoMemoryServer({ instance: { dbName: 'x' } });
  assert.equal(server.state, 'new');
  await server.start();
  deployments.push(server);
  assert.equal((await server.ensureInstance()).dbName, 'x');
  const port = server.instanceInfo.port;
  await server.stop({ doCleanup: false });
  await server.cleanup();
  await server.start(true);
  assert.equal(server.instanceInfo.port, port, 'start(forceSamePort) moved to another port');
  await server.stop();
});

test('replica set of 3: one URI, a primary, writes with majority', async () => {
  const rs = await MongoMemoryReplSet.create({ replSet: { count: 3 } });
  deployments.push(rs);
  await rs.waitUntilRunning();
  assert.equal(rs.servers.length, 3);
  const uri = rs.getUri();
  assert.match(uri, /^mongodb:\/\/(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+\/\?replicaSet=testset$/);
  assert.deepEqual(rs.servers.map(s => `127.0.0.1:${s.instanceInfo.port}`), uri.slice(10).split('/')[0].split(','));
  const c = client(uri);
  const hello = await c.db('admin').command({ hello: 1 });
  assert.equal(hello.setName, 'testset');
  assert.equal(hello.hosts.length, 3);
  await c.db('t').collection('c').insertOne({ _id: 1 }, { writeConcern: { w: 'majority' } });
  const session = c.startSession();
  await session.withTransaction(async () => {
    await c.db('t').collection('c').insertOne({ _id: 2 }, { session });
  });
  await session.endSession();
  assert.equal(await c.db('t').collection('c').countDocuments(), 2);
  await rs.stop();
});

test('sharded: two shards behind two routers', async () => {
  const sh = await MongoMemorySharded.create({ shards: 2, routers: 2 });
  deployments.push(sh);
  assert.equal(sh.routers.length, 2);
  assert.equal(sh.shards.length, 2);
  const c = client(sh.getUri());
  const hello = await c.db('admin').command({ hello: 1 });
  assert.equal(hello.msg, 'isdbgrid');
  const shards = await c.db('admin').command({ listShards: 1 });
  assert.equal(shards.shards.length, 2);
  await c.db('t').collection('c').insertOne({ _id: 1 });
  assert.equal(await c.db('t').collection('c').countDocuments(), 1);
  await sh.stop();
});

test('load balanced: loadBalanced: true gives a loadBalanced=true URI', async () => {
  const lb = await MongoMemoryServer.create({ loadBalanced: true });
  deployments.push(lb);
  assert.match(lb.getUri(), /loadBalanced=true/);
  const c = client(lb.getUri());
  await c.db('t').collection('c').insertOne({ _id: 1 });
  assert.equal(await c.db('t').collection('c').countDocuments(), 1);
  await lb.stop();
});

test('stepDown: another member becomes primary and retryable writes go on', async () => {
  const rs = await MongoMemoryReplSet.create({ replSet: { count: 3, name: 'sd' } });
  deployments.push(rs);
  const c = client(rs.getUri(), { heartbeatFrequencyMS: 500 });
  const coll = c.db('t').collection('c');
  await coll.insertOne({ _id: 0 });
  const old = (await c.db('admin').command({ hello: 1 })).primary;
  const next = await rs.stepDown();
  assert.notEqual(next, old);
  for (let i = 1; i <= 20; i++) await coll.insertOne({ _id: i });
  assert.equal(await coll.countDocuments(), 21);
  const hello = await c.db('admin').command({ hello: 1 });
  assert.equal(hello.primary, next);
  await rs.stop();
});

test('failCommand: the fail point fails the next find, then clears itself', async () => {
  const rs = await MongoMemoryReplSet.create({ replSet: { count: 3 } });
  deployments.push(rs);
  const c = client(rs.getUri(), { retryReads: false });
  const coll = c.db('t').collection('c');
  await coll.insertOne({ _id: 1 });
  await rs.failCommand({ failCommands: ['find'], errorCode: 2 }, { times: 1 });
  await assert.rejects(coll.findOne({}), err => err.code === 2);
  assert.deepEqual(await coll.findOne({}), { _id: 1 });
  await rs.failCommand({ failCommands: ['insert'], errorCode: 91, errorLabels: ['RetryableWriteError'] }, 'alwaysOn');
  await assert.rejects(coll.insertOne({ _id: 2 }), err => err.code === 91);
  await rs.clearFailCommand();
  await coll.insertOne({ _id: 2 });
  await rs.stop();
});

test('overload: requests past the admitted rate answer 462', async () => {
  const server = await MongoMemoryServer.create({ instance: { replSet: 'ov' } });
  deployments.push(server);
  const c = client(server.getUri(), { directConnection: true });
  await c.db('admin').command({ ping: 1 });
  await server.overload({ requestsPerSecond: 1, burst: 1 });
  const codes = await Promise.all(Array.from({ length: 20 }, () =>
    c.db('admin').command({ ping: 1 }).then(() => 0, err => err.code)));
  assert.ok(codes.includes(462), `no 462 among ${codes}`);
  await server.overload(false);
  await c.db('admin').command({ ping: 1 });
  await server.stop();
});

test('mongod arguments with a mongosim meaning are honoured', async () => {
  const server = await MongoMemoryServer.create({
    instance: { args: ['--replSet', 'one', '--setParameter', 'ttlMonitorSleepSecs=1', '--bind_ip', '127.0.0.1', '--quiet'] },
  });
  deployments.push(server);
  const c = client(server.getUri());
  assert.equal((await c.db('admin').command({ hello: 1 })).setName, 'one');
  const coll = c.db('t').collection('ttl');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await coll.insertOne({ at: new Date(Date.now() - 1000) });
  const deadline = Date.now() + 10000;
  while (await coll.countDocuments() > 0) {
    assert.ok(Date.now() < deadline, 'the TTL monitor did not run within 10 s: ttlMonitorSleepSecs was not honoured');
    await sleep(50);
  }
  await server.stop();
});

test('auth option: the root user is required and accepted', async () => {
  const server = await MongoMemoryServer.create({ auth: { customRootName: 'root', customRootPwd: 'secret' } });
  deployments.push(server);
  const anon = client(server.getUri());
  await assert.rejects(anon.db('t').collection('c').insertOne({ _id: 1 }), err => err.code === 13);
  const authed = client(server.getUri(), { auth: { username: 'root', password: 'secret' } });
  await authed.db('t').collection('c').insertOne({ _id: 1 });
  await server.stop();
});

test('--auth in args requires mongodb-memory-server\'s default root user', async () => {
  const server = await MongoMemoryServer.create({ instance: { args: ['--auth'] } });
  deployments.push(server);
  await assert.rejects(client(server.getUri()).db('t').collection('c').insertOne({ _id: 1 }), err => err.code === 13);
  const authed = client(server.getUri(), { auth: { username: 'mongodb-memory-server-root', password: 'rootuser' } });
  await authed.db('t').collection('c').insertOne({ _id: 1 });
  await server.stop();
});

test('port: a given port is used, a port in use is a clear error', async () => {
  const blocker = createServer();
  await new Promise(res => blocker.listen(0, '127.0.0.1', res));
  const { port } = blocker.address();
  await assert.rejects(MongoMemoryServer.create({ instance: { port } }), err => {
    assert.equal(err.code, 'EADDRINUSE');
    assert.match(err.message, new RegExp(`port ${port} .*already in use`));
    return true;
  });
  await new Promise(res => blocker.close(res));
  const server = await MongoMemoryServer.create({ instance: { port } });
  deployments.push(server);
  assert.equal(server.getUri(), `mongodb://127.0.0.1:${port}/`);
  await server.stop();
});

test('unknown options are warned about by name; mongodb-memory-server-only ones are not', async () => {
  const warnings = [];
  const onWarning = w => warnings.push(w.message);
  process.on('warning', onWarning);
  const server = await MongoMemoryServer.create({
    binary: { version: '7.0.14', downloadDir: '/nowhere' },
    instance: { storageEngine: 'wiredTiger', dbPath: '/nowhere', noSuchOption: true },
    notAnOption: 1,
  });
  deployments.push(server);
  await server.stop();
  await sleep(0); // warnings are emitted on the next tick
  process.off('warning', onWarning);
  assert.ok(warnings.some(m => m.includes('"instance.noSuchOption"')), warnings.join('\n'));
  assert.ok(warnings.some(m => m.includes('"notAnOption"')), warnings.join('\n'));
  assert.ok(!warnings.some(m => /storageEngine|dbPath|binary/.test(m)), warnings.join('\n'));
});

test('a missing platform package is named in the error', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sim-noplatform-'));
  try {
    cpSync(join(process.cwd(), 'node_modules', '@sturdy-go', 'sim'), join(dir, 'node_modules', '@sturdy-go', 'sim'), { recursive: true });
    writeFileSync(join(dir, 'probe.cjs'), "require('@sturdy-go/sim').MongoMemoryServer.create().then(() => process.exit(3), e => { console.log(e.message); });");
    const env = { ...process.env };
    delete env.STURDY_SIM_BINARY;
    const out = execFileSync(process.execPath, ['probe.cjs'], { cwd: dir, env, encoding: 'utf8' });
    const pkg = `@sturdy-go/sim-${process.platform}-${process.arch}`;
    assert.ok(out.includes(`the platform package ${pkg} is not installed`) && out.includes(`npm install --save-dev ${pkg}@`), out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a script that forgets stop() still exits, and its sim with it', { skip: process.platform === 'win32' }, async () => {
  const script = join(process.cwd(), 'forgetful.mjs');
  writeFileSync(script, "import { MongoMemoryServer } from '@sturdy-go/sim';\n" +
    'const s = await MongoMemoryServer.create();\n' +
    'console.log(s.instanceInfo.instance.pid);\n');
  const out = execFileSync(process.execPath, [script], { encoding: 'utf8', timeout: 20000 });
  const simPid = Number(out.trim());
  assert.ok(simPid > 0, out);
  assert.ok(await waitGone(simPid), `sim ${simPid} outlived the script that started it`);
});

test('a parent killed with SIGKILL leaves no sim behind', { skip: process.platform === 'win32' }, async () => {
  const script = join(process.cwd(), 'parent.mjs');
  writeFileSync(script, "import { MongoMemoryReplSet } from '@sturdy-go/sim';\n" +
    'const rs = await MongoMemoryReplSet.create({ replSet: { count: 3 } });\n' +
    'console.log(rs.servers.length, rs._sim.pid);\n' +
    'setInterval(() => {}, 1000);\n');
  const parent = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise((res, rej) => {
    let buf = '';
    parent.stdout.on('data', d => { buf += d; if (buf.includes('\n')) res(buf.trim()); });
    parent.once('exit', code => rej(new Error(`parent exited ${code} before starting the set`)));
  });
  const simPid = Number(line.split(' ')[1]);
  assert.ok(alive(simPid));
  const exited = new Promise(res => parent.once('exit', res));
  parent.kill('SIGKILL');
  await exited;
  assert.ok(await waitGone(simPid), `sim ${simPid} outlived its SIGKILLed parent`);
});

test('benchmark: create() to a usable URI', async () => {
  const median = a => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  const measure = async (make) => {
    const times = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const d = await make();
      const c = new MongoClient(d.getUri(), { serverSelectionTimeoutMS: 5000 });
      await c.db('t').collection('c').insertOne({ _id: 1 });
      times.push(performance.now() - t0);
      await c.close();
      await d.stop();
    }
    return median(times);
  };
  const standalone = await measure(() => MongoMemoryServer.create());
  const replSet = await measure(() => MongoMemoryReplSet.create({ replSet: { count: 3 } }));
  console.log(`BENCH create() to a usable URI (median of 5, first write included): standalone ${standalone.toFixed(1)} ms, 3-member replica set ${replSet.toFixed(1)} ms`);
  assert.ok(standalone < 5000 && replSet < 5000);
});
