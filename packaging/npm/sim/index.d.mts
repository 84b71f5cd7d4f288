// Types of the ESM entry point (index.mjs): the CommonJS declarations, with
// MongoMemoryServer as the default export, as index.mjs has it.
export * from './index.js';
import { MongoMemoryServer } from './index.js';
export default MongoMemoryServer;
