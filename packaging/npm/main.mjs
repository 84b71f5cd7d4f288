// node main.mjs DIR VERSION: stamps the version into the main package in DIR
// and lists every platform package as an optional dependency of that exact
// version; npm installs the one whose os/cpu match the machine.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, version] = process.argv.slice(2);
const file = join(dir, 'package.json');
const pkg = JSON.parse(readFileSync(file, 'utf8'));
pkg.version = version;
pkg.optionalDependencies = Object.fromEntries(
  ['linux-x64', 'linux-arm64', 'darwin-x64', 'darwin-arm64', 'win32-x64', 'win32-arm64']
    .map(p => [`@sturdy-go/sim-${p}`, version]));
writeFileSync(file, JSON.stringify(pkg, null, 2) + '\n');
