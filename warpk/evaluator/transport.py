"""Tensors across the trust boundary: raw bytes in sealed memfds, described by TensorSpecs.

The sender packs contiguous tensor bytes (lazy conjugates resolved) into a fresh memfd (ALIGN
aligned), sealed against writing, growing and shrinking before the fd travels with its message:
the bytes a receiver verifies existed when the message was sent; a candidate cannot change its
outputs after handing them over, nor truncate the file under the trusted reader (SIGBUS).
`unpack` refuses an fd that is not a sealed regular file of the right size, a dtype outside
DTYPES, a bad shape or a misaligned offset: all `ProtocolError`, the candidate's fault.

On a GPU, big batches stay on the device (`Carrier(on_device=True)`): copied into a CUDA VMM
allocation sent as an fd (warpk.evaluator.cudashare). Device memory cannot be sealed, so a
receiver copies the bytes out before it believes them (`Carrier.unpack`); the untrusted worker
uses staged inputs in place (`Carrier.decode_calls`), never read by the trusted side again.

Non-goals: no messages (warpk.evaluator.protocol), no verification (warpk.evaluator.checks).
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import mmap
import os
import stat
import sys
import time
import warnings

from warpk.evaluator.protocol import Arg, ProtocolError, TensorSpec
from warpk.evaluator.seal import SEALS, SIZE_SEALS, seal

ALIGN = 512  # what torch's CUDA caching allocator gives: kernels pick the same paths as for fresh tensors
DTYPES = "float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 bool complex64 complex128".split()
JSON_SCALARS = (int, float, bool, str, type(None))


def _dtype(torch, name: str):
    if name not in DTYPES:
        raise ProtocolError(f"dtype {name[:20]!r} is not one of {', '.join(DTYPES)}")
    return getattr(torch, name)


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def layout(tensors: list) -> tuple[list[TensorSpec], int]:
    """Specs of `tensors` packed back to back (ALIGN-byte aligned), and the bytes they need."""
    specs, offset = [], 0
    for t in tensors:
        specs.append(TensorSpec(offset=offset, dtype=dtype_name(t.dtype), shape=list(t.shape)))
        offset = _aligned(offset + t.numel() * t.element_size())
    return specs, offset


class Outbox:
    """A memfd allocated ahead (no page allocation in a timed batch), filled and sealed once."""

    def __init__(self, nbytes: int = 0):
        self.fd = os.memfd_create("warpk", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self.size = max(nbytes, 0)
        if nbytes > 0:
            os.posix_fallocate(self.fd, 0, nbytes)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def seal_with(self, torch, tensors: list, seals: int = SEALS) -> tuple[int | None, list[TensorSpec]]:
        """(the sealed fd, or None when there are no bytes, one spec per tensor)."""
        specs, needed = layout(tensors)
        if not tensors:
            self.close()
            return None, specs
        try:
            if needed > self.size:
                os.ftruncate(self.fd, needed)
            for t, spec in zip(tensors, specs, strict=True):
                if t.numel():
                    data = resolved(t).cpu().reshape(-1).view(torch.uint8).numpy()
                    _write_all(self.fd, data, spec.offset)
            seal(self.fd, seals)
        except BaseException:
            self.close()
            raise
        fd, self.fd = self.fd, None
        return fd, specs


def resolved(t):  # contiguous values: a lazy conjugate's raw bytes are not its values
    return t.detach().resolve_conj().resolve_neg().contiguous()


def pack(torch, tensors: list) -> tuple[int | None, list[TensorSpec]]:
    """(sealed memfd or None when there are no bytes, one spec per tensor)."""
    return Outbox().seal_with(torch, tensors)


def _write_all(fd: int, data, offset: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def open_sealed(fd: int | None, needed: int):
    """A private read mapping of a sealed memfd of at least `needed` bytes, or None for 0 bytes."""
    if needed == 0:
        return None
    if fd is None:
        raise ProtocolError("tensor bytes were announced but no memfd came with the message")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise ProtocolError("the attached fd is not a regular file")
    try:  # the kernel's refusals are the sender's; only the needed bytes (round 38: 1 TiB, ENOMEM)
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
            raise ProtocolError("the attached memfd is not sealed against writes and resizing")
        if info.st_size < needed:
            raise ProtocolError(f"the memfd holds {info.st_size} bytes, the specs need {needed}")
        # Private + writable is copy-on-write: torch gets a writable buffer, the file stays as sealed.
        return mmap.mmap(fd, needed, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as err:
        raise ProtocolError(f"the attached fd is not a sealable memfd or cannot be mapped ({err})") from err


def tensor_bytes(torch, spec: TensorSpec) -> int:
    """Bytes of the tensor a spec describes (ProtocolError for a shape or dtype that is none)."""
    extent = math.prod(max(d, 1) for d in spec.shape) if len(spec.shape) <= 16 else 0
    if any(d < 0 for d in spec.shape) or len(spec.shape) > 16 or extent >= 1 << 48:
        raise ProtocolError(f"shape {spec.shape[:17]} is not a tensor shape")  # (an empty one too:
        #                     its strides must fit, [0, 2**40, 2**40] overflows torch.empty)
    return math.prod(spec.shape) * _dtype(torch, spec.dtype).itemsize


def _nbytes(torch, spec: TensorSpec, limit: int) -> int:
    n = tensor_bytes(torch, spec)
    if spec.offset < 0 or spec.offset % ALIGN or spec.offset + n > limit:
        raise ProtocolError(f"a tensor at offset {spec.offset} of {n} bytes lies outside the memfd")
    return n


def unpack(torch, fd: int | None, specs: list[TensorSpec], device, limit_bytes: int) -> list:
    """Tensors on `device` copied out of the memfd described by `specs` (fd is closed)."""
    try:
        needed = max((s.offset + _nbytes(torch, s, limit_bytes) for s in specs), default=0)
        mm = open_sealed(fd, needed)
        if mm is None:
            return [torch.empty(s.shape, dtype=_dtype(torch, s.dtype), device=device) for s in specs]
        try:
            return _copy_out(torch, mm, specs, device, limit_bytes)
        finally:
            mm.close()
    finally:
        if fd is not None:
            os.close(fd)


def _copy_out(torch, mm, specs: list[TensorSpec], device, limit_bytes: int) -> list:
    """Copies of the tensors in `mm` (no view of the mapping survives this call)."""
    buffer = torch.frombuffer(mm, dtype=torch.uint8)
    out = []
    for spec in specs:
        n = _nbytes(torch, spec, limit_bytes)
        view = buffer[spec.offset : spec.offset + n].view(_dtype(torch, spec.dtype)).reshape(spec.shape)
        out.append(view.to(device, copy=True))
    return out


# --- positional arguments ---------------------------------------------------------------------
def _json_value(value, where: str):
    if isinstance(value, JSON_SCALARS):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, JSON_SCALARS) for v in value):
        return list(value)
    raise ValueError(f"{where} is a {type(value).__name__}, which cannot cross the sandbox boundary")


def encode_calls(torch, calls: list[list]) -> tuple[int | None, list[list[Arg]]]:
    """Each call's arguments as Args over one memfd holding every tensor of every call."""
    tensors = [a for call in calls for a in call if isinstance(a, torch.Tensor)]
    fd, specs = pack(torch, tensors)
    return fd, _args(calls, specs, torch)


