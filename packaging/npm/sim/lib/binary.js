'use strict';
// Finds the `sturdy` binary: STURDY_SIM_BINARY, else the platform package
// npm installed as an optional dependency (the one whose os/cpu match).

const path = require('node:path');
const { version } = require('../package.json');

// Node's platform-arch → the package holding that binary.
const PLATFORM_PACKAGES = {
  'linux-x64': '@sturdy-go/sim-linux-x64',
  'linux-arm64': '@sturdy-go/sim-linux-arm64',
  'darwin-x64': '@sturdy-go/sim-darwin-x64',
  'darwin-arm64': '@sturdy-go/sim-darwin-arm64',
  'win32-x64': '@sturdy-go/sim-win32-x64',
  'win32-arm64': '@sturdy-go/sim-win32-arm64',
};

function binaryPath() {
  if (process.env.STURDY_SIM_BINARY) return process.env.STURDY_SIM_BINARY;
  const key = `${process.platform}-${process.arch}`;
  const pkg = PLATFORM_PACKAGES[key];
  if (!pkg) {
    throw new Error(`@sturdy-go/sim has no binary for ${key} (it ships ${Object.keys(PLATFORM_PACKAGES).join(', ')}). ` +
      'Build one with `go build ./cmd/sturdy` from github.com/sturdy-go/sturdy and point STURDY_SIM_BINARY at it.');
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    throw new Error(`@sturdy-go/sim: the platform package ${pkg} is not installed, so there is no sturdy binary for ${key}. ` +
      'npm installs it as an optional dependency; it is missing after `npm install --omit=optional` (or --no-optional), ' +
      'or when node_modules was copied from another platform. ' +
      `Fix: npm install --save-dev ${pkg}@${version} (or set STURDY_SIM_BINARY to a sturdy binary).`);
  }
  return path.join(dir, 'bin', process.platform === 'win32' ? 'sturdy.exe' : 'sturdy');
}

module.exports = { binaryPath, PLATFORM_PACKAGES };
