#!/usr/bin/env python3
"""Runs numpy_reference.py over small calbins of many weight seeds: the calibration of its
tolerance, and the `long` ctests over seeds 1..16.

Usage: numpy_reference_seeds.py --simdev EXE --work DIR [--seeds 1-16] [--config FILE]
                                [--tolerance T] [--max-prompt N] [--router-margin M]

For each seed it generates `simdev gen --preset tiny --no-long --seed N` (with --config,
`simdev gen --config FILE` in place of the preset, e.g. the qwen3-moe-small mixture of
experts) into DIR/seedN (replacing what is there), runs numpy_reference.py on it as a
separate process (so the CLI and its exit status are what is tested) and prints a table:
worst |reference - golden| of the prefill and decode rows, the generation and check times,
and for a mixture of experts the router near-ties and the smallest gap between the k-th and
(k+1)-th router logits of the seed. Exit status 1 when any check fails (its output is shown),
2 on a usage error or when simdev cannot generate.
"""
import argparse
import pathlib
import re
import subprocess
import sys
import time

CHECK = pathlib.Path(__file__).with_name("numpy_reference.py")
SUMMARY = re.compile(r"worst prefill (\S+) \((\S+)\), worst decode (\S+) \((\S+)\)")
ROUTING = re.compile(r"routing: (\d+) near-ties .*, smallest gap (\S+)")


def seeds_of(text):
    """'1-4,9' -> [1, 2, 3, 4, 9]."""
    seeds = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simdev", required=True, help="the simdev executable")
    parser.add_argument("--work", required=True, type=pathlib.Path, help="scratch directory")
    parser.add_argument("--seeds", default="1-16", help="e.g. 1-16 or 1,5,7 (default 1-16)")
    parser.add_argument("--config", help="generate from this model file instead of --preset tiny")
    parser.add_argument("--tolerance", help="passed on to numpy_reference.py")
    parser.add_argument("--max-prompt", help="passed on to numpy_reference.py")
    parser.add_argument("--router-margin", help="passed on to numpy_reference.py")
    args = parser.parse_args(argv)
    try:
        seeds = seeds_of(args.seeds)
    except ValueError:
        parser.error(f"--seeds: {args.seeds!r} is not a list like 1-16 or 1,5,7")

    extra = []
    if args.tolerance:
        extra += ["--tolerance", args.tolerance]
    if args.max_prompt:
        extra += ["--max-prompt", args.max_prompt]
    if args.router_margin:
        extra += ["--router-margin", args.router_margin]
    model = ["--config", args.config] if args.config else ["--preset", "tiny"]
    args.work.mkdir(parents=True, exist_ok=True)
    print(
        f"{'seed':>4}  {'prefill max|d|':>14}  {'decode max|d|':>13}  {'gen s':>6}  {'check s':>7}"
        + ("  near-ties  smallest gap" if args.config else "")
    )
    worst_prefill = worst_decode = 0.0
    # Mixture of experts only: the check prints a routing line for those.
    routed_seeds, near_ties, smallest_gap = 0, 0, float("inf")
    failed = []
    for seed in seeds:
        calbin = args.work / f"seed{seed}"
        started = time.perf_counter()
        gen = subprocess.run(
            [args.simdev, "gen", *model, "--seed", str(seed), "--no-long"]
            + ["--force", "--out", str(calbin)],
            capture_output=True,
            text=True,
        )
        generated = time.perf_counter()
        if gen.returncode != 0:
            print(gen.stdout + gen.stderr, file=sys.stderr)
            print(f"seed {seed}: simdev gen exited {gen.returncode}", file=sys.stderr)
            return 2
        check = subprocess.run(
            [sys.executable, str(CHECK), str(calbin)] + extra, capture_output=True, text=True
        )
        checked = time.perf_counter()
        match = SUMMARY.search(check.stdout)
        if check.returncode != 0 or not match:
            # Show the whole check output: it names the case, the array and the values.
            print(check.stdout + check.stderr, file=sys.stderr)
            failed.append(f"seed {seed} (exit {check.returncode})")
            continue
        prefill, decode = float(match.group(1)), float(match.group(3))
        worst_prefill, worst_decode = max(worst_prefill, prefill), max(worst_decode, decode)
        routing = ROUTING.search(check.stdout)
        routed = f"  {'-':>9}  {'-':>12}" if args.config else ""
        if routing:
            routed_seeds += 1
            near_ties += int(routing.group(1))
            smallest_gap = min(smallest_gap, float(routing.group(2)))
            routed = f"  {int(routing.group(1)):>9}  {float(routing.group(2)):>12.3e}"
        print(
            f"{seed:>4}  {prefill:>14.3e}  {decode:>13.3e}  {generated - started:>6.2f}  "
            f"{checked - generated:>7.2f}{routed}"
        )
    print(
        f"worst {worst_prefill:>14.3e}  {worst_decode:>13.3e}  over {len(seeds)} seeds"
        + (f"; {near_ties} near-ties, smallest gap {smallest_gap:.3e}" if routed_seeds else "")
    )
    if failed:
        print(f"numpy_reference_seeds: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
