#!/usr/bin/python3
"""Writes a Qwen3 shape as a GGUF file for llama.cpp: Q8_0 matrices of seeded random values.

    make_gguf.py --config config.json --seed 11 [--layers N] --out model.gguf

The config is a Hugging Face config.json of `model_type: qwen3` (the one `simdev gen
--config` reads). The file holds what llama.cpp's `qwen3` architecture loads: the token
embedding (tied: no `output.weight`), per layer the attention and FFN norms, q/k/v/o,
q_norm/k_norm and gate/up/down, and the final norm. The 2-D matrices are Q8_0 (blocks of 32:
an FP16 scale and 32 int8), drawn N(0, 0.02) per tensor from the seed and quantised as
ggml's reference quantiser does; the norms are FP32 ones. The vocabulary is synthetic: a
`gpt2` BPE vocabulary of the config's size (the 256 byte symbols, then `t<id>` tokens, the
last id `<|endoftext|>`), enough for llama.cpp to load; the benchmark feeds token ids.

Format: GGUF version 3, little-endian, tensor data aligned to 32 bytes (ggml's docs/gguf.md).
"""

import argparse
import hashlib
import json
import struct
import sys
import zlib
from pathlib import Path

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf_metadata_value_type
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
# ggml_type
GGML_F32, GGML_Q8_0 = 0, 8
LLAMA_FTYPE_MOSTLY_Q8_0 = 7
QK8_0 = 32
Q8_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", (QK8_0,))])  # 34 bytes
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3
WEIGHT_STD = 0.02


class ConfigError(Exception):
    pass


def read_shape(config_path, layers=None):
    """The model's shape from a Hugging Face config.json, with an optional layer count."""
    try:
        cfg = json.loads(Path(config_path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{config_path}: cannot read the config: {e}") from e
    if cfg.get("model_type") != "qwen3":
        raise ConfigError(f"{config_path}: model_type is {cfg.get('model_type')!r}; "
                          "this writer makes llama.cpp's qwen3 architecture only")
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                "intermediate_size", "vocab_size"):
        if not isinstance(cfg.get(key), int) or cfg[key] <= 0:
            raise ConfigError(f"{config_path}: {key} must be a positive integer")
    heads = cfg["num_attention_heads"]
    shape = {
        "layers": cfg["num_hidden_layers"] if layers is None else layers,
        "hidden": cfg["hidden_size"],
        "heads": heads,
        "kv_heads": cfg.get("num_key_value_heads", heads),
        "head_dim": cfg.get("head_dim", cfg["hidden_size"] // heads),
        "ffn": cfg["intermediate_size"],
        "vocab": cfg["vocab_size"],
        "context": cfg.get("max_position_embeddings", 32768),
        "rope_theta": float(cfg.get("rope_theta", 10000.0)),
        "rms_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "name": Path(config_path).stem,
    }
    if shape["layers"] <= 0:
        raise ConfigError(f"--layers must be positive, not {shape['layers']}")
    if not cfg.get("tie_word_embeddings", False):
        raise ConfigError(f"{config_path}: only tied embeddings are written "
                          "(tie_word_embeddings: true)")
    for key in ("hidden", "ffn", "head_dim"):
        if shape[key] % QK8_0:
            raise ConfigError(f"{config_path}: {key} {shape[key]} is not a multiple of "
                              f"{QK8_0}, Q8_0's block")
    return shape


def tensor_specs(shape):
    """(name, ggml dims (innermost first), ggml type) of every tensor, in file order."""
    h, d, f, v = shape["hidden"], shape["head_dim"], shape["ffn"], shape["vocab"]
    q, kv = shape["heads"] * d, shape["kv_heads"] * d
    specs = [("token_embd.weight", (h, v), GGML_Q8_0)]
    for i in range(shape["layers"]):
        b = f"blk.{i}."
        specs += [
            (b + "attn_norm.weight", (h,), GGML_F32),
            (b + "attn_q.weight", (h, q), GGML_Q8_0),
            (b + "attn_k.weight", (h, kv), GGML_Q8_0),
            (b + "attn_v.weight", (h, kv), GGML_Q8_0),
            (b + "attn_output.weight", (q, h), GGML_Q8_0),
            (b + "attn_q_norm.weight", (d,), GGML_F32),
            (b + "attn_k_norm.weight", (d,), GGML_F32),
            (b + "ffn_norm.weight", (h,), GGML_F32),
            (b + "ffn_gate.weight", (h, f), GGML_Q8_0),
            (b + "ffn_up.weight", (h, f), GGML_Q8_0),
            (b + "ffn_down.weight", (f, h), GGML_Q8_0),
        ]
    specs.append(("output_norm.weight", (h,), GGML_F32))
    return specs


def tensor_nbytes(dims, ggml_type):
    count = int(np.prod(dims))
    return count * 4 if ggml_type == GGML_F32 else count // QK8_0 * Q8_0_BLOCK.itemsize


def tensor_rng(seed, name):
    """Each tensor's own stream, so that a tensor's values do not depend on the others."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def random_rows(rng, rows, cols):
    return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(WEIGHT_STD)


def quantize_q8_0(x):
    """ggml's reference Q8_0: per 32 values d = max|x| / 127, q = round(x / d)."""
    blocks = x.reshape(-1, QK8_0)
    d = np.abs(blocks).max(axis=1) / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    out = np.empty(len(blocks), dtype=Q8_0_BLOCK)
    out["d"] = d.astype(np.float16)
    # roundf rounds half away from zero; np.rint would round half to even.
    scaled = blocks * inv[:, None]
    out["qs"] = (np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))).astype(np.int8)
    return out


