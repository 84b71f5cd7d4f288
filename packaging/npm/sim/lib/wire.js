'use strict';
// A minimal MongoDB wire client: one OP_MSG command per TCP connection, with
// just enough BSON to send admin commands (hello, configureFailPoint,
// replSetStepDown, setParameter) and read their replies. It keeps this
// package free of dependencies: the user's own driver does the real work.

const net = require('node:net');

const OP_MSG = 2013;

function cstring(s) {
  return Buffer.concat([Buffer.from(s, 'utf8'), Buffer.from([0])]);
}

function encodeDoc(doc) {
  const parts = [];
  const entries = Array.isArray(doc) ? doc.map((v, i) => [String(i), v]) : Object.entries(doc);
  for (const [k, v] of entries) {
    if (v === undefined) continue;
    const key = cstring(k);
    if (v === null) {
      parts.push(Buffer.from([0x0a]), key);
    } else if (typeof v === 'boolean') {
      parts.push(Buffer.from([0x08]), key, Buffer.from([v ? 1 : 0]));
    } else if (typeof v === 'string') {
      const s = Buffer.from(v, 'utf8');
      const len = Buffer.alloc(4);
      len.writeInt32LE(s.length + 1);
      parts.push(Buffer.from([0x02]), key, len, s, Buffer.from([0]));
    } else if (typeof v === 'bigint') {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(v);
      parts.push(Buffer.from([0x12]), key, b);
    } else if (typeof v === 'number' && Number.isInteger(v) && v >= -0x80000000 && v <= 0x7fffffff) {
      const b = Buffer.alloc(4);
      b.writeInt32LE(v);
      parts.push(Buffer.from([0x10]), key, b);
    } else if (typeof v === 'number') {
      const b = Buffer.alloc(8);
      b.writeDoubleLE(v);
      parts.push(Buffer.from([0x01]), key, b);
    } else if (typeof v === 'object') {
      parts.push(Buffer.from([Array.isArray(v) ? 0x04 : 0x03]), key, encodeDoc(v));
    } else {
      throw new TypeError(`cannot encode ${typeof v} field "${k}"`);
    }
  }
  const body = Buffer.concat(parts);
  const out = Buffer.alloc(body.length + 5);
  out.writeInt32LE(out.length);
  body.copy(out, 4);
  return out;
}

// decodeDoc reads every BSON type a server reply can carry; values this
// package never inspects (ObjectId, binary, regex, decimal) come back as
// opaque strings or buffers.
function decodeDoc(buf, start = 0, isArray = false) {
  const end = start + buf.readInt32LE(start) - 1;
  const out = isArray ? [] : {};
  let i = start + 4;
  while (i < end) {
    const type = buf[i++];
    const z = buf.indexOf(0, i);
    const key = buf.toString('utf8', i, z);
    i = z + 1;
    let v;
    switch (type) {
      case 0x01: v = buf.readDoubleLE(i); i += 8; break;
      case 0x02: case 0x0d: case 0x0e: {
        const n = buf.readInt32LE(i);
        v = buf.toString('utf8', i + 4, i + 4 + n - 1);
        i += 4 + n;
        break;
      }
      case 0x03: case 0x04: v = decodeDoc(buf, i, type === 0x04); i += buf.readInt32LE(i); break;
      case 0x05: {
        const n = buf.readInt32LE(i);
        v = buf.subarray(i + 5, i + 5 + n);
        i += 5 + n;
        break;
      }
      case 0x06: case 0x0a: case 0x7f: case 0xff: v = null; break;
      case 0x07: v = buf.toString('hex', i, i + 12); i += 12; break;
      case 0x08: v = buf[i] !== 0; i += 1; break;
      case 0x09: v = new Date(Number(buf.readBigInt64LE(i))); i += 8; break;
      case 0x0b: {
        const a = buf.indexOf(0, i);
        const b = buf.indexOf(0, a + 1);
        v = `/${buf.toString('utf8', i, a)}/${buf.toString('utf8', a + 1, b)}`;
        i = b + 1;
        break;
      }
      case 0x10: v = buf.readInt32LE(i); i += 4; break;
      case 0x11: v = { t: buf.readUInt32LE(i + 4), i: buf.readUInt32LE(i) }; i += 8; break;
      case 0x12: v = Number(buf.readBigInt64LE(i)); i += 8; break;
      case 0x13: v = buf.subarray(i, i + 16); i += 16; break;
      default: throw new Error(`unsupported BSON type 0x${type.toString(16)} in reply`);
    }
    if (isArray) out.push(v); else out[key] = v;
  }
  return out;
}

let requestID = 0;

/** An error reply (ok: 0) to a command this package sent. */
class CommandError extends Error {
  constructor(host, command, reply) {
    super(`${command} on ${host} failed: ${reply.errmsg ?? 'unknown error'} (code ${reply.code})`);
    this.name = 'MongoSimCommandError';
    this.code = reply.code;
    this.codeName = reply.codeName;
    this.reply = reply;
  }
}

/**
 * Runs one command on host ("ip:port") in database db and returns the reply
 * document; an ok: 0 reply throws CommandError.
 */
function command(host, db, cmd, { timeoutMS = 10000 } = {}) {
  const idx = host.lastIndexOf(':');
  const hostname = host.slice(0, idx).replace(/^\[|\]$/g, '');
  const port = Number(host.slice(idx + 1));
  const body = encodeDoc({ ...cmd, $db: db });
  const header = Buffer.alloc(21);
  header.writeInt32LE(21 + body.length, 0);
  header.writeInt32LE(++requestID & 0x7fffffff, 4);
  header.writeInt32LE(0, 8);
  header.writeInt32LE(OP_MSG, 12);
  header.writeUInt32LE(0, 16); // flag bits
  header[20] = 0; // section kind 0: the body
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: hostname, port });
    const chunks = [];
    let got = 0;
    const fail = err => { sock.destroy(); reject(err); };
    sock.setTimeout(timeoutMS, () => fail(new Error(`${Object.keys(cmd)[0]} on ${host}: no reply within ${timeoutMS} ms`)));
    sock.once('error', fail);
    sock.once('connect', () => sock.write(Buffer.concat([header, body])));
    sock.on('data', chunk => {
      chunks.push(chunk);
      got += chunk.length;
      const buf = Buffer.concat(chunks);
      if (got < 4 || got < buf.readInt32LE(0)) return;
      sock.destroy();
      try {
        if (buf.readInt32LE(12) !== OP_MSG || buf[20] !== 0) throw new Error(`unexpected reply from ${host}`);
        const reply = decodeDoc(buf, 21);
        if (reply.ok !== 1) throw new CommandError(host, Object.keys(cmd)[0], reply);
        resolve(reply);
      } catch (err) {
        reject(err);
      }
    });
    sock.once('close', () => reject(new Error(`${Object.keys(cmd)[0]} on ${host}: connection closed before the reply`)));
  });
}

module.exports = { command, encodeDoc, decodeDoc, CommandError };
