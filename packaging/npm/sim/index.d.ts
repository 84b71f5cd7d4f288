// Type declarations for @sturdy-go/sim: the parts of mongodb-memory-server's
// API that test suites use, plus mongosim's extras (sharded clusters, load
// balancing, fault injection).

import { EventEmitter } from 'node:events';
import { ChildProcess } from 'node:child_process';

export declare enum MongoMemoryServerStates {
  new = 'new',
  starting = 'starting',
  running = 'running',
  stopped = 'stopped',
}

export declare enum MongoMemoryReplSetStates {
  init = 'init',
  running = 'running',
  stopped = 'stopped',
}

/** mongodb-memory-server's auth option: mongosim knows the one root user. */
export interface AutomaticAuth {
  enable?: boolean;
  customRootName?: string;
  customRootPwd?: string;
  /** Accepted and ignored: mongosim knows one user. */
  extraUsers?: unknown[];
  force?: boolean;
  keyfileContent?: string;
}

export interface Cleanup {
  doCleanup?: boolean;
  force?: boolean;
}

export interface MemoryServerInstanceOpts {
  /** mongod arguments; --port, --bind_ip, --replSet, --auth and --setParameter ttlMonitorSleepSecs=N are honoured. */
  args?: string[];
  /** Port to listen on; ephemeral when unset. */
  port?: number;
  ip?: string;
  dbName?: string;
  /** Run a one-member replica set of this name instead of a standalone server. */
  replSet?: string;
  /** Require authentication as the auth option's user. */
  auth?: boolean;
  /** Start-up timeout in ms (default 20000). */
  launchTimeout?: number;
  /** Accepted and ignored: mongosim keeps data in memory. */
  dbPath?: string;
  storageEngine?: string;
  replicaMemberConfig?: Record<string, unknown>;
  keyfileLocation?: string;
  portGeneration?: boolean;
}

/** Accepted and ignored: there is no binary to download. */
export interface MongoBinaryOpts {
  version?: string;
  downloadDir?: string;
  platform?: string;
  arch?: string;
  checkMD5?: boolean;
  systemBinary?: string;
  os?: unknown;
}

export interface MongoMemoryServerOpts {
  instance?: MemoryServerInstanceOpts;
  binary?: MongoBinaryOpts;
  spawn?: unknown;
  auth?: AutomaticAuth;
  dispose?: { enabled?: boolean; cleanup?: Cleanup };
  /** mongosim extra: two mongos routers behind a load balancer; getUri() has loadBalanced=true. */
  loadBalanced?: boolean;
  /** mongosim extra: more `sturdy sim` flags, passed as they are. */
  simArgs?: string[];
}

export interface MongoInstanceData {
  port: number;
  ip: string;
  dbName: string;
  dbPath?: string;
  storageEngine: string;
  replSet?: string;
  tmpDir?: string;
  launchTimeout?: number;
  instance: { mongodProcess: ChildProcess; pid: number };
}

/** The failCommand fail point's data document. */
export interface FailCommandData {
  failCommands: string[];
  errorCode?: number;
  closeConnection?: boolean;
  errorLabels?: string[];
  blockConnection?: boolean;
  blockTimeMS?: number;
  writeConcernError?: Record<string, unknown>;
  appName?: string;
  [k: string]: unknown;
}

export type FailPointMode = { times: number } | { skip: number } | 'alwaysOn' | 'off';

export interface OverloadOptions {
  /** Requests admitted per second on each member; the rest answer 462 SystemOverloadedError. */
  requestsPerSecond: number;
  /** Bucket capacity in requests (default: the rate). */
  burst?: number;
  /** baseBackoffMS attached to overload errors. */
  baseBackoffMS?: number;
}

