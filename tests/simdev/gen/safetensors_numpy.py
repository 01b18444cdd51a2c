#!/usr/bin/env python3
"""Writes a Hugging Face-style checkpoint with NumPy alone, as a numerics team would export
one: config.json (copied) and model.safetensors, or shards with model.safetensors.index.json.

The tensors follow the Qwen3 (or Qwen3-MoE: router and experts) names and shapes of the config, with the scales a trained model
has at initialisation: matrices N(0, 1/fan_in), norms 1 + N(0, 0.1), embeddings N(0, 1),
an untied lm_head N(0, 9/hidden) (logits of std ~3, the margins the smoke's greedy
agreement relies on; calbin/MODEL.md). `simdev gen --config DIR/config.json --weights DIR`
then packages them and `calrt smoke` runs them (tests/simdev/gen/CMakeLists.txt).

usage: safetensors_numpy.py CONFIG.json OUT_DIR --dtype F32|BF16|F16 [--shards N] [--seed S]
       [--untie]
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np


def to_bytes(values, dtype):
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "F32":
        return values.astype("<f4").tobytes()
    if dtype == "F16":
        return values.astype("<f2").tobytes()
    # BF16: round to nearest even from the FP32 bits.
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def write_file(path, tensors, dtype):
    header, blobs, offset = {}, [], 0
    for name, values in tensors:
        blob = to_bytes(values, dtype)
        header[name] = {"dtype": dtype, "shape": list(values.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to 8 bytes
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for blob in blobs:
            out.write(blob)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("out")
    parser.add_argument("--dtype", choices=["F32", "BF16", "F16"], required=True)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--untie", action="store_true", help="write tie_word_embeddings: false")
    args = parser.parse_args()

    with open(args.config) as f:
        config = json.load(f)
    if args.untie:
        config["tie_word_embeddings"] = False
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim", hidden // heads)
    ffn, vocab = config["intermediate_size"], config["vocab_size"]
    tied = config.get("tie_word_embeddings", False)
    experts = config.get("num_experts", 0) if config["model_type"] == "qwen3_moe" else 0
    rng = np.random.default_rng(args.seed)

    def matrix(out_dim, in_dim):
        return rng.normal(0.0, 1.0 / np.sqrt(in_dim), (out_dim, in_dim))

    def mlp(prefix, width):
        return [(prefix + "gate_proj.weight", matrix(width, hidden)),
                (prefix + "up_proj.weight", matrix(width, hidden)),
                (prefix + "down_proj.weight", matrix(hidden, width))]

    def norm(size):
        return 1.0 + rng.normal(0.0, 0.1, (size,))

    # A tied embedding is also the lm_head: its scale is the head's, and the first RMSNorm
    # removes it on the way in.
    embed_std = 3.0 / np.sqrt(hidden) if tied else 1.0
    tensors = [("model.embed_tokens.weight", rng.normal(0.0, embed_std, (vocab, hidden)))]
    for l in range(layers):
        p = f"model.layers.{l}."
        tensors += [
            (p + "input_layernorm.weight", norm(hidden)),
            (p + "self_attn.q_proj.weight", matrix(heads * head_dim, hidden)),
            (p + "self_attn.k_proj.weight", matrix(kv_heads * head_dim, hidden)),
            (p + "self_attn.v_proj.weight", matrix(kv_heads * head_dim, hidden)),
            (p + "self_attn.q_norm.weight", norm(head_dim)),
            (p + "self_attn.k_norm.weight", norm(head_dim)),
            (p + "self_attn.o_proj.weight", matrix(hidden, heads * head_dim)),
            (p + "post_attention_layernorm.weight", norm(hidden)),
        ]
        if experts == 0:
            tensors += mlp(p + "mlp.", ffn)
        else:
            # Qwen3-MoE: the router `mlp.gate` (logits of std ~2 on a unit-RMS input, margins
            # between the top-k picks as a trained router has), then each expert's MLP.
            tensors.append((p + "mlp.gate.weight", rng.normal(0.0, 2.0 / np.sqrt(hidden),
                                                              (experts, hidden))))
            for e in range(experts):
                tensors += mlp(p + f"mlp.experts.{e}.", config["moe_intermediate_size"])
    tensors.append(("model.norm.weight", norm(hidden)))
    if not tied:
        tensors.append(("lm_head.weight", rng.normal(0.0, 3.0 / np.sqrt(hidden), (vocab, hidden))))

    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if args.shards == 1:
        write_file(os.path.join(args.out, "model.safetensors"), tensors, args.dtype)
    else:
        weight_map = {}
        for s in range(args.shards):
            name = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
            part = tensors[s::args.shards]
            write_file(os.path.join(args.out, name), part, args.dtype)
            weight_map.update({tensor: name for tensor, _ in part})
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
    print(f"wrote {len(tensors)} tensors ({args.dtype}, {args.shards} file(s)) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
