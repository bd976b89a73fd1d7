# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Python binding of libengram: fetch rows of Engram tables through /dev/engram_rdma.

    import numpy as np
    from engram_rdma import Engram, ROW_BYTES

    with Engram() as e:                          # /dev/engram_rdma
        t = e.open_table(name="layer1")          # or sha256=..., link=N
        out = np.empty((4096, ROW_BYTES), np.uint8)
        e.register(out)                          # pinned until unregister/close
        rows = np.random.randint(0, t.rows, 4096, dtype=np.uint32)
        e.fetch(t, rows, out)                    # out[i] = weight row + scales of rows[i]

Any writable, C-contiguous object that exports the buffer protocol can be
registered (numpy arrays, bytearray, mmap, ctypes arrays); the binding holds
an export of it while it is registered, so it cannot be resized or freed
under the kernel.  The destination of a fetch is a registered object or any
contiguous view inside one (``out[100:200]``).  Row indices are a sequence
of ints or anything exporting uint32 items (``np.uint32`` arrays are used in
place).  numpy is not needed by this module.

Failures raise OSError (or the subclass Python picks for the errno:
TimeoutError for ETIMEDOUT, FileNotFoundError for ENOENT, ...) whose errno
is the kernel's and whose message names the server's status; the status
and the first bad row position are also in its ``wire_status``,
``status_name`` and ``bad_index`` attributes.

libengram.so.0 is taken from $ENGRAM_LIBENGRAM when set, else from next to
this package, from tools/libengram/ (the source tree), or from the system.

