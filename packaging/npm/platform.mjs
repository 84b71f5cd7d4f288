// node platform.mjs DIR GOOS GOARCH VERSION: writes the package.json and
// README of one platform package (its bin/ is already in DIR). npm installs
// it only where os and cpu match: the esbuild way, with no install script.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, goos, goarch, version] = process.argv.slice(2);
const os = { linux: 'linux', darwin: 'darwin', windows: 'win32' }[goos];
const cpu = { amd64: 'x64', arm64: 'arm64' }[goarch];
if (!os || !cpu) throw new Error(`no npm platform for ${goos}/${goarch}`);
const name = `@sturdy-go/sim-${os}-${cpu}`;
const pkg = {
  name,
  version,
  description: `The ${os}-${cpu} binary of @sturdy-go/sim (mongosim, an in-memory MongoDB-compatible server). Install @sturdy-go/sim instead.`,
  homepage: 'https://github.com/sturdy-go/sturdy',
  repository: { type: 'git', url: 'git+https://github.com/sturdy-go/sturdy.git' },
  os: [os],
  cpu: [cpu],
  files: ['bin/'],
  preferUnplugged: true,
};
writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
writeFileSync(join(dir, 'README.md'), `# ${name}\n\nThe \`sturdy\` binary for ${os}-${cpu}, used by [@sturdy-go/sim](https://www.npmjs.com/package/@sturdy-go/sim). Install that package; npm picks this one for you.\n`);
