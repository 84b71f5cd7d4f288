"""A minimal MongoDB wire client: one hello per connection, enough BSON to
read the reply. It checks a deployment is ready without any dependency."""

import socket
import struct

_OP_MSG = 2013


def _cstring(s):
    return s.encode() + b"\x00"


def _hello_msg(request_id):
    body = b"\x10" + _cstring("hello") + struct.pack("<i", 1)
    body += b"\x02" + _cstring("$db") + struct.pack("<i", 6) + b"admin\x00"
    doc = struct.pack("<i", len(body) + 5) + body + b"\x00"
    payload = struct.pack("<I", 0) + b"\x00" + doc
    return struct.pack("<iiii", 16 + len(payload), request_id, 0, _OP_MSG) + payload


def _decode(buf, i=0, is_array=False):
    """Decodes the BSON document at buf[i:]; types it does not read are
    skipped by size and come back as None."""
    end = i + struct.unpack_from("<i", buf, i)[0] - 1
    out = [] if is_array else {}
    i += 4
    while i < end:
        t = buf[i]
        z = buf.index(b"\x00", i + 1)
        key = buf[i + 1:z].decode()
        i = z + 1
        v = None
        if t == 0x01:
            v = struct.unpack_from("<d", buf, i)[0]
            i += 8
        elif t in (0x02, 0x0D, 0x0E):
            n = struct.unpack_from("<i", buf, i)[0]
            v = buf[i + 4:i + 3 + n].decode()
            i += 4 + n
        elif t in (0x03, 0x04):
            v = _decode(buf, i, t == 0x04)
            i += struct.unpack_from("<i", buf, i)[0]
        elif t == 0x05:
            i += 5 + struct.unpack_from("<i", buf, i)[0]
        elif t == 0x07:
            i += 12
        elif t == 0x08:
            v = buf[i] != 0
            i += 1
        elif t in (0x09, 0x11, 0x12):
            v = struct.unpack_from("<q", buf, i)[0]
            i += 8
        elif t == 0x0B:
            a = buf.index(b"\x00", i)
            i = buf.index(b"\x00", a + 1) + 1
        elif t == 0x10:
            v = struct.unpack_from("<i", buf, i)[0]
            i += 4
        elif t == 0x13:
            i += 16
        elif t not in (0x06, 0x0A, 0x7F, 0xFF):
            raise ValueError("unsupported BSON type 0x%x in reply" % t)
        if is_array:
            out.append(v)
        else:
            out[key] = v
    return out


def hello(host, timeout=5.0):
    """Sends hello to host ("ip:port") and returns the reply as a dict."""
    ip, _, port = host.rpartition(":")
    with socket.create_connection((ip.strip("[]"), int(port)), timeout=timeout) as s:
        s.sendall(_hello_msg(1))
        buf = b""
        while len(buf) < 4 or len(buf) < struct.unpack_from("<i", buf)[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("%s closed the connection before replying to hello" % host)
            buf += chunk
    if struct.unpack_from("<i", buf, 12)[0] != _OP_MSG or buf[20] != 0:
        raise ValueError("unexpected reply to hello from %s" % host)
    return _decode(buf, 21)