Row indices of any integer dtype (what numpy and torch indexing produce,
int64 mostly) are converted to the uint32 the kernel takes in one
vectorised step when numpy is there, with one range check for the whole
array: an index below 0 or above 2**32 - 1 is an OverflowError naming its
position, never a silent wrap.  CPU torch tensors, pinned or not, are
accepted as row indices and as destinations (through ``data_ptr()``; torch
is not needed by this module): a tensor registered with register() must
not be resized while it is registered.
"""

import array
import ctypes
import ctypes.util
import errno
import os
from typing import Any, NamedTuple, Optional, Sequence, Tuple, Union

__version__ = "0.1.0"

__all__ = ["Engram", "Table", "Buffer", "Result", "ROW_BYTES", "WEIGHT_BYTES",
           "SCALE_BYTES", "DEFAULT_DEV", "WORD_FAILED", "status_name", "load_library",
           "__version__"]

DEFAULT_DEV = "/dev/engram_rdma"
WEIGHT_BYTES = 256
SCALE_BYTES = 8
ROW_BYTES = WEIGHT_BYTES + SCALE_BYTES
SHA256_LEN = 32
NAME_MAX = 64
BUSY_POLL = 1 << 0          # LIBENGRAM_BUSY_POLL
KEEP_KEYS = 1 << 0          # LIBENGRAM_BUF_KEEP_KEYS
WORD_FAILED = 1 << 63       # LIBENGRAM_WORD_FAILED: a completion word's failure bit

WIRE_OK = 0
WIRE_ROW_OUT_OF_RANGE = 5
WIRE_ROW_NOT_HELD = 12      # protocol version 3: a row no host holds


class _TableInfo(ctypes.Structure):
    _fields_ = [
        ("handle", ctypes.c_uint32),
        ("link", ctypes.c_uint32),
        ("rows", ctypes.c_uint64),
        ("generation", ctypes.c_uint64),
        ("row_bytes", ctypes.c_uint32),
        ("max_rows", ctypes.c_uint32),
        ("sha256", ctypes.c_uint8 * SHA256_LEN),
        ("name", ctypes.c_char * NAME_MAX),
        ("weight_offset", ctypes.c_uint64),
        ("scale_offset", ctypes.c_uint64),
        ("reserved", ctypes.c_uint64 * 2),
    ]


class _Range(ctypes.Structure):
    _fields_ = [
        ("buf_id", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("offset", ctypes.c_uint64),
        ("length", ctypes.c_uint64),
    ]


class _Word(ctypes.Structure):
    _fields_ = [
        ("buf_id", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("offset", ctypes.c_uint64),
        ("value", ctypes.c_uint64),
    ]


class _Result(ctypes.Structure):
    _fields_ = [
        ("ticket", ctypes.c_uint64),
        ("error", ctypes.c_int32),
        ("wire_status", ctypes.c_uint32),
        ("bad_index", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("rtt_ns", ctypes.c_uint64),
        ("remote_error", ctypes.c_int32),
        ("reserved0", ctypes.c_uint32),
        ("local_ns", ctypes.c_uint64),
        ("reserved", ctypes.c_uint64 * 2),
    ]


_lib = None


def _candidates():
    env = os.environ.get("ENGRAM_LIBENGRAM")
    if env:
        # An explicit choice is the only one: no silent fallback elsewhere.
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    c = [os.path.join(here, "libengram.so.0"),
         os.path.join(here, "..", "..", "libengram", "libengram.so.0")]
    found = ctypes.util.find_library("engram")
    if found:
        c.append(found)
    c.append("libengram.so.0")
    return c


def load_library() -> ctypes.CDLL:
    """Load libengram.so.0 (once) and return the ctypes handle."""
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: not found" % path)
            continue
        try:
            lib = ctypes.CDLL(path, use_errno=False)
        except OSError as e:
            errors.append(str(e))
            continue
        break
    else:
        raise OSError(errno.ENOENT, "libengram.so.0 not found (set ENGRAM_LIBENGRAM): " +
                      "; ".join(errors))

    P = ctypes.c_void_p
    u32, u64, i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
    pu32 = ctypes.POINTER(ctypes.c_uint32)
    pres = ctypes.POINTER(_Result)
    prange = ctypes.POINTER(_Range)
    sigs = {
        "engram_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(P)]),
        "engram_close": (None, [P]),
        "engram_fd": (ctypes.c_int, [P]),
        "engram_table_open": (i64, [P, u32, ctypes.c_char_p, P, ctypes.POINTER(_TableInfo)]),
        "engram_buf_register": (ctypes.c_int, [P, P, ctypes.c_size_t, pu32]),
        "engram_buf_register_flags": (ctypes.c_int, [P, P, ctypes.c_size_t, u32, pu32]),
        "engram_buf_unregister": (ctypes.c_int, [P, u32]),
        "engram_fetch": (ctypes.c_int, [P, u32, P, u32, u32, u64, u32, u64, u32, pres]),
        "engram_fetch_ranges": (ctypes.c_int, [P, u32, P, u32, prange, u32, u32, u64, u32,
                                               pres]),
        "engram_submit": (i64, [P, u32, P, u32, u32, u64, u32, u64, u32, pres]),
        "engram_submit_word": (i64, [P, u32, P, u32, prange, u32, u32, u64, u32, u64,
                                     ctypes.POINTER(_Word), u32, pres]),
        "engram_wait": (ctypes.c_int, [P, u64, u64, u32, pres]),
        "engram_table_set_local": (ctypes.c_int, [P, u32, ctypes.c_char_p, ctypes.c_char_p]),
        "engram_set_timeout_ms": (ctypes.c_int, [P, u32]),
        "engram_set_required": (ctypes.c_int, [P, ctypes.c_int]),
        "engram_set_local_dir": (ctypes.c_int, [P, ctypes.c_char_p]),
        "engram_set_local_check": (ctypes.c_int, [P, u32]),
        "engram_status_name": (ctypes.c_char_p, [u32]),
        "engram_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "engram_version": (ctypes.c_char_p, []),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    _lib = lib
    return lib


def status_name(wire_status: int) -> str:
    """Stable name of a server status: "ok", "row_out_of_range", ..."""
    return load_library().engram_status_name(wire_status).decode()


def _error(ret: int, what: str, res: Optional["_Result"] = None,
           filename: Optional[str] = None) -> OSError:
    """OSError for a negative errno from libengram, naming the server's status."""
    lib = load_library()
    err = -ret
    msg = "%s: %s" % (what, lib.engram_strerror(ret).decode())
    wire_status, bad_index = (res.wire_status, res.bad_index) if res is not None else (0, 0)
    if res is not None:
        if wire_status or bad_index:
            msg += " (server status %s" % status_name(wire_status)
            if wire_status in (WIRE_ROW_OUT_OF_RANGE, WIRE_ROW_NOT_HELD):
                msg += ", bad_index %d" % bad_index
            msg += ")"
        else:
            msg += " (no server status)"
    e = OSError(err, msg) if filename is None else OSError(err, msg, filename)
    e.wire_status = wire_status  # type: ignore[attr-defined]
    e.status_name = status_name(wire_status)  # type: ignore[attr-defined]
    e.bad_index = bad_index  # type: ignore[attr-defined]
    return e


