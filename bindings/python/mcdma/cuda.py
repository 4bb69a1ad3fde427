"""mcdma.cuda: mcdma buffers as CUDA tensors, without a copy.

An mcdma buffer is page-aligned host memory shared with the daemon. CUDA can
register such memory as pinned and mapped (``cudaHostRegister`` with
``cudaHostRegisterMapped``): a kernel then reads and writes it in place
through its device pointer (``cudaHostGetDevicePointer``), over PCIe or, on
a DGX Spark's GB10, at memory speed, and the daemon moves the same bytes to
another host. ``as_tensor`` makes such a buffer a ``torch`` CUDA tensor::

    import mcdma, mcdma.cuda, torch

    with mcdma.Client() as c:
        buf = c.alloc(64 << 20)
        mapped = mcdma.cuda.map_buffer(buf)                # device 0
        t = mapped.as_tensor(torch.bfloat16, (32, 1024, 1024))
        t.copy_(kv_layer)                                   # a kernel writes the buffer
        torch.cuda.synchronize()                            # the bytes are in it now
        # ... mcdma.kv.KVExport([buf, ...]) offers it to another host ...

The tensor holds the mapping, and the mapping holds the buffer: the memory
stays registered while either is alive (``unmap()`` ends it early; tensors
made from it must be gone by then). Kernels reach mapped memory over the bus
on discrete GPUs: use it for data that crosses hosts (the KV cache on its
way), and copy it into device memory (``t.to("cuda", copy=True)``) when a
kernel reads it many times.

It uses the CUDA runtime that torch has loaded (torch's CUDA wheels bundle
one). Without torch with CUDA, or without a GPU, ``map_buffer`` raises
``mcdma.Unavailable`` saying why. On macOS there is no CUDA: Metal takes an
mcdma buffer in place with ``newBufferWithBytesNoCopy`` (docs/integrations.md).
The C++ side is ``mcdma/cuda.hpp`` (gpu/).
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Sequence

from ._errors import Invalid, Unavailable
from ._mcdma import Buffer

# cudaHostRegister flags (driver_types.h).
_REGISTER_PORTABLE = 0x01
_REGISTER_MAPPED = 0x02
_SUCCESS = 0

_runtime: Optional[ctypes.CDLL] = None


def _loaded_cudart_path() -> Optional[str]:
    """The CUDA runtime library this process has mapped (Linux), if any."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if "/libcudart.so" in path:
                    return path
    except OSError:
        pass
    return None


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime, after torch has initialized CUDA."""
    global _runtime
    if _runtime is not None:
        return _runtime
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"mcdma.cuda needs torch with CUDA: {e}") from None
    if not torch.cuda.is_available():
        why = "torch was built without CUDA" if torch.version.cuda is None else \
            "torch finds no CUDA device (or no driver)"
        raise Unavailable(f"mcdma.cuda: no CUDA: {why}")
    torch.cuda.init()
    path = _loaded_cudart_path()
    names = [path] if path else []
    names += ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise Unavailable("mcdma.cuda: cannot load the CUDA runtime: " + "; ".join(errors))
    lib.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    lib.cudaHostRegister.restype = ctypes.c_int
    lib.cudaHostUnregister.argtypes = [ctypes.c_void_p]
    lib.cudaHostUnregister.restype = ctypes.c_int
    lib.cudaHostGetDevicePointer.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                             ctypes.c_uint]
    lib.cudaHostGetDevicePointer.restype = ctypes.c_int
    lib.cudaSetDevice.argtypes = [ctypes.c_int]
    lib.cudaSetDevice.restype = ctypes.c_int
    lib.cudaGetErrorString.argtypes = [ctypes.c_int]
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    _runtime = lib
    return lib


def _check(lib: ctypes.CDLL, what: str, code: int) -> None:
    if code != _SUCCESS:
        text = lib.cudaGetErrorString(code).decode(errors="replace")
        raise Unavailable(f"mcdma.cuda: {what}: CUDA error {code}: {text}")


class MappedBuffer:
    """An mcdma buffer registered with CUDA as mapped host memory."""

    def __init__(self, buffer: Buffer, device: int = 0) -> None:
        if not isinstance(buffer, Buffer):
            raise TypeError(f"map_buffer: an mcdma.Buffer, not {type(buffer).__name__}")
        if buffer.size == 0:
            raise Invalid("map_buffer: an empty buffer")
        lib = _cudart()
        self._lib = lib
        self._buffer: Optional[Buffer] = buffer
        self.device = device
        _check(lib, "cudaSetDevice", lib.cudaSetDevice(device))
        _check(lib, "cudaHostRegister",
               lib.cudaHostRegister(buffer.address, buffer.size,
                                    _REGISTER_PORTABLE | _REGISTER_MAPPED))
        pointer = ctypes.c_void_p()
        code = lib.cudaHostGetDevicePointer(ctypes.byref(pointer), buffer.address, 0)
        if code != _SUCCESS:
            lib.cudaHostUnregister(buffer.address)
            _check(lib, "cudaHostGetDevicePointer", code)
        self.device_ptr: int = pointer.value or 0

    @property
    def buffer(self) -> Buffer:
        if self._buffer is None:
            raise Invalid("mcdma.cuda: the buffer was unmapped")
        return self._buffer

    @property
    def size(self) -> int:
        return self.buffer.size

    def as_tensor(self, dtype: Any = None, shape: Optional[Sequence[int]] = None) -> Any:
        """The buffer (or its first bytes) as a torch CUDA tensor on this
        mapping's device: `dtype` (default torch.uint8) and `shape`
        (default: 1-D, the whole buffer), C-contiguous. No copy."""
        import torch

        dtype = dtype or torch.uint8
        item = torch.empty((), dtype=dtype).element_size()
        shape = tuple(shape) if shape is not None else (self.size // item,)
        nbytes = item
        for n in shape:
            nbytes *= n
        if nbytes > self.size:
            raise Invalid(f"as_tensor: {shape} of {dtype} is {nbytes} bytes, the buffer "
                          f"{self.size}")
        device = f"cuda:{self.device}"
        typestr = _TYPESTR.get(str(dtype))
        if typestr is None:  # bfloat16 and the like: the bytes, viewed
            raw = torch.as_tensor(_CudaArray(self, (nbytes,), "|u1"), device=device)
            return raw.view(dtype).reshape(shape)
        return torch.as_tensor(_CudaArray(self, shape, typestr), device=device)

    def unmap(self) -> None:
        """Unregisters the buffer (idempotent)."""
        if self._buffer is not None:
            self._lib.cudaHostUnregister(self._buffer.address)
            self._buffer = None
            self.device_ptr = 0

    def __del__(self) -> None:
        try:
            self.unmap()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_TYPESTR = {"torch.uint8": "|u1", "torch.int8": "|i1", "torch.int16": "<i2",
            "torch.int32": "<i4", "torch.int64": "<i8", "torch.float16": "<f2",
            "torch.float32": "<f4", "torch.float64": "<f8", "torch.bool": "|b1"}


class _CudaArray:
    """What torch.as_tensor reads: __cuda_array_interface__ over a mapping
    (torch keeps this object, and so the mapping, alive with the tensor)."""

    def __init__(self, mapping: MappedBuffer, shape: Sequence[int], typestr: str) -> None:
        self.mapping = mapping
        self.__cuda_array_interface__: Dict[str, Any] = {
            "shape": tuple(shape), "typestr": typestr,
            "data": (mapping.device_ptr, False), "version": 2, "strides": None,
            "stream": None,
        }


def map_buffer(buffer: Buffer, device: int = 0) -> MappedBuffer:
    """Registers `buffer` with CUDA device `device` as mapped host memory.
    Raises mcdma.Unavailable without CUDA (saying why)."""
    return MappedBuffer(buffer, device)


def as_tensor(buffer: Buffer, dtype: Any = None, shape: Optional[Sequence[int]] = None,
              device: int = 0) -> Any:
    """``map_buffer(buffer, device).as_tensor(dtype, shape)``."""
    return map_buffer(buffer, device).as_tensor(dtype, shape)
