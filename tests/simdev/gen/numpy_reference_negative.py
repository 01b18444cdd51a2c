#!/usr/bin/env python3
"""Negative controls of numpy_reference.py: copies a calbin, plants one defect in the copy and
passes only when the check fails the way that defect must make it fail.

Usage: numpy_reference_negative.py SRC_CALBIN WORK_DIR --defect NAME

The copy goes to WORK_DIR/<NAME>. Defects that change a file listed in manifest.json's
`files` recompute its size and SHA-256 there, so the check sees a well-formed calbin whose
numbers are wrong and must catch it by the logits, not by the checksum. Defects:

  none            no change: the copy must pass (exit 0), so the copying is not what fails
  golden-bf16     len17's prefill_logits rounded to BF16, as if the golden had been captured
                  from the device's BF16 logits tensor instead of the FP32 reference: exit 1
  golden-logit    len17 decode step 3's top logit moved by +0.001 in both top_logits and
                  decode_logits (10x the tolerance, far below a BF16 ulp there): exit 1
  weight-sign     the sign of the largest int8 value of layers.1.mlp.down_proj's second
                  shard (chip 1's file) flipped: exit 1
  norm-scale      layers.0.ffn_norm[0] multiplied by 1.5 (a BF16 weight): exit 1
  stale-checksum  weight-sign without recomputing the SHA-256: exit 2 naming sha256
  missing-tensor  the lm_head entries removed from manifest.json: exit 2 naming lm_head
  bad-shape       len17's prefill_logits stored with one logit less: exit 2 naming the shape
  no-manifest     manifest.json deleted: exit 2 naming it

On a mixture-of-experts calbin (qwen3-moe-small; `none` applies there too):

  moe-router      the sign of the largest-magnitude BF16 weight of layers.1.mlp.gate (the
                  router) flipped: exit 1
  moe-expert-sign the sign of the largest int8 value of layers.0.mlp.experts.3.gate_proj's
                  second shard flipped: exit 1
  moe-top-k       llm.active_experts set to experts + 1: exit 2 naming the field and value
  moe-no-expert   the entries of layers.1.mlp.experts.7.up_proj removed: exit 2 naming it
  moe-other-routing
                  len255's golden rewritten with the layer-0 router decision closest to a
                  tie taken the other way (its k-th and (k+1)-th experts swapped), checked
                  with --router-margin twice that decision's gap: exit 0 naming the changed
                  choice ("golden routed pos P layer 0 ...")
  moe-other-routing-far
                  the same golden checked with half that gap as the margin: exit 1

The two moe-other-routing controls test the search for routings, not the model: their golden
comes from numpy_reference.py's own model (a golden routed otherwise by the generator's FP32
noise has not been seen in 110 seeds), so they prove that another routing is run, used and
named when it is a near-tie, and refused when it is not.

On a calbin with w4af16 experts (qwen3-moe-w4):

  w4-nibbles      in layers.1.mlp.experts.2.up_proj's second shard, the two nibbles of the
                  byte whose weights differ most swapped (a writer that packs the even column
                  high): exit 1
  w4-scale        the first group scale of layers.0.mlp.experts.4.down_proj's second shard
                  (an axis-1 shard, so one of its own groups) multiplied by 1.5: exit 1
  w4-group-size   layers.0.mlp.experts.0.gate_proj's first shard declaring group_size 31:
                  exit 2 naming the tensor and the value

A plant may return arguments for the check (the moe-other-routing margins).

Exit status 0 when the check ended as expected (its exit status and the expected message),
1 otherwise (the check's output is shown), 2 on a usage error (also a defect whose tensor
the source calbin does not have).
"""
import argparse
import hashlib
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np

CHECK = pathlib.Path(__file__).with_name("numpy_reference.py")


def rehash(calbin, manifest, rel):
    """Brings manifest.json's files[] entry of `rel` up to date with the file on disk."""
    data = (calbin / rel).read_bytes()
    for entry in manifest["files"]:
        if entry["path"] == rel:
            entry["size"] = len(data)
            entry["sha256"] = hashlib.sha256(data).hexdigest()
            return
    raise SystemExit(f"{rel}: not in manifest.json files")


def golden_array(calbin, case, key):
    """Relative path (as in `files`) of one golden array of a case."""
    index_rel = json.loads((calbin / "manifest.json").read_text())["golden"]["index"]
    index = json.loads((calbin / index_rel).read_text())
    (entry,) = [c for c in index["cases"] if c["name"] == case]
    return str(pathlib.PurePosixPath(index_rel).parent / entry[key])


