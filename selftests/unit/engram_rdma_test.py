# SPDX-License-Identifier: GPL-2.0
"""Unit tests of the engram_rdma package (tools/python) without the kernel module (TAP).

    python3 engram_rdma_test.py PATH/TO/test_libengram

The ctypes structs must match libengram.h (test_libengram --layout prints
the C side); row indices convert exactly or raise; destinations are checked;
a context opened on /dev/null shows that calls reach the ioctl (ENOTTY) and
that a failed registration lets go of the buffer; errors carry the errno and
the server's status name; the module imports without numpy; row indices of
every integer dtype convert in one step with a range check naming the bad
position; CPU torch tensors are row indices and destinations; the package
builds a wheel with its version and licence.  numpy and torch parts are
skipped when they are missing.
"""

import ctypes
import errno
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "tools", "python")
sys.path.insert(0, PYDIR)

import engram_rdma as er  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

count = 0
failed = 0


def ok(cond, what, detail=None):
    global count, failed
    count += 1
    print("%sok %d - %s" % ("" if cond else "not ", count, what))
    if not cond:
        failed += 1
        if detail:
            for line in str(detail).splitlines():
                print("#   " + line)
    return cond


def skip(what, why):
    global count
    count += 1
    print("ok %d - %s # SKIP %s" % (count, what, why))


def raises(exc, fn, what, check=None):
    try:
        fn()
    except exc as e:
        if check is not None and not check(e):
            return ok(False, what, "raised %r" % e)
        return ok(True, what)
    except Exception as e:  # noqa: BLE001
        return ok(False, what, "raised %r, wanted %s" % (e, exc.__name__))
    return ok(False, what, "no exception, wanted %s" % exc.__name__)


def test_layout(test_libengram):
    out = subprocess.run([test_libengram, "--layout"], check=True, capture_output=True,
                         text=True).stdout
    structs = {"engram_table_info": er._TableInfo, "engram_result": er._Result,
               "engram_range": er._Range, "engram_word": er._Word}
    for line in out.splitlines():
        f = line.split()
        name, size, fields = f[0], int(f[1]), dict(zip(f[2::2], map(int, f[3::2])))
        cls = structs.pop(name)
        py = {n: getattr(cls, n).offset for n, _ in cls._fields_}
        ok(ctypes.sizeof(cls) == size and py == fields,
           "ctypes struct %s matches libengram.h (%d bytes)" % (name, size),
           "C: %d %s\nPython: %d %s" % (size, fields, ctypes.sizeof(cls), py))
    ok(not structs, "every struct was compared", structs)


def rows_values(rows):
    addr, n, keep = er._rows_arg(rows)
    return list((ctypes.c_uint32 * n).from_address(addr)), addr, keep


def test_rows():
    got, _, _ = rows_values([0, 1, 0xFFFFFFFF, 7, 7])
    ok(got == [0, 1, 0xFFFFFFFF, 7, 7], "a list of ints converts exactly", got)
    got, _, _ = rows_values(range(3, 6))
    ok(got == [3, 4, 5], "a range converts", got)
    raises(OverflowError, lambda: er._rows_arg([1, -1]), "a negative index raises OverflowError")
    raises(OverflowError, lambda: er._rows_arg([1 << 32]),
           "an index of 2^32 raises OverflowError (no silent wrap)")
    raises(TypeError, lambda: er._rows_arg([1.0]), "a float index raises TypeError")
    raises(ValueError, lambda: er._rows_arg([]), "no rows raises ValueError")
    if np is None:
        skip("numpy row arrays", "numpy not installed")
        return
    a = np.array([5, 0, 9, 9], dtype=np.uint32)
    got, addr, _ = rows_values(a)
    ok(got == [5, 0, 9, 9] and addr == a.ctypes.data,
       "a numpy uint32 array is used in place", (got, addr, a.ctypes.data))
    a.flags.writeable = False
    got, addr, _ = rows_values(a)
    ok(got == [5, 0, 9, 9] and addr != a.ctypes.data, "a read-only uint32 array is copied")
    got, _, _ = rows_values(np.arange(10, dtype=np.uint32)[::3])
    ok(got == [0, 3, 6, 9], "a strided uint32 view converts", got)
    got, _, _ = rows_values(np.array([2, 1 << 31], dtype=">u4"))
    ok(got == [2, 1 << 31], "big-endian uint32 converts by value", got)
    got, _, _ = rows_values(np.array([4, 0xFFFFFFFF], dtype=np.int64))
    ok(got == [4, 0xFFFFFFFF], "int64 indices convert by value", got)
    raises(OverflowError, lambda: er._rows_arg(np.array([1 << 32], dtype=np.int64)),
           "an int64 index of 2^32 raises OverflowError")
    raises(OverflowError, lambda: er._rows_arg(np.array([-3], dtype=np.int32)),
           "a negative int32 index raises OverflowError")
    raises(TypeError, lambda: er._rows_arg(np.array([1.5])), "float64 indices raise TypeError")


