#!/usr/bin/env python3
"""Reads a safetensors file without the safetensors package and prints what it holds.

    python3 tests/scripts/read_safetensors.py [--safetensors-package] model.safetensors

One line per metadata entry, "meta KEY JSON-STRING", then one per tensor in file order,
"tensor NAME DTYPE D0,D1,... CRC32 SUM" (CRC-32 of the tensor's bytes, sum of its values in
double precision). Uses numpy when it is installed and DS2_NO_NUMPY is not set, else the array
module; with --safetensors-package it reads through Hugging Face's `safetensors` instead (tensors
in name order). Checks the format's rules on the way: header length, a JSON object, float32 tensors
whose byte ranges match their shapes and cover the data exactly once, in order, without gaps.
The ds2 export test (tests/cli/export_test.cpp) compares this output with the model it exported.
"""
import array
import json
import os
import struct
import sys
import zlib

try:
    if os.environ.get("DS2_NO_NUMPY"):
        raise ImportError
    import numpy
except ImportError:
    numpy = None


def read_safetensors(path):
    """Returns (metadata dict, list of (name, dtype, shape, raw bytes, values))."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header of {n} bytes in a file of {len(data)}")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError(f"{path}: __metadata__ must map strings to strings")
    body = data[8 + n:]
    order = sorted(header.items(), key=lambda item: item[1]["data_offsets"][0])
    position = 0
    tensors = []
    for name, info in order:
        begin, end = info["data_offsets"]
        if begin != position:
            raise ValueError(f"{path}: tensor {name} starts at {begin}, expected {position}")
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}")
        shape = info["shape"]
        count = 1
        for d in shape:
            count *= d
        if end - begin != 4 * count:
            raise ValueError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape}")
        raw = body[begin:end]
        if numpy is not None:
            values = numpy.frombuffer(raw, dtype="<f4").reshape(shape)
        else:
            values = array.array("f")
            values.frombytes(raw)
            if sys.byteorder == "big":
                values.byteswap()
        tensors.append((name, info["dtype"], shape, raw, values))
        position = end
    if position != len(body):
        raise ValueError(f"{path}: {len(body) - position} bytes after the last tensor")
    return metadata, tensors


def tensor_sum(values):
    if numpy is not None:
        return float(values.astype(numpy.float64).sum())
    return float(sum(float(v) for v in values))


def read_with_safetensors_package(path):
    """The same as read_safetensors, through Hugging Face's safetensors package (name order)."""
    from safetensors import safe_open

    tensors = []
    with safe_open(path, framework="numpy") as f:
        metadata = f.metadata() or {}
        for name in sorted(f.keys()):
            values = numpy.ascontiguousarray(f.get_tensor(name), dtype="<f4")
            tensors.append((name, "F32", list(values.shape), values.tobytes(), values))
    return metadata, tensors


def main(argv):
    args = argv[1:]
    official = "--safetensors-package" in args
    args = [a for a in args if a != "--safetensors-package"]
    if len(args) != 1:
        print("usage: read_safetensors.py [--safetensors-package] FILE", file=sys.stderr)
        return 2
    if official:
        metadata, tensors = read_with_safetensors_package(args[0])
    else:
        metadata, tensors = read_safetensors(args[0])
    for key in sorted(metadata):
        print("meta", key, json.dumps(metadata[key]))
    for name, dtype, shape, raw, values in tensors:
        dims = ",".join(str(d) for d in shape)
        print("tensor", name, dtype, dims, zlib.crc32(raw), repr(tensor_sum(values)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