def to_bf16(values):
    """float32 -> nearest BF16 (round half to even), kept as float32."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def plant_golden_bf16(calbin, manifest):
    rel = golden_array(calbin, "len17", "prefill_logits")
    logits = np.load(calbin / rel)
    np.save(calbin / rel, to_bf16(logits))
    rehash(calbin, manifest, rel)


def plant_golden_logit(calbin, manifest):
    # Both arrays move together so the golden stays consistent with itself: only the
    # comparison with the model can see it.
    step = 3
    top_rel = golden_array(calbin, "len17", "top_logits")
    top = np.load(calbin / top_rel)
    ids = np.load(calbin / golden_array(calbin, "len17", "top_ids"))
    top[step, 0] += np.float32(0.001)
    np.save(calbin / top_rel, top)
    rehash(calbin, manifest, top_rel)
    full_rel = golden_array(calbin, "len17", "decode_logits")
    full = np.load(calbin / full_rel)
    full[step, ids[step, 0]] = top[step, 0]
    np.save(calbin / full_rel, full)
    rehash(calbin, manifest, full_rel)


def shard_of(manifest, name, index, dtype=None):
    found = [w for w in manifest["weights"] if w["name"] == name and w["shard"]["index"] == index]
    if len(found) != 1 or (dtype and found[0]["dtype"] != dtype):
        # A defect planted in the wrong kind of calbin is the caller's mistake, not a detection.
        print(
            f"numpy_reference_negative: the source has no {dtype or 'weight'} shard {index} of "
            f"{name} (MoE defects need an MoE calbin, w4 defects a w4af16 one)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return found[0]


def edit_file(calbin, manifest, rel, edit, update_checksum=True):
    """Applies edit(bytearray) to a calbin file, rewrites it, and by default its checksum."""
    path = calbin / rel
    data = bytearray(path.read_bytes())
    edit(data)
    path.write_bytes(bytes(data))
    if update_checksum:
        rehash(calbin, manifest, rel)


def flip_largest_int8(calbin, manifest, entry, update_checksum=True):
    def edit(data):
        values = np.frombuffer(data, np.int8, entry["bytes"], entry["offset"])
        # The largest positive value, so that the flip is representable (-128 has no +128).
        at = int(np.argmax(values))
        data[entry["offset"] + at] = np.int8(-values[at]).view(np.uint8)

    edit_file(calbin, manifest, entry["file"], edit, update_checksum)


def plant_weight_sign(calbin, manifest, update_checksum=True):
    flip_largest_int8(
        calbin, manifest, shard_of(manifest, "layers.1.mlp.down_proj", 1), update_checksum
    )


def plant_norm_scale(calbin, manifest):
    entry = shard_of(manifest, "layers.0.ffn_norm", 0)

    def edit(data):
        raw = np.frombuffer(data, "<u2", 1, entry["offset"])
        value = (raw.astype(np.uint32) << 16).view(np.float32) * np.float32(1.5)
        data[entry["offset"] : entry["offset"] + 2] = (
            (to_bf16(value).view(np.uint32) >> 16).astype("<u2").tobytes()
        )

    edit_file(calbin, manifest, entry["file"], edit)


def plant_moe_router(calbin, manifest):
    entry = shard_of(manifest, "layers.1.mlp.gate", 0, "bf16")

    def edit(data):
        raw = np.frombuffer(data, "<u2", entry["bytes"] // 2, entry["offset"])
        # The largest magnitude, so that the routing weights of many tokens move, and perhaps
        # their experts; flipping the BF16 sign bit is exact.
        at = int(np.argmax(np.abs((raw.astype(np.uint32) << 16).view(np.float32))))
        start = entry["offset"] + 2 * at
        data[start : start + 2] = np.array([raw[at] ^ 0x8000], "<u2").tobytes()

    edit_file(calbin, manifest, entry["file"], edit)


def plant_moe_expert_sign(calbin, manifest):
    flip_largest_int8(
        calbin, manifest, shard_of(manifest, "layers.0.mlp.experts.3.gate_proj", 1, "int8")
    )


def plant_moe_top_k(calbin, manifest):
    manifest["llm"]["active_experts"] = manifest["llm"]["experts"] + 1


def plant_moe_no_expert(calbin, manifest):
    shard_of(manifest, "layers.1.mlp.experts.7.up_proj", 0)
    manifest["weights"] = [
        w for w in manifest["weights"] if w["name"] != "layers.1.mlp.experts.7.up_proj"
    ]


def plant_w4_nibbles(calbin, manifest):
    entry = shard_of(manifest, "layers.1.mlp.experts.2.up_proj", 1, "int4")

    def edit(data):
        packed = np.frombuffer(data, np.uint8, entry["bytes"], entry["offset"])
        # Two's complement nibbles as signed values, to find the byte the swap changes most.
        low = ((packed & 0x0F).astype(np.int16) ^ 8) - 8
        high = ((packed >> 4).astype(np.int16) ^ 8) - 8
        at = int(np.argmax(np.abs(low - high)))
        byte = int(packed[at])
        data[entry["offset"] + at] = ((byte & 0x0F) << 4) | (byte >> 4)

    edit_file(calbin, manifest, entry["file"], edit)


def plant_w4_scale(calbin, manifest):
    quant = shard_of(manifest, "layers.0.mlp.experts.4.down_proj", 1, "int4")["quant"]

    def edit(data):
        start = quant["scale_offset"]
        scale = np.frombuffer(data, "<f4", 1, start) * np.float32(1.5)
        data[start : start + 4] = scale.astype("<f4").tobytes()

    edit_file(calbin, manifest, quant["scale_file"], edit)


def plant_w4_group_size(calbin, manifest):
    shard_of(manifest, "layers.0.mlp.experts.0.gate_proj", 0, "int4")["quant"]["group_size"] = 31


def reference_module():
    spec = importlib.util.spec_from_file_location("numpy_reference", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plant_other_routing(calbin, manifest, margin_factor):
    """len255's golden from numpy_reference's own model with the layer-0 decision closest to a
    tie routed the other way; returns the check's --router-margin, margin_factor x its gap."""
    ref = reference_module()
    llm = ref.read_llm(manifest)
    weights = ref.read_weights(manifest, ref.read_files(calbin, manifest), llm)
    # A margin of 1 records nearly every decision of the run as a near-tie, with its gap.
    model = ref.Model(llm, weights, 1.0)
    (case,) = [c for c in ref.read_golden(calbin, manifest, llm) if c["name"] == "len255"]
    routing = ref.Routing()
    model.run(case, routing)
    # Layer 0: the token's keys and values in layer 1 reach every later row, so the swap shows
    # in the compared logits wherever the token is.
    tie = min((t for t in routing.near_ties if t.layer == 0), key=lambda t: t.gap)
    # candidates[1] is the exact rule's set with its k-th expert swapped for the (k+1)-th
    # (top_k_candidates lists combinations in rank order).
    forced = {(tie.position, tie.layer): tie.candidates[1]}
    # The decode steps feed greedy, which the swap may change: iterate until it is the argmax
    # of the FP32 rows it leads to.
    for _ in range(case["decode_steps"] + 2):
        prefill, decode = model.run(case, ref.Routing(forced))
        prefill, decode = prefill.astype(np.float32), decode.astype(np.float32)
        greedy = np.array([np.argmax(prefill)] + [np.argmax(row) for row in decode], np.int32)
        if np.array_equal(greedy, case["greedy"]):
            break
        case["greedy"] = greedy
    top_ids = np.argsort(-decode, axis=1, kind="stable")[:, : case["top_k"]].astype(np.int32)
    arrays = {
        "prefill_logits": prefill,
        "greedy": greedy,
        "top_ids": top_ids,
        "top_logits": np.take_along_axis(decode, top_ids, axis=1),
        "decode_logits": decode,
    }
    for key, array in arrays.items():
        rel = golden_array(calbin, "len255", key)
        np.save(calbin / rel, array)
        rehash(calbin, manifest, rel)
    return ["--router-margin", repr(margin_factor * float(tie.gap))]