def _numpy() -> Any:
    """numpy when it can be imported, else None: numpy is optional."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr")


# torch dtypes whose items can be row indices: ctypes type, numpy dtype.
_TORCH_INTS = {
    "torch.uint8": (ctypes.c_uint8, "u1"), "torch.int8": (ctypes.c_int8, "i1"),
    "torch.int16": (ctypes.c_int16, "i2"), "torch.int32": (ctypes.c_int32, "i4"),
    "torch.int64": (ctypes.c_int64, "i8"),
}


def _torch_mem(t: Any, what: str) -> Tuple[int, int]:
    """(address, nbytes) of a CPU tensor's contiguous storage, or TypeError/ValueError."""
    dev = str(t.device)
    if dev != "cpu":
        raise TypeError("%s is a tensor on %s: only CPU tensors (pinned or not) are accepted"
                        % (what, dev))
    if not t.is_contiguous():
        raise ValueError("%s is a non-contiguous tensor" % what)
    return int(t.data_ptr()), int(t.numel()) * int(t.element_size())


def _torch_bytes(t: Any, what: str) -> "ctypes.Array[ctypes.c_char]":
    """A ctypes char array over a CPU tensor's bytes (the tensor must outlive it)."""
    addr, nbytes = _torch_mem(t, what)
    if nbytes == 0:
        raise ValueError("%s is empty" % what)
    return (ctypes.c_char * nbytes).from_address(addr)


