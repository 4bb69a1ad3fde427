"""Writes the KV manifest fuzzer's seed corpus (fuzz/corpus/kv_manifest/)
and dictionary (fuzz/dict/kv_manifest.dict) from the package's own producer:
a real KVExport answers a consumer's open and status requests (encoded with
_kv_wire.encode) before and after publishing a layer, and records the
events it would notify.

Run: /opt/mcdma-dev/venv/bin/python fuzz/make_kv_corpus.py
"""

import pathlib

import kv_harness

HERE = pathlib.Path(__file__).resolve().parent
wire = kv_harness.mods.wire


class Recorder(kv_harness.Client):
    def __init__(self) -> None:
        super().__init__()
        self.notified = []

    def notify(self, target: str, data: bytes, timeout: float = 0.0) -> None:
        self.notified.append(data)


def main() -> None:
    out = HERE / "corpus" / "kv_manifest"
    out.mkdir(parents=True, exist_ok=True)
    client = Recorder()
    export = kv_harness.mods.kv_export.KVExport(
        client, "fuzz", [kv_harness.Buffer(n) for n in kv_harness.LAYERS],
        dict(kv_harness.MANIFEST), allowed_peers=["host-b"], ttl=None)
    open_request = wire.encode({"op": "open", "host": "host-b", "notify": "mcdma.kv.fuzz.in.0"})
    files = {
        "request_open": b"\x00" + open_request,
        "request_status": b"\x00" + wire.encode({"op": "status"}),
        "request_done": b"\x00" + wire.encode({"op": "done", "host": "host-b"}),
        "reply_open": b"\x01" + export._serve(open_request, None),
    }
    export.publish_layer(0)
    export.publish_layer(1)
    reply = export._serve(open_request, None)
    files["reply_open_published"] = b"\x01" + reply
    export.revoke("the producer stopped")
    files["reply_then_events"] = (b"\x01" + files["reply_open"][1:] + b"\n" +
                                  b"\n".join(client.notified))
    files["reply_revoked"] = b"\x01" + export._serve(wire.encode({"op": "status"}), None)
    for name, data in files.items():
        (out / name).write_bytes(data)
    words = ["state", "open", "closed", "revoked", "expired", "reason", "manifest", "published",
             "format", wire.FORMAT, "n_layers", "layer_nbytes", "checksum", "xxh3-64", "event",
             "layer", "op", "status", "done", "host", "notify", "token_digest", "dtype", "null",
             "true", "false"]
    (HERE / "dict").mkdir(exist_ok=True)
    (HERE / "dict" / "kv_manifest.dict").write_text("".join(f'"\\"{w}\\""\n' for w in words))


if __name__ == "__main__":
    main()
