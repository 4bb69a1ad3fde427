"""Type stubs of the mcdma._mcdma extension (the C++ layer of mcdma)."""

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

__version__: str

def codes() -> List[Tuple[str, int]]:
    """Every mcdma status code as (NAME, value) pairs, in numeric order (OK first)."""

def reasons() -> List[Tuple[str, int]]:
    """Every mcdma reason as (NAME, value) pairs, in numeric order (NONE first)."""

def _set_error_factory(factory: Any) -> None: ...

CHECKSUM_ALGORITHM: str

def checksum(data: Any, offset: int = 0, length: Optional[int] = None) -> int:
    """XXH3-64 of `length` bytes of `data` (any C-contiguous buffer) from
    `offset` (default: to the end), with the GIL released. ValueError for a
    range outside the buffer or a non-contiguous one."""

_error_factory: Any

class Buffer:
    """Page-aligned shared memory from Client.alloc; buffer protocol,
    __array_interface__ and DLPack (kDLCPU, uint8), all without copies."""

    @property
    def size(self) -> int:
        """Size in bytes."""
    @property
    def id(self) -> int:
        """The daemon's id of this buffer."""
    @property
    def address(self) -> int:
        """Address of the first byte in this process (page-aligned)."""
    @property
    def __array_interface__(self) -> Dict[str, Any]:
        """numpy array interface v3: 1-D uint8, writable."""
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[Any] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """A DLPack capsule over this buffer (no copy)."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU, 0)."""

class SessionInfo:
    """What the daemon said when the session opened."""

    @property
    def session_id(self) -> int: ...
    @property
    def host_id(self) -> str: ...
    @property
    def daemon_version(self) -> str: ...
    @property
    def socket(self) -> str: ...

class RemoteBuffer:
    """A resolved export (Client.resolve)."""

    @property
    def handle(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def readable(self) -> bool: ...
    @property
    def writable(self) -> bool: ...
    @property
    def peer(self) -> Optional[str]:
        """The exporting host, or None for this host."""
    @property
    def name(self) -> str: ...

class CallInfo:
    """What a handler learns about the call it serves."""

    @property
    def service(self) -> str: ...
    @property
    def service_id(self) -> int: ...
    @property
    def one_way(self) -> bool:
        """True for a notification."""
    @property
    def time_left(self) -> float:
        """Seconds left before the caller's deadline, now."""
    @property
    def _token(self) -> int: ...
    @property
    def _request(self) -> bytes: ...

class _NotifyQueue:
    def pop(self, timeout: Optional[float] = None) -> bytes: ...
    @property
    def pending(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def closed(self) -> bool: ...

class _Core:
    @staticmethod
    def connect(
        socket: str = "",
        app_name: str = "",
        timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        handler_threads: int = 1,
    ) -> "_Core": ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def info(self) -> SessionInfo: ...
    @property
    def handler_threads(self) -> int: ...
    def call(self, service: str, data: Any, timeout: Optional[float] = None) -> bytes: ...
    def call_async(self, service: str, data: Any, timeout: Optional[float], token: int) -> None: ...
    def notify(self, service: str, data: Any, timeout: Optional[float] = None) -> None: ...
    def serve(self, service: str, token: int) -> int: ...
    def subscribe(self, service: str, max_pending: int = 0) -> Tuple[int, _NotifyQueue]: ...
    def unserve(self, service_id: int) -> None: ...
    def next_call(self) -> Optional[CallInfo]: ...
    def answer(self, call: CallInfo, data: Any) -> None: ...
    def fail(self, call: CallInfo, code: int, message: str) -> None: ...
    def next_completion(self) -> Optional[Tuple[int, int, str, Any]]: ...
    def alloc(self, size: int) -> Buffer: ...
    def export(
        self,
        buffer: Buffer,
        name: str,
        offset: int = 0,
        length: int = 0,
        ttl: Optional[float] = None,
        allow_read: bool = True,
        allow_write: bool = False,
        allowed_peers: Iterable[str] = ...,
    ) -> None: ...
    def unexport(self, name: str) -> None: ...
    def resolve(self, name: str, peer: str = "") -> RemoteBuffer: ...
    def release(self, remote: RemoteBuffer) -> None: ...
    def transfer(
        self,
        write: bool,
        remote: RemoteBuffer,
        remote_offset: int,
        buffer: Buffer,
        local_offset: int,
        length: int,
        timeout: Optional[float] = None,
    ) -> int: ...
    def transfer_async(
        self,
        write: bool,
        remote: RemoteBuffer,
        remote_offset: int,
        buffer: Buffer,
        local_offset: int,
        length: int,
        timeout: Optional[float],
        token: int,
    ) -> None: ...
    def transfer_batch(
        self, write: bool, pieces: Sequence[Any], timeout: Optional[float] = None
    ) -> int: ...

# The KV hand-off (mcdma/kv.hpp); mcdma/_kv_export.py and _kv_import.py are
# the Python API over these.
def _kv_check_manifest(reply_json: str) -> List[int]: ...
def _kv_check_published(reply_json: str, n_layers: int) -> List[int]: ...
def _kv_mismatches(manifest_json: str, expect_json: str) -> List[str]: ...

class _KvPool:
    def __init__(self, core: _Core, max_idle_bytes: int) -> None: ...
    def trim(self) -> None: ...
    def counters(self) -> Tuple[int, int, int, int]: ...

class _KvExport:
    def __init__(self, core: _Core, handoff_id: str, layers: Sequence[Buffer],
                 manifest_json: str, allowed_peers: List[str], ttl: Optional[float],
                 checksum: bool) -> None: ...
    @property
    def manifest_json(self) -> str: ...
    @property
    def state(self) -> str: ...
    def publish(self, layer: int) -> None: ...
    def wait_consumed(self, count: int, timeout: Optional[float]) -> List[str]: ...
    def revoke(self, reason: str) -> None: ...
    def close(self) -> None: ...

class _KvImport:
    def __init__(self, core: _Core, peer: str, handoff_id: str, expect_json: str,
                 token_digest: str, deadline: float, verify: bool, open_wait: float,
                 buffers: Optional[Sequence[Buffer]], pool: Optional[_KvPool]) -> None: ...
    @property
    def manifest_json(self) -> str: ...
    def buffers(self) -> List[Buffer]: ...
    def pull(self, on_layer: Optional[Callable[[int], None]]) -> None: ...
    def wait_layer(self, layer: int, timeout: Optional[float]) -> Tuple[int, int, float, float, float, float]: ...
    def stats(self) -> Tuple[float, float, int, List[Tuple[int, int, float, float, float, float]]]: ...
    def close(self) -> None: ...
