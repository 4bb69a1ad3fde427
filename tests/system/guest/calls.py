"""Apps of the system test, run in the VM as users alice and bob.

    calls.py echo N          serve "echo" and call it N times, every reply
                             byte-checked; prints "echo: N calls ok"
    calls.py denied          connect and expect mcdma.PermissionDenied
    calls.py drain MARKER    serve "slow" (the handler takes 3 s) and call
                             it; touches MARKER once the handler runs, so
                             the daemon can be stopped with the call in
                             flight; the call must still return its reply
Exit 0 iff what was expected happened.
"""
import os
import sys
import threading
import time

import mcdma


def echo(n):
    with mcdma.Client(app_name="system-echo") as c:
        c.serve("echo", lambda req, info: b"re:" + bytes(req))
        for i in range(n):
            payload = os.urandom(64 + i)
            got = c.call("echo", payload, timeout=10)
            if got != b"re:" + payload:
                print(f"echo: call {i}: wrong reply ({len(got)} bytes)")
                return 1
    print(f"echo: {n} calls ok")
    return 0


def denied():
    try:
        mcdma.Client(app_name="system-denied")
    except mcdma.PermissionDenied as e:
        print(f"denied: PermissionDenied: {e}")
        return 0
    except mcdma.Error as e:
        print(f"denied: expected PermissionDenied, got {type(e).__name__}: {e}")
        return 1
    print("denied: connected, but expected PermissionDenied")
    return 1


def drain(marker):
    started = threading.Event()

    def slow(req, info):
        started.set()
        with open(marker, "w") as f:
            f.write("in flight\n")
        time.sleep(3)
        return b"done:" + bytes(req)

    with mcdma.Client(app_name="system-drain") as server, mcdma.Client(app_name="system-caller") as caller:
        server.serve("slow", slow)
        t0 = time.monotonic()
        try:
            got = caller.call("slow", b"drain-me", timeout=15)
        except mcdma.Error as e:
            print(f"drain: the call in flight failed: {type(e).__name__}: {e}")
            return 1
        took = time.monotonic() - t0
        if got != b"done:drain-me":
            print(f"drain: wrong reply {got!r}")
            return 1
        print(f"drain: the call in flight returned its reply after {took:.1f} s")
        return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "echo":
        sys.exit(echo(int(sys.argv[2])))
    if mode == "denied":
        sys.exit(denied())
    if mode == "drain":
        sys.exit(drain(sys.argv[2]))
    print(f"calls.py: unknown mode {mode}")
    sys.exit(2)