def test_dtypes():
    if np is None:
        skip("integer dtypes", "numpy not installed")
        return
    want = [0, 1, 100, 77, 3]
    for dt in ("i1", "u1", "i2", "u2", "i4", ">i4", "i8", ">i8", "u8", "uintp"):
        got, _, _ = rows_values(np.array(want, dtype=dt))
        ok(got == want, "%s indices convert by value" % dt, got)
    big = np.arange(49152, dtype=np.int64) * 87383 % 4294967296
    got, _, keep = rows_values(big)
    ok(keep.dtype == np.uint32 and np.array_equal(keep, big),
       "49,152 int64 indices convert in one cast to uint32", keep.dtype)
    bad = big.copy()
    bad[30000] = -2
    raises(OverflowError, lambda: er._rows_arg(bad), "a negative int64 index names its position",
           lambda e: "position 30000" in str(e) and "-2" in str(e))
    bad[30000] = 1 << 32
    bad[40000] = -1
    raises(OverflowError, lambda: er._rows_arg(bad), "the first bad position is named",
           lambda e: "position 30000" in str(e))
    raises(OverflowError, lambda: er._rows_arg(np.array([1 << 40], dtype=np.uint64)),
           "a uint64 index above 2^32 - 1 raises OverflowError")
    raises(TypeError, lambda: er._rows_arg(np.array([True, False])),
           "bool indices raise TypeError")
    raises(TypeError, lambda: er._rows_arg(np.array([1], dtype=np.float32)),
           "float32 indices raise TypeError")
    raises(ValueError, lambda: er._rows_arg(np.zeros((2, 2), dtype=np.int64)),
           "2-D indices raise ValueError")
    raises(ValueError, lambda: er._rows_arg(np.array([], dtype=np.int64)),
           "no int64 rows raises ValueError")
    got, _, _ = rows_values(memoryview(np.array(want, dtype=np.int64)))
    ok(got == want, "a memoryview of int64 items converts", got)
    code = ("import sys, array; sys.modules['numpy'] = None; sys.path.insert(0, %r)\n"
            "import engram_rdma, ctypes\n"
            "a, n, k = engram_rdma._rows_arg(array.array('q', [9, 0, 4294967295]))\n"
            "print(list((ctypes.c_uint32 * n).from_address(a)))\n"
            "try:\n    engram_rdma._rows_arg(array.array('q', [1, -1]))\n"
            "except OverflowError:\n    print('overflow')" % PYDIR)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    ok(r.stdout.split("\n")[:2] == ["[9, 0, 4294967295]", "overflow"],
       "without numpy int64 items convert one by one, checked", r.stdout + r.stderr)


def test_torch():
    if torch is None or np is None:
        skip("torch tensors", "torch not installed")
        return
    t = torch.tensor([7, 0, 4294967295, 12], dtype=torch.int64)
    got, _, _ = rows_values(t)
    ok(got == [7, 0, 4294967295, 12], "an int64 tensor's indices convert by value", got)
    got, _, _ = rows_values(torch.tensor([3, 1], dtype=torch.int32))
    ok(got == [3, 1], "an int32 tensor's indices convert", got)
    raises(OverflowError, lambda: er._rows_arg(torch.tensor([1, -5], dtype=torch.int32)),
           "a negative index in a tensor raises OverflowError naming it",
           lambda e: "position 1" in str(e))
    raises(TypeError, lambda: er._rows_arg(torch.tensor([1.0])), "a float tensor raises TypeError")
    raises(ValueError, lambda: er._rows_arg(torch.arange(10)[::2]),
           "a non-contiguous index tensor raises ValueError")
    raises(ValueError, lambda: er._rows_arg(torch.zeros((2, 2), dtype=torch.int64)),
           "a 2-D index tensor raises ValueError")
    d = torch.zeros((8, er.ROW_BYTES), dtype=torch.uint8)
    ok(er._span(d) == (d.data_ptr(), 8 * er.ROW_BYTES), "a CPU tensor's span is its storage")
    ok(er._span(d[2:4])[0] == d.data_ptr() + 2 * er.ROW_BYTES, "a tensor slice's span is its part")
    ok(er._span(torch.zeros(66, dtype=torch.float32))[1] == 264,
       "a float tensor spans its bytes (element size times count)")
    raises(ValueError, lambda: er._span(d[:, :10]), "a non-contiguous tensor is refused")
    e = er.Engram("/dev/null")
    raises(OSError, lambda: e.register(d), "registering a tensor reaches the ioctl (ENOTTY)",
           lambda x: x.errno == errno.ENOTTY)
    raises(ValueError, lambda: e.fetch(0, torch.tensor([1]), d),
           "a tensor destination outside every registered buffer is refused")
    raises(ValueError, lambda: e.fetch_ranges(0, [1], []), "fetch_ranges without destinations")
    raises(ValueError, lambda: e.fetch_ranges(0, [1], [d]),
           "fetch_ranges into an unregistered tensor is refused")
    e.close()