def dequantize_q8_0(raw):
    blocks = np.frombuffer(raw, dtype=Q8_0_BLOCK)
    return (blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)).ravel()


def tensor_chunks(seed, name, dims, ggml_type, rows_per_chunk=4096):
    """The tensor's bytes, a few thousand rows at a time (the embedding is 150k rows)."""
    if ggml_type == GGML_F32:
        yield np.ones(dims, dtype="<f4").tobytes()
        return
    cols, rows = dims[0], int(np.prod(dims[1:]))
    rng = tensor_rng(seed, name)
    for start in range(0, rows, rows_per_chunk):
        n = min(rows_per_chunk, rows - start)
        yield quantize_q8_0(random_rows(rng, n, cols)).tobytes()


def pack_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def pack_value(vtype, value):
    if vtype == T_STRING:
        return pack_string(value)
    if vtype == T_ARRAY:
        elem_type, items = value
        if elem_type == T_STRING:
            body = b"".join(pack_string(s) for s in items)
        else:
            fmt = {T_INT32: "<i", T_UINT32: "<I", T_FLOAT32: "<f"}[elem_type]
            body = np.asarray(items, dtype=np.dtype(fmt)).tobytes()
        return struct.pack("<IQ", elem_type, len(items)) + body
    fmt = {T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?"}[vtype]
    return struct.pack(fmt, value)


def byte_symbols():
    """GPT-2's byte-to-unicode table: the 256 symbols of a byte-level BPE vocabulary."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    symbols, extra = {}, 0
    for b in range(256):
        if b in printable:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def synthetic_vocab(size):
    """(tokens, token types): the byte symbols, `t<id>` fillers, `<|endoftext|>` last."""
    if size < 258:
        raise ConfigError(f"vocab_size {size} is too small for a byte-level vocabulary (258)")
    tokens = byte_symbols() + [f"t{i}" for i in range(256, size - 1)] + ["<|endoftext|>"]
    types = [TOKEN_NORMAL] * (size - 1) + [TOKEN_CONTROL]
    return tokens, types


def metadata(shape, seed):
    """The key/value pairs llama.cpp reads for `qwen3`, and the tokenizer's."""
    arch = "qwen3"
    tokens, types = synthetic_vocab(shape["vocab"])
    eos = shape["vocab"] - 1
    return [
        ("general.architecture", T_STRING, arch),
        ("general.name", T_STRING, f"{shape['name']} seed {seed} (random Q8_0)"),
        ("general.file_type", T_UINT32, LLAMA_FTYPE_MOSTLY_Q8_0),
        ("general.quantization_version", T_UINT32, 2),
        ("general.alignment", T_UINT32, ALIGNMENT),
        (f"{arch}.context_length", T_UINT32, shape["context"]),
        (f"{arch}.embedding_length", T_UINT32, shape["hidden"]),
        (f"{arch}.block_count", T_UINT32, shape["layers"]),
        (f"{arch}.feed_forward_length", T_UINT32, shape["ffn"]),
        (f"{arch}.attention.head_count", T_UINT32, shape["heads"]),
        (f"{arch}.attention.head_count_kv", T_UINT32, shape["kv_heads"]),
        (f"{arch}.attention.key_length", T_UINT32, shape["head_dim"]),
        (f"{arch}.attention.value_length", T_UINT32, shape["head_dim"]),
        (f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, shape["rms_eps"]),
        (f"{arch}.rope.freq_base", T_FLOAT32, shape["rope_theta"]),
        ("tokenizer.ggml.model", T_STRING, "gpt2"),
        ("tokenizer.ggml.pre", T_STRING, "qwen2"),
        ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
        ("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
        ("tokenizer.ggml.merges", T_ARRAY, (T_STRING, ["t 1"])),
        ("tokenizer.ggml.eos_token_id", T_UINT32, eos),
        ("tokenizer.ggml.bos_token_id", T_UINT32, eos),
        ("tokenizer.ggml.padding_token_id", T_UINT32, eos),
        ("tokenizer.ggml.add_bos_token", T_BOOL, False),
    ]


def align(n):
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def header_bytes(kvs, specs):
    """Header, metadata and tensor table; offsets relative to the aligned data section."""
    parts = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(specs), len(kvs))]
    for key, vtype, value in kvs:
        parts += [pack_string(key), struct.pack("<I", vtype), pack_value(vtype, value)]
    offset = 0
    for name, dims, ggml_type in specs:
        parts += [pack_string(name), struct.pack("<I", len(dims)),
                  struct.pack(f"<{len(dims)}Q", *dims), struct.pack("<IQ", ggml_type, offset)]
        offset = align(offset + tensor_nbytes(dims, ggml_type))
    return b"".join(parts)


