#!/usr/bin/python3
"""benchmarks/llama_cpp/make_gguf.py writes a GGUF that reads back as llama.cpp's qwen3.

    gguf_writer_test.py

Writes a tiny Qwen3 shape (a 3-layer config cut to 2 by --layers, hidden 64, vocabulary 300)
into a temporary directory and parses it with a reader of its own, written from ggml's
docs/gguf.md and not sharing code with the writer: the header, every metadata value, the
tensor table (names, dims in ggml's order, types, offsets aligned and in order, the file's
size), the vocabulary, and the Q8_0 blocks (each value within half a step of the seeded
N(0, 0.02) draw the writer quantised, each scale its block's max |x| / 127). Correctness only:
no timing. Prints "N passed, N failed"; exits 1 on a failure.
"""

import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "benchmarks" / "llama_cpp" / "make_gguf.py"

SHAPE = {"model_type": "qwen3", "num_hidden_layers": 3, "hidden_size": 64,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
         "intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 2048,
         "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": True}
LAYERS, SEED = 2, 5


class Reader:
    """A GGUF v3 reader after docs/gguf.md: little-endian, strings as u64 length + bytes."""

    SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype == 8:
            return self.string()
        if vtype == 9:
            elem, n = self.take("<I"), self.take("<Q")
            return [self.value(elem) for _ in range(n)]
        return self.take(self.SCALARS[vtype])

    def parse(self):
        assert self.data[:4] == b"GGUF", "magic"
        self.pos = 4
        version, n_tensors, n_kv = self.take("<I"), self.take("<Q"), self.take("<Q")
        kv = {}
        for _ in range(n_kv):
            key = self.string()
            kv[key] = (self.take("<I"), None)
            kv[key] = (kv[key][0], self.value(kv[key][0]))
        tensors = []
        for _ in range(n_tensors):
            name = self.string()
            dims = [self.take("<Q") for _ in range(self.take("<I"))]
            tensors.append((name, dims, self.take("<I"), self.take("<Q")))
        alignment = kv.get("general.alignment", (4, 32))[1]
        data_start = (self.pos + alignment - 1) // alignment * alignment
        return version, kv, tensors, alignment, data_start


def expected_tensors():
    """llama.cpp's qwen3 tensors at SHAPE with LAYERS: name -> (dims, ggml type)."""
    h, d, f, v = 64, 32, 96, 300
    t = {"token_embd.weight": ([h, v], 8), "output_norm.weight": ([h], 0)}
    for i in range(LAYERS):
        b = f"blk.{i}."
        t.update({b + "attn_norm.weight": ([h], 0), b + "ffn_norm.weight": ([h], 0),
                  b + "attn_q.weight": ([h, 4 * d], 8), b + "attn_k.weight": ([h, 2 * d], 8),
                  b + "attn_v.weight": ([h, 2 * d], 8), b + "attn_output.weight": ([4 * d, h], 8),
                  b + "attn_q_norm.weight": ([d], 0), b + "attn_k_norm.weight": ([d], 0),
                  b + "ffn_gate.weight": ([h, f], 8), b + "ffn_up.weight": ([h, f], 8),
                  b + "ffn_down.weight": ([f, h], 8)})
    return t


def nbytes(dims, ggml_type):
    n = int(np.prod(dims))
    return n * 4 if ggml_type == 0 else n // 32 * 34


def q8_0_blocks(raw):
    """(scales as FP32, quants as int8 [n, 32]) from 34-byte blocks: FP16 d, then 32 int8."""
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view("<f2").astype(np.float32).ravel()
    return d, b[:, 2:].copy().view(np.int8)


def seeded_values(name, rows, cols):
    """The draw the writer makes for a tensor (its documented stream: seed, crc32 of name)."""
    import zlib
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)


