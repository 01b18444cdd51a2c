#!/usr/bin/env python3
"""Independent NumPy reference of a functional calbin's model, checked against its golden set.

Usage: numpy_reference.py CALBIN_DIR [--max-prompt N] [--cases NAMES] [--tolerance T]
                          [--router-margin M]
       numpy_reference.py CALBIN_DIR --write-golden OUT_DIR [--perturb NAME]
                          [--max-prompt N] [--cases NAMES]

The script reads only the calbin's own files: manifest.json (verifying every listed file's
size and SHA-256), the weight files (reassembling each tensor from its shards, dequantising
int8 w8a8_dynamic rows by their per-row scales and packed int4 w4af16 weights by their
per-group scales, widening bf16), and the golden set. It then runs calbin/MODEL.md's FP32
reference in float64, the more exact side, so that what it measures is the golden's own FP32
rounding plus any defect. Dense models and mixtures of experts (llm.experts > 0: a BF16
router per layer, softmax over all experts, the top llm.active_experts, renormalised when
llm.norm_topk_prob) are both read; the routing has its own section below.

- the prompt (positions 0..L-1) in chunks of llm.prefill_chunk, through a KV cache, giving
  the logits of the last prompt token, compared with prefill_logits;
- decode step s feeding greedy[s] at position L + s (calbin/golden.hpp), giving one logits
  row per step, compared with top_logits at top_ids (and with decode_logits when stored);
  no id outside top_ids may beat the k-th golden logit, and greedy[s + 1] must be our argmax
  unless the two are within the tolerance (a near-tie FP32 may break either way).

It also checks the golden set against itself (greedy is the argmax of the stored logits,
top_logits descend and equal decode_logits at top_ids), since a writer bug there would
otherwise compare a wrong array against a right one without anyone noticing.

It prints one line per case (worst |difference| of the prefill row and of the decode rows,
greedy agreement) and a summary. Cases with prompt_len > --max-prompt (default 300) are
skipped to keep the check fast; pass a larger value to include the long cases.

Exit status: 0 every compared logit is within the tolerance; 1 a logit differs by more than
the tolerance under every routing tried, or the golden set contradicts itself (each message
names the case, the array, the index and both values); 2 malformed input (missing manifest,
file, field or tensor, bad shape, dtype, checksum, shard layout, expert count or int4 group;
the message names the file, the field and the value).

Calibration of the tolerance
----------------------------
Measured with this script at --tolerance 1 over `simdev gen --preset tiny --no-long --seed N`
for N = 1..16 (each seed's 8 short cases, prompts of 1 to 257 tokens, 8 decode steps each):

    tests/simdev/gen/numpy_reference_seeds.py --simdev build-test/simdev/tool/simdev \\
        --seeds 1-16 --work /tmp/npref/seeds --tolerance 1

    seed  prefill max|d|  decode max|d|        seed  prefill max|d|  decode max|d|
       1       6.263e-06      6.560e-06           9       5.621e-06      7.087e-06
       2       5.881e-06      7.809e-06          10       5.972e-06      8.591e-06
       3       6.006e-06      7.206e-06          11       6.076e-06      7.173e-06
       4       6.193e-06      7.970e-06          12       5.375e-06      7.147e-06
       5       7.044e-06      9.077e-06          13       5.970e-06      6.825e-06
       6       5.159e-06      6.771e-06          14       5.720e-06      6.231e-06
       7       4.982e-06      9.486e-06          15       6.436e-06      6.658e-06
       8       5.224e-06      7.140e-06          16       6.174e-06      6.794e-06

The long cases of seed 1 (prompts 4095, 4096, 4097, 4600; --max-prompt 100000) stay within
the same figures (worst 6.2e-06 prefill, 5.6e-06 decode): the golden's FP32 error does not
grow with the context. The worst clean figure is 9.5e-06 (seed 7, a decode row), the FP32
rounding of logits up to |15.2|. The tolerance is 1e-4, about 10x that: headroom for other
seeds, compilers and summation orders of the golden writer, yet more than three orders of
magnitude below the device's intended W8A8/BF16 noise (~0.15) and about 100x below the BF16
rounding of a typical logit (up to 2^-8 x |logit|, ~0.01 at |logit| = 3). So a golden taken
through BF16, a logit moved by 0.001, one int8 weight's sign flipped or one norm weight
scaled all fail; numpy_reference_negative.py proves each.

Calibration for a mixture of experts
------------------------------------
Measured as for the dense preset, over `simdev gen --config
tests/simdev/gen/configs/qwen3-moe-small/config.json --no-long --seed N` (8 experts, top 2,
norm_topk_prob, H 96, F 64, 2 layers; each seed's 8 short cases):

    tests/simdev/gen/numpy_reference_seeds.py --simdev build-test/simdev/tool/simdev \\
        --config tests/simdev/gen/configs/qwen3-moe-small/config.json \\
        --seeds 1-16 --work /tmp/npref/moe-seeds --tolerance 1

    seed  prefill max|d|  decode max|d|        seed  prefill max|d|  decode max|d|
       1       6.578e-06      5.958e-06           9       5.090e-06      5.984e-06
       2       4.280e-06      6.452e-06          10       4.671e-06      5.991e-06
       3       5.420e-06      7.139e-06          11       5.228e-06      6.486e-06
       4       5.701e-06      7.286e-06          12       4.613e-06      5.106e-06
       5       6.723e-06      5.732e-06          13       5.629e-06      6.028e-06
       6       4.343e-06      6.177e-06          14       5.906e-06      9.363e-06
       7       4.443e-06      6.932e-06          15       5.089e-06      8.104e-06
       8       4.842e-06      6.041e-06          16       5.200e-06      5.572e-06

The long case (len2040, near the 2048 context) of the same seeds stays within 5.8e-06
prefill and 7.0e-06 decode. The worst clean figure, 9.4e-06 (seed 14, a decode row), is the
dense preset's, so the same tolerance, 1e-4, holds with the same headroom.

Routing near-ties (mixture of experts)
--------------------------------------
Top-k is a step function of the router logits. When a token's k-th and (k+1)-th logits are
closer than their FP32 rounding, the golden's FP32 run and this float64 run can route it to
different experts; the token's residual stream then moves by the difference of two experts'
outputs (0.02 to 0.07 on later logits of seeds 1 and 9), and since its keys and values feed
every later token's attention in the next layers, so do all later rows of the case. Skipping
the affected rows would skip most of the case, and widening the tolerance would blind the
check, so both routings are computed instead:

- a token whose gap between the k-th and (k+1)-th router logits (float64) is below
  --router-margin (ROUTER_MARGIN, 1e-4) is a near-tie; the run takes the exact rule's set
  and records the others FP32 noise could pick (experts chained to the boundary by gaps
  below the margin, any k of them with the ones above the chain);
- the combinations of choices at the case's near-ties are run one by one, the float64
  routing first, until one matches, at most MAX_ROUTINGS (16) runs; a changed choice may
  create near-ties of its own downstream, which are explored the same way;
- the case passes when one routing matches the golden everywhere within the tolerance: one
  consistent routing for all the case's rows, not a pick per row. The case line counts the
  float64 run's near-ties and names any choice the matching routing changed ("golden routed
  pos 95 layer 0 experts [4, 6] not [1, 6]"); the summary gives the near-ties, the smallest
  gap met and the cases the golden routed otherwise. When none matches, the float64
  routing's failures are reported.

This does not weaken the check of the weights: only the experts at the k-th place of tokens
within 1e-4 of a tie may change, and the routing must still reproduce every logit of the
case to 1e-4. The negative controls moe-router and moe-expert-sign fail; so do, tried by
hand on seed 1, one router weight moved by one BF16 ulp and one expert's int8 weight by one.

The margin: an FP32 run of this same model (its arrays float32, seeds 1..16; its logits
differ from float64 by up to 1.1e-05, like the golden's 9.4e-06) puts each router logit
within 4.2e-06 of float64's, |z| up to 9.4, so two logits can trade places only when their
gap is below 8.4e-06. 1e-4 is 12x that, for other summation orders of the golden writer.
Near-ties are rare: none in the short cases of seeds 1..16 (the smallest gap 1.35e-04, seed
9). The long case len2040 has more tokens: 9 of seeds 1..16 have one near-tie, the closest
3.0e-07 apart (seed 13, below the FP32 noise), and seeds 17..110 have 39 more, the closest
5.2e-07 (seed 18); at the default tolerance the golden took the float64 routing in every one.
So the search for another routing is proved by the negative controls moe-other-routing (a
golden routed the other way at a decision within the margin: passes, naming the choice) and
moe-other-routing-far (the same, outside the margin: fails).

Writing a golden set (--write-golden)
-------------------------------------
With --write-golden OUT_DIR the script checks nothing: it writes the golden set a reference
team would bring, computed by this float64 model and cast to float32 when written, for the
prompts of the calbin's own golden cases (same names, tokens, prompt_len, decode_steps and
long_case; --cases and --max-prompt select them as for the check). Each case's greedy chain
is its own: greedy[0] is the argmax of its prefill logits, decode step s feeds greedy[s] at
position L + s and greedy[s + 1] is the argmax of that row; top_ids and top_logits are each
row's top_k (the calbin golden's top_k) by the written float32 values, a tie to the lower id;
decode_logits are the full rows. It is a schema-1 set (calbin/FORMAT.md): FP32 logits only,
no contract rows, so `calrt smoke CALBIN --golden OUT_DIR` computes those from the calbin's
weights. A mixture of experts takes the float64 routing. The arrays are written first and
golden.json last. Each case's line gives the prefill row's max |difference| from the calbin's
own golden (for a clean set, about the tolerance's calibration above) and how many of its
greedy tokens agree.

--perturb NAME makes the written set what a reference with one real defect would produce
(numpy_golden_smoke.py checks that the smoke fails each on a correct device):

    q_norm_ignored   the q head norm's weight taken as 1 (the norm itself still applied)
    attn_scale       attention scores not divided by sqrt(head_dim)
    rope_direction   RoPE rotating q and k by -angle
    swiglu_swapped   silu(up) * gate in place of silu(gate) * up
    logits_scaled    the final logits multiplied by 1.02
"""
import argparse
import collections
import hashlib
import itertools
import json
import math
import pathlib
import sys
import time

