"""The KV hand-off's Python code without libmcdma, for the manifest fuzzer
and its corpus generator: the package's modules are loaded from
bindings/python/mcdma without running its __init__ (which needs the
compiled extension), with a stand-in `mcdma._mcdma` that holds only the
names the modules import, and a stand-in client that answers from bytes
given to it.

Only the transport is faked: the producer (KVExport) and the consumer
(KVImport) and their checks are the package's own code.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys
import types
from typing import Any, Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bindings" / "python" / "mcdma"
CODES_H = ROOT / "client" / "include" / "mcdma" / "codes.h"


def _x_list(macro: str) -> List[tuple]:
    """(NAME, value) pairs of one X-macro list in codes.h, as the
    extension's codes() and reasons() return them."""
    text = CODES_H.read_text()
    block = text[text.index(f"#define {macro}(X)"):]
    block = block[:block.index("\n\n")]
    return [(name, int(value)) for name, value in re.findall(r"X\((\w+), (\d+),", block)]


class Buffer:
    """Stands in for mcdma.Buffer: a size, no memory."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def __len__(self) -> int:
        return self.nbytes


class RemoteBuffer:
    def __init__(self, length: int) -> None:
        self.length = length


def _load() -> types.SimpleNamespace:
    if "mcdma" not in sys.modules:
        package = types.ModuleType("mcdma")
        package.__path__ = [str(PACKAGE)]
        sys.modules["mcdma"] = package
        ext = types.ModuleType("mcdma._mcdma")
        for name in ("CallInfo", "SessionInfo", "Client", "Subscription"):
            setattr(ext, name, type(name, (), {}))
        ext.Buffer = Buffer
        ext.RemoteBuffer = RemoteBuffer
        ext.checksum = lambda *args, **kwargs: 0
        ext.__version__ = "0"
        codes, reasons = _x_list("MCDMA_CODE_LIST"), _x_list("MCDMA_REASON_LIST")
        ext.codes = lambda: codes
        ext.reasons = lambda: reasons
        ext._set_error_factory = lambda factory: None
        sys.modules["mcdma._mcdma"] = ext
    return types.SimpleNamespace(
        wire=importlib.import_module("mcdma._kv_wire"),
        errors=importlib.import_module("mcdma._errors"),
        kv_export=importlib.import_module("mcdma._kv_export"),
        kv_import=importlib.import_module("mcdma._kv_import"),
    )


mods = _load()


class Subscription:
    def __init__(self, events: List[bytes]) -> None:
        self.service = "mcdma.kv.fuzz.in.0"
        self._events = list(events)

    def poll(self) -> Optional[bytes]:
        return self._events.pop(0) if self._events else None

    def wait(self, timeout: float = 0.0) -> Optional[bytes]:
        return self.poll()

    def close(self) -> None:
        pass


class Client:
    """Answers the consumer's calls with `reply` and holds what the producer
    registers; every export resolves to `export_length` bytes."""

    def __init__(self, reply: bytes = b"", events: Optional[List[bytes]] = None,
                 export_length: int = 1 << 40) -> None:
        self.info = types.SimpleNamespace(host_id="host-a")
        self.reply = reply
        self.events = events or []
        self.export_length = export_length

    # consumer side
    def call(self, service: str, data: bytes, timeout: float = 0.0) -> bytes:
        return self.reply

    def subscribe(self, name: str) -> Subscription:
        return Subscription(self.events)

    def resolve(self, name: str, peer: Optional[str] = None) -> RemoteBuffer:
        return RemoteBuffer(self.export_length)

    def release(self, remote: Any) -> None:
        pass

    def alloc(self, nbytes: int) -> Buffer:
        return Buffer(nbytes)

    # producer side
    def export(self, buffer: Any, name: str, **kwargs: Any) -> None:
        pass

    def serve(self, name: str, handler: Any) -> str:
        return name

    def unserve(self, service: Any) -> None:
        pass

    def unexport(self, name: str) -> None:
        pass

    def notify(self, target: str, data: bytes, timeout: float = 0.0) -> None:
        pass


LAYERS = [4096, 8192]
MANIFEST: Dict[str, Any] = {"model": "fuzz-model", "dtype": "float16", "token_digest": "d1"}


def producer() -> Any:
    """A real KVExport of two layers (no TTL timer), and the client under it."""
    client = Client()
    export = mods.kv_export.KVExport(client, "fuzz", [Buffer(n) for n in LAYERS], dict(MANIFEST),
                                     allowed_peers=["host-b"], ttl=None)
    return export


def consumer(reply: bytes, events: List[bytes]) -> Any:
    """A real KVImport whose open call is answered with `reply`."""
    client = Client(reply, events)
    return mods.kv_import.KVImport(client, None, "fuzz", expect={"dtype": "float16"},
                                   token_digest="d1", deadline=5.0)