def _args(calls: list[list], specs: list[TensorSpec], torch) -> list[list[Arg]]:
    specs_iter = iter(specs)
    return [
        [
            Arg(tensor=next(specs_iter))
            if isinstance(a, torch.Tensor)
            else Arg(value=_json_value(a, f"argument {i}"))
            for i, a in enumerate(call)
        ]
        for call in calls
    ]


def decode_calls(torch, fd: int | None, calls: list[list[Arg]], device) -> list[list]:
    """The calls' arguments with their tensors on `device` (used by the untrusted worker): views
    of the memfd itself when it is writable and the device is the CPU (shared inputs, which the
    sender reads back), else copies."""
    specs = [a.tensor for call in calls for a in call if a.tensor is not None]
    size = os.fstat(fd).st_size if fd is not None else 0
    if fd is not None and str(device) == "cpu" and not _write_sealed(fd):
        tensors = iter(_shared_views(torch, fd, specs, size))
    else:
        tensors = iter(unpack(torch, fd, specs, device, size))
    return [[next(tensors) if a.tensor is not None else a.value for a in call] for call in calls]


def _write_sealed(fd: int) -> bool:
    try:
        return bool(fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_WRITE)
    except OSError:
        return False


def _shared_views(torch, fd: int, specs: list[TensorSpec], size: int) -> list:
    """Writable views of a shared memfd (closed here; the mapping lives as long as the views)."""
    try:
        needed = max((s.offset + _nbytes(torch, s, size) for s in specs), default=0)
        if needed == 0:
            return [torch.empty(s.shape, dtype=_dtype(torch, s.dtype)) for s in specs]
        mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    buffer = torch.frombuffer(mm, dtype=torch.uint8)
    return [_view(torch, buffer, s, size) for s in specs]


