// A node:test reporter writing one JSON line per finished test:
// {file, name, pass}. run.mjs compares these with expected_failures.json.
import { basename } from 'node:path';

export default async function* results(source) {
  for await (const ev of source) {
    if (ev.type !== 'test:pass' && ev.type !== 'test:fail') continue;
    const d = ev.data;
    if (d.details?.type === 'suite') continue;
    yield JSON.stringify({ file: d.file ? basename(d.file) : '', name: d.name, pass: ev.type === 'test:pass' }) + '\n';
  }
}
