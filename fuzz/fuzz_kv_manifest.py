"""Fuzzes the KV hand-off's messages (bindings/python/mcdma/_kv_wire.py,
_kv_import.py, _kv_export.py) with atheris: what one app receives from
another, maybe on another host.

Input: a selector byte, then the message bytes.
  even: a consumer's request to the producer (KVExport._serve);
  odd:  the producer's open reply (manifest and published layers) as a new
        KVImport receives it, then, one per line, the events it is notified
        of (KVImport._next_event).
Every malformed message must end in an mcdma error (Invalid, a hand-off
error, ...); any other exception is a finding.

Run: scripts/fuzz.sh kv_manifest SECONDS (uses the dev venv's atheris).
"""

import sys

import atheris

with atheris.instrument_imports(include=["mcdma"]):
    import kv_harness

Error = kv_harness.mods.errors.Error
PRODUCER = kv_harness.producer()


def test_one_input(data: bytes) -> None:
    if not data:
        return
    which, body = data[0], data[1:]
    if which % 2 == 0:
        try:
            PRODUCER._serve(body, None)
        except Error:
            pass
        return
    reply, *events = body.split(b"\n")
    try:
        consumer = kv_harness.consumer(reply, events[:16])
    except Error:
        return
    try:
        while consumer._next_event(block=False) is not None:
            pass
    except Error:
        pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
