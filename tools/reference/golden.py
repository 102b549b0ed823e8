"""Shared helpers for the golden-fixture scripts in tools/reference/.

A golden fixture is one safetensors file that holds, for every test case, the inputs of an op,
what PyTorch computes from them, and the gradients autograd gives for a random upstream
gradient. The C++ tests (tests/ops/test_golden_*.cpp) run the same op in ocrt and compare.

Naming inside a fixture, for a case called e.g. "add_broadcast":
    add_broadcast.in0, .in1, ...      the inputs, in argument order
    add_broadcast.out                 the output (ops with one output)
    add_broadcast.out0, .out1, ...    the outputs (ops with several, e.g. max -> values, indices)
    add_broadcast.gout / .gout0, ...  the upstream gradient of each floating-point output
    add_broadcast.grad0, .grad1, ...  d(sum(out * gout))/d(in_k) for each floating-point input k

This file writes safetensors by hand (json + struct) so the scripts need nothing beyond
Debian's python3-torch: no `safetensors` or `numpy` package.
"""

import json
import struct
import zlib

import torch

FORMAT = "ocrt-golden-1"

# torch dtype -> (safetensors dtype name, struct format char). Booleans are stored as U8 (0/1),
# which is how ocrt holds masks.
_DTYPES = {
    torch.float64: ("F64", "d"),
    torch.float32: ("F32", "f"),
    torch.int64: ("I64", "q"),
    torch.uint8: ("U8", "B"),
}


def seed_for(name):
    """A per-case seed derived from the case name, so adding or reordering cases never changes
    the data of the others."""
    return zlib.crc32(name.encode("utf-8"))


def tensor_bytes(t):
    """Raw little-endian bytes of a tensor, row-major."""
    t = t.detach().cpu()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.dtype not in _DTYPES:
        raise TypeError(f"golden fixtures hold F64, F32, I64 and U8 tensors, not {t.dtype}")
    _, fmt = _DTYPES[t.dtype]
    values = t.contiguous().reshape(-1).tolist()
    return struct.pack(f"<{len(values)}{fmt}", *values)


def dtype_name(t):
    return "U8" if t.dtype == torch.bool else _DTYPES[t.dtype][0]


def write_safetensors(path, tensors, metadata):
    """Writes `tensors` (a list of (name, tensor) pairs, kept in that order) and `metadata`
    (str -> str) to `path` in the safetensors format:
        8 bytes    header length N, little-endian u64
        N bytes    JSON header, padded with spaces to a multiple of 8
        the rest   the tensors' bytes, back to back, at the offsets the header gives
    """
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    chunks = []
    offset = 0
    seen = set()
    for name, t in tensors:
        if name in seen or name == "__metadata__":
            raise ValueError(f"duplicate or reserved tensor name {name!r}")
        seen.add(name)
        data = tensor_bytes(t)
        header[name] = {
            "dtype": dtype_name(t),
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def read_safetensors(path):
    """Reads a file written by write_safetensors back into (tensors dict, metadata dict); used
    to self-check the writer."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    data = blob[8 + n :]
    metadata = header.pop("__metadata__", {})
    by_name = {v[0]: (k, v[1]) for k, v in _DTYPES.items()}
    out = {}
    for name, e in header.items():
        dtype, fmt = by_name[e["dtype"]]
        b, end = e["data_offsets"]
        count = (end - b) // struct.calcsize(fmt)
        values = struct.unpack(f"<{count}{fmt}", data[b:end])
        out[name] = torch.tensor(values, dtype=dtype).reshape(e["shape"])
    return out, metadata


class Fixture:
    """Collects the tensors of many cases, then writes them as one file.

    case(name, fn, inputs) runs fn(*inputs) with every floating-point input as a leaf that
    requires grad, stores inputs and outputs, draws a random upstream gradient for each
    floating-point output and stores autograd's gradient for each floating-point input.
    `inputs` are already-made tensors (see the spec helpers in ops_core.py).
    """

    def __init__(self):
        self.tensors = []
        self.case_names = []

    def case(self, name, fn, inputs, gen):
        if name in self.case_names:
            raise ValueError(f"case {name!r} defined twice")
        self.case_names.append(name)
        leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
        result = fn(*leaves)
        single = isinstance(result, torch.Tensor)
        outs = [result] if single else list(result)
        for k, x in enumerate(leaves):
            self.tensors.append((f"{name}.in{k}", x.detach()))
        for k, o in enumerate(outs):
            self.tensors.append((f"{name}.out" if single else f"{name}.out{k}", o.detach()))

        float_outs = [(k, o) for k, o in enumerate(outs) if o.is_floating_point()]
        if not float_outs:
            return  # comparisons, argmax: no gradient
        gouts = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for _, o in float_outs]
        for (k, _), g in zip(float_outs, gouts):
            self.tensors.append((f"{name}.gout" if single else f"{name}.gout{k}", g))
        float_leaves = [(k, x) for k, x in enumerate(leaves) if x.requires_grad]
        grads = torch.autograd.grad([o for _, o in float_outs], [x for _, x in float_leaves], gouts,
                                    allow_unused=True)
        for (k, _), g in zip(float_leaves, grads):
            if g is None:
                raise ValueError(f"case {name!r}: input {k} gets no gradient; every float input of a "
                                 "case must be used")
            self.tensors.append((f"{name}.grad{k}", g))

    def write(self, path, generator):
        metadata = {
            "generator": generator,
            "torch": torch.__version__,
            "format": FORMAT,
            "cases": str(len(self.case_names)),
        }
        write_safetensors(path, self.tensors, metadata)
