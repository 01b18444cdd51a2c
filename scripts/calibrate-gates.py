#!/usr/bin/env python3
"""Calibrates and checks the smoke's numeric gates (runner/README.md, "Calibration of the
numeric gates"): runs `calrt smoke` on tiny calbins of many weight seeds, on the unmodified
simulator and under every numeric mutant, and prints what each gate sees.

  scripts/calibrate-gates.py --build build --seeds 1-64 --mutants none
  scripts/calibrate-gates.py --build build --seeds 1-8 --mutants all --cases short
  scripts/calibrate-gates.py --build build --preset tiny-gqa --seeds 1-8 --mutants all

Clean runs give the noise the gates must tolerate; mutants give the defects they must catch.
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
                  "attn_unscaled", "silu_as_relu", "kv_truncated", "gqa_mapping"]
RUNNER_MUTANTS = ["runner:past-kv", "runner:position", "runner:stale-kv", "runner:tile16"]
# Where the smoke must localise each mutant with its layer probes (the first point whose run
# mean leaves the contract): the op each one changes first.
EXPECTED_PLACE = {m: "layer 0 attention" for m in DEVICE_MUTANTS + RUNNER_MUTANTS}
EXPECTED_PLACE.update({
    "logits_scale": "after the last layer",
    "lm_head_swapped": "after the last layer",
    "silu_as_relu": "layer 0 MLP",
    # Fails at readout, before any comparison: the logits tensor's bytes disagree with a tile
    # of 16, and the failure names the tensor and both sizes.
    "runner:tile16": None,
})
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


def seeds_of(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def calbin_for(args, seed):
    # The long golden cases cost most of the generation; short runs do without them.
    short = args.cases != "all"
    path = os.path.join(args.cache, f"{args.preset}-seed{seed}" + ("-short" if short else ""))
    simdev = os.path.join(args.build, "simdev/tool/simdev")
    manifest = os.path.join(path, "manifest.json")
    # A calbin of an older generator may lack what the gates read (the contract rows).
    if not os.path.exists(manifest) or os.path.getmtime(manifest) < os.path.getmtime(simdev):
        subprocess.run([simdev, "gen", "--preset", args.preset,
                        "--seed", str(seed), "--out", path, "--force"] +
                       (["--no-long"] if short else []),
                       check=True, stdout=subprocess.DEVNULL)
    return path


def run(args, seed, mutant):
    calbin = calbin_for(args, seed)
    report = os.path.join(args.cache,
                          f"report-{args.preset}-{seed}-{mutant.replace(':', '_')}.json")
    cmd = [os.path.join(args.build, "runner/calrt"), "smoke", calbin, "--cases", args.cases,
           "--json", report]
    if mutant.startswith("runner:"):
        cmd += ["--inject-runner-bug", mutant.split(":", 1)[1]]
    elif mutant != "none":
        cmd += ["--device-config", f"numerics_mutant={mutant}"]
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--cache", default=".calrt/calibration")
    p.add_argument("--preset", default="tiny", choices=sorted(INVISIBLE))
    p.add_argument("--seeds", default="1-8")
    p.add_argument("--mutants", default="all", help="all, none, invisible, or NAME,NAME")
    p.add_argument("--cases", default="short")
    p.add_argument("--tie", type=float, default=0.3, help="margin below which a greedy miss is a near-tie")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
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
        bad |= expect_pass != (r["result"] == "PASS")
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
        want = EXPECTED_PLACE.get(m)
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
