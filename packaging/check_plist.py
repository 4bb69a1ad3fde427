"""Checks the configured launchd plist: it parses as a property list and
starts mcdma-rpcd from the install's bin directory with the installed
config, under the label and the limits the daemon needs.

usage: check_plist.py PLIST EXPECTED_PROGRAM EXPECTED_CONFIG
"""
import plistlib
import sys


def main() -> int:
    path, program, config = sys.argv[1:4]
    with open(path, "rb") as f:
        plist = plistlib.load(f)
    problems = []
    want = {"Label": "org.mcdma.rpcd", "RunAtLoad": True, "KeepAlive": True}
    for key, value in want.items():
        if plist.get(key) != value:
            problems.append(f"{key} is {plist.get(key)!r}, want {value!r}")
    args = plist.get("ProgramArguments", [])
    if args != [program, "--config", config]:
        problems.append(f"ProgramArguments is {args!r}, want {[program, '--config', config]!r}")
    for limits in ("SoftResourceLimits", "HardResourceLimits"):
        memlock = plist.get(limits, {}).get("MemoryLock")
        if memlock is None or memlock < 2**62:
            problems.append(f"{limits}.MemoryLock is {memlock!r}: registered memory needs it unlimited")
    if not str(plist.get("ExitTimeOut", 0)).isdigit() or int(plist.get("ExitTimeOut", 0)) <= 5:
        problems.append("ExitTimeOut must exceed the 5 s drain timeout")
    for p in problems:
        print(f"check_plist: {path}: {p}")
    if problems:
        return 1
    print(f"check_plist: {path}: ok ({len(plist)} keys; runs {' '.join(args)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
