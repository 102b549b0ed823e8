#!/usr/bin/env python3
"""Converts a PyTorch checkpoint (.pt / .pth) of a CRNN or SVTR-lite into an ocrt model file.

    /usr/bin/python3 tools/convert_torch.py model.pth model.safetensors --arch crnn-s --charset chars.txt

The input is what torch.save wrote: a state_dict, or a dict holding one under a usual key
("state_dict", "model_state_dict", "model", "net", "weights"; checked in that order, one level of
nesting allowed), with DataParallel's "module." prefix stripped when every name carries it. The
tensor names must be those of the reference modules in tools/reference (crnn.py, svtr_lite.py),
which are ocrt's own names (docs/models.md).

The output is a self-contained ocrt model file (docs/formats.md, "Model files"): the tensors as
float32 (num_batches_tracked as int64) under their names, and the metadata format, arch, config,
charset, input and training. ocrt-infer then needs neither --arch nor --charset.

The architecture's sizes are read off the tensor shapes (channels, hidden size and classes of a
CRNN; dims, depths, MLP ratio, projection width and classes of an SVTR-lite) and the class count
is checked against the charset (classes = characters + 1, class 0 the CTC blank). What shapes
cannot tell (an SVTR-lite's heads, mixers, window and dropout) comes from the preset when the
sizes are the preset's, else from --config, a JSON object (inline or a file name) whose fields
override and are checked against what the shapes say.

It refuses, with one message, an unknown arch, a class count that does not match the charset,
an entry that is not a tensor, and names that are missing, unexpected or of the wrong shape for
the arch (all listed). A BatchNorm's num_batches_tracked may be absent (PyTorch loads such a
state_dict too); it is written as 0.

The file is written by the small safetensors writer below (json + struct), so the tool needs
only torch: neither the safetensors nor the numpy package. Before torch.load reads the
checkpoint, its pickles' opcodes are scanned (without running them) for the globals they refer
to, and only tensors, storages and plain containers (dicts, lists, numbers, strings) pass; a
checkpoint that pickled objects (an nn.Module, an optimizer, a numpy scalar, a class of the
training code) needs --trust-pickle, which lets the file run code while it loads: use it on
files you trust. (torch 1.13's own weights_only=True refuses any float in the file, such as an
optimizer's learning rate, so it cannot be used for real training checkpoints there.)
"""

import argparse
import inspect
import io
import json
import os
import pickletools
import struct
import sys
import zipfile

import torch

FORMAT = "ocrt-model-1"
ARCHS = ("crnn", "crnn-s", "svtr-lite")
STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model", "net", "weights")

CRNN_PRESETS = {
    "crnn": dict(channels=[64, 128, 256, 256, 512, 512, 512], hidden=256),
    "crnn-s": dict(channels=[32, 64, 128, 128, 256, 256, 256], hidden=128),
}
SVTR_PRESET = dict(dims=[64, 128, 256], depths=[3, 6, 3], heads=[2, 4, 8],
                   mixer=["local"] * 6 + ["global"] * 6, window=[7, 11], mlp_ratio=4, out_dim=192,
                   dropout=0.1)
# The fields of an SVTR-lite config that no tensor shape shows.
SVTR_UNSEEN = ("heads", "mixer", "window", "dropout")

# What every ocrt model reads today (models/model_file.h, default_input_spec): 32-high gray
# lines, pixel p as p / 127.5 - 1, widths a multiple of 4.
INPUT_SPEC = {"height": 32, "channels": 1, "scale": 1 / 127.5, "offset": -1.0, "width_multiple": 4}


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------- reading the inputs

