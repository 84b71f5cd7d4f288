// Runs the interop suite: `npm test`, and what `go test ./interop/` runs.
//
// Builds sturdy once (unless STURDY_BIN names a binary), runs every
// test/*.test.mjs file with node --test (the spec reporter to stdout, one
// JSON line per test to a results file), then compares the results with
// expected_failures.json: the run fails on a failure not listed there, on a
// listed test that now passes (delete its entry), and on an entry naming no
// test. Each listed test asserts mongod's behaviour; its entry says what
// mongosim lacks. An entry starting "intermittent:" may also pass (its
// failure depends on timing until the named gap is closed).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'sturdy-interop-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));

if (!process.env.STURDY_BIN) {
  process.env.STURDY_BIN = join(work, 'sturdy');
  execFileSync('go', ['build', '-o', process.env.STURDY_BIN, './cmd/sturdy'], { cwd: join(here, '..'), stdio: 'inherit' });
}
const args = process.argv.slice(2);
const files = args.length ? args
  : readdirSync(join(here, 'test')).filter(f => f.endsWith('.test.mjs')).sort().map(f => join('test', f));
const resultsFile = join(work, 'results.jsonl');
// All files at once: most of the time is the monitoring file's 40 s of
// watching, which the other files overlap.
const r = spawnSync(process.execPath, [
  '--test', `--test-concurrency=${files.length}`,
  '--test-reporter=spec', '--test-reporter-destination=stdout',
  '--test-reporter=./lib/results-reporter.mjs', `--test-reporter-destination=${resultsFile}`,
  ...files,
], { cwd: here, stdio: 'inherit' });
if (r.error) throw r.error;

let results = [];
try {
  results = readFileSync(resultsFile, 'utf8').trim().split('\n').filter(Boolean).map(l => JSON.parse(l));
} catch { /* no results: reported below */ }
const expected = JSON.parse(readFileSync(join(here, 'expected_failures.json'), 'utf8'));
const ran = new Set(files.map(f => f.split(/[\\/]/).pop()));
const problems = [];
const known = [];
const seen = new Set();
for (const { file, name, pass } of results) {
  const reason = expected[file]?.[name];
  seen.add(`${file}\0${name}`);
  if (!pass && reason === undefined) problems.push(`FAIL ${file}: ${name}`);
  if (pass && reason !== undefined && !reason.startsWith('intermittent:')) problems.push(`NOW PASSES ${file}: ${name} — delete its entry from expected_failures.json`);
  if (!pass && reason !== undefined) known.push(`${file}: ${name}\n    ${reason}`);
}
for (const [file, tests] of Object.entries(expected)) {
  if (!ran.has(file)) continue;
  for (const name of Object.keys(tests)) {
    if (!seen.has(`${file}\0${name}`)) problems.push(`STALE ENTRY ${file}: ${name} — no such test ran`);
  }
}
if (results.length === 0) problems.push(`no test results (node --test exited ${r.status}, signal ${r.signal})`);

console.log(`\ninterop: ${results.length} tests, ${results.filter(x => x.pass).length} passed, ${known.length} expected failures (expected_failures.json)`);
if (known.length) console.log('expected failures (mongod behaviour mongosim lacks):\n  ' + known.join('\n  '));
if (problems.length) {
  console.log('\ninterop: FAILED\n  ' + problems.join('\n  '));
  process.exit(1);
}
console.log('interop: ok');