def _view(torch, buffer, spec: TensorSpec, size: int):
    raw = buffer[spec.offset : spec.offset + _nbytes(torch, spec, size)]
    return raw.view(_dtype(torch, spec.dtype)).reshape(spec.shape)


def read_back(torch, fd: int, specs: list[TensorSpec]) -> list:
    """Views of what is in a shared memfd now (the trusted side's check of inputs): a read-only
    shared mapping (a private writable one faults page by page, ~4x slower to read: 23 against
    6 ms for 76 MiB); the file is sealed against resizing, so the mapping cannot fault; it lives
    as long as the views."""
    size = os.fstat(fd).st_size
    if size == 0:
        return [torch.empty(s.shape, dtype=_dtype(torch, s.dtype)) for s in specs]
    mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    with warnings.catch_warnings():  # "not writable": these views are only ever read
        warnings.simplefilter("ignore", UserWarning)
        buffer = torch.frombuffer(mm, dtype=torch.uint8)
    return [_view(torch, buffer, s, size) for s in specs]


def memfd_digest(fd: int) -> bytes:
    """blake2b of a memfd's bytes now (read-only shared mapping, no copy): it stands for inputs we
    no longer hold, so the worker's in-place changes are still seen (link.Link.go)."""
    if (size := os.fstat(fd).st_size) == 0:
        return b""
    with mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) as mm:
        return hashlib.blake2b(mm, digest_size=32).digest()


# --- device memory (a GPU on both sides) -------------------------------------------------------
class DeviceOutbox:
    """An exportable device buffer allocated ahead, filled once; `seal_with` hands back an fd
    that keeps the memory alive after this object is closed (the sender need keep nothing)."""

    def __init__(self, torch, device, nbytes: int = 0):
        self.torch, self.device = torch, device
        self.buffer = self.export = None
        if nbytes > 0:
            self._allocate(nbytes)

    def _allocate(self, nbytes: int) -> None:
        from warpk.evaluator.cudashare import allocate

        self.buffer = self.export = None  # the old one goes first: memory is what is scarce
        self.buffer, self.export = allocate(self.torch, self.device, nbytes)

    def close(self) -> None:
        self.buffer = self.export = None

    def seal_with(self, torch, tensors: list) -> tuple[int | None, list[TensorSpec]]:
        specs, needed = layout(tensors)
        if not tensors or not needed:
            self.close()
            return None, specs
        try:
            if self.buffer is None or needed > self.buffer.numel():
                self._allocate(needed)
            for t, spec in zip(tensors, specs, strict=True):
                n = t.numel() * t.element_size()
                if n:
                    flat = resolved(t).reshape(-1).view(torch.uint8)
                    self.buffer[spec.offset : spec.offset + n].copy_(flat)
            torch.cuda.synchronize(self.device)
            fd = self.export()
        except BaseException:
            self.close()
            raise
        return fd, specs  # the caller closes this outbox once fd is sent (unmapping takes time)


def _device_bytes(torch, fd: int | None, specs: list[TensorSpec], device, limit_bytes: int):
    """(uint8 view of the allocation behind fd, or None for no bytes)."""
    from warpk.evaluator.cudashare import CudaShareError, DeviceOutOfMemory, import_fd

    needed = max((s.offset + _nbytes(torch, s, limit_bytes) for s in specs), default=0)
    if needed == 0:
        return None
    if fd is None:
        raise ProtocolError("tensor bytes were announced but no device memory came with the message")
    try:
        return import_fd(torch, device, fd, needed)
    except DeviceOutOfMemory:
        raise  # the device is short of memory (whoever holds it), not a bad fd
    except CudaShareError as err:
        raise ProtocolError(f"the attached device memory cannot be mapped: {err}") from err