import numpy as np

# See "Calibration of the tolerance" in the docstring.
TOLERANCE = 1e-4
# See "Routing near-ties" in the docstring: router logits closer than this at the k-th place
# are tried both ways, and a case may try at most MAX_ROUTINGS routings.
ROUTER_MARGIN = 1e-4
MAX_ROUTINGS = 16

EXIT_OK, EXIT_MISMATCH, EXIT_INPUT = 0, 1, 2

# --write-golden --perturb: the defects a reference (or a device) could have; see "Writing a
# golden set" in the docstring.
PERTURBATIONS = (
    "q_norm_ignored",
    "attn_scale",
    "rope_direction",
    "swiglu_swapped",
    "logits_scaled",
)
LOGITS_SCALE = 1.02
WRITTEN_REFERENCE = "numpy float64 reference (tests/simdev/gen/numpy_reference.py)"
MAX_FAILURES_SHOWN = 20

# Element types this reader accepts for weights (FORMAT.md, dtype): bits per element.
WEIGHT_BITS = {"int4": 4, "int8": 8, "bf16": 16, "f32": 32}


class InputError(Exception):
    """Malformed calbin; the message names the file, the field and the value."""


# --- reading the manifest -------------------------------------------------------------------


def get(obj, key, where, kind=None):
    """obj[key], or an InputError naming the field path `where.key`."""
    if not isinstance(obj, dict) or key not in obj:
        raise InputError(f"{where}.{key}: missing")
    value = obj[key]
    # JSON booleans are ints in Python; a `true` where a count is expected is malformed.
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError(f"{where}.{key}: expected an integer, got {value!r}")
    if kind is not None and kind is not int and not isinstance(value, kind):
        raise InputError(f"{where}.{key}: expected {kind.__name__}, got {value!r}")
    return value


def inside(root, relative, where):
    """root / relative, refusing paths that could leave the directory (FORMAT.md, Paths)."""
    if not isinstance(relative, str) or not relative:
        raise InputError(f"{where}: expected a relative path, got {relative!r}")
    parts = relative.split("/")
    if relative.startswith("/") or ".." in parts:
        raise InputError(f"{where}: path {relative!r} leaves the calbin directory")
    return root / relative


def read_manifest(calbin):
    path = calbin / "manifest.json"
    if not path.is_file():
        raise InputError(f"{path}: missing (not a calbin directory?)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not valid JSON: {error}") from None
    where = "manifest.json"
    schema = get(manifest, "schema", where, int)
    if schema != 1:
        raise InputError(f"{where}: schema: {schema} but this reader knows 1")
    if manifest.get("timing_only", False):
        raise InputError(f"{where}: timing_only: true, a timing-only calbin has no weights")
    return manifest