def read_charset(path):
    """A charset file as ocrt reads it (models/charset.cpp, docs/data.md): UTF-8, one character
    a line, a trailing CR dropped, empty lines skipped, a line holding one space is the space;
    multi-character lines and duplicates are errors naming the line."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except OSError as e:
        raise ConvertError(f"charset file {path}: cannot open it ({e.strerror})")
    except UnicodeDecodeError as e:
        raise ConvertError(f"charset file {path}: not valid UTF-8 ({e.reason} at byte {e.start})")
    chars, seen = [], {}
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            continue
        if len(line) != 1:
            raise ConvertError(f"{path} line {lineno}: expected one character per line, got {line!r} "
                               f"({len(line)} characters)")
        if line in seen:
            raise ConvertError(f"{path} line {lineno}: {line!r} is already on line {seen[line]}")
        seen[line] = lineno
        chars.append(line)
    if not chars:
        raise ConvertError(f"charset file {path}: no characters in it")
    return chars


# The globals a checkpoint of tensors and plain containers refers to. Any other (an nn.Module,
# an optimizer object, a numpy scalar, a class of the training code) is refused unless
# --trust-pickle: unpickling can call whatever a pickle names, and nothing else.
_SAFE_GLOBALS = {
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_parameter_with_state"),
    ("torch._tensor", "_rebuild_from_type_v2"),
    ("torch", "Tensor"),
    ("torch.nn.parameter", "Parameter"),
    ("torch", "Size"),
    ("torch", "device"),
    ("_codecs", "encode"),  # how protocol 2 pickles bytes
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("__builtin__", "set"),  # protocol 2's names, mapped to builtins when read
    ("__builtin__", "frozenset"),
}
_MEMO_STORES = {"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"}
_STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING", "SHORT_BINSTRING"}
_GETS = {"GET", "BINGET", "LONG_BINGET"}


def _safe_global(module, name):
    if (module, name) in _SAFE_GLOBALS:
        return True
    # torch.FloatStorage and the like (the tensors' storages), torch.float32 and the like.
    return module == "torch" and (name.endswith("Storage") or isinstance(getattr(torch, name, None), torch.dtype))


def _pickle_globals(stream):
    """The (module, name) of every global one pickle refers to, read from its opcodes without
    running it; None for one that cannot be told statically (which is then refused)."""
    found, memo, recent = [], {}, []  # recent: what the latest stack pushes were (a string or None)
    for op, arg, _ in pickletools.genops(stream):
        name = op.name
        if name in ("GLOBAL", "INST"):
            module, _, attr = arg.partition(" ")
            found.append((module, attr))
            recent.append(None)
        elif name == "STACK_GLOBAL":
            top = recent[-2:]
            found.append(tuple(top) if len(top) == 2 and all(isinstance(t, str) for t in top) else None)
            recent.append(None)
        elif name in ("EXT1", "EXT2", "EXT4"):
            found.append(None)  # the copyreg extension registry: not resolvable here
        elif name in _STRINGS:
            recent.append(arg)
        elif name in _GETS:
            recent.append(memo.get(arg))
        elif name in _MEMO_STORES:  # stores the top of the stack, changes nothing on it
            key = len(memo) if name == "MEMOIZE" else arg
            memo[key] = recent[-1] if recent else None
        else:
            recent.append(None)
    return found


def _check_pickles(blob, path):
    """Refuses a torch file whose pickles refer to globals beyond _SAFE_GLOBALS."""
    streams = []
    if zipfile.is_zipfile(io.BytesIO(blob)):
        with zipfile.ZipFile(io.BytesIO(blob)) as z:
            streams = [io.BytesIO(z.read(n)) for n in z.namelist() if n.endswith(".pkl")]
    else:  # the legacy format: magic number, protocol, system info, the object, storage keys
        f = io.BytesIO(blob)
        streams = [f] * 5
    if not streams:
        raise ConvertError(f"{path}: not a torch file (a zip archive without a pickle in it)")
    for stream in streams:
        try:
            found = _pickle_globals(stream)
        except Exception as e:  # truncated or not a pickle at all
            raise ConvertError(f"{path}: not a torch checkpoint that can be read ({e})")
        for g in found:
            if g is None or not _safe_global(*g):
                what = "a global it names only at run time" if g is None else f"{g[0]}.{g[1]}"
                raise ConvertError(f"{path}: the file pickles {what}, which is not a tensor or a plain container; "
                                   "give --trust-pickle if you trust the file (loading it then runs code from it)")


def load_checkpoint(path, trust_pickle):
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise ConvertError(f"{path}: cannot read it ({e.strerror})")
    if not trust_pickle:
        _check_pickles(blob, path)
    kwargs = {"map_location": "cpu"}
    if "weights_only" in inspect.signature(torch.load).parameters:
        # The check above stands in for it: torch 1.13's weights_only refuses any float in the
        # file (an optimizer's learning rate), which most training checkpoints hold.
        kwargs["weights_only"] = False
    try:
        return torch.load(io.BytesIO(blob), **kwargs)  # the bytes that were checked
    except Exception as e:  # truncated, not a torch file, a class that cannot be imported here, ...
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConvertError(f"{path}: torch.load failed: {msg}")


def is_state_dict(obj):
    return isinstance(obj, dict) and len(obj) > 0 and any(isinstance(v, torch.Tensor) for v in obj.values())


def find_state_dict(obj, path):
    """The state_dict inside what torch.load returned, and where it was found."""
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict(), "the pickled module's state_dict()"
    if not isinstance(obj, dict):
        raise ConvertError(f"{path} holds a {type(obj).__name__}, not a state_dict or a dict holding one")
    if is_state_dict(obj):
        return obj, "the top level"
    for key in STATE_DICT_KEYS:
        inner = obj.get(key)
        if isinstance(inner, torch.nn.Module):
            return inner.state_dict(), f"[{key!r}].state_dict()"
        if is_state_dict(inner):
            return inner, f"[{key!r}]"
        if isinstance(inner, dict):  # e.g. {"model": {"state_dict": ...}}
            for key2 in STATE_DICT_KEYS:
                if is_state_dict(inner.get(key2)):
                    return inner[key2], f"[{key!r}][{key2!r}]"
    keys = ", ".join(repr(k) for k in list(obj)[:12]) or "none"
    raise ConvertError(f"{path}: found no state_dict: the top level holds no tensors and none of the keys "
                       f"{', '.join(STATE_DICT_KEYS)} holds one (its keys: {keys})")


def tensors_of(state, path):
    """name -> tensor, with DataParallel's 'module.' prefix stripped and non-tensors refused."""
    bad = [f"{k!r} ({type(v).__name__})" for k, v in state.items()
           if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise ConvertError(f"{path}: entries that are not tensors, which an ocrt model file cannot hold: "
                           + ", ".join(bad[:10]) + (f" and {len(bad) - 10} more" if len(bad) > 10 else ""))
    names = list(state)
    if names and all(n.startswith("module.") for n in names):
        state = {n[len("module."):]: t for n, t in state.items()}
    return dict(state)


# ---------------------------------------------------------------- configs and expected shapes

def shape_of(tensors, name, ndim, path):
    t = tensors.get(name)
    if t is None:
        raise ConvertError(f"{path}: no tensor '{name}', which gives the model's sizes (is --arch right?)")
    if t.dim() != ndim:
        raise ConvertError(f"{path}: '{name}' has shape {list(t.shape)}, expected {ndim} dimensions")
    return list(t.shape)


def crnn_config(tensors, path):
    """channels, hidden, num_classes (and batch_norm) of a CRNN from its tensors' shapes."""
    convs = [0, 3, 6, 9, 12, 15, 18]
    channels = [shape_of(tensors, f"cnn.{i}.weight", 4, path)[0] for i in convs]
    hidden = shape_of(tensors, "rnn.weight_hh_l0", 2, path)[1]
    classes = shape_of(tensors, "fc.weight", 2, path)[0]
    config = {"channels": channels, "hidden": hidden, "num_classes": classes}
    if "cnn.7.weight" not in tensors and "cnn.6.bias" in tensors:
        config["batch_norm"] = False  # ocrt's variant without BatchNorm (docs/models.md)
    return config


def crnn_expected(config):
    """name -> shape of a CRNN state_dict (tools/reference/crnn.py; models/crnn.cpp)."""
    c, h, k = config["channels"], config["hidden"], config["num_classes"]
    bn = config.get("batch_norm", True)
    out = {}
    cin = [1] + c[:6]
    for layer, (i, ks, bias) in enumerate([(0, 3, True), (3, 3, True), (6, 3, not bn), (9, 3, True),
                                           (12, 3, not bn), (15, 3, True), (18, 2, not bn)]):
        out[f"cnn.{i}.weight"] = [c[layer], cin[layer], ks, ks]
        if bias:
            out[f"cnn.{i}.bias"] = [c[layer]]
        if bn and i in (6, 12, 18):
            for what in ("weight", "bias", "running_mean", "running_var"):
                out[f"cnn.{i + 1}.{what}"] = [c[layer]]
            out[f"cnn.{i + 1}.num_batches_tracked"] = []
    for layer in range(2):
        fin = c[6] if layer == 0 else 2 * h
        for sfx in ("", "_reverse"):
            out[f"rnn.weight_ih_l{layer}{sfx}"] = [4 * h, fin]
            out[f"rnn.weight_hh_l{layer}{sfx}"] = [4 * h, h]
            out[f"rnn.bias_ih_l{layer}{sfx}"] = [4 * h]
            out[f"rnn.bias_hh_l{layer}{sfx}"] = [4 * h]
    out["fc.weight"] = [k, 2 * h]
    out["fc.bias"] = [k]
    return out


def svtr_config_seen(tensors, path):
    """The SVTR-lite sizes that tensor shapes show: dims, depths, mlp_ratio, out_dim, classes."""
    d0 = shape_of(tensors, "patch_embed.3.weight", 4, path)[0]
    d1 = shape_of(tensors, "merges.0.conv.weight", 4, path)[0]
    d2 = shape_of(tensors, "merges.1.conv.weight", 4, path)[0]
    widths = []  # each block's channels, in order
    while f"blocks.{len(widths)}.norm1.weight" in tensors:
        widths.append(shape_of(tensors, f"blocks.{len(widths)}.norm1.weight", 1, path)[0])
    if not widths:
        raise ConvertError(f"{path}: no tensor 'blocks.0.norm1.weight': no mixing blocks (is --arch right?)")
    seen = {"dims": [d0, d1, d2], "out_dim": shape_of(tensors, "proj.weight", 2, path)[0],
            "num_classes": shape_of(tensors, "head.weight", 2, path)[0],
            "mlp_ratio": shape_of(tensors, "blocks.0.mlp.fc1.weight", 2, path)[0] // d0}
    # Blocks run stage by stage, so with three different widths the depths follow from the
    # widths; with two stages of equal width they do not.
    if len({d0, d1, d2}) == 3:
        seen["depths"] = [widths.count(d) for d in (d0, d1, d2)]
    return seen, len(widths)


def svtr_expected(config):
    """name -> shape of an SVTR-lite state_dict (tools/reference/svtr_lite.py; docs/models.md)."""
    dims, depths, r = config["dims"], config["depths"], config["mlp_ratio"]
    out = {"patch_embed.0.weight": [dims[0] // 2, 1, 3, 3], "patch_embed.3.weight": [dims[0], dims[0] // 2, 3, 3]}
    for i, ch in ((1, dims[0] // 2), (4, dims[0])):
        for what in ("weight", "bias", "running_mean", "running_var"):
            out[f"patch_embed.{i}.{what}"] = [ch]
        out[f"patch_embed.{i}.num_batches_tracked"] = []
    b = 0
    for s in range(3):
        C = dims[s]
        for _ in range(depths[s]):
            p = f"blocks.{b}."
            out.update({p + "norm1.weight": [C], p + "norm1.bias": [C],
                        p + "attn.in_proj_weight": [3 * C, C], p + "attn.in_proj_bias": [3 * C],
                        p + "attn.out_proj.weight": [C, C], p + "attn.out_proj.bias": [C],
                        p + "norm2.weight": [C], p + "norm2.bias": [C],
                        p + "mlp.fc1.weight": [r * C, C], p + "mlp.fc1.bias": [r * C],
                        p + "mlp.fc2.weight": [C, r * C], p + "mlp.fc2.bias": [C]})
            b += 1
    for m in range(2):
        cin, cout = dims[m], dims[m + 1]
        out.update({f"merges.{m}.conv.weight": [cout, cin, 3, 3], f"merges.{m}.conv.bias": [cout],
                    f"merges.{m}.norm.weight": [cout], f"merges.{m}.norm.bias": [cout]})
    out.update({"norm.weight": [dims[2]], "norm.bias": [dims[2]], "proj.weight": [config["out_dim"], dims[2]],
                "head.weight": [config["num_classes"], config["out_dim"]], "head.bias": [config["num_classes"]]})
    return out


def merge_given(derived, given, path):
    """derived, with the fields of --config added; a given field that the shapes also show must agree."""
    out = dict(derived)
    for k, v in given.items():
        if k in derived and derived[k] != v:
            raise ConvertError(f"{path}: --config says {k} = {json.dumps(v)}, but the weights' shapes say "
                               f"{json.dumps(derived[k])}")
        out[k] = v
    return out


CONFIG_FIELDS = {"crnn": ("channels", "hidden", "num_classes", "batch_norm"),
                 "svtr-lite": ("dims", "depths", "heads", "mixer", "window", "mlp_ratio", "out_dim", "dropout",
                               "num_classes")}


def make_config(arch, tensors, given, path):
    fields = CONFIG_FIELDS["crnn" if arch in CRNN_PRESETS else arch]
    unknown = [k for k in given if k not in fields]
    if unknown:
        raise ConvertError(f"--config: unknown field(s) {', '.join(unknown)} for {arch} (it has {', '.join(fields)})")
    if arch in CRNN_PRESETS:
        config = merge_given(crnn_config(tensors, path), given, path)
        for k in ("channels", "hidden", "num_classes"):
            if k not in config:
                raise ConvertError(f"CRNN config: needs '{k}'")
        return config, crnn_expected(config)
    seen, blocks = svtr_config_seen(tensors, path)
    config = merge_given(seen, given, path)
    preset_sizes = {k: SVTR_PRESET[k] for k in ("dims", "depths", "mlp_ratio", "out_dim")}
    if all(config.get(k) == v for k, v in preset_sizes.items()):
        for k in SVTR_UNSEEN + ("depths",):
            config.setdefault(k, SVTR_PRESET[k])
    missing = [k for k in ("depths",) + SVTR_UNSEEN if k not in config]
    if missing:
        raise ConvertError(
            f"{path}: an SVTR-lite of sizes other than the preset's (dims {config['dims']}, {blocks} blocks, "
            f"out_dim {config['out_dim']}) needs --config with {', '.join(missing)}, which no tensor shape "
            "shows (docs/models.md lists the fields)")
    if sum(config["depths"]) != blocks or len(config["mixer"]) != blocks:
        raise ConvertError(f"{path}: the weights hold {blocks} mixing blocks, but the config's depths "
                           f"{config['depths']} and mixer ({len(config['mixer'])} entries) say otherwise")
    for s in range(3):
        if config["dims"][s] % config["heads"][s]:
            raise ConvertError(f"SVTR-lite config: dims[{s}] = {config['dims'][s]} is not a multiple of "
                               f"heads[{s}] = {config['heads'][s]}")
    ordered = {k: config[k] for k in ("dims", "depths", "heads", "mixer", "window", "mlp_ratio", "out_dim",
                                      "dropout", "num_classes")}
    return ordered, svtr_expected(ordered)


def check_names_and_shapes(tensors, expected, arch, path):
    """Every expected tensor present with its shape (num_batches_tracked may be missing), nothing else."""
    missing = [n for n in expected if n not in tensors and not n.endswith(".num_batches_tracked")]
    unexpected = [n for n in tensors if n not in expected]
    wrong = [f"{n} (expected {expected[n]}, got {list(t.shape)})" for n, t in tensors.items()
             if n in expected and list(t.shape) != expected[n]]
    problems = []
    for what, names in (("wrong shape", wrong), ("missing", missing), ("unexpected", unexpected)):
        if names:
            problems.append(f"  {what}: " + ", ".join(names))
    if problems:
        raise ConvertError(f"{path}: the weights do not match a '{arch}' model:\n" + "\n".join(problems))


def prepare_tensors(tensors, expected, path):
    """The file's tensors in the expected order: floats as float32 (finite), counters as int64."""
    out, converted = [], set()
    for name in expected:
        t = tensors.get(name)
        if name.endswith(".num_batches_tracked"):
            if t is None:
                t = torch.zeros((), dtype=torch.int64)  # what PyTorch itself assumes when it is absent
            elif t.is_floating_point() or t.is_complex():
                raise ConvertError(f"{path}: '{name}' is {t.dtype}, expected an integer count")
            out.append((name, t.detach().to(torch.int64).contiguous()))
            continue
        if not t.is_floating_point():
            raise ConvertError(f"{path}: '{name}' is {t.dtype}, expected a floating-point tensor")
        if t.dtype != torch.float32:
            converted.add(str(t.dtype).replace("torch.", ""))
        t = t.detach().to(torch.float32).contiguous()
        if not bool(torch.isfinite(t).all()):
            raise ConvertError(f"{path}: tensor '{name}' holds a non-finite value; the checkpoint is damaged "
                               "or its training diverged")
        out.append((name, t))
    return out, sorted(converted)


# ---------------------------------------------------------------- writing safetensors

_DTYPES = {torch.float32: ("F32", "f"), torch.int64: ("I64", "q")}


def write_safetensors(path, tensors, metadata):
    """The safetensors layout (runtime/safetensors.h): an 8-byte little-endian header length, the
    JSON header (name -> dtype, shape, data_offsets, plus "__metadata__" of strings) padded with
    spaces to a multiple of 8, then each tensor's little-endian bytes back to back. Written to a
    temporary file and renamed over path, so a failure never leaves half a model behind."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, t in tensors:
        dtype, fmt = _DTYPES[t.dtype]
        values = t.reshape(-1).tolist()
        data = struct.pack(f"<{len(values)}{fmt}", *values)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for b in blobs:
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise ConvertError(f"{path}: cannot write it ({e.strerror})")


# ---------------------------------------------------------------- the conversion

def parse_config_arg(text):
    if text is None:
        return {}
    source = "--config"
    if os.path.isfile(text):
        source = text
        with open(text, encoding="utf-8") as f:
            text = f.read()
    try:
        given = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConvertError(f"{source}: not valid JSON ({e.msg} at character {e.pos})")
    if not isinstance(given, dict):
        raise ConvertError(f"{source}: expected a JSON object")
    return given


def convert(input_path, output_path, arch, charset_path, config_text=None, trust_pickle=False, quiet=False):
    """Converts input_path into an ocrt model file at output_path; returns the metadata written."""
    if arch not in ARCHS:
        raise ConvertError(f"unknown architecture '{arch}' (expected one of {', '.join(ARCHS)})")
    charset = read_charset(charset_path)
    given = parse_config_arg(config_text)
    state, where = find_state_dict(load_checkpoint(input_path, trust_pickle), input_path)
    tensors = tensors_of(state, input_path)
    config, expected = make_config(arch, tensors, given, input_path)
    classes = config["num_classes"]
    if classes != len(charset) + 1:
        raise ConvertError(f"{input_path}: the weights have {classes} classes, but the charset {charset_path} has "
                           f"{len(charset)} characters (expected characters + 1 classes: class 0 is the CTC blank)")
    check_names_and_shapes(tensors, expected, arch, input_path)
    out, converted = prepare_tensors(tensors, expected, input_path)
    training = {"converted_from": os.path.basename(input_path), "converter": "tools/convert_torch.py",
                "torch": torch.__version__}
    metadata = {
        "format": FORMAT,
        "arch": arch,
        "config": json.dumps(config, separators=(",", ":")),
        "charset": json.dumps(charset, ensure_ascii=False, separators=(",", ":")),
        "input": json.dumps(INPUT_SPEC, separators=(",", ":")),
        "training": json.dumps(training, separators=(",", ":")),
    }
    write_safetensors(output_path, out, metadata)
    if not quiet:
        added = [n for n, _ in out if n not in tensors]
        print(f"{input_path}: state_dict at {where}, {len(out)} tensors, {sum(t.numel() for _, t in out)} values")
        if converted:
            print(f"  converted {', '.join(converted)} tensors to float32")
        if added:
            print(f"  added {', '.join(added)} = 0 (absent from the checkpoint)")
        print(f"wrote {output_path}: a '{arch}' model, config {metadata['config']}, {len(charset)} characters")
    return metadata


def main(argv=None):
    p = argparse.ArgumentParser(description="Convert a PyTorch .pt/.pth checkpoint into an ocrt model file.")
    p.add_argument("input", help="the .pt / .pth file (a state_dict, or a dict holding one)")
    p.add_argument("output", help="the ocrt model file to write (.safetensors)")
    p.add_argument("--arch", required=True, help=f"one of {', '.join(ARCHS)}")
    p.add_argument("--charset", required=True, help="charset file: UTF-8, one character a line (docs/data.md)")
    p.add_argument("--config", help="JSON object (or a file holding one): config fields the shapes do not show")
    p.add_argument("--trust-pickle", action="store_true",
                   help="load with full unpickling (runs code from the file; trusted files only)")
    a = p.parse_args(argv)
    try:
        convert(a.input, a.output, a.arch, a.charset, a.config, a.trust_pickle)
    except ConvertError as e:
        print(f"convert_torch.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
