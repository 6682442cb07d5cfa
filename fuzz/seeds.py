#!/usr/bin/env python3
"""Writes the hand-made binary seeds of the fuzz corpus (x86-64 layouts).

decode: first byte picks the decoder (see fuzz_targets/decode.rs).
policy: structured seeds start with 0xFF (see fuzz_targets/policy.rs).
Run from anywhere: python3 fuzz/seeds.py
"""
import os
import socket
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def sin(port, ip, family=socket.AF_INET):
    return struct.pack("=H", family) + struct.pack(">H", port) + socket.inet_aton(ip) + bytes(8)


def sin6(port, ip):
    return struct.pack("=H", socket.AF_INET6) + struct.pack(">H", port) + bytes(4) + socket.inet_pton(socket.AF_INET6, ip) + bytes(4)


def sun(path):
    return struct.pack("=H", socket.AF_UNIX) + path


# 0: C strings (byte 1: limit, 0 = PATH_MAX)
cstr = [
    ("path-etc-passwd", 0, b"/etc/passwd\0"),
    ("path-proc-self-fd", 0, b"/proc/self/fd/3/sub/dir\0junk"),
    ("path-thread-self", 0, b"/proc/thread-self/root/etc\0"),
    ("path-dev-stdin", 0, b"/dev/stdin\0"),
    ("path-relative", 0, b"a/b/../c/\0"),
    ("path-long", 16, b"/" + b"x" * 40),
    ("path-unterminated", 0, b"/tmp/no-nul"),
    ("path-empty", 0, b"\0"),
]
for name, limit, s in cstr:
    write("decode", "cstr-" + name, bytes([0, limit]) + s)

# 1: socket addresses
addrs = {
    "in-metadata": sin(80, "169.254.169.254"),
    "in-short": sin(443, "10.0.0.1")[:6],
    "unspec-metadata": sin(53, "169.254.169.254", family=0),
    "in6-linklocal": sin6(443, "fe80::1"),
    "in6-mapped": sin6(80, "::ffff:169.254.169.254"),
    "in6-nat64": sin6(80, "64:ff9b::a9fe:a9fe"),
    "un-path": sun(b"/run/app.sock\0"),
    "un-relative": sun(b"sock"),
    "un-abstract": sun(b"\0abstract"),
    "too-long": b"\x01\x00" + b"A" * 130,
}
for name, a in addrs.items():
    write("decode", "addr-" + name, bytes([1]) + a)

# 2: struct open_how (+ extension)
O_CREAT, O_TMPFILE, O_WRONLY = 0o100, 0o20200000, 1
hows = {
    "plain": struct.pack("=QQQ", 0, 0, 0),
    "creat": struct.pack("=QQQ", O_CREAT | O_WRONLY, 0o644, 0x10),
    "tmpfile": struct.pack("=QQQ", O_TMPFILE | 2, 0o600, 0),
    "mode-no-creat": struct.pack("=QQQ", 0, 0o644, 0),
    "ext-zero": struct.pack("=QQQ", 0, 0, 0x08) + bytes(16),
    "ext-nonzero": struct.pack("=QQQ", 0, 0, 0) + bytes(7) + b"\x01",
    "short": struct.pack("=QQ", 0, 0),
}
for name, h in hows.items():
    write("decode", "openhow-" + name, bytes([2]) + h)


# 3: msghdr + caller memory at address 0
def msghdr(name, namelen, iov, iovlen, control, controllen):
    return struct.pack("=QIIQQQQiI", name, namelen, 0, iov, iovlen, control, controllen, 0, 0)


mem = b"hello, world" + bytes(4) + struct.pack("=QQ", 0, 5) + struct.pack("=QQ", 7, 5)
write("decode", "msg-two-iovecs", bytes([3]) + msghdr(0, 0, 16, 2, 0, 0) + mem)
write("decode", "msg-iov-wraps", bytes([3]) + msghdr(0, 0, 2**64 - 16, 3, 0, 0) + mem)
write("decode", "msg-too-many", bytes([3]) + msghdr(0, 0, 16, 1025, 0, 0) + mem)
write("decode", "msg-huge-len", bytes([3]) + msghdr(0, 0, 0, 1, 0, 0) + struct.pack("=QQ", 0, 2**63))