def test_package():
    top = os.path.join(HERE, "..", "..")
    with open(os.path.join(top, "kmod", "engram.h")) as f:
        kver = [line.split('"')[1] for line in f if line.startswith("#define ENGRAM_VERSION")]
    ok(kver == [er.__version__], "__version__ is the module's version (%s)" % er.__version__, kver)
    try:
        import setuptools.build_meta  # noqa: F401
    except ImportError:
        skip("the package builds a wheel", "setuptools not installed")
        return
    import shutil
    import zipfile
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(PYDIR, src, ignore=shutil.ignore_patterns("__pycache__"))
        code = ("import setuptools.build_meta as b, sys; "
                "print(b.build_wheel(sys.argv[1]))")
        r = subprocess.run([sys.executable, "-c", code, os.path.join(tmp, "dist")], cwd=src,
                           capture_output=True, text=True)
        whl = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout else ""
        if not ok(whl.startswith("engram_rdma-%s-" % er.__version__),
                  "pyproject.toml builds a wheel of this version (%s)" % whl, r.stderr[-2000:]):
            return
        with zipfile.ZipFile(os.path.join(tmp, "dist", whl)) as z:
            names = z.namelist()
            meta = z.read("engram_rdma-%s.dist-info/METADATA" % er.__version__).decode()
        ok("engram_rdma/__init__.py" in names and "engram_rdma/py.typed" in names,
           "it holds the package and its py.typed marker", names)
        ok("License: GPL-2.0 OR BSD-2-Clause" in meta, "its metadata names the licence", meta)


def test_span():
    raises(TypeError, lambda: er._span(b"abc"), "read-only bytes cannot be a destination")
    raises(TypeError, lambda: er._span(12), "a non-buffer cannot be a destination")
    raises(ValueError, lambda: er._span(bytearray()), "an empty buffer cannot be a destination")
    b = bytearray(100)
    addr, n = er._span(memoryview(b)[10:30])
    ok(n == 20 and addr == er._span(b)[0] + 10, "a view's span is its part of the buffer")
    b.extend(b"x")
    ok(len(b) == 101, "_span keeps no export of the object")
    if np is None:
        skip("numpy destinations", "numpy not installed")
        return
    a = np.zeros((4, 264), np.uint8)
    ok(er._span(a) == (a.ctypes.data, a.nbytes), "a 2-D numpy array spans all its bytes")
    raises(ValueError, lambda: er._span(a[:, :10]),
           "a non-contiguous numpy view cannot be a destination")


def test_errors():
    res = er._Result(wire_status=er.WIRE_ROW_OUT_OF_RANGE, bad_index=3)
    e = er._error(-errno.ERANGE, "fetch of 5 rows", res)
    ok(e.errno == errno.ERANGE and "row_out_of_range" in str(e) and "bad_index 3" in str(e) and
       e.wire_status == 5 and e.status_name == "row_out_of_range" and e.bad_index == 3,
       "a refusal: errno ERANGE, the status name and bad_index in the message", str(e))
    e = er._error(-errno.ETIMEDOUT, "fetch of 5 rows", er._Result())
    ok(isinstance(e, TimeoutError) and "no server status" in str(e),
       "a timeout is a TimeoutError with no server status", repr(e))
    e = er._error(-errno.ESTALE, "fetch", er._Result(wire_status=3))
    ok(e.errno == errno.ESTALE and "unknown_table" in str(e) and "bad_index" not in str(e),
       "bad_index is named only for row_out_of_range", str(e))
    ok(er.status_name(0) == "ok" and er.status_name(11) == "internal" and
       er.status_name(12) == "row_not_held" and er.status_name(13) == "unknown",
       "status_name() comes from libengram")
    e = er._error(-errno.ENXIO, "fetch", er._Result(wire_status=12, bad_index=3))
    ok(e.errno == errno.ENXIO and "row_not_held, bad_index 3" in str(e) and e.bad_index == 3,
       "a row no host holds: ENXIO, the status name and bad_index in the message", str(e))