def read_files(calbin, manifest):
    """Every `files` entry's bytes, after checking its size and SHA-256 like verify_files.

    Why check: the golden and the weights are only worth comparing if they are the bytes the
    generator wrote; a truncated or edited file should say so, not show as a logit mismatch.
    """
    blobs = {}
    for i, entry in enumerate(get(manifest, "files", "manifest.json", list)):
        where = f"manifest.json: files[{i}]"
        rel = get(entry, "path", where, str)
        path = inside(calbin, rel, f"{where}.path")
        if not path.is_file():
            raise InputError(f"{rel}: missing, but {where}.path names it")
        data = path.read_bytes()
        size = get(entry, "size", where, int)
        if len(data) != size:
            raise InputError(f"{rel}: size {len(data)} but {where}.size says {size}")
        digest = hashlib.sha256(data).hexdigest()
        expected = get(entry, "sha256", where, str)
        if digest != expected:
            raise InputError(f"{rel}: sha256 {digest} but {where}.sha256 says {expected}")
        blobs[rel] = data
    return blobs


def read_llm(manifest):
    where = "manifest.json: llm"
    llm = get(manifest, "llm", "manifest.json", dict)
    dims = {}
    for key in ("vocab", "context", "layers", "hidden", "ffn", "q_heads", "kv_heads", "head_dim"):
        dims[key] = get(llm, key, where, int)
        if dims[key] < 1:
            raise InputError(f"{where}.{key}: {dims[key]}, must be at least 1")
    if dims["q_heads"] % dims["kv_heads"]:
        raise InputError(
            f"{where}.q_heads: {dims['q_heads']} is not a multiple of "
            f"kv_heads {dims['kv_heads']}"
        )
    if dims["head_dim"] % 2:
        raise InputError(f"{where}.head_dim: {dims['head_dim']} is odd; RoPE pairs (i, i + D/2)")
    # MoE fields are optional (FORMAT.md, llm): a dense model may omit them or write 0.
    for key in ("experts", "active_experts"):
        dims[key] = get(llm, key, where, int) if key in llm else 0
    dims["norm_topk_prob"] = llm.get("norm_topk_prob", False)
    if not isinstance(dims["norm_topk_prob"], bool):
        raise InputError(
            f"{where}.norm_topk_prob: expected true or false, got {dims['norm_topk_prob']!r}"
        )
    E, k = dims["experts"], dims["active_experts"]
    if E < 0:
        raise InputError(f"{where}.experts: {E}, must be 0 (dense) or more")
    if E == 0 and k != 0:
        raise InputError(f"{where}.active_experts: {k} but experts is 0 (a dense model)")
    if E > 0 and not 1 <= k <= E:
        raise InputError(f"{where}.active_experts: {k}, must be in [1, experts {E}]")
    dims["prefill_chunk"] = llm.get("prefill_chunk", 0) or 256
    # Optional with the defaults of FORMAT.md; numbers, not necessarily integers.
    dims["rope_theta"] = float(llm.get("rope_theta", 10000.0))
    dims["rms_eps"] = float(llm.get("rms_eps", 1e-6))
    return dims


# --- reading the weights --------------------------------------------------------------------


def expected_shapes(llm):
    """MODEL.md's weight table: name -> logical [out, in] (or [n]) shape."""
    H, F, V, D = llm["hidden"], llm["ffn"], llm["vocab"], llm["head_dim"]
    q_rows, kv_rows = llm["q_heads"] * D, llm["kv_heads"] * D
    shapes = {"tok_embeddings": [V, H], "final_norm": [H], "lm_head": [V, H]}
    for layer in range(llm["layers"]):
        p = f"layers.{layer}."
        shapes.update(
            {
                p + "attn_norm": [H],
                p + "attn.q_proj": [q_rows, H],
                p + "attn.k_proj": [kv_rows, H],
                p + "attn.v_proj": [kv_rows, H],
                p + "attn.q_norm": [D],
                p + "attn.k_norm": [D],
                p + "attn.o_proj": [H, q_rows],
                p + "ffn_norm": [H],
            }
        )
        # A MoE layer has a router and E experts in place of the dense MLP (MODEL.md).
        mlps = [p + f"mlp.experts.{e}." for e in range(llm["experts"])] or [p + "mlp."]
        if llm["experts"]:
            shapes[p + "mlp.gate"] = [llm["experts"], H]
        for mlp in mlps:
            shapes.update(
                {mlp + "gate_proj": [F, H], mlp + "up_proj": [F, H], mlp + "down_proj": [H, F]}
            )
    return shapes


def bf16_to_f64(raw):
    # BF16 is the top half of an IEEE f32: widen by shifting into the high 16 bits.
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def unpack_int4(packed, count):
    """`count` int4 values from bytes holding two each, the even element in the low nibble,
    two's complement (MODEL.md, w4af16)."""
    nibbles = np.empty((len(packed), 2), np.int8)
    nibbles[:, 0] = packed & 0x0F
    nibbles[:, 1] = packed >> 4
    # A nibble of 8..15 is -8..-1.
    nibbles[nibbles >= 8] -= 16
    return nibbles.reshape(-1)[:count]


def take(blobs, rel, offset, nbytes, where):
    if rel not in blobs:
        raise InputError(f"{where}: {rel!r} is not a `files` entry")
    data = blobs[rel]
    if offset + nbytes > len(data):
        raise InputError(
            f"{where}: bytes [{offset}, {offset + nbytes}) run past the end of {rel} "
            f"({len(data)} bytes)"
        )
    return data[offset : offset + nbytes]