def write_gguf(shape, seed, out_path):
    specs = tensor_specs(shape)
    head = header_bytes(metadata(shape, seed), specs)
    tmp = Path(str(out_path) + ".partial")
    with open(tmp, "wb") as f:
        f.write(head + b"\0" * (align(len(head)) - len(head)))
        for name, dims, ggml_type in specs:
            written = 0
            for chunk in tensor_chunks(seed, name, dims, ggml_type):
                f.write(chunk)
                written += len(chunk)
            f.write(b"\0" * (align(written) - written))
    tmp.replace(out_path)
    return specs


def cache_key(shape, seed):
    """Names the file by what is in it and by this writer's own source."""
    h = hashlib.sha256(json.dumps(shape, sort_keys=True).encode())
    h.update(str(seed).encode())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:12]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="Hugging Face config.json (qwen3)")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--layers", type=int, help="override num_hidden_layers")
    p.add_argument("--out", help="the GGUF file to write")
    p.add_argument("--out-dir", help="write <dir>/<name>-<key>.gguf unless it is there; "
                   "prints the path")
    args = p.parse_args(argv)
    if bool(args.out) == bool(args.out_dir):
        p.error("give one of --out and --out-dir")
    try:
        shape = read_shape(args.config, args.layers)
    except ConfigError as e:
        print(f"make_gguf: {e}", file=sys.stderr)
        return 2
    if args.out:
        out = Path(args.out)
    else:
        out = Path(args.out_dir) / (f"{shape['name']}-L{shape['layers']}-seed{args.seed}-"
                                    f"{cache_key(shape, args.seed)}.gguf")
        if out.exists():
            print(out)
            return 0
        out.parent.mkdir(parents=True, exist_ok=True)
    write_gguf(shape, args.seed, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
