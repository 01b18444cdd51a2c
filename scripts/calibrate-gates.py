#!/usr/bin/env python3
"""Calibrates and checks the smoke's numeric gates (runner/README.md, "Calibration of the
numeric gates"): runs `calrt smoke` on tiny calbins of many weight seeds, on the unmodified
simulator and under every numeric mutant, and prints what each gate sees.

  scripts/calibrate-gates.py --build build --seeds 1-64 --mutants none
  scripts/calibrate-gates.py --build build --seeds 1-8 --mutants all --cases short
  scripts/calibrate-gates.py --build build --preset tiny-gqa --seeds 1-8 --mutants all
  scripts/calibrate-gates.py --build build --config tests/simdev/gen/configs/llama-small/config.json \
      --seeds 1-16 --mutants none
  scripts/calibrate-gates.py --build build --config ... --seeds 1-4 --mutants all --fp32-only

Clean runs give the noise the gates must tolerate; mutants give the defects they must catch.
`--config` runs a model from a config file instead of a preset (`simdev gen --config`); the
table "against the contract reference" shows how far the device is from FP32 next to how far
the contract reference is over the same rows, which the scaled FP32 gates stand on.
`--fp32-only` switches the contract gates off, to show what the FP32 gates catch by themselves
(mutants passing are then reported, not an error).
The last table is the detection matrix: a mutant row with a `.` anywhere is a defect the
smoke lets through. Exit status 1 when a clean run fails, a mutant passes, or a mutant
documented as invisible (INVISIBLE below) is caught after all.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

# simdev/device/base/numerics_mutant.hpp and the runner's --inject-runner-bug.
DEVICE_MUTANTS = ["logits_scale", "q_norm_ignored", "k_norm_ignored", "rope_interleaved",
                  "rope_theta", "rms_eps", "kv_slot_off", "lm_head_swapped", "act_per_tensor",
                  "attn_unscaled", "silu_as_relu", "kv_truncated", "gqa_mapping", "v_cache_bf16",
                  "router_unnormalised", "expert_weights_reversed", "int4_nibbles_swapped",
                  "batch_rows_rotated", "batch_pads_kept", "top_k_local_ids", "top_k_one_chip"]
RUNNER_MUTANTS = ["runner:past-kv", "runner:position", "runner:stale-kv", "runner:tile16"]
# Where the smoke must localise each mutant with its layer probes (the first point whose run
# mean leaves the contract): the op each one changes first.
EXPECTED_PLACE = {m: "layer 0 attention" for m in DEVICE_MUTANTS + RUNNER_MUTANTS}
EXPECTED_PLACE.update({
    "logits_scale": "after the last layer",
    "top_k_one_chip": "after the last layer",
    "lm_head_swapped": "after the last layer",
    "silu_as_relu": "layer 0 MLP",
    "router_unnormalised": "layer 0 MLP",
    "expert_weights_reversed": "layer 0 MLP",
    "int4_nibbles_swapped": "layer 0 MLP",
    # Fails at readout, before any comparison: the logits tensor's bytes disagree with a tile
    # of 16, and the failure names the tensor and both sizes.
    "runner:tile16": None,
    # Fails in the batch step (10) only: every case alone in row 0 (steps 5-7) is untouched,
    # so the probes of those rows find nothing to localise.
    "batch_rows_rotated": None,
    # Fails on the ranked row's own promises (an id repeated), before the row is compared:
    # the rows that were compared equal the contract, and there is nothing to localise.
    "top_k_local_ids": None,
    "batch_pads_kept": None,
})
# Per model: a batch decode reads each row's past from its position (calrt.h, Kv_Apply), so a
# runner that sets past_kv_cur_seq_len one too far changes no number there; the smoke fails it
# on the KV bookkeeping (the fill level is not past + cur_seq_len), before any probe.
PLACE_BY_MODEL = {"qwen3-small-batch4": {"runner:past-kv": None},
                  "qwen3-small-batch4-top40": {"runner:past-kv": None}}
# Mutants no gate against the FP32 golden can see on the tiny calbin, and why. They are run
# with `--mutants invisible` and expected to pass, so that the claim stays checked.
INVISIBLE = {
    "tiny": {
        "gqa_mapping": "the tiny calbin has one KV head per chip, so h % 1 and h / 2 both read "
                       "it (tiny-gqa has two per chip and catches it)",
        "runner:tile16": "the tiny calbin's logits tile is 16 (tiny-gqa's is 32 and catches it)",
    },
    "tiny-gqa": {},
}
# The test configs (tests/simdev/gen/configs) have a logits tile of 16 too.
for name in ["qwen3-small", "llama-small", "qwen3-small-1chip", "qwen3-small-4chip",
             "qwen3-small-s8v", "qwen3-moe-small", "qwen3-moe-w4", "qwen3-small-batch4",
             "qwen3-small-batch4-top40", "qwen3-deep-28", "qwen3-deep-28-trained", "qwen3-deep-48",
             "llama-deep-30-1chip", "qwen3-moe-deep-24"]:
    INVISIBLE[name] = {"runner:tile16": "its logits tile is 16"}
# v_cache_bf16 changes only an int8 V-cache; the routing mutants only a mixture of experts.
for name in INVISIBLE:
    if not name.endswith("-s8v"):
        INVISIBLE[name]["v_cache_bf16"] = "its V-cache is BF16 already"
    if "moe" not in name:
        INVISIBLE[name]["router_unnormalised"] = "it has no router"
        INVISIBLE[name]["expert_weights_reversed"] = "it has no experts"
    if not name.endswith("-w4"):
        INVISIBLE[name]["int4_nibbles_swapped"] = "it has no int4 weights"
    if "batch" not in name:
        INVISIBLE[name]["batch_rows_rotated"] = "its decode has one row"
        INVISIBLE[name]["batch_pads_kept"] = "its decode has one row"
    if "1chip" in name:
        INVISIBLE[name]["lm_head_swapped"] = "one chip holds the whole vocabulary: no halves to swap"
    if "top" not in name:
        INVISIBLE[name]["top_k_local_ids"] = "its decode gives full rows"
        INVISIBLE[name]["top_k_one_chip"] = "its decode gives full rows"


def seeds_of(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def model_name(args):
    if args.config:
        return os.path.basename(os.path.dirname(args.config)) if args.config.endswith(
            "config.json") else os.path.splitext(os.path.basename(args.config))[0]
    return args.preset


def calbin_for(args, seed):
    # The long golden cases cost most of the generation; short runs do without them.
    short = args.cases != "all"
    path = os.path.join(args.cache, f"{model_name(args)}-seed{seed}" + ("-short" if short else ""))
    simdev = os.path.join(args.build, "simdev/tool/simdev")
    manifest = os.path.join(path, "manifest.json")
    # A calbin of an older generator may lack what the gates read (the contract rows).
    if not os.path.exists(manifest) or os.path.getmtime(manifest) < os.path.getmtime(simdev):
        model = ["--config", args.config] if args.config else ["--preset", args.preset]
        subprocess.run([simdev, "gen"] + model + ["--seed", str(seed), "--out", path, "--force"] +
                       (["--no-long"] if short else []),
                       check=True, stdout=subprocess.DEVNULL)
    return path


def run(args, seed, mutant):
    calbin = calbin_for(args, seed)
    report = os.path.join(args.cache,
                          f"report-{model_name(args)}-{seed}-{mutant.replace(':', '_')}.json")
    cmd = [os.path.join(args.build, "runner/calrt"), "smoke", calbin, "--cases", args.cases,
           "--json", report]
    if args.fp32_only:
        cmd += ["--contract", "none"]
    device_config = list(args.device_config)
    if mutant.startswith("runner:"):
        cmd += ["--inject-runner-bug", mutant.split(":", 1)[1]]
    elif mutant != "none":
        device_config.append(f"numerics_mutant={mutant}")
    if device_config:
        cmd += ["--device-config", ",".join(device_config)]
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    with open(report) as f:
        data = json.load(f)
    comparisons = []
    for step in data["steps"]:
        for case in (step.get("details") or {}).get("cases", []):
            for c in case.get("comparisons", []):
                comparisons.append(dict(c, case=case["name"]))
    failed_steps = [s["name"] for s in data["steps"] if s["status"] == "FAIL"]
    return {"seed": seed, "mutant": mutant, "rc": rc, "result": data["result"],
            "failed": failed_steps, "comparisons": comparisons,
            "fp32_gates": data.get("metrics", {}).get("fp32_gates", ""),
            "localised": data.get("metrics", {}).get("contract", {}).get("localisation", ""),
            "probe_means": data.get("metrics", {}).get("contract", {}).get("probe_mean_errors")}


def summary(all_comparisons, tie):
    comparisons = [c for c in all_comparisons if c["phase"] != "contract"]
    contract = [c for c in all_comparisons if c["phase"] == "contract"]
    if not comparisons:  # the run failed before its first comparison (a broken readout)
        comparisons = [{"cosine": float("nan"), "gain": float("nan"), "rel_rms": float("nan"),
                        "max_abs_error": float("nan"), "top_k_overlap": float("nan"),
                        "golden_margin": 0.0, "argmax": -1, "golden_argmax": -1}]
    decisive = [c for c in comparisons if c["golden_margin"] > tie]
    return {
        "cosine_min": min(c["cosine"] for c in comparisons),
        "gain_dev_max": max(abs(c["gain"] - 1) for c in comparisons),
        "rel_rms_max": max(c["rel_rms"] for c in comparisons),
        "max_abs_max": max(c["max_abs_error"] for c in comparisons),
        "topk_min": min(c["top_k_overlap"] for c in comparisons),
        "decisive_miss": sum(c["argmax"] != c["golden_argmax"] for c in decisive),
        "tie_miss": sum(c["argmax"] != c["golden_argmax"] for c in comparisons
                        if c["golden_margin"] <= tie),
        "miss_margin_max": max([c["golden_margin"] for c in comparisons
                                if c["argmax"] != c["golden_argmax"]] or [0.0]),
        # Against the device-contract reference: BF16 ULPs of each row's largest logit.
        "ulps_max": max([c["ulps"] for c in contract] or [float("nan")]),
        "ulps_mean": (sum(c["mean_ulps"] for c in contract) / len(contract)
                      if contract else float("nan")),
        "contract_rows": len(contract),
    }


def against_reference(all_comparisons):
    """The device's distance from FP32 over the rows that have the contract reference's,
    next to the reference's: the ratios the scaled FP32 gates' margins are set on."""
    rows = [c for c in all_comparisons if "reference" in c]
    if not rows:
        return None
    ref = [c["reference"] for c in rows]
    mean = lambda xs: sum(xs) / len(xs)
    return {
        "rel_rms": mean([c["rel_rms"] for c in rows]) / mean([r["rel_rms"] for r in ref]),
        "max_abs": max(c["max_abs_error"] for c in rows) / max(r["max_abs_error"] for r in ref),
        "one_minus_cos": (1 - min(c["cosine"] for c in rows)) / (1 - min(r["cosine"] for r in ref)),
        "topk_drop": min(r["top_k_overlap"] for r in ref) - min(c["top_k_overlap"] for c in rows),
        "gain_shift": abs(mean([c["gain"] for c in rows]) - mean([r["gain"] for r in ref])),
        "ref_rel_rms": mean([r["rel_rms"] for r in ref]),
        "ref_cos_min": min(r["cosine"] for r in ref),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--cache", default=".calrt/calibration")
    p.add_argument("--preset", default="tiny", choices=sorted(INVISIBLE))
    p.add_argument("--config", help="a model config file (simdev gen --config) instead of a preset")
    p.add_argument("--device-config", action="append", default=[],
                   help="KEY=VALUE for the device (chips=4 for a 4-chip calbin); repeatable")
    p.add_argument("--fp32-only", action="store_true",
                   help="switch the contract gates off: what the FP32 gates catch alone")
    p.add_argument("--seeds", default="1-8")
    p.add_argument("--mutants", default="all", help="all, none, invisible, or NAME,NAME")
    p.add_argument("--cases", default="short")
    p.add_argument("--tie", type=float, default=0.3, help="margin below which a greedy miss is a near-tie")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    if args.config:
        INVISIBLE.setdefault(model_name(args), {})
        args.preset = model_name(args)
    os.makedirs(args.cache, exist_ok=True)
    seeds = seeds_of(args.seeds)
    if args.mutants == "all":
        mutants = ["none"] + [m for m in DEVICE_MUTANTS + RUNNER_MUTANTS
                              if m not in INVISIBLE[args.preset]]
    elif args.mutants == "invisible":
        mutants = list(INVISIBLE[args.preset])
    else:
        mutants = args.mutants.split(",")
    for seed in seeds:  # generate first, once per seed
        calbin_for(args, seed)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda sm: run(args, *sm), [(s, m) for m in mutants for s in seeds]))
    bad = False
    print(f"{'mutant':18} {'seed':>4} {'result':6} {'cos_min':>9} {'|gain-1|':>9} {'rel_rms':>8} "
          f"{'max_abs':>8} {'topk':>5} {'miss':>4} {'ties':>4} {'miss_margin':>11} "
          f"{'ulps':>8} {'ulps_mean':>9} {'rows':>5}  failed steps")
    for r in runs:
        s = summary(r["comparisons"], args.tie)
        print(f"{r['mutant']:18} {r['seed']:4} {r['result']:6} {s['cosine_min']:9.6f} "
              f"{s['gain_dev_max']:9.5f} {s['rel_rms_max']:8.5f} {s['max_abs_max']:8.4f} "
              f"{s['topk_min']:5.2f} {s['decisive_miss']:4} {s['tie_miss']:4} "
              f"{s['miss_margin_max']:11.4f} {s['ulps_max']:8.2f} {s['ulps_mean']:9.4f} "
              f"{s['contract_rows']:5}  "
              f"{','.join(r['failed'])}")
        expect_pass = r["mutant"] == "none" or r["mutant"] in INVISIBLE[args.preset]
        if r["mutant"] == "none" or not args.fp32_only:
            bad |= expect_pass != (r["result"] == "PASS")
    ratios = [(r, against_reference(r["comparisons"])) for r in runs]
    if any(x for _, x in ratios):
        print("\nagainst the contract reference over the same rows (device / reference; the "
              "scaled FP32 gates open to 1.1x its mean relative RMS error, 1.5x its max abs error and "
              "1 - cosine, 0.1 below its top-k overlap):")
        print(f"{'mutant':18} {'seed':>4} {'rel_rms':>8} {'max_abs':>8} {'1-cos':>8} "
              f"{'topk_drop':>9} {'gain_shift':>10} {'ref_rel_rms':>11} {'ref_cos_min':>11}  gates")
        for r, x in ratios:
            if x:
                print(f"{r['mutant']:18} {r['seed']:4} {x['rel_rms']:8.4f} {x['max_abs']:8.4f} "
                      f"{x['one_minus_cos']:8.4f} {x['topk_drop']:9.3f} {x['gain_shift']:10.6f} "
                      f"{x['ref_rel_rms']:11.5f} {x['ref_cos_min']:11.6f}  {r['fp32_gates']}")
    print("\ndetection matrix (D = the smoke failed, . = it passed; clean runs must pass):")
    print(f"{'':18} " + " ".join(f"{s:>3}" for s in seeds))
    for m in mutants:
        row = [r for r in runs if r["mutant"] == m]
        print(f"{m:18} " + " ".join(f"{'D' if r['result'] != 'PASS' else '.':>3}" for r in row))
    print("\nwhere the smoke localises each failing run (first seed shown; every failing run of "
          "a mutant must name the place EXPECTED_PLACE gives):")
    for m in mutants:
        failing = [r for r in runs if r["mutant"] == m and r["result"] != "PASS"]
        if failing:
            print(f"{m:18} {failing[0]['localised'] or '(nothing)'}")
        want = PLACE_BY_MODEL.get(model_name(args), {}).get(m, EXPECTED_PLACE.get(m))
        for r in failing:
            if want and want not in r["localised"]:
                print(f"  seed {r['seed']}: expected {want!r}, got {r['localised']!r}")
                bad = True
    print("\nmean relative error of the layer probes against the contract, per point, over the "
          "runs of each mutant (min - max):")
    for m in mutants:
        means = [r["probe_means"] for r in runs if r["mutant"] == m and r["probe_means"]]
        if means:
            cells = [f"{min(x[p] for x in means):.4f}-{max(x[p] for x in means):.4f}"
                     for p in range(len(means[0]))]
            print(f"{m:18} " + " ".join(f"{c:>15}" for c in cells))
    for m in mutants:
        if m in INVISIBLE[args.preset]:
            print(f"{m}: expected to pass: {INVISIBLE[args.preset][m]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
