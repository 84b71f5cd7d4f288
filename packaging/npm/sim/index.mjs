// ESM entry point: the same classes as the CommonJS one.
import sim from './index.js';

export const {
  MongoMemoryServer,
  MongoMemoryReplSet,
  MongoMemorySharded,
  MongoMemoryServerStates,
  MongoMemoryReplSetStates,
  MongoSimCommandError,
  binaryPath,
} = sim;
export default sim.MongoMemoryServer;
