#!/usr/bin/env python3
"""Builds the sturdy-sim wheel for one platform, with nothing but the
standard library (no network, no build backend): the package, the sturdy
binary, and the dist-info files the wheel format requires (METADATA, WHEEL,
entry_points.txt registering the pytest plugin, RECORD).

    build_wheel.py --binary dist/sturdy_linux_amd64 --goos linux --goarch amd64 \
        --version 1.2.3 --out dist/python
"""

import argparse
import base64
import hashlib
import io
import os
import re
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

# Go target → wheel platform tags. The Linux binaries are static, so they
# run on glibc (manylinux) and musl (Alpine) alike; Go 1.25+ needs macOS 12.
PLATFORM_TAGS = {
    ("linux", "amd64"): ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"],
    ("linux", "arm64"): ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"],
    ("darwin", "amd64"): ["macosx_12_0_x86_64"],
    ("darwin", "arm64"): ["macosx_12_0_arm64"],
    ("windows", "amd64"): ["win_amd64"],
    ("windows", "arm64"): ["win_arm64"],
}


def pep440(version):
    """1.2.3 stays; 1.2.3-rc.1 becomes 1.2.3rc1; other pre-releases such as
    0.0.0-dev.gabc1234 become 0.0.0.dev0+gabc1234."""
    base, _, pre = version.partition("-")
    if not pre:
        return base
    m = re.fullmatch(r"(alpha|a|beta|b|rc)\.?(\d+)", pre)
    if m:
        return base + {"alpha": "a", "a": "a", "beta": "b", "b": "b", "rc": "rc"}[m.group(1)] + m.group(2)
    local = re.sub(r"[^A-Za-z0-9]+", ".", (pre[3:] if pre.startswith("dev") else pre).strip(".-")) or "0"
    return base + ".dev0+" + local


def metadata(version):
    readme = open(os.path.join(HERE, "README.md"), encoding="utf-8").read()
    return (
        "Metadata-Version: 2.1\n"
        "Name: sturdy-sim\n"
        "Version: %s\n"
        "Summary: mongosim, an in-memory MongoDB-compatible server, with pytest fixtures: no mongod download\n"
        "Home-page: https://github.com/sturdy-go/sturdy\n"
        "Keywords: mongodb,pytest,testing,in-memory\n"
        "Classifier: Framework :: Pytest\n"
        "Classifier: Topic :: Software Development :: Testing\n"
        "Requires-Python: >=3.8\n"
        "Description-Content-Type: text/markdown\n"
        "\n%s" % (version, readme))


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build(binary, goos, goarch, version, out):
    tags = PLATFORM_TAGS[(goos, goarch)]
    pyver = pep440(version)
    distinfo = "sturdy_sim-%s.dist-info" % pyver
    files = []  # (name, data, executable)
    pkg = os.path.join(HERE, "sturdy_sim")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(pkg, name), "rb") as f:
                files.append(("sturdy_sim/" + name, f.read(), False))
    with open(binary, "rb") as f:
        files.append(("sturdy_sim/bin/" + ("sturdy.exe" if goos == "windows" else "sturdy"), f.read(), True))
    wheel = "Wheel-Version: 1.0\nGenerator: sturdy packaging/python/build_wheel.py\nRoot-Is-Purelib: false\n"
    wheel += "".join("Tag: py3-none-%s\n" % t for t in tags)
    files.append((distinfo + "/METADATA", metadata(pyver).encode(), False))
    files.append((distinfo + "/WHEEL", wheel.encode(), False))
    files.append((distinfo + "/entry_points.txt", b"[pytest11]\nmongosim = sturdy_sim.pytest_plugin\n", False))
    record = "".join(record_line(n, d) + "\n" for n, d, _ in files) + distinfo + "/RECORD,,\n"
    files.append((distinfo + "/RECORD", record.encode(), False))

    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "sturdy_sim-%s-py3-none-%s.whl" % (pyver, ".".join(tags)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            z.writestr(info, data)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--goos", required=True, choices=sorted({k[0] for k in PLATFORM_TAGS}))
    ap.add_argument("--goarch", required=True, choices=sorted({k[1] for k in PLATFORM_TAGS}))
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    print("build_wheel.py:", build(a.binary, a.goos, a.goarch, a.version, a.out))


if __name__ == "__main__":
    main()