def read_shard(entry, where, blobs):
    """One weights[] entry as float64, dequantised; returns (array, shard_info, scales)."""
    shape = get(entry, "shape", where, list)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        raise InputError(f"{where}.shape: {shape}, dimensions must be integers > 0")
    dtype = get(entry, "dtype", where, str)
    if dtype not in WEIGHT_BITS:
        raise InputError(f"{where}.dtype: {dtype!r}, this reference reads {list(WEIGHT_BITS)}")
    shard = entry.get("shard") or {"axis": -1}
    axis = get(shard, "axis", f"{where}.shard", int)
    if not -1 <= axis < len(shape):
        raise InputError(f"{where}.shard.axis: {axis} for a rank-{len(shape)} tensor")
    shard_shape = list(shape)
    begin, end = 0, (shape[axis] if axis >= 0 else 0)
    if axis >= 0:
        begin = get(shard, "begin", f"{where}.shard", int)
        end = get(shard, "end", f"{where}.shard", int)
        if not 0 <= begin < end <= shape[axis]:
            raise InputError(
                f"{where}.shard: [begin, end) = [{begin}, {end}) outside axis {axis} "
                f"of size {shape[axis]}"
            )
        shard_shape[axis] = end - begin
    count = math.prod(shard_shape)
    quant = entry.get("quant") or {"scheme": "none"}
    scheme = get(quant, "scheme", f"{where}.quant", str)
    if scheme == "w4af16":
        # Checked before the size: the group is what makes a row a whole number of bytes.
        if dtype != "int4" or len(shape) != 2:
            raise InputError(f"{where}.quant.scheme: w4af16 on a {dtype} {shape} tensor")
        group = get(quant, "group_size", f"{where}.quant", int)
        if group <= 0 or group % 2 or shard_shape[1] % group:
            raise InputError(
                f"{where}.quant.group_size: {group}, must be > 0, even and divide the "
                f"shard's {shard_shape[1]} columns"
            )
    nbytes = (count * WEIGHT_BITS[dtype] + 7) // 8  # int4 rounds up to whole bytes (FORMAT.md)
    declared = get(entry, "bytes", where, int)
    if declared != nbytes:
        raise InputError(
            f"{where}.bytes: {declared} but shard shape {shard_shape} of {dtype} is {nbytes}"
        )
    offset = get(entry, "offset", where, int) if "offset" in entry else 0
    raw = take(blobs, get(entry, "file", where, str), offset, nbytes, where)
    if dtype == "bf16":
        values = bf16_to_f64(np.frombuffer(raw, "<u2"))
    elif dtype == "f32":
        values = np.frombuffer(raw, "<f4").astype(np.float64)
    elif dtype == "int4":
        values = unpack_int4(np.frombuffer(raw, np.uint8), count).astype(np.float64)
    else:
        values = np.frombuffer(raw, np.int8).astype(np.float64)
    values = values.reshape(shard_shape)

    scales = None
    if scheme == "w4af16":
        # The shard's own groups, [rows][cols / G]: its rows for an axis-0 shard, its columns'
        # groups for an axis-1 shard (MODEL.md, w4af16); both are the shard shape's.
        rows, groups = shard_shape[0], shard_shape[1] // group
        scale_count = get(quant, "scale_count", f"{where}.quant", int)
        if scale_count != rows * groups:
            raise InputError(
                f"{where}.quant.scale_count: {scale_count} but the shard has {rows} rows of "
                f"{groups} groups of {group}"
            )
        scale_raw = take(
            blobs,
            get(quant, "scale_file", f"{where}.quant", str),
            get(quant, "scale_offset", f"{where}.quant", int),
            4 * scale_count,
            f"{where}.quant",
        )
        group_scales = np.frombuffer(scale_raw, "<f4").astype(np.float64).reshape(rows, groups)
        # int4 x f32 is exact in float64: the real weight q[r][c] * s[r][c / G].
        values = (values.reshape(rows, groups, group) * group_scales[:, :, None]).reshape(
            shard_shape
        )
    elif dtype == "int4":
        raise InputError(f"{where}.quant.scheme: {scheme} on an int4 tensor (w4af16 expected)")
    elif scheme == "w8a8_dynamic":
        if dtype != "int8" or len(shape) != 2:
            raise InputError(f"{where}.quant.scheme: w8a8_dynamic on a {dtype} {shape} tensor")
        # One scale per output row the shard holds: its own rows for an axis-0 shard, every
        # row for an axis-1 (or whole) tensor; both cases are the shard's first dimension.
        rows = shard_shape[0]
        scale_count = get(quant, "scale_count", f"{where}.quant", int)
        if scale_count != rows:
            raise InputError(
                f"{where}.quant.scale_count: {scale_count} but the shard has {rows} rows"
            )
        scale_raw = take(
            blobs,
            get(quant, "scale_file", f"{where}.quant", str),
            get(quant, "scale_offset", f"{where}.quant", int),
            4 * rows,
            f"{where}.quant",
        )
        scales = np.frombuffer(scale_raw, "<f4").astype(np.float64)
        # int8 x f32 is exact in float64, so this is the real weight q[r][c] * s[r].
        values = values * scales[:, None]
    elif scheme != "none":
        raise InputError(
            f"{where}.quant.scheme: {scheme!r}, this reference reads none, w8a8_dynamic, w4af16"
        )
    elif dtype == "int8":
        raise InputError(f"{where}.quant.scheme: none on an int8 tensor (no scales)")
    return values, (axis, begin, end, shape, dtype), scales


def read_weights(manifest, blobs, llm):
    """Every tensor of MODEL.md's table, unsplit, as float64."""
    expected = expected_shapes(llm)
    shards = {}
    for i, entry in enumerate(get(manifest, "weights", "manifest.json", list)):
        name = get(entry, "name", f"manifest.json: weights[{i}]", str)
        shards.setdefault(name, []).append((i, entry))
    weights = {}
    for name, shape in expected.items():
        if name not in shards:
            raise InputError(f"manifest.json: weights: no entry for tensor {name!r} (MODEL.md)")
        full, covered, shared_scales = None, None, None
        for i, entry in shards[name]:
            where = f"manifest.json: weights[{i}] ({name})"
            values, (axis, begin, end, logical, dtype), scales = read_shard(entry, where, blobs)
            if logical != shape:
                raise InputError(f"{where}.shape: {logical} but MODEL.md gives {shape}")
            if full is None:
                full = np.zeros(shape)
                covered = np.zeros(shape[axis] if axis >= 0 else 1, np.int64)
                shard_axis = axis
            if axis != shard_axis:
                raise InputError(f"{where}.shard.axis: {axis} but another shard uses {shard_axis}")
            if axis < 0:
                full[...] = values
                covered += 1
                continue
            index = [slice(None)] * len(shape)
            index[axis] = slice(begin, end)
            full[tuple(index)] = values
            covered[begin:end] += 1
            # Only w8a8_dynamic returns scales: w4af16's axis-1 shards hold different groups.
            if axis == 1 and scales is not None:
                # MODEL.md: a row's scale is computed on the whole row before splitting, so
                # both axis-1 shards carry the same vector; different ones mean a bad writer.
                if shared_scales is None:
                    shared_scales = (scales, where)
                elif not np.array_equal(scales, shared_scales[0]):
                    row = int(np.argmax(scales != shared_scales[0]))
                    raise InputError(
                        f"{where}.quant: scale of row {row} is {scales[row]!r} but "
                        f"{shared_scales[1]} has {shared_scales[0][row]!r}"
                    )
        if np.any(covered != 1):
            at = int(np.argmax(covered != 1))
            raise InputError(
                f"manifest.json: weights ({name}): shards cover index {at} of axis "
                f"{shard_axis} {covered[at]} times, need exactly once"
            )
        weights[name] = full
    return weights


# --- reading the golden set -----------------------------------------------------------------


def load_npy(directory, rel, where, dtype, shape):
    path = inside(directory, rel, where)
    if not path.is_file():
        raise InputError(f"{path}: missing, but {where} names it")
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: {where}: not a readable .npy: {error}") from None
    if array.dtype != np.dtype(dtype):
        raise InputError(f"{path}: {where}: dtype {array.dtype.str} but the case needs {dtype}")
    if list(array.shape) != shape:
        raise InputError(f"{path}: {where}: shape {list(array.shape)} but the case needs {shape}")
    return array