/** Fault injection, sending mongosim the admin commands mongod understands. Not available with auth enabled. */
declare abstract class FaultHelpers extends EventEmitter {
  /** Sets the failCommand fail point where clients' commands arrive (every router, else the primary). */
  failCommand(data: FailCommandData, mode?: FailPointMode): Promise<void>;
  clearFailCommand(): Promise<void>;
  /** replSetStepDown on the primary (of shard `shard`); resolves with the new primary's host:port. */
  stepDown(opts?: { stepDownSecs?: number; shard?: number; timeoutMS?: number }): Promise<string>;
  /** Ingress admission limit on every member; false turns it off. */
  overload(opts: OverloadOptions | false): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class MongoMemoryServer extends FaultHelpers {
  opts: MongoMemoryServerOpts;
  constructor(opts?: MongoMemoryServerOpts);
  static create(opts?: MongoMemoryServerOpts): Promise<MongoMemoryServer>;
  start(forceSamePort?: boolean): Promise<void>;
  stop(cleanupOptions?: boolean | Cleanup): Promise<boolean>;
  cleanup(options?: boolean | Cleanup): Promise<void>;
  ensureInstance(): Promise<MongoInstanceData>;
  getUri(otherDb?: string, otherIp?: string): string;
  get instanceInfo(): MongoInstanceData | undefined;
  get state(): MongoMemoryServerStates;
}

export interface ReplSetOpts {
  auth?: AutomaticAuth;
  args?: string[];
  /** Members (default 1). */
  count?: number;
  dbName?: string;
  ip?: string;
  /** Replica-set name (default "testset"). */
  name?: string;
  spawn?: unknown;
  storageEngine?: string;
  configSettings?: Record<string, unknown>;
  dispose?: { enabled?: boolean; cleanup?: Cleanup };
}

export interface MongoMemoryReplSetOpts {
  /** Per-member options; mongosim members listen on consecutive ports from the first one's port. */
  instanceOpts?: MemoryServerInstanceOpts[];
  binary?: MongoBinaryOpts;
  replSet?: ReplSetOpts;
  simArgs?: string[];
}

/** One member as replSet.servers lists it. */
export interface MongoMemoryReplSetMember {
  readonly state: MongoMemoryServerStates;
  readonly instanceInfo: { port: number; ip: string; dbName: string; replSet: string; storageEngine: string };
  getUri(otherDb?: string, otherIp?: string): string;
  /** Not supported by mongosim: rejects; use stepDown(). */
  stop(): Promise<never>;
}

export declare class MongoMemoryReplSet extends FaultHelpers {
  opts: MongoMemoryReplSetOpts;
  servers: MongoMemoryReplSetMember[];
  constructor(opts?: MongoMemoryReplSetOpts);
  static create(opts?: MongoMemoryReplSetOpts): Promise<MongoMemoryReplSet>;
  start(): Promise<void>;
  waitUntilRunning(): Promise<void>;
  stop(cleanupOptions?: boolean | Cleanup): Promise<boolean>;
  cleanup(options?: boolean | Cleanup): Promise<void>;
  getUri(otherDb?: string, otherIp?: string): string;
  get state(): MongoMemoryReplSetStates;
  get replSetOpts(): ReplSetOpts;
}

export interface MongoMemoryShardedOpts {
  /** Shards, each a replica set (default 2). */
  shards?: number;
  /** mongos routers (default 2); getUri() lists them. */
  routers?: number;
  /** Members of each shard's replica set (default 1). */
  members?: number;
  /** A load balancer in front of the routers; getUri() has loadBalanced=true. */
  loadBalanced?: boolean;
  auth?: AutomaticAuth;
  ip?: string;
  dbName?: string;
  args?: string[];
  simArgs?: string[];
  launchTimeout?: number;
}

export declare class MongoMemorySharded extends FaultHelpers {
  opts: MongoMemoryShardedOpts;
  constructor(opts?: MongoMemoryShardedOpts);
  static create(opts?: MongoMemoryShardedOpts): Promise<MongoMemorySharded>;
  start(): Promise<void>;
  waitUntilRunning(): Promise<void>;
  stop(): Promise<boolean>;
  cleanup(): Promise<void>;
  getUri(otherDb?: string, otherIp?: string): string;
  get state(): MongoMemoryReplSetStates;
  readonly routers: string[];
  readonly shards: { uri: string; members: string[] }[];
}

/** An admin command a fault helper sent was refused. */
export declare class MongoSimCommandError extends Error {
  code: number;
  codeName?: string;
  reply: Record<string, unknown>;
}

/** The sturdy binary this package runs (STURDY_SIM_BINARY or the platform package's). */
export declare function binaryPath(): string;

export default MongoMemoryServer;