def plant_missing_tensor(calbin, manifest):
    manifest["weights"] = [w for w in manifest["weights"] if w["name"] != "lm_head"]


def plant_bad_shape(calbin, manifest):
    rel = golden_array(calbin, "len17", "prefill_logits")
    np.save(calbin / rel, np.load(calbin / rel)[:-1])
    rehash(calbin, manifest, rel)


# A logit of any row beyond the tolerance: a defect in an expert only some tokens use may
# show in the decode rows alone (top_logits[s][i], decode_logits[s][v]).
LOGIT_FAILURE = r"FAIL len\d+: \w+_logits(\[\d+\])+: .* > tolerance"

# name -> (plant, expected exit status, regular expression the check's output must match)
DEFECTS = {
    "none": (lambda calbin, manifest: None, 0, r"worst prefill .* tolerance"),
    "golden-bf16": (plant_golden_bf16, 1, r"FAIL len17: prefill_logits\[\d+\]: .* > tolerance"),
    "golden-logit": (plant_golden_logit, 1, r"FAIL len17: (top|decode)_logits\[3.*> tolerance"),
    "weight-sign": (plant_weight_sign, 1, r"FAIL len\d+: prefill_logits\[\d+\]: .* > tolerance"),
    "norm-scale": (plant_norm_scale, 1, r"FAIL len\d+: prefill_logits\[\d+\]: .* > tolerance"),
    "stale-checksum": (
        lambda calbin, manifest: plant_weight_sign(calbin, manifest, update_checksum=False),
        2,
        r"error: param_blk2\.bin: sha256 [0-9a-f]{64} but manifest\.json: files\[\d+\]\.sha256",
    ),
    "missing-tensor": (plant_missing_tensor, 2, r"error: manifest\.json: weights: .*'lm_head'"),
    "bad-shape": (
        plant_bad_shape,
        2,
        r"error: .*len17\.prefill_logits\.npy: .*shape \[\d+\] but the case needs \[\d+\]",
    ),
    "no-manifest": (None, 2, r"error: .*manifest\.json: missing"),
    "moe-router": (plant_moe_router, 1, LOGIT_FAILURE),
    "moe-expert-sign": (plant_moe_expert_sign, 1, LOGIT_FAILURE),
    "moe-top-k": (
        plant_moe_top_k,
        2,
        r"error: manifest\.json: llm\.active_experts: \d+, must be in \[1, experts \d+\]",
    ),
    "moe-other-routing": (
        lambda calbin, manifest: plant_other_routing(calbin, manifest, 2.0),
        0,
        r"len255 .* ok  near-ties \d+, golden routed pos \d+ layer 0 experts \[[\d, ]+\] not ",
    ),
    "moe-other-routing-far": (
        lambda calbin, manifest: plant_other_routing(calbin, manifest, 0.5),
        1,
        LOGIT_FAILURE,
    ),
    "moe-no-expert": (
        plant_moe_no_expert,
        2,
        r"error: manifest\.json: weights: .*'layers\.1\.mlp\.experts\.7\.up_proj'",
    ),
    "w4-nibbles": (plant_w4_nibbles, 1, LOGIT_FAILURE),
    "w4-scale": (plant_w4_scale, 1, LOGIT_FAILURE),
    "w4-group-size": (
        plant_w4_group_size,
        2,
        r"error: manifest\.json: weights\[\d+\] \(layers\.0\.mlp\.experts\.0\.gate_proj\)"
        r"\.quant\.group_size: 31, must be",
    ),
}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=pathlib.Path, help="a correct calbin directory")
    parser.add_argument("work", type=pathlib.Path, help="where the defective copy goes")
    parser.add_argument("--defect", required=True, choices=sorted(DEFECTS))
    args = parser.parse_args(argv)

    plant, expected_status, expected_message = DEFECTS[args.defect]
    calbin = args.work / args.defect
    if calbin.exists():
        shutil.rmtree(calbin)
    shutil.copytree(args.source, calbin)
    manifest_path = calbin / "manifest.json"
    check_args = []
    if plant is None:
        manifest_path.unlink()
    else:
        manifest = json.loads(manifest_path.read_text())
        check_args = plant(calbin, manifest) or []
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")

    check = subprocess.run(
        [sys.executable, str(CHECK), str(calbin)] + check_args, capture_output=True, text=True
    )
    output = check.stdout + check.stderr
    print(output, end="")
    # Both the status and the message must match: a crash (a traceback, status 1) or a failure
    # for another reason must not count as the defect being caught.
    if check.returncode != expected_status or not re.search(expected_message, output):
        print(
            f"numpy_reference_negative: defect {args.defect}: expected exit {expected_status} "
            f"with /{expected_message}/, got exit {check.returncode}",
            file=sys.stderr,
        )
        return 1
    print(f"numpy_reference_negative: defect {args.defect}: exit {check.returncode} as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
