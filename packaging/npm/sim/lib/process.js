'use strict';
// Runs one `sturdy sim` child: started with -exit-on-eof so the child dies
// with this process however it ends (its stdin pipe closes, even on
// SIGKILL), reports itself ready with a JSON line, and is stopped by
// closing that pipe.

const { spawn } = require('node:child_process');
const { binaryPath } = require('./binary');
const { command } = require('./wire');

const live = new Set();
// On a normal exit, take every child down at once rather than waiting for
// it to notice its stdin closing.
process.once('exit', () => {
  for (const p of live) {
    try { p.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

/** The port a listener could not bind, from sturdy sim's stderr. */
function portInUse(stderr) {
  if (!/address already in use|only one usage of each socket address/i.test(stderr)) return undefined;
  const m = /listen tcp ([^\s]+?):(\d+)/.exec(stderr);
  return m ? { host: m[1], port: Number(m[2]) } : { host: '?', port: 0 };
}

class SimProcess {
  constructor(argv) {
    this.argv = argv;
    this.stderr = '';
    this.ready = undefined;
    this.proc = undefined;
    this.exited = undefined;
  }

  /** Spawns the child and waits for its ready line and a primary. */
  async start({ timeoutMS = 20000 } = {}) {
    const bin = binaryPath();
    const argv = ['sim', '-exit-on-eof', '-json', ...this.argv];
    const proc = spawn(bin, argv, { stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
    this.proc = proc;
    live.add(proc);
    this.exited = new Promise(res => proc.once('close', (code, signal) => { live.delete(proc); res({ code, signal }); }));
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', chunk => { this.stderr = (this.stderr + chunk).slice(-65536); });
    try {
      this.ready = await this.readyLine(bin, argv, timeoutMS);
      await waitForPrimaries(this.ready, timeoutMS);
    } catch (err) {
      await this.stop();
      throw err;
    }
    // Unreferenced, a forgotten server does not keep the test runner
    // alive; when the runner exits, the pipe closes and the child exits.
    proc.unref();
    for (const s of [proc.stdin, proc.stdout, proc.stderr]) s.unref?.();
    return this.ready;
  }

  readyLine(bin, argv, timeoutMS) {
    const proc = this.proc;
    return new Promise((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error(`${bin} ${argv.join(' ')}: not ready within ${timeoutMS} ms\n${this.stderr}`)), timeoutMS);
      proc.stdout.setEncoding('utf8');
      proc.stdout.on('data', chunk => {
        buf += chunk;
        const nl = buf.indexOf('\n');
        if (nl < 0 || this.ready) return;
        clearTimeout(timer);
        try {
          resolve(JSON.parse(buf.slice(0, nl)));
        } catch (err) {
          reject(new Error(`${bin} printed no JSON ready line (is it older than sturdy sim -json?): ${buf.slice(0, nl)}`));
        }
      });
      proc.once('error', err => {
        clearTimeout(timer);
        reject(new Error(`cannot run ${bin}: ${err.message}`));
      });
      this.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        const used = portInUse(this.stderr);
        if (used) {
          const err = new Error(`@sturdy-go/sim: port ${used.port} on ${used.host} is already in use; pick another port or leave it unset for an ephemeral one`);
          err.code = 'EADDRINUSE';
          err.port = used.port;
          reject(err);
          return;
        }
        reject(new Error(`${bin} ${argv.join(' ')} exited (code ${code}, signal ${signal}) before it was ready:\n${this.stderr.trim()}`));
      });
    });
  }

  get pid() { return this.proc?.pid; }

  get running() { return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null; }

  /** Closes the child's stdin (it exits at EOF); kills it if it lingers. */
  async stop({ graceMS = 5000 } = {}) {
    const proc = this.proc;
    if (!proc) return;
    proc.ref();
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.stdin.end();
      proc.kill('SIGTERM');
    }
    const t = setTimeout(() => { try { proc.kill('SIGKILL'); } catch { /* gone */ } }, graceMS);
    await this.exited;
    clearTimeout(t);
  }
}

// waitForPrimaries sends hello to every replica set's primary (and every
// router) until each answers as one: the deployment is usable when this
// returns.
async function waitForPrimaries(ready, timeoutMS) {
  const deadline = Date.now() + timeoutMS;
  const sets = ready.shards?.length ? ready.shards : [{ members: ready.members, primary: ready.primary }];
  const checks = sets.map(s => async () => {
    const hello = await command(s.primary, 'admin', { hello: 1 });
    return hello.isWritablePrimary === true;
  });
  for (const r of ready.routers ?? []) {
    checks.push(async () => (await command(r, 'admin', { hello: 1 })).msg === 'isdbgrid');
  }
  for (const check of checks) {
    for (;;) {
      let err;
      try {
        if (await check()) break;
      } catch (e) {
        err = e;
      }
      if (Date.now() > deadline) throw new Error(`@sturdy-go/sim: the deployment has no primary after ${timeoutMS} ms${err ? `: ${err.message}` : ''}`);
      await new Promise(r => setTimeout(r, 10));
    }
  }
}

module.exports = { SimProcess };