def _rows_torch(t: Any) -> Any:
    """Row indices in a torch tensor as a ctypes array over its items (no copy)."""
    kind = _TORCH_INTS.get(str(t.dtype))
    if kind is None:
        raise TypeError("row indices must be integers, not %s" % t.dtype)
    if t.dim() != 1:
        raise ValueError("row indices must be one-dimensional, not %d-D" % t.dim())
    addr, nbytes = _torch_mem(t, "row indices")
    size = ctypes.sizeof(kind[0])
    if nbytes == 0:
        raise ValueError("no rows to fetch")
    return (kind[0] * (nbytes // size)).from_address(addr), kind[1]


_INT_FORMATS = set("bBhHiIlLqQnN")


def _rows_numpy(np: Any, a: Any) -> Tuple[int, int, Any]:
    """(address, count, keepalive): one range check and one cast for the whole array."""
    if a.ndim != 1:
        raise ValueError("row indices must be one-dimensional, not %d-D" % a.ndim)
    if a.dtype.kind not in "iu":
        raise TypeError("row indices must be integers, not %s" % a.dtype)
    n = int(a.shape[0])
    if n == 0:
        raise ValueError("no rows to fetch")
    if n > 0xFFFFFFFF:
        raise ValueError("too many rows")
    if a.dtype.kind == "i" or a.dtype.itemsize > 4:
        lo, hi = a.min(), a.max()
        if lo < 0 or hi > 0xFFFFFFFF:
            pos = int(np.flatnonzero((a < 0) | (a > 0xFFFFFFFF))[0])
            raise OverflowError("row index %d at position %d is outside 0 .. 2**32 - 1"
                                % (int(a[pos]), pos))
    if not (a.dtype == np.uint32 and a.dtype.isnative and a.flags.c_contiguous and
            a.flags.writeable):
        a = np.ascontiguousarray(a, dtype=np.uint32)
    return int(a.ctypes.data), n, a


def _rows_arg(rows: Any) -> Tuple[int, int, Any]:
    """(address, count, keepalive) of rows as contiguous native uint32 items."""
    np = _numpy()
    if _is_torch(rows):
        items, dtype = _rows_torch(rows)
        if np is not None:
            return _rows_numpy(np, np.frombuffer(items, dtype=dtype))
        rows = items
    try:
        mv = memoryview(rows)
    except TypeError:
        mv = None
    if mv is not None and mv.ndim == 1 and mv.itemsize == 4 and \
            mv.format in ("I", "@I", "=I", "<I") and mv.c_contiguous:
        n = mv.shape[0]
        if n and not mv.readonly:
            keep = (ctypes.c_uint32 * n).from_buffer(mv)
        else:
            keep = (ctypes.c_uint32 * n).from_buffer_copy(mv)
    elif mv is not None and np is not None:
        fmt = mv.format.lstrip("@=<>!")
        mv.release()
        if fmt not in _INT_FORMATS and fmt not in ("e", "f", "d", "g"):
            # Not a number numpy would cast: say what it is.
            raise TypeError("row indices must be integers, not buffer format %r" % fmt)
        return _rows_numpy(np, np.asarray(rows))
    else:
        if mv is not None:
            mv.release()
        # Checks every item: negative or >= 2^32 is OverflowError, not a wrap.
        arr = array.array("I", rows)
        n = len(arr)
        keep = (ctypes.c_uint32 * n).from_buffer(arr) if n else None
    if n == 0:
        raise ValueError("no rows to fetch")
    if n > 0xFFFFFFFF:
        raise ValueError("too many rows")
    return ctypes.addressof(keep), n, keep


def _exporter(obj: Any) -> Any:
    """obj, or for a torch tensor a ctypes array over its bytes: something memoryview takes."""
    return _torch_bytes(obj, "destination") if _is_torch(obj) else obj


def _span(obj: Any) -> Tuple[int, int]:
    """(address, nbytes) of a writable C-contiguous buffer, without keeping an export."""
    obj = _exporter(obj)
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError("%s does not export the buffer protocol" % type(obj).__name__)
    with mv:
        if mv.readonly:
            raise TypeError("buffer is read-only")
        if not mv.c_contiguous:
            raise ValueError("buffer is not C-contiguous")
        if mv.nbytes == 0:
            raise ValueError("buffer is empty")
        c = (ctypes.c_char * mv.nbytes).from_buffer(mv)
        addr = ctypes.addressof(c)
        del c
        return addr, mv.nbytes


RESULT_FALLBACK = 1 << 0    # LIBENGRAM_RESULT_FALLBACK
CHECKS = {"size": 0, "sha256": 1}   # LIBENGRAM_CHECK_*

class Result(NamedTuple):
    """A completed fetch.

    ticket: its ticket; rtt_ns: the kernel's submit-to-completion time;
    fallback: whether the rows came from the local copy, and then
    remote_error: the remote errno (negative) and local_ns: how long the
    local read took.
    """

    ticket: int
    rtt_ns: int
    fallback: bool = False
    remote_error: int = 0
    local_ns: int = 0


def _result(res: _Result) -> Result:
    return Result(res.ticket, res.rtt_ns, bool(res.flags & RESULT_FALLBACK), res.remote_error,
                  res.local_ns)


class Table:
    """A table opened with Engram.open_table(); valid while its Engram is open."""

    __slots__ = ("handle", "name", "link", "rows", "generation", "row_bytes", "max_rows",
                 "sha256", "weight_offset", "scale_offset")

    handle: int
    name: Optional[str]
    link: int
    rows: int
    generation: int
    row_bytes: int
    max_rows: int
    sha256: bytes
    # Where its tensors are in the file (which table of the file it is);
    # 0 when the hosts serving it cannot say (protocol version 3 or older).
    weight_offset: int
    scale_offset: int

    def __init__(self, info: _TableInfo) -> None:
        self.handle = info.handle
        self.name = info.name.decode() or None
        self.link = info.link
        self.rows = info.rows
        self.generation = info.generation
        self.row_bytes = info.row_bytes
        self.max_rows = info.max_rows
        self.sha256 = bytes(info.sha256)
        self.weight_offset = info.weight_offset
        self.scale_offset = info.scale_offset

    def __repr__(self) -> str:
        return ("Table(name=%r, handle=%d, link=%d, rows=%d, generation=%d, max_rows=%d, "
                "sha256=%s)" % (self.name, self.handle, self.link, self.rows,
                                self.generation, self.max_rows, self.sha256.hex()))


class Buffer:
    """Memory registered with Engram.register(); holds an export of the object.

    For a torch tensor it holds the tensor (torch exports no buffer): the
    tensor must not be resized while it is registered.
    """

    __slots__ = ("buf_id", "obj", "address", "nbytes", "_cbuf", "_engram")

    buf_id: int
    obj: Any
    address: int
    nbytes: int

    def __init__(self, engram: "Engram", buf_id: int, obj: Any, cbuf: Any) -> None:
        self._engram = engram
        self.buf_id = buf_id
        self.obj = obj
        self._cbuf = cbuf
        self.address = ctypes.addressof(cbuf)
        self.nbytes = ctypes.sizeof(cbuf)

    def unregister(self) -> None:
        self._engram.unregister(self)

    def _release(self) -> None:
        self._cbuf = None
        self.obj = None

    def __repr__(self) -> str:
        return "Buffer(buf_id=%d, nbytes=%d)" % (self.buf_id, self.nbytes)


def _timeout_ns(timeout_ms: Optional[float]) -> int:
    if timeout_ms is None:
        return 0
    if timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive (None: the module's default)")
    return max(1, int(timeout_ms * 1000000))


class Engram:
    """An open /dev/engram_rdma (path=None) with its tables and registered buffers.

    The local fallback (libengram.h) is set up from the ENGRAM_RDMA_* environment
    variables, and overridden here: required=True never falls back; timeout_ms is
    the deadline of fetches that name none; local_dir is searched for the local
    copy of each table opened by name; local_check is "size" or "sha256".
    """

    def __init__(self, path: Optional[str] = None, required: Optional[bool] = None,
                 timeout_ms: Optional[int] = None, local_dir: Optional[str] = None,
                 local_check: Optional[str] = None) -> None:
        lib = load_library()
        self._e: Optional[ctypes.c_void_p] = None
        self._bufs: dict = {}
        e = ctypes.c_void_p()
        ret = lib.engram_open(os.fsencode(path) if path is not None else None,
                              ctypes.byref(e))
        if ret:
            what = "open"
            bad = sorted("%s=%r" % kv for kv in os.environ.items()
                         if kv[0].startswith("ENGRAM_RDMA_"))
            if ret == -errno.EINVAL and bad:
                # The library prints nothing: say which settings it refused.
                what += " (malformed ENGRAM_RDMA_* variable? %s)" % ", ".join(bad)
            raise _error(ret, what, filename=path or DEFAULT_DEV)
        self._e = e
        self._lib = lib
        try:
            if required is not None:
                self._check(lib.engram_set_required(e, 1 if required else 0), "required")
            if timeout_ms is not None:
                if timeout_ms <= 0:
                    raise ValueError("timeout_ms must be positive")
                self._check(lib.engram_set_timeout_ms(e, int(timeout_ms)), "timeout_ms")
            if local_dir is not None:
                self._check(lib.engram_set_local_dir(e, os.fsencode(local_dir)), "local_dir")
            if local_check is not None:
                if local_check not in CHECKS:
                    raise ValueError("local_check must be 'size' or 'sha256'")
                self._check(lib.engram_set_local_check(e, CHECKS[local_check]), "local_check")
        except Exception:
            self.close()
            raise

    @staticmethod
    def _check(ret: int, what: str) -> None:
        if ret:
            raise _error(ret, what)

    def set_local(self, table: Union[Table, int], path: str,
                  tensor: Optional[str] = None) -> None:
        """Give an open table its local copy (a safetensors file), checked once now."""
        handle = table.handle if isinstance(table, Table) else int(table)
        ret = self._lib.engram_table_set_local(self._ctx(), handle, os.fsencode(path),
                                               tensor.encode() if tensor else None)
        if ret:
            raise _error(ret, "set_local %s" % path, filename=path)

    def _ctx(self) -> ctypes.c_void_p:
        if self._e is None:
            raise ValueError("Engram is closed")
        return self._e

    def close(self) -> None:
        """Close the device: the kernel unpins every buffer, then they are let go."""
        if self._e is not None:
            self._lib.engram_close(self._e)
            self._e = None
            for b in self._bufs.values():
                b._release()
            self._bufs.clear()

    def __enter__(self) -> "Engram":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def fileno(self) -> int:
        """The descriptor, for select/poll: readable when a submitted fetch completed."""
        return self._lib.engram_fd(self._ctx())

    def open_table(self, name: Optional[str] = None,
                   sha256: Union[bytes, str, None] = None, link: int = 0) -> Table:
        """Open a table by name and/or SHA-256 (32 bytes or 64 hex digits); returns a Table."""
        if name is None and sha256 is None:
            raise ValueError("open_table needs name or sha256")
        if isinstance(sha256, str):
            sha256 = bytes.fromhex(sha256)
        if sha256 is not None and len(sha256) != SHA256_LEN:
            raise ValueError("sha256 must be %d bytes" % SHA256_LEN)
        info = _TableInfo()
        sha = ctypes.create_string_buffer(bytes(sha256), SHA256_LEN) if sha256 else None
        ret = self._lib.engram_table_open(self._ctx(), link,
                                          name.encode() if name is not None else None,
                                          sha, ctypes.byref(info))
        if ret < 0:
            what = "open_table %s" % (name if name is not None else bytes(sha256).hex())
            raise _error(ret, what)
        return Table(info)

    def register(self, obj: Any, keep_keys: Optional[bool] = None) -> Buffer:
        """Pin a writable buffer-protocol object or CPU tensor as a fetch destination.

        Returns a Buffer; the object (numpy array, bytearray, mmap, torch
        tensor, ...) stays pinned until unregister() or close().  keep_keys:
        register it once per RDMA connection and keep the keys (for hosts
        you trust: libengram(3), engram_buf_register_flags()); None follows
        ENGRAM_RDMA_KEEP_KEYS.
        """
        ctx = self._ctx()
        exp = _exporter(obj)
        addr, nbytes = _span(exp)
        cbuf = (ctypes.c_char * nbytes).from_buffer(exp)   # the export held while registered
        buf_id = ctypes.c_uint32()
        if keep_keys is None:
            ret = self._lib.engram_buf_register(ctx, ctypes.c_void_p(addr), nbytes,
                                                ctypes.byref(buf_id))
        else:
            ret = self._lib.engram_buf_register_flags(ctx, ctypes.c_void_p(addr), nbytes,
                                                      KEEP_KEYS if keep_keys else 0,
                                                      ctypes.byref(buf_id))
        if ret:
            del cbuf
            raise _error(ret, "register %d bytes" % nbytes)
        b = Buffer(self, buf_id.value, obj, cbuf)
        self._bufs[b.buf_id] = b
        return b

    def unregister(self, buf: Any) -> None:
        """Unpin a Buffer (or the object registered); the object may then be resized or freed."""
        if isinstance(buf, Buffer):
            b = buf
        else:
            b = next((x for x in self._bufs.values() if x.obj is buf), None)
            if b is None:
                b, off, nbytes = self._find(buf)
                if off or nbytes != b.nbytes:
                    raise ValueError("a part of a registered buffer cannot be unregistered")
        if self._bufs.get(b.buf_id) is not b:
            raise ValueError("buffer is not registered here")
        ret = self._lib.engram_buf_unregister(self._ctx(), b.buf_id)
        if ret:
            raise _error(ret, "unregister buffer %d" % b.buf_id)
        del self._bufs[b.buf_id]
        b._release()

    def _find(self, out: Any) -> Tuple[Buffer, int, int]:
        """(Buffer, byte offset of out in it, nbytes of out) for a registered object or view."""
        if isinstance(out, Buffer):
            if self._bufs.get(out.buf_id) is not out:
                raise ValueError("buffer is not registered here")
            return out, 0, out.nbytes
        addr, nbytes = _span(out)
        for b in self._bufs.values():
            if b.address <= addr and addr + nbytes <= b.address + b.nbytes:
                return b, addr - b.address, nbytes
        raise ValueError("destination is not inside a registered buffer")

    def _dest(self, rows: Any, out: Any, offset: int,
              stride: int) -> Tuple[int, int, Any, Buffer, int]:
        if stride < ROW_BYTES:
            raise ValueError("stride must be at least %d" % ROW_BYTES)
        if offset < 0:
            raise ValueError("offset must not be negative")
        raddr, n, keep = _rows_arg(rows)
        b, base, nbytes = self._find(out)
        need = offset + (n - 1) * stride + ROW_BYTES
        if need > nbytes:
            raise ValueError("destination holds %d bytes, %d rows at stride %d from offset %d "
                             "need %d" % (nbytes, n, stride, offset, need))
        return raddr, n, keep, b, base + offset

    def fetch(self, table: Union[Table, int], rows: Any, out: Any, offset: int = 0,
              stride: int = ROW_BYTES, timeout_ms: Optional[float] = None,
              busy_poll: bool = False) -> Result:
        """Fetch rows[i] into out at offset + i * stride and wait; returns a Result.

        table: a Table or its handle.  rows: integers of any dtype (a list, a
        range, a numpy array, a CPU tensor).  out: a registered object, a
        view inside one, or a Buffer.  timeout_ms: None for the module's
        timeout_ms.
        """
        raddr, n, keep, b, off = self._dest(rows, out, offset, stride)
        res = _Result()
        handle = table.handle if isinstance(table, Table) else int(table)
        ret = self._lib.engram_fetch(self._ctx(), handle, raddr, n, b.buf_id, off, stride,
                                     _timeout_ns(timeout_ms), BUSY_POLL if busy_poll else 0,
                                     ctypes.byref(res))
        del keep
        if ret:
            raise _error(ret, "fetch of %d rows" % n, res)
        return _result(res)

    def submit(self, table: Union[Table, int], rows: Any, out: Any, offset: int = 0,
               stride: int = ROW_BYTES, timeout_ms: Optional[float] = None,
               word: Optional[Tuple[Any, int]] = None) -> int:
        """Send a fetch without waiting; returns its ticket for wait().

        out must not be read until wait() reports the ticket, or until the
        completion word says so: word=(where, value), where an 8-byte
        registered object or view (a one-element uint64 array or tensor,
        outside out's rows), set to value (below 2**63) once every row is
        in place, or to WORD_FAILED | errno once the fetch failed and
        nothing more can land; wait() then raises, or reads the rows from
        the table's local copy and sets the value.  A fetch that succeeded
        needs no wait().  Clear the word (or use a new value) each time.
        """
        raddr, n, keep, b, off = self._dest(rows, out, offset, stride)
        res = _Result()
        handle = table.handle if isinstance(table, Table) else int(table)
        if word is not None:
            wb, woff, wbytes = self._find(word[0])
            if wbytes < 8:
                raise ValueError("a completion word needs 8 bytes, its object has %d" % wbytes)
            w = _Word(wb.buf_id, 0, woff, int(word[1]))
            ret = self._lib.engram_submit_word(self._ctx(), handle, raddr, n, None, 0,
                                               b.buf_id, off, stride, _timeout_ns(timeout_ms),
                                               ctypes.byref(w), 0, ctypes.byref(res))
        else:
            ret = self._lib.engram_submit(self._ctx(), handle, raddr, n, b.buf_id, off, stride,
                                          _timeout_ns(timeout_ms), 0, ctypes.byref(res))
        del keep
        if ret < 0:
            raise _error(ret, "submit of %d rows" % n, res)
        return ret

    def wait(self, ticket: int = 0, timeout_ms: Optional[float] = None,
             busy_poll: bool = False) -> Result:
        """Wait for a submitted fetch (ticket 0: any); returns a Result, raises on failure."""
        res = _Result()
        ret = self._lib.engram_wait(self._ctx(), ticket, _timeout_ns(timeout_ms),
                                    BUSY_POLL if busy_poll else 0, ctypes.byref(res))
        if ret:
            e = _error(ret, "fetch %d" % res.ticket if res.ticket else "wait", res)
            e.ticket = res.ticket  # type: ignore[attr-defined]
            raise e
        return _result(res)

    def fetch_ranges(self, table: Union[Table, int], rows: Any, outs: Sequence[Any],
                     stride: int = ROW_BYTES, timeout_ms: Optional[float] = None,
                     busy_poll: bool = False) -> Result:
        """Fetch rows into a list of destinations and wait; returns a Result.

        Row i lands at byte i * stride of the concatenation of outs, each a
        registered object, a view inside one, or a Buffer (up to the link's
        limit of ranges, 16 at most); no row may straddle two of them.
        """
        if stride < ROW_BYTES:
            raise ValueError("stride must be at least %d" % ROW_BYTES)
        if not outs:
            raise ValueError("no destination ranges")
        raddr, n, keep = _rows_arg(rows)
        ranges = (_Range * len(outs))()
        total = 0
        for i, out in enumerate(outs):
            b, off, nbytes = self._find(out)
            ranges[i].buf_id, ranges[i].offset, ranges[i].length = b.buf_id, off, nbytes
            total += nbytes
        need = (n - 1) * stride + ROW_BYTES
        if need > total:
            raise ValueError("destinations hold %d bytes, %d rows at stride %d need %d"
                             % (total, n, stride, need))
        res = _Result()
        handle = table.handle if isinstance(table, Table) else int(table)
        ret = self._lib.engram_fetch_ranges(self._ctx(), handle, raddr, n, ranges, len(outs),
                                            stride, _timeout_ns(timeout_ms),
                                            BUSY_POLL if busy_poll else 0, ctypes.byref(res))
        del keep
        if ret:
            raise _error(ret, "fetch of %d rows into %d ranges" % (n, len(outs)), res)
        return _result(res)
