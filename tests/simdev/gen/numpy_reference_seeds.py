#!/usr/bin/env python3
"""Runs numpy_reference.py over tiny calbins of many weight seeds: the calibration of its
tolerance, and the `long` ctest over seeds 1..16.

Usage: numpy_reference_seeds.py --simdev EXE --work DIR [--seeds 1-16] [--tolerance T]

For each seed it generates `simdev gen --preset tiny --no-long --seed N` into DIR/seedN
(replacing what is there), runs numpy_reference.py on it as a separate process (so the CLI
and its exit status are what is tested) and prints a table: worst |reference - golden| of the
prefill and decode rows, the generation and check times. Exit status 1 when any check fails
(its output is shown), 2 on a usage error or when simdev cannot generate.
"""
import argparse
import pathlib
import re
import subprocess
import sys
import time

CHECK = pathlib.Path(__file__).with_name("numpy_reference.py")
SUMMARY = re.compile(r"worst prefill (\S+) \((\S+)\), worst decode (\S+) \((\S+)\)")


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
    parser.add_argument("--tolerance", help="passed on to numpy_reference.py")
    parser.add_argument("--max-prompt", help="passed on to numpy_reference.py")
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
    args.work.mkdir(parents=True, exist_ok=True)
    print(
        f"{'seed':>4}  {'prefill max|d|':>14}  {'decode max|d|':>13}  {'gen s':>6}  {'check s':>7}"
    )
    worst_prefill = worst_decode = 0.0
    failed = []
    for seed in seeds:
        calbin = args.work / f"seed{seed}"
        started = time.perf_counter()
        gen = subprocess.run(
            [args.simdev, "gen", "--preset", "tiny", "--seed", str(seed), "--no-long"]
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
        print(
            f"{seed:>4}  {prefill:>14.3e}  {decode:>13.3e}  {generated - started:>6.2f}  "
            f"{checked - generated:>7.2f}"
        )
    print(f"worst {worst_prefill:>14.3e}  {worst_decode:>13.3e}  over {len(seeds)} seeds")
    if failed:
        print(f"numpy_reference_seeds: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
