// Starting and stopping `sturdy sim` for one test file.
//
// The binary comes from STURDY_BIN (run.mjs and the Go test set it, so it is
// built once per run) or is built here with `go build` into a temporary
// directory. Each sim listens on ephemeral ports (-port 0) and prints its
// connection string, so test files never collide and never guess ports.
// Every sim started here is killed when its test file ends, including when
// the file fails, throws, or is interrupted (SIGINT/SIGTERM); if the file's
// process dies without cleaning up, the sim sees its stdin close and exits.

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient } from 'mongodb';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const live = new Set();
let built; // path of a binary built by this process, if any

function killAll() {
  for (const sim of live) {
    try { sim.proc.kill('SIGKILL'); } catch { /* already gone */ }
  }
  live.clear();
  if (built) {
    try { rmSync(dirname(built), { recursive: true, force: true }); } catch { /* best effort */ }
    built = undefined;
  }
}

// 'exit' runs on normal exit and after uncaught exceptions; signals need
// their own handlers because their default action skips 'exit'.
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => { killAll(); process.exit(128 + (sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1)); });
}

export function sturdyBinary() {
  if (process.env.STURDY_BIN) return process.env.STURDY_BIN;
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), 'sturdy-interop-'));
    built = join(dir, process.platform === 'win32' ? 'sturdy.exe' : 'sturdy');
    execFileSync('go', ['build', '-o', built, './cmd/sturdy'], { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] });
  }
  return built;
}

/**
 * Starts `sturdy sim` and waits until every member answers hello.
 * @param {{members?: number, args?: string[]}} [opts]
 * @returns {Promise<Sim>}
 */
export async function startSim({ members = 3, args = [] } = {}) {
  const bin = sturdyBinary();
  // -exit-on-eof: the sim exits when this process's end of its stdin pipe
  // closes, so even a SIGKILLed test file leaves no sim behind.
  const argv = ['sim', '-port', '0', '-exit-on-eof', '-members', String(members), ...args];
  const proc = spawn(bin, argv, { stdio: ['pipe', 'pipe', 'pipe'] });
  const sim = new Sim(proc, argv);
  live.add(sim);
  try {
    sim.uri = await sim.firstLine(15_000);
    await sim.waitReady(15_000);
  } catch (err) {
    await sim.stop();
    throw new Error(`${err.message}\n${sim.tail()}`);
  }
  return sim;
}

export class Sim {
  constructor(proc, argv) {
    this.proc = proc;
    this.argv = argv;
    this.uri = '';
    this.stderr = '';
    this.exited = new Promise(res => proc.once('exit', (code, signal) => res({ code, signal })));
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', chunk => {
      // Keep the last 64 KiB: enough for a failure report, bounded under load.
      this.stderr = (this.stderr + chunk).slice(-65536);
    });
  }

  /** Host:port of every member, in member order (member 0 first). */
  get hosts() {
    return this.uri.slice('mongodb://'.length).split('/')[0].split(',');
  }

  firstLine(timeoutMS) {
    return new Promise((res, rej) => {
      let buf = '';
      const timer = setTimeout(() => rej(new Error(`sturdy ${this.argv.join(' ')}: no connection string within ${timeoutMS} ms`)), timeoutMS);
      this.proc.stdout.setEncoding('utf8');
      this.proc.stdout.on('data', chunk => {
        buf += chunk;
        const nl = buf.indexOf('\n');
        if (nl >= 0 && !this.uri) {
          clearTimeout(timer);
          res(buf.slice(0, nl).trim());
        }
      });
      this.proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        rej(new Error(`sturdy ${this.argv.join(' ')} exited (code ${code}, signal ${signal}) before printing its connection string`));
      });
      this.proc.once('error', err => { clearTimeout(timer); rej(err); });
    });
  }

  // Pings every member directly until all answer: the listeners are up and
  // the set has a primary that hello reports.
  async waitReady(timeoutMS) {
    const deadline = Date.now() + timeoutMS;
    for (const host of this.hosts) {
      for (;;) {
        const c = new MongoClient(`mongodb://${host}/?directConnection=true`, { serverSelectionTimeoutMS: 1000 });
        try {
          const hello = await c.db('admin').command({ hello: 1 });
          if (!this.uri.includes('replicaSet=') || hello.setName) break;
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`member ${host} not ready after ${timeoutMS} ms: ${err.message}`);
        } finally {
          await c.close();
        }
        await sleep(100);
      }
    }
  }

  /** The last lines of the sim's stderr, for failure messages. */
  tail(lines = 40) {
    if (!this.stderr.trim()) return '(sturdy sim wrote nothing to stderr)';
    const all = this.stderr.trimEnd().split('\n');
    return `--- sturdy sim stderr (last ${Math.min(lines, all.length)} lines) ---\n` +
      all.slice(-lines).join('\n') + '\n--- end of sturdy sim stderr ---';
  }

  /** SIGTERM, then SIGKILL if the sim has not exited within 5 s. */
  async stop() {
    live.delete(this);
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
  }
}

/**
 * Wraps a test body so a failure also prints the sim's stderr tail: the
 * server's own account (slog) of what it rejected and why.
 * @param {() => Sim | undefined} getSim
 */
export function withSimLog(getSim, fn) {
  return async (t) => {
    try {
      await fn(t);
    } catch (err) {
      const sim = getSim();
      if (sim?.stderr.trim()) process.stderr.write(`\n[${t.name}] failed; ${sim.tail()}\n`);
      throw err;
    }
  };
}