def _views(torch, buffer, specs: list[TensorSpec], limit_bytes: int) -> list:
    out = []
    for spec in specs:
        n = _nbytes(torch, spec, limit_bytes)
        out.append(buffer[spec.offset : spec.offset + n].view(_dtype(torch, spec.dtype)).reshape(spec.shape))
    return out


class Carrier:
    """How tensors cross between the two workers: sealed memfds in host memory, or (a GPU on both
    sides, `on_device`) CUDA VMM allocations. The same calls either way."""

    def __init__(self, torch, device, on_device: bool):
        self.torch, self.device, self.on_device = torch, device, on_device
        self.mapped = None  # the last imported device buffer, kept until `unmap`

    def outbox(self, nbytes: int = 0):
        return DeviceOutbox(self.torch, self.device, nbytes) if self.on_device else Outbox(nbytes)

    def pack(self, tensors: list) -> tuple[int | None, list[TensorSpec]]:
        return self.outbox().seal_with(self.torch, tensors)

    def unpack(self, fd: int | None, specs: list[TensorSpec], limit_bytes: int) -> list:
        """Copies, on this side's device, of the tensors behind fd (closed here). A device copy
        is complete (synchronised) when this returns: the sender can no longer change it."""
        torch = self.torch
        if not self.on_device:
            if fd is not None:
                limit_bytes = min(limit_bytes, os.fstat(fd).st_size)
            return unpack(torch, fd, specs, self.device, limit_bytes)
        self.unmap()
        start = time.perf_counter()
        try:
            buffer = _device_bytes(torch, fd, specs, self.device, limit_bytes)
        finally:
            if fd is not None:
                os.close(fd)
        if buffer is None:
            return [torch.empty(s.shape, dtype=_dtype(torch, s.dtype), device=self.device) for s in specs]
        mapped_s = time.perf_counter()
        copies = [v.clone() for v in _views(torch, buffer, specs, limit_bytes)]
        torch.cuda.synchronize(self.device)
        if os.environ.get("WARPK_DEBUG_TIMING"):
            print(f"unpack {buffer.numel() / 2**20:.0f} MiB: map {(mapped_s - start) * 1e3:.3f} ms, "
                  f"copy {(time.perf_counter() - mapped_s) * 1e3:.3f} ms", file=sys.stderr, flush=True)
        self.mapped = buffer  # unmapped by the next unpack or `unmap`, after the caller's clock
        return copies

    def unmap(self) -> None:
        self.mapped = None

    def encode_calls(self, calls: list[list], shared: bool = False) -> tuple[int | None, list[list[Arg]]]:
        """The calls' arguments over one fd; `shared` (host memory only): sealed against resizing
        but not writing, for a worker that uses them in place and a sender that reads them back."""
        tensors = [a for call in calls for a in call if isinstance(a, self.torch.Tensor)]
        if shared and not self.on_device:
            fd, specs = Outbox().seal_with(self.torch, tensors, SIZE_SEALS)
        else:
            fd, specs = self.pack(tensors)
        return fd, _args(calls, specs, self.torch)

    def decode_calls(self, fd: int | None, calls: list[list[Arg]]) -> list[list]:
        """The calls' arguments on this side's device: in place in the sender's device memory
        (nothing here is believed by the sender), or copied out of a memfd."""
        torch = self.torch
        specs = [a.tensor for call in calls for a in call if a.tensor is not None]
        if not self.on_device:
            return decode_calls(torch, fd, calls, self.device)
        try:
            buffer = _device_bytes(torch, fd, specs, self.device, 1 << 50)
        finally:
            if fd is not None:
                os.close(fd)
        if buffer is None:
            buffer = torch.empty(0, dtype=torch.uint8, device=self.device)
        tensors = iter(_views(torch, buffer, specs, 1 << 50))
        return [[next(tensors) if a.tensor is not None else a.value for a in call] for call in calls]
