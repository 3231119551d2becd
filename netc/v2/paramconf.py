"""PaddlePaddle's ParameterConfig message (proto/ParameterConfig.proto, proto2), the `<name>.protobuf`
members of its parameter tar files, written and read by hand (no protobuf dependency): the fields
netc.v2 knows -- name (1), size (2), initial_mean (5), initial_std (6), dims (9, repeated, unpacked as
proto2 writes them), initial_strategy (11), initial_smart (12); a message's other fields are skipped
when read. And the value members' 16-byte header: struct "IIQ" (version 0, value size 4, count)."""
from __future__ import annotations

import struct

HEADER = struct.Struct("IIQ")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def encode(name: str, size: int, dims, initial_mean: float = 0.0, initial_std: float = 0.01,
           initial_strategy: int = 0, initial_smart: bool = False) -> bytes:
    """A serialized ParameterConfig."""
    raw = name.encode()
    out = bytearray(_key(1, 2) + _varint(len(raw)) + raw + _key(2, 0) + _varint(int(size)))
    out += _key(5, 1) + struct.pack("<d", initial_mean) + _key(6, 1) + struct.pack("<d", initial_std)
    for d in dims:
        out += _key(9, 0) + _varint(int(d))
    out += _key(11, 0) + _varint(int(initial_strategy)) + _key(12, 0) + _varint(int(bool(initial_smart)))
    return bytes(out)


def _read_varint(buf: bytes, i: int) -> tuple:
    n, shift = 0, 0
    while True:
        if i >= len(buf):
            raise ValueError("a truncated varint")
        b = buf[i]
        n |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return n, i
        shift += 7


def decode(buf: bytes) -> dict:
    """{"name", "size", "dims", "initial_mean", "initial_std"} of a serialized ParameterConfig
    (ValueError when it is not one)."""
    out = {"dims": []}
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire} of field {field}")
        if i > len(buf):
            raise ValueError("a truncated field")
        if field == 1 and wire == 2:
            out["name"] = v.decode()
        elif field == 2 and wire == 0:
            out["size"] = v
        elif field == 9 and wire == 0:
            out["dims"].append(v)
        elif field == 9 and wire == 2:                   # packed (proto3 writers)
            j = 0
            while j < len(v):
                d, j = _read_varint(v, j)
                out["dims"].append(d)
        elif field in (5, 6) and wire == 1:
            out["initial_mean" if field == 5 else "initial_std"] = struct.unpack("<d", v)[0]
    if "name" not in out or "size" not in out:
        raise ValueError("no name or size")
    return out


__all__ = ["HEADER", "encode", "decode"]