def read_golden(calbin, manifest, llm):
    golden = get(manifest, "golden", "manifest.json", dict)
    index_rel = get(golden, "index", "manifest.json: golden", str)
    index_path = inside(calbin, index_rel, "manifest.json: golden.index")
    if not index_path.is_file():
        raise InputError(f"{index_path}: missing, but manifest.json golden.index names it")
    try:
        index = json.loads(index_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{index_path}: not valid JSON: {error}") from None
    where = index_rel
    # Schema 2 (calbin/golden.hpp) adds the optional device-contract arrays contract_rows and
    # contract_logits; they describe the device's quantised numerics, not the FP32 reference,
    # so this check reads the schema-1 arrays of either and ignores the rest.
    if get(index, "schema", where, int) not in (1, 2):
        raise InputError(f"{where}: schema: {index['schema']} but this reader knows 1 and 2")
    V, K = get(index, "vocab", where, int), get(index, "top_k", where, int)
    if V != llm["vocab"]:
        raise InputError(f"{where}: vocab: {V} but manifest.json llm.vocab is {llm['vocab']}")
    if not 1 <= K <= V:
        raise InputError(f"{where}: top_k: {K} outside [1, vocab {V}]")
    directory = index_path.parent
    cases = []
    for i, case in enumerate(get(index, "cases", where, list)):
        cw = f"{where}: cases[{i}]"
        name = get(case, "name", cw, str)
        L = get(case, "prompt_len", cw, int)
        N = get(case, "decode_steps", cw, int)
        if L < 1 or L + N > llm["context"]:
            raise InputError(f"{cw}.prompt_len: {L} + {N} steps outside [1, context]")
        arrays = {"name": name, "prompt_len": L, "decode_steps": N, "top_k": K,
                  "long_case": bool(case.get("long_case", False))}
        needs = {
            "tokens": ("<i4", [L]),
            "prefill_logits": ("<f4", [V]),
            "greedy": ("<i4", [N + 1]),
            "top_ids": ("<i4", [N, K]),
            "top_logits": ("<f4", [N, K]),
        }
        if case.get("decode_logits"):
            needs["decode_logits"] = ("<f4", [N, V])
        for key, (dtype, shape) in needs.items():
            rel = get(case, key, cw, str)
            arrays[key] = load_npy(directory, rel, f"{cw}.{key}", dtype, shape)
        for key in ("tokens", "greedy", "top_ids"):
            bad = (arrays[key] < 0) | (arrays[key] >= V)
            if bad.any():
                at = np.unravel_index(int(np.argmax(bad)), bad.shape)
                raise InputError(f"{cw}.{key}: id {arrays[key][at]} at {at} outside [0, {V})")
        cases.append(arrays)
    return cases


# --- the model (MODEL.md, "One step") ------------------------------------------------------


def rmsnorm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(z):
    # z * sigmoid(z), with sigmoid written through logaddexp so large |z| cannot overflow.
    return z * np.exp(-np.logaddexp(0.0, -z))


# One routing choice that FP32 noise could make either way: the token's position, the layer,
# the gap between the k-th and (k+1)-th router logits, and the expert sets it could pick, the
# exact rule's first.
NearTie = collections.namedtuple("NearTie", "position layer gap candidates")


def top_k_candidates(z, k, margin):
    """The expert sets (frozensets) top-k could pick from router logits z [E] when each logit
    may be off by noise that moves a gap of less than `margin`; the exact rule's set first
    (the k largest, the lower index first on a tie). Returns (candidates, gap at the k-th)."""
    order = np.argsort(-z, kind="stable")  # descending; stable keeps the lower index first
    if k == len(z):
        return [frozenset(order.tolist())], math.inf
    ranked = z[order]
    gap = ranked[k - 1] - ranked[k]
    if gap >= margin:
        return [frozenset(order[:k].tolist())], gap
    # Experts chained to the boundary by gaps below the margin may trade places; the ones
    # above the chain are in every candidate.
    low, high = k - 1, k
    while low > 0 and ranked[low - 1] - ranked[low] < margin:
        low -= 1
    while high + 1 < len(z) and ranked[high] - ranked[high + 1] < margin:
        high += 1
    sure = frozenset(order[:low].tolist())
    # combinations() yields order[low:k] first: the exact rule's set leads, as promised.
    return [
        sure | frozenset(chosen)
        for chosen in itertools.combinations(order[low : high + 1].tolist(), k - low)
    ], gap


class Routing:
    """The expert choices of one run of a case: `forced` maps (position, layer) to the set that
    run must use; every other token follows its float64 router logits, and those that are
    near-ties are appended to `near_ties` in the order the run meets them."""

    def __init__(self, forced=None, changed=None):
        self.forced = dict(forced or {})
        # (position, layer) -> (the set forced there, the float64 choice it replaces).
        self.changed = dict(changed or {})
        self.near_ties = []
        # The smallest gap between the k-th and (k+1)-th logits the run met: how close the
        # seed came to a near-tie, reported for the calibration of the margin.
        self.smallest_gap = math.inf

    def describe(self):
        """Where this routing leaves the float64 one, e.g. `pos 5 layer 0 experts [1, 3] not
        [1, 4]`."""
        return "; ".join(
            f"pos {position} layer {layer} experts {sorted(chosen)} not {sorted(float64)}"
            for (position, layer), (chosen, float64) in sorted(self.changed.items())
        )


class Model:
    def __init__(self, llm, weights, router_margin, perturb=None):
        self.llm, self.w, self.router_margin = llm, weights, router_margin
        # One of PERTURBATIONS (--write-golden --perturb) or None: the model as MODEL.md says.
        self.perturb = perturb
        D = llm["head_dim"]
        # NeoX RoPE: pair (i, i + D/2) turns by position * theta^(-2i/D), i < D/2.
        self.inv_freq = llm["rope_theta"] ** (-2.0 * np.arange(D // 2) / D)
        if perturb == "rope_direction":
            self.inv_freq = -self.inv_freq

    def rope(self, x, positions):
        """x [T, heads, D] rotated per token; rotate_half convention (x1, x2) -> (-x2, x1)."""
        half = x.shape[-1] // 2
        angle = np.asarray(positions, np.float64)[:, None] * self.inv_freq  # [T, D/2]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def new_cache(self, slots):
        shape = (self.llm["layers"], self.llm["kv_heads"], slots, self.llm["head_dim"])
        return {"k": np.zeros(shape), "v": np.zeros(shape)}

    def mlp(self, h, prefix):
        w = self.w
        gate, up = h @ w[prefix + "gate_proj"].T, h @ w[prefix + "up_proj"].T
        if self.perturb == "swiglu_swapped":
            gate, up = up, gate
        return (silu(gate) * up) @ w[prefix + "down_proj"].T

    def moe(self, h, layer, positions, routing):
        """MODEL.md, "Mixture of experts": sum over the token's k experts of w_e * mlp_e(h)."""
        llm, prefix = self.llm, f"layers.{layer}.mlp."
        z = h @ self.w[prefix + "gate"].T  # [T, E]
        probs = np.exp(z - z.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        chosen = np.zeros(z.shape, bool)
        for t, position in enumerate(positions):
            key = (int(position), layer)
            if key in routing.forced:
                experts = routing.forced[key]
            else:
                candidates, gap = top_k_candidates(z[t], llm["active_experts"], self.router_margin)
                experts = candidates[0]
                routing.smallest_gap = min(routing.smallest_gap, gap)
                if len(candidates) > 1:
                    routing.near_ties.append(NearTie(key[0], layer, gap, candidates))
            chosen[t, sorted(experts)] = True
        weights = np.where(chosen, probs, 0.0)
        if llm["norm_topk_prob"]:
            weights /= weights.sum(axis=-1, keepdims=True)
        out = np.zeros_like(h)
        for e in range(llm["experts"]):
            rows = np.flatnonzero(chosen[:, e])
            if rows.size:
                out[rows] += weights[rows, e, None] * self.mlp(h[rows], f"{prefix}experts.{e}.")
        return out

    def step(self, tokens, positions, cache, past, routing):
        """One submission: tokens go to KV slots past + t; returns the last token's logits."""
        llm, w = self.llm, self.w
        Hq, Hkv, D, eps = llm["q_heads"], llm["kv_heads"], llm["head_dim"], llm["rms_eps"]
        T = len(tokens)
        end = past + T
        scale = 1.0 if self.perturb == "attn_scale" else math.sqrt(D)
        # Token t sees slots [0, past + t]: mask[t, s] is True where s lies in its future.
        mask = np.arange(end)[None, :] > (past + np.arange(T))[:, None]
        x = w["tok_embeddings"][np.asarray(tokens)]
        for layer in range(llm["layers"]):
            p = f"layers.{layer}."
            h = rmsnorm(x, w[p + "attn_norm"], eps)
            q = (h @ w[p + "attn.q_proj"].T).reshape(T, Hq, D)
            k = (h @ w[p + "attn.k_proj"].T).reshape(T, Hkv, D)
            v = (h @ w[p + "attn.v_proj"].T).reshape(T, Hkv, D)
            q_norm = w[p + "attn.q_norm"]
            if self.perturb == "q_norm_ignored":
                q_norm = np.ones_like(q_norm)
            q = self.rope(rmsnorm(q, q_norm, eps), positions)
            k = self.rope(rmsnorm(k, w[p + "attn.k_norm"], eps), positions)
            cache["k"][layer, :, past:end] = k.transpose(1, 0, 2)
            cache["v"][layer, :, past:end] = v.transpose(1, 0, 2)
            # GQA: query head h reads KV head h // (Hq / Hkv); repeat gives exactly that order.
            keys = np.repeat(cache["k"][layer, :, :end], Hq // Hkv, axis=0)  # [Hq, S, D]
            values = np.repeat(cache["v"][layer, :, :end], Hq // Hkv, axis=0)
            scores = q.transpose(1, 0, 2) @ keys.transpose(0, 2, 1) / scale  # [Hq, T, S]
            scores[:, mask] = -np.inf
            # Softmax shifted by the row maximum: same value, no overflow of exp.
            probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs /= probs.sum(axis=-1, keepdims=True)
            attended = (probs @ values).transpose(1, 0, 2).reshape(T, Hq * D)
            x = x + attended @ w[p + "attn.o_proj"].T
            h = rmsnorm(x, w[p + "ffn_norm"], eps)
            if llm["experts"]:
                x = x + self.moe(h, layer, positions, routing)
            else:
                x = x + self.mlp(h, p + "mlp.")
        logits = rmsnorm(x[-1], w["final_norm"], eps) @ w["lm_head"].T
        return logits * LOGITS_SCALE if self.perturb == "logits_scaled" else logits

    def run(self, case, routing, feed=None):
        """Prefill logits [V] and decode logits [N, V] of one golden case, routed by `routing`.

        Decode step s feeds feed(s, row before it) (the prefill row for s = 0); by default the
        golden's greedy[s], which ignores the row."""
        if feed is None:

            def feed(s, _row):
                return int(case["greedy"][s])

        L, N, chunk = case["prompt_len"], case["decode_steps"], self.llm["prefill_chunk"]
        tokens = case["tokens"].astype(np.int64)
        cache = self.new_cache(L + N)
        # Chunked like the device; in exact arithmetic chunking changes nothing, but it
        # keeps the [heads, T, S] score block small for the long prompts.
        for start in range(0, L, chunk):
            stop = min(start + chunk, L)
            prefill = self.step(tokens[start:stop], np.arange(start, stop), cache, start, routing)
        decode = np.zeros((N, self.llm["vocab"]))
        for s in range(N):
            token = feed(s, decode[s - 1] if s else prefill)
            decode[s] = self.step([token], [L + s], cache, L + s, routing)
        return prefill, decode

    def routings(self, case):
        """Yields the case under every routing its near-ties allow, the float64 one first, as
        (routing, prefill, decode, routings still to run), lazily: most cases stop at one.

        Each run is one routing: its own near-ties take the float64 choice. A run whose i-th
        near-tie takes another candidate keeps the first i - 1 as they were and is explored
        the same way, since what comes after a changed choice may tie elsewhere."""
        pending = [Routing()]
        while pending:
            routing = pending.pop(0)
            prefill, decode = self.run(case, routing)
            forced = dict(routing.forced)
            for tie in routing.near_ties:
                key, float64 = (tie.position, tie.layer), tie.candidates[0]
                for other in tie.candidates[1:]:
                    changed = {**routing.changed, key: (other, float64)}
                    pending.append(Routing({**forced, key: other}, changed))
                forced[key] = float64
            yield routing, prefill, decode, len(pending)


# --- comparison -----------------------------------------------------------------------------


def worst(ours, golden, label, tol, failures):
    """Max |ours - golden|; records a failure naming the element when it exceeds tol."""
    diff = np.abs(ours - golden.astype(np.float64))
    at = int(np.argmax(diff))
    if diff.flat[at] > tol:
        index = np.unravel_index(at, diff.shape)
        failures.append(
            f"{label}[{', '.join(map(str, index))}]: reference {ours.flat[at]:.7f} golden "
            f"{golden.flat[at]:.7f} |diff| {diff.flat[at]:.3g} > tolerance {tol:g}"
        )
    return float(diff.flat[at])


def check_golden_itself(case, failures):
    """The golden's internal contract (golden.hpp), independent of our model."""
    name, g = case["name"], case
    if g["prefill_logits"][g["greedy"][0]] != g["prefill_logits"].max():
        failures.append(
            f"{name}: greedy[0]: id {g['greedy'][0]} is not the argmax of prefill_logits "
            f"({g['prefill_logits'][g['greedy'][0]]:.7f} < {g['prefill_logits'].max():.7f})"
        )
    for s in range(case["decode_steps"]):
        ids, logits = g["top_ids"][s], g["top_logits"][s]
        if np.any(np.diff(logits) > 0):
            failures.append(f"{name}: top_logits[{s}]: not descending: {logits.tolist()}")
        if len(set(ids.tolist())) != len(ids):
            failures.append(f"{name}: top_ids[{s}]: repeats an id: {ids.tolist()}")
        # A tie for the top may put either id first, so compare values, not positions.
        nxt = g["greedy"][s + 1]
        if nxt not in ids or logits[list(ids).index(nxt)] != logits[0]:
            failures.append(
                f"{name}: greedy[{s + 1}]: id {nxt} is not the top of top_ids[{s}] "
                f"(top {ids[0]} at {logits[0]:.7f})"
            )
        if "decode_logits" in g:
            row = g["decode_logits"][s]
            if not np.array_equal(row[ids], logits):
                failures.append(f"{name}: top_logits[{s}]: differ from decode_logits[{s}][top_ids]")
            if row.max() != logits[0]:
                failures.append(
                    f"{name}: top_logits[{s}][0]: {logits[0]:.7f} but decode_logits[{s}] "
                    f"peaks at {row.max():.7f}"
                )


def compare(case, prefill, decode, tol):
    """Returns (worst prefill diff, worst decode diff, greedy agreements, failures)."""
    name, failures = case["name"], []
    check_golden_itself(case, failures)
    d_prefill = worst(prefill, case["prefill_logits"], f"{name}: prefill_logits", tol, failures)
    d_decode = 0.0
    for s in range(case["decode_steps"]):
        ids = case["top_ids"][s]
        label = f"{name}: top_logits[{s}]"
        d_decode = max(d_decode, worst(decode[s][ids], case["top_logits"][s], label, tol, failures))
        if "decode_logits" in case:
            label = f"{name}: decode_logits[{s}]"
            d_decode = max(
                d_decode, worst(decode[s], case["decode_logits"][s], label, tol, failures)
            )
        # An id the golden left out of its top-k must not beat the k-th golden logit.
        outside = decode[s].copy()
        outside[ids] = -np.inf
        if outside.max() > case["top_logits"][s][-1] + tol:
            extra = int(np.argmax(outside))
            failures.append(
                f"{name}: top_ids[{s}]: misses id {extra}, reference logit {outside[extra]:.7f} "
                f"> k-th golden logit {case['top_logits'][s][-1]:.7f} + tolerance {tol:g}"
            )
    # Greedy agreement: our argmax against greedy[s]. A different id is only a failure when it
    # is no near-tie: FP32 and float64 may order two logits within the tolerance either way.
    rows = [prefill] + list(decode)
    agree = 0
    for s, row in enumerate(rows):
        ours, theirs = int(np.argmax(row)), int(case["greedy"][s])
        if ours == theirs:
            agree += 1
        elif row[ours] - row[theirs] > tol:
            failures.append(
                f"{name}: greedy[{s}]: golden {theirs} (reference logit {row[theirs]:.7f}) but "
                f"reference argmax {ours} ({row[ours]:.7f}), margin > tolerance {tol:g}"
            )
    return d_prefill, d_decode, agree, failures


def check_case(model, case, tol):
    """compare() under each routing of the case (Model.routings) until the golden matches one
    within the tolerance; when none does, the float64 routing's failures are the result.
    Returns compare()'s four figures, the float64 routing and the matching one (None: none)."""
    float64, first = None, None
    for tried, (routing, prefill, decode, pending) in enumerate(model.routings(case), 1):
        float64 = float64 or routing
        result = compare(case, prefill, decode, tol)
        if not result[3]:
            return result, float64, routing
        first = first or result
        if tried == MAX_ROUTINGS and pending:
            # First, so that the display limit of failures cannot hide why.
            first[3].insert(
                0,
                f"{case['name']}: routing: more than {MAX_ROUTINGS} routings from router "
                f"near-ties (k-th logit gaps < --router-margin); only {MAX_ROUTINGS} were tried"
            )
            break
    return first, float64, None


# --- writing a golden set (--write-golden) --------------------------------------------------


def ranked(row, k):
    """The ids of the k largest values of `row` as written (float32), a tie to the lower id,
    and those values: golden.hpp's top_ids and top_logits, its greedy for k = 1."""
    written = row.astype(np.float32)
    # -x is exact in float32, and the stable sort keeps the lower id first on a tie.
    ids = np.argsort(-written, kind="stable")[:k]
    return ids.astype(np.int32), written[ids]


def generate_case(model, case):
    """The case's prompt through the model with its own greedy chain: (prefill [V], decode
    [N, V], greedy [N + 1]), float64 rows."""
    greedy = []

    def feed(s, row):
        greedy.append(int(ranked(row, 1)[0][0]))
        return greedy[s]

    prefill, decode = model.run(case, Routing(), feed)
    last = decode[-1] if case["decode_steps"] else prefill
    greedy.append(int(ranked(last, 1)[0][0]))
    return prefill, decode, np.asarray(greedy, np.int32)


def save_npy(directory, name, array, dtype):
    """np.save of a little-endian C-order array (FORMAT.md: .npy 1.0 as NumPy writes it)."""
    np.save(directory / name, np.ascontiguousarray(array, dtype=dtype), allow_pickle=False)
    return name


def write_golden(model, cases, out_dir, top_k, perturb):
    """Writes golden.json and its arrays into out_dir (see "Writing a golden set"); returns
    the number of cases written. The index goes last and any old one first, so that an index
    on disk never names an array of another run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    index_path = out_dir / "golden.json"
    index_path.unlink(missing_ok=True)
    entries = []
    for case in cases:
        name, L, N = case["name"], case["prompt_len"], case["decode_steps"]
        started = time.perf_counter()
        prefill, decode, greedy = generate_case(model, case)
        top = [ranked(row, top_k) for row in decode]
        top_ids = np.asarray([ids for ids, _ in top], np.int32).reshape(N, top_k)
        top_logits = np.asarray([values for _, values in top], np.float32).reshape(N, top_k)
        entry = {"name": name, "prompt_len": L, "decode_steps": N, "long_case": case["long_case"]}
        arrays = {
            "tokens": (case["tokens"], "<i4"),
            "prefill_logits": (prefill, "<f4"),
            "greedy": (greedy, "<i4"),
            "top_ids": (top_ids, "<i4"),
            "top_logits": (top_logits, "<f4"),
            "decode_logits": (decode.reshape(N, -1), "<f4"),
        }
        for key, (array, dtype) in arrays.items():
            entry[key] = save_npy(out_dir, f"{name}.{key}.npy", array, dtype)
        entries.append(entry)
        # How far this set is from the calbin's own: the prefill row (same prompt) and the
        # greedy chain (after a differing token the decode rows are of other inputs).
        d_prefill = float(np.max(np.abs(prefill - case["prefill_logits"].astype(np.float64))))
        same = int(np.sum(greedy == case["greedy"]))
        print(
            f"{name:<10} L={L:<5} N={N:<3} wrote; against the calbin's golden: prefill max|d| "
            f"{d_prefill:.3e}, greedy {same}/{N + 1} equal  ({time.perf_counter() - started:.2f} s)"
        )
    reference = WRITTEN_REFERENCE + (f", perturbed: {perturb}" if perturb else "")
    index = {
        "schema": 1,
        "vocab": model.llm["vocab"],
        "top_k": top_k,
        "reference": reference,
        "cases": entries,
    }
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    return len(entries)


# --- main -----------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("calbin", type=pathlib.Path, help="calbin directory")
    parser.add_argument(
        "--max-prompt",
        type=int,
        default=300,
        help="skip cases with a longer prompt (default 300: the short cases)",
    )
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=TOLERANCE,
        help=f"largest accepted |reference - golden| of one logit (default {TOLERANCE:g})",
    )
    parser.add_argument(
        "--router-margin",
        type=float,
        default=ROUTER_MARGIN,
        help="MoE: a gap between the k-th and (k+1)-th router logits below this is a near-tie "
        f"whose routings are all tried (default {ROUTER_MARGIN:g}; 0 tries only float64's)",
    )
    parser.add_argument(
        "--write-golden",
        type=pathlib.Path,
        metavar="OUT_DIR",
        help="check nothing: write this model's golden set for the calbin's golden prompts "
        "into OUT_DIR (schema 1, no contract rows; see the docstring)",
    )
    parser.add_argument(
        "--perturb",
        choices=PERTURBATIONS,
        help="with --write-golden: compute the set with this defect in the model",
    )
    args = parser.parse_args(argv)
    if args.perturb and not args.write_golden:
        parser.error("--perturb needs --write-golden")
    return args


def main(argv):
    args = parse_args(argv)
    started = time.perf_counter()
    try:
        manifest = read_manifest(args.calbin)
        blobs = read_files(args.calbin, manifest)
        llm = read_llm(manifest)
        model = Model(llm, read_weights(manifest, blobs, llm), args.router_margin, args.perturb)
        cases = read_golden(args.calbin, manifest, llm)
        if args.cases:
            wanted = args.cases.split(",")
            unknown = sorted(set(wanted) - {case["name"] for case in cases})
            if unknown:
                raise InputError(f"--cases: no golden case named {', '.join(unknown)}")
            cases = [case for case in cases if case["name"] in wanted]
    except InputError as error:
        print(f"numpy_reference: error: {error}", file=sys.stderr)
        return EXIT_INPUT

    if args.write_golden:
        return main_write(args, model, cases, started)

    failures, checked = [], 0
    worst_prefill, worst_decode = (0.0, ""), (0.0, "")
    near_ties, rerouted, smallest_gap = 0, [], (math.inf, "")
    for case in cases:
        name, L, N = case["name"], case["prompt_len"], case["decode_steps"]
        if L > args.max_prompt:
            print(f"{name:<10} L={L:<5} N={N:<3} skipped (prompt_len > --max-prompt)")
            continue
        result, float64, matched = check_case(model, case, args.tolerance)
        d_prefill, d_decode, agree, case_failures = result
        checked += 1
        worst_prefill = max(worst_prefill, (d_prefill, name))
        worst_decode = max(worst_decode, (d_decode, name))
        status = "FAIL" if case_failures else "ok"
        routing_note = ""
        if llm["experts"]:
            near_ties += len(float64.near_ties)
            smallest_gap = min(smallest_gap, (float64.smallest_gap, name))
            routing_note = f"  near-ties {len(float64.near_ties)}"
            if matched is not None and matched.changed:
                rerouted.append(name)
                routing_note += f", golden routed {matched.describe()}"
        print(
            f"{name:<10} L={L:<5} N={N:<3} prefill max|d| {d_prefill:.3e}  "
            f"decode max|d| {d_decode:.3e}  greedy {agree}/{N + 1}  {status}{routing_note}"
        )
        failures += case_failures
    elapsed = time.perf_counter() - started
    if not checked:
        print("numpy_reference: error: no golden case left to check", file=sys.stderr)
        return EXIT_INPUT
    print(
        f"worst prefill {worst_prefill[0]:.3e} ({worst_prefill[1]}), worst decode "
        f"{worst_decode[0]:.3e} ({worst_decode[1]}), tolerance {args.tolerance:g}, "
        f"{checked} cases in {elapsed:.2f} s"
    )
    if llm["experts"]:
        print(
            f"routing: {near_ties} near-ties (k-th gap < {args.router_margin:g}), smallest gap "
            f"{smallest_gap[0]:.3e} ({smallest_gap[1]}), golden routed otherwise than float64 in "
            f"{len(rerouted)} cases{': ' + ', '.join(rerouted) if rerouted else ''}"
        )
    if failures:
        # A weight defect fails nearly every row; the first ones say enough.
        for failure in failures[:MAX_FAILURES_SHOWN]:
            print(f"FAIL {failure}", file=sys.stderr)
        if len(failures) > MAX_FAILURES_SHOWN:
            print(f"... and {len(failures) - MAX_FAILURES_SHOWN} more", file=sys.stderr)
        print(f"numpy_reference: {len(failures)} failed comparisons", file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def main_write(args, model, cases, started):
    """--write-golden: the selected cases up to --max-prompt, written by write_golden."""
    kept = []
    for case in cases:
        if case["prompt_len"] > args.max_prompt:
            name, L = case["name"], case["prompt_len"]
            print(f"{name:<10} L={L:<5} skipped (prompt_len > --max-prompt)")
        else:
            kept.append(case)
    if not kept:
        print("numpy_reference: error: no golden case left to write", file=sys.stderr)
        return EXIT_INPUT
    try:
        written = write_golden(model, kept, args.write_golden, kept[0]["top_k"], args.perturb)
    except OSError as error:
        print(f"numpy_reference: error: {args.write_golden}: {error}", file=sys.stderr)
        return EXIT_INPUT
    print(
        f"wrote {written} cases to {args.write_golden} ({args.perturb or 'no perturbation'}) "
        f"in {time.perf_counter() - started:.2f} s"
    )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
