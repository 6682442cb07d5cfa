"""A stand-in for untrusted code (say, written by an AI agent): it does real
work with the standard library, and also tries a few things a sandbox
must stop. Run by `make demo` inside the python bundle under cordon."""

import ctypes
import json
import os
import socket
import sqlite3
import subprocess
import threading


def attempt(what, fn):
    try:
        result = fn()
        print(f"  {what}: allowed -> {result}")
    except OSError as e:
        print(f"  {what}: BLOCKED ({e.strerror})")


print("Useful work, unchanged under the supervisor:")
with open("/tmp/notes.json", "w") as f:
    json.dump({"items": list(range(5))}, f)
print("  wrote /tmp/notes.json:", json.load(open("/tmp/notes.json")))
db = sqlite3.connect("/tmp/app.db")
db.execute("create table t (x)")
db.executemany("insert into t values (?)", [(i,) for i in range(100)])
print("  sqlite3 sum:", db.execute("select sum(x) from t").fetchone()[0])
print("  subprocess:", subprocess.run(["echo", "hello from a child"], capture_output=True, text=True).stdout.strip())
results = []
threads = [threading.Thread(target=lambda i=i: results.append(len(open("/etc/os-release").read()) + i * 0)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print("  8 threads read /etc/os-release:", len(results), "ok")

print("What the container sees of the kernel (emulated uname):")
u = os.uname()
print(f"  {u.sysname} {u.release} {u.version} (the host's real kernel version stays hidden)")

print("Things a sandbox must stop:")
attempt("read kernel symbol addresses (/proc/kallsyms)", lambda: f"{len(open('/proc/kallsyms').read())} bytes of them")
attempt("overwrite core_pattern (runs a program on the host)", lambda: open("/proc/sys/kernel/core_pattern", "w").write("|/tmp/x"))
attempt(
    "reach the cloud metadata service (169.254.169.254:80)",
    lambda: socket.create_connection(("169.254.169.254", 80), timeout=2),
)
libc = ctypes.CDLL(None, use_errno=True)


def unshare_user():
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return "new user namespace"


attempt("create a user namespace (unshare CLONE_NEWUSER)", unshare_user)
attempt("load a BPF program (bpf)", lambda: libc.syscall(321, 0, 0, 0) == 0 or (_ for _ in ()).throw(OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))))
