"""Reader of IDX files, the format of MNIST and Fashion-MNIST, plain or gzipped.

Layout (http://yann.lecun.com/exdb/mnist/, "file formats"): two zero bytes, a type code
(``IDX_DTYPES``), the number of dimensions ``k``, then ``k`` big-endian unsigned 32-bit
sizes, then the values in C order, big-endian. A gzipped file is recognised by its own magic
bytes, whatever its name.
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np

from fedpca.errors import InvalidDataError

#: IDX type code -> big-endian numpy dtype.
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

GZIP_MAGIC = b"\x1f\x8b"


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in the IDX file ``path`` (native byte order, writable).

    Raises InvalidDataError naming the file when it is missing, not IDX (wrong magic number,
    unknown type code), a corrupt gzip stream, or when its size disagrees with its header.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidDataError(f"IDX file {path} does not exist")
    raw = path.read_bytes()
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InvalidDataError(f"{path} is a corrupt gzip file: {exc}") from exc
    if len(raw) < 4 or raw[:2] != b"\x00\x00":
        raise InvalidDataError(
            f"{path} is not an IDX file: bad magic number {raw[:4].hex() or 'empty'}; an IDX "
            "file starts with 00 00, a type code and the number of dimensions"
        )
    code, ndim = raw[2], raw[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise InvalidDataError(f"{path}: unknown IDX type code 0x{code:02X} (known: {known})")
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise InvalidDataError(f"{path}: IDX header is truncated or declares {ndim} dimensions")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(IDX_DTYPES[code])
    expected = math.prod(shape) * dtype.itemsize
    if len(raw) - header != expected:
        raise InvalidDataError(
            f"{path}: header declares shape {shape} ({expected} bytes of data) but the file "
            f"holds {len(raw) - header}; the file is truncated or corrupt, download it again"
        )
    values = np.frombuffer(raw, dtype=dtype, count=math.prod(shape), offset=header)
    return values.astype(dtype.newbyteorder("=")).reshape(shape)
