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

Exit status 0 when the check ended as expected (its exit status and the expected message),
1 otherwise (the check's output is shown), 2 on a usage error.
"""
import argparse
import hashlib
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


def shard_of(manifest, name, index):
    (entry,) = [
        w for w in manifest["weights"] if w["name"] == name and w["shard"]["index"] == index
    ]
    return entry


def plant_weight_sign(calbin, manifest, update_checksum=True):
    entry = shard_of(manifest, "layers.1.mlp.down_proj", 1)
    path = calbin / entry["file"]
    data = bytearray(path.read_bytes())
    values = np.frombuffer(data, np.int8, entry["bytes"], entry["offset"])
    # The largest positive value, so that the flip is representable (-128 has no +128).
    at = int(np.argmax(values))
    data[entry["offset"] + at] = np.int8(-values[at]).view(np.uint8)
    path.write_bytes(bytes(data))
    if update_checksum:
        rehash(calbin, manifest, entry["file"])


def plant_norm_scale(calbin, manifest):
    entry = shard_of(manifest, "layers.0.ffn_norm", 0)
    path = calbin / entry["file"]
    data = bytearray(path.read_bytes())
    raw = np.frombuffer(data, "<u2", 1, entry["offset"])
    value = (raw.astype(np.uint32) << 16).view(np.float32) * np.float32(1.5)
    data[entry["offset"] : entry["offset"] + 2] = (
        (to_bf16(value).view(np.uint32) >> 16).astype("<u2").tobytes()
    )
    path.write_bytes(bytes(data))
    rehash(calbin, manifest, entry["file"])


def plant_missing_tensor(calbin, manifest):
    manifest["weights"] = [w for w in manifest["weights"] if w["name"] != "lm_head"]


def plant_bad_shape(calbin, manifest):
    rel = golden_array(calbin, "len17", "prefill_logits")
    np.save(calbin / rel, np.load(calbin / rel)[:-1])
    rehash(calbin, manifest, rel)


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
    if plant is None:
        manifest_path.unlink()
    else:
        manifest = json.loads(manifest_path.read_text())
        plant(calbin, manifest)
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")

    check = subprocess.run(
        [sys.executable, str(CHECK), str(calbin)], capture_output=True, text=True
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
