// npm test: build sturdy once, then run every test file with node --test.
// The Go test (interop_test.go) does the same from `go test ./...`.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
let dir;
if (!process.env.STURDY_BIN) {
  dir = mkdtempSync(join(tmpdir(), 'sturdy-interop-'));
  process.env.STURDY_BIN = join(dir, 'sturdy');
  execFileSync('go', ['build', '-o', process.env.STURDY_BIN, './cmd/sturdy'], { cwd: join(here, '..'), stdio: 'inherit' });
}
const files = process.argv.slice(2).length ? process.argv.slice(2)
  : readdirSync(join(here, 'test')).filter(f => f.endsWith('.test.mjs')).sort().map(f => join('test', f));
const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', `--test-concurrency=${files.length}`, ...files], { cwd: here, stdio: 'inherit' });
if (dir) rmSync(dir, { recursive: true, force: true });
process.exit(r.status ?? 1);