def run_checks(path):
    data = path.read_bytes()
    version, kv, tensors, alignment, data_start = Reader(data).parse()
    val = {k: v for k, (_, v) in kv.items()}
    typ = {k: t for k, (t, _) in kv.items()}
    checks = []

    def check(name, ok):
        checks.append((name, bool(ok)))

    check("version 3", version == 3)
    check("architecture qwen3", val["general.architecture"] == "qwen3")
    check("file type Q8_0", val["general.file_type"] == 7)
    for key, want in (("block_count", LAYERS), ("embedding_length", 64),
                      ("feed_forward_length", 96), ("attention.head_count", 4),
                      ("attention.head_count_kv", 2), ("attention.key_length", 32),
                      ("attention.value_length", 32), ("context_length", 2048)):
        check(f"qwen3.{key} = {want} (u32)", val[f"qwen3.{key}"] == want and
              typ[f"qwen3.{key}"] == 4)
    check("rms eps (f32)", abs(val["qwen3.attention.layer_norm_rms_epsilon"] - 1e-6) < 1e-12 and
          typ["qwen3.attention.layer_norm_rms_epsilon"] == 6)
    check("rope base", val["qwen3.rope.freq_base"] == 1000000.0)
    tokens, types = val["tokenizer.ggml.tokens"], val["tokenizer.ggml.token_type"]
    check("gpt2 tokenizer with merges", val["tokenizer.ggml.model"] == "gpt2" and
          len(val["tokenizer.ggml.merges"]) >= 1)
    check("vocabulary size", len(tokens) == 300 and len(types) == 300)
    check("tokens unique", len(set(tokens)) == 300)
    eos = val["tokenizer.ggml.eos_token_id"]
    check("eos is a control token", eos < 300 and types[eos] == 3 and
          tokens[eos] == "<|endoftext|>")

    want = expected_tensors()
    got = {name: (dims, t) for name, dims, t, _ in tensors}
    check("tensor names are qwen3's, tied (no output.weight)", set(got) == set(want))
    check("tensor dims and types", all(got.get(n) == w for n, w in want.items()))
    offsets_ok, end = True, 0
    for name, dims, t, off in tensors:
        offsets_ok &= off % alignment == 0 and off >= end
        end = off + nbytes(dims, t)
    check("offsets aligned and in order", offsets_ok)
    check("file ends with the last tensor (padded)",
          data_start + end <= len(data) < data_start + end + alignment)

    def raw(name):
        for n, dims, t, off in tensors:
            if n == name:
                return data[data_start + off:data_start + off + nbytes(dims, t)]
        raise KeyError(name)

    check("norms are FP32 ones", all(
        np.all(np.frombuffer(raw(n), dtype="<f4") == 1.0)
        for n, (_, t) in want.items() if t == 0))
    for name, rows, cols in (("token_embd.weight", 300, 64), ("blk.1.ffn_down.weight", 64, 96)):
        x = seeded_values(name, rows, cols).reshape(-1, 32)
        d, q = q8_0_blocks(raw(name))
        amax = np.abs(x).max(axis=1)
        check(f"{name}: scales are max|x| / 127 in FP16",
              np.array_equal(d, (amax / np.float32(127)).astype(np.float16).astype(np.float32)))
        err = np.abs(d[:, None] * q - x)
        check(f"{name}: values within half a step (+ FP16 rounding of d)",
              np.all(err <= d[:, None] * 0.5 + amax[:, None] * 2e-3))
        check(f"{name}: quants span -127..127", q.min() >= -127 and q.max() <= 127 and
              np.all(np.abs(q).max(axis=1) == 127))
    return checks


def main():
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "tiny-qwen3.json"
        config.write_text(json.dumps(SHAPE))
        out = Path(tmp) / "tiny.gguf"
        subprocess.run([sys.executable, str(WRITER), "--config", str(config), "--seed", str(SEED),
                        "--layers", str(LAYERS), "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        try:
            checks = run_checks(out)
        except (AssertionError, KeyError, ValueError, struct.error) as e:
            checks = [(f"the file parses and holds every tensor ({type(e).__name__}: {e})", False)]
        bad = subprocess.run([sys.executable, str(WRITER), "--config", str(config), "--layers",
                              "0", "--out", str(out)], capture_output=True, text=True)
        checks.append(("--layers 0 is refused with exit 2, naming the flag",
                       bad.returncode == 2 and "--layers" in bad.stderr))
    failed = [name for name, ok in checks if not ok]
    for name in failed:
        print(f"FAILED: {name}")
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