def test_device():
    raises(FileNotFoundError, lambda: er.Engram("/nonexistent/engram_rdma"),
           "a missing device raises FileNotFoundError naming it",
           lambda e: e.errno == errno.ENOENT and e.filename == "/nonexistent/engram_rdma")
    with tempfile.NamedTemporaryFile() as f:
        raises(OSError, lambda: er.Engram(f.name), "a regular file is refused with ENODEV",
               lambda e: e.errno == errno.ENODEV)

    e = er.Engram("/dev/null")
    ok(e.fileno() >= 0, "fileno() is the descriptor")
    raises(OSError, lambda: e.open_table(name="t"), "open_table reaches the ioctl (ENOTTY)",
           lambda x: x.errno == errno.ENOTTY)
    raises(OSError, lambda: e.open_table(sha256="ab" * 32, link=2),
           "open_table by hex sha256 reaches the ioctl", lambda x: x.errno == errno.ENOTTY)
    raises(ValueError, lambda: e.open_table(), "open_table without name or sha256")
    raises(ValueError, lambda: e.open_table(sha256=b"short"), "a short sha256")
    b = bytearray(4096)
    raises(OSError, lambda: e.register(b), "register reaches the ioctl (ENOTTY)",
           lambda x: x.errno == errno.ENOTTY)
    try:
        b.extend(b"x")
        ok(True, "a failed registration holds no export of the buffer")
    except BufferError as x:
        ok(False, "a failed registration holds no export of the buffer", x)
    raises(OSError, lambda: e.register(b, keep_keys=True),
           "register with keep_keys reaches the ioctl through engram_buf_register_flags",
           lambda x: x.errno == errno.ENOTTY)
    raises(TypeError, lambda: e.register(b"immutable"), "read-only memory cannot be registered")
    raises(ValueError, lambda: e.fetch(0, [1, 2], bytearray(1024)),
           "a destination outside every registered buffer is refused")
    raises(ValueError, lambda: e.fetch(0, [1], bytearray(1024), stride=100),
           "a stride below 264 is refused")
    raises(ValueError, lambda: e.fetch(0, [1], bytearray(1024), timeout_ms=0),
           "timeout_ms 0 is refused (None is the module default)")
    with e:
        pass
    raises(ValueError, lambda: e.fileno(), "a closed Engram refuses calls")
    e.close()
    ok(True, "close() twice is harmless")


def test_imports():
    code = ("import sys; sys.modules['numpy'] = None; sys.path.insert(0, %r); "
            "import engram_rdma; print(engram_rdma.ROW_BYTES)" % PYDIR)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    ok(r.returncode == 0 and r.stdout.strip() == "264", "engram_rdma imports without numpy",
       r.stderr)
    env = dict(os.environ, ENGRAM_LIBENGRAM="/nonexistent/libengram.so.0")
    code = ("import sys; sys.path.insert(0, %r); import engram_rdma\n"
            "try:\n    engram_rdma.Engram('/dev/null')\n"
            "except OSError as e:\n    print(e.errno, 'ENGRAM_LIBENGRAM' in str(e))" % PYDIR)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    ok(r.stdout.strip() == "%d True" % errno.ENOENT,
       "a wrong ENGRAM_LIBENGRAM is an error naming it, not a silent fallback",
       r.stdout + r.stderr)
    code = ("import sys; sys.path.insert(0, %r); import engram_rdma, os\n"
            "engram_rdma.load_library(); print('loaded')" % PYDIR)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "ENGRAM_LIBENGRAM"})
    ok(r.stdout.strip() == "loaded", "libengram.so.0 is found in the source tree", r.stderr)


def main():
    if len(sys.argv) != 2:
        print("usage: engram_rdma_test.py PATH/TO/test_libengram", file=sys.stderr)
        return 2
    if np is None:
        print("# numpy not installed: numpy cases are skipped")
    test_layout(sys.argv[1])
    test_rows()
    test_dtypes()
    test_torch()
    test_span()
    test_errors()
    test_device()
    test_imports()
    test_package()
    print("1..%d" % count)
    if failed:
        print("# %d of %d failed" % (failed, count))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