# 4: control messages
def cmsg(level, kind, data, length=None):
    n = 16 + len(data) if length is None else length
    pad = (-(16 + len(data))) % 8
    return struct.pack("=Qii", n, level, kind) + data + bytes(pad)


SOL_SOCKET, SCM_RIGHTS, SCM_CREDENTIALS = 1, 1, 2
write("decode", "cmsg-rights", bytes([4]) + cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("=iii", 0, 1, 2)))
write("decode", "cmsg-two", bytes([4]) + cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("=i", 3)) + cmsg(SOL_SOCKET, SCM_CREDENTIALS, struct.pack("=iII", 1, 0, 0)))
write("decode", "cmsg-len-huge", bytes([4]) + cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("=i", 3), length=2**64 - 1))
write("decode", "cmsg-len-short", bytes([4]) + cmsg(SOL_SOCKET, SCM_RIGHTS, b"", length=8))

# 5: raw paths
for name, p in {"root": b"/", "proc-pid-cwd": b"/proc/12/cwd", "proc-task-fd": b"/proc/1/task/1/fd/7/x", "slashes": b"///a//b///"}.items():
    write("decode", "raw-" + name, bytes([5]) + p)

# 6: DNS messages (RFC 1035 section 4.1)
def qname(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".") if l) + b"\0"


def dns_query(name, qtype=1, flags=0x0100):
    return struct.pack(">HHHHHH", 7, flags, 1, 0, 0, 0) + qname(name) + struct.pack(">HH", qtype, 1)


def dns_answer(name, cname=None, addr=b"\x0a\x4d\x00\x01"):
    q = qname(name) + struct.pack(">HH", 1, 1)
    rrs = b""
    owner = b"\xc0\x0c"
    n = 0
    if cname:
        target = qname(cname)
        rrs += owner + struct.pack(">HHIH", 5, 1, 300, len(target)) + target
        owner = struct.pack(">H", 0xC000 | (12 + len(q) + 12))
        n += 1
    rrs += owner + struct.pack(">HHIH", 1, 1, 300, 4) + addr
    n += 1
    return struct.pack(">HHHHHH", 7, 0x8180, 1, n, 0, 0) + q + rrs


write("decode", "dns-query", bytes([6]) + dns_query("pypi.org"))
write("decode", "dns-query-opcode", bytes([6]) + dns_query("pypi.org", flags=0x2900))
write("decode", "dns-query-dotted-label", bytes([6]) + struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x08pypi.org\x00\x00\x01\x00\x01")
write("decode", "dns-answer", bytes([6]) + dns_answer("allowed.test"))
write("decode", "dns-answer-cname", bytes([6]) + dns_answer("allowed.test", "edge.cdn.test"))
write("decode", "dns-pointer-loop", bytes([6]) + struct.pack(">HHHHHH", 7, 0x8180, 1, 1, 0, 0) + b"\xc0\x0c\x00\x01\x00\x01")

# policy, structured: 0xFF, extends, default action, then rules
# rule: nnames, name bytes.., action, [errno choice], nargs, (op, index, [mask], value)...
def rule(names, action, args):
    out = bytes([len(names) - 1]) + bytes(names) + bytes([action])
    if action == 1:
        out += bytes([1])  # no errno
    out += bytes([len(args)])
    for op, index, mask, value in args:
        out += bytes([op, index]) + (struct.pack("<Q", mask) if op == 2 else b"") + struct.pack("<Q", value)
    return out + bytes([1])  # no path rule


write("policy", "structured-args", b"\xff\x01\x00" + rule([5, 9], 1, [(0, 0, 0, 1), (1, 1, 0, 2), (2, 2, 0xff00, 0x1200)]) + rule([20], 4, []))
write("policy", "structured-many-args", b"\xff\x01\x00" + rule([30], 1, [(2, i % 6, 0xffff, i) for i in range(50)]))
