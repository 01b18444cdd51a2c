#!/usr/bin/env python3
"""A user's FP32 golden set through the smoke: the independent NumPy reference writes one, the
correct simulated device must pass it and each of five perturbed ones must fail.

Usage: numpy_golden_smoke.py CALRT SIMDEV WORKDIR --config CONFIG [--seed N] [--cases NAMES]
                             [--perturbations NAMES]

A golden set brought by a reference team (Hugging Face, NumPy) has FP32 logits and no
device-contract rows (schema 1, calbin/FORMAT.md); `calrt smoke` then computes those rows
from the calbin's weights and opens its FP32 gates to their distance from the golden set. This
script checks both directions of that at the config's shape (a deep one in the ctest):

1. `SIMDEV gen --config CONFIG --seed N --no-long --force --out WORKDIR/calbin`;
2. clean: numpy_reference.py CALBIN --write-golden WORKDIR/golden (its float64 model of
   calbin/MODEL.md, written as float32, for the prompts of the calbin's own golden cases),
   then `CALRT smoke WORKDIR/calbin --golden WORKDIR/golden --json WORKDIR/clean.json`:
   expected exit 0 (PASS), a correct device against a correct reference;
3. for each perturbation (numpy_reference.py --perturb: q_norm_ignored, attn_scale,
   rope_direction, swiglu_swapped, logits_scaled), the same into WORKDIR/golden-NAME and
   WORKDIR/NAME.json: expected exit 1 (FAIL), a correct device against a wrong reference.
   Any other exit status (bad input, a crash) is no detection.

--cases NAMES (comma-separated) goes to both numpy_reference.py (the golden set then holds
only those cases) and the smoke; by default every short case of the calbin's golden set.

It prints one line per run: the verdict against the expectation, the contract gate (worst
row in BF16 ULPs and where its rows came from), the prefill and decode logits cosine min and
mean relative RMS error (each with its gate), the greedy agreement, the mean gain and how the
FP32 gates were set; for a FAIL, the smoke's first failure lines (which gate caught it).

Exit status: 0 every run as expected; 1 some run not as expected (each named at the end);
2 the calbin or a golden set could not be written.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import time

REFERENCE = pathlib.Path(__file__).with_name("numpy_reference.py")
PERTURBATIONS = (
    "q_norm_ignored",
    "attn_scale",
    "rope_direction",
    "swiglu_swapped",
    "logits_scaled",
)
EXIT_PASS, EXIT_FAIL = 0, 1
FAILURES_SHOWN = 3


def run(command):
    """Runs command; returns (exit status, stdout + stderr, seconds)."""
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.returncode, done.stdout, time.perf_counter() - started


def gate_text(gate, digits):
    """`value/threshold` of a gate from the report's metrics, `value` when not gated."""
    value = f"{gate['value']:.{digits}f}"
    if "threshold" in gate:
        value += f"/{gate['threshold']:.{digits}g}"
    return value + ("" if gate.get("pass", True) else " FAIL")


def metrics_line(report):
    """The key figures of a smoke JSON report (its `metrics`), on one line."""
    m = report.get("metrics") or {}
    if not m:
        return "no metrics (the smoke stopped before the golden cases)"
    parts = []
    contract = m.get("contract", {})
    if contract.get("available"):
        parts.append(
            f"contract max {contract['value']:.2f} ulps, mean {contract['mean']['value']:.4f} "
            f"({contract.get('source', '?')})"
        )
    else:
        parts.append(f"contract not available ({contract.get('source', '?')})")
    for phase in ("prefill", "decode"):
        p = m.get(phase, {})
        if p.get("compared"):
            parts.append(
                f"{phase} cos {gate_text(p['cosine_min'], 6)} rel_rms "
                f"{gate_text(p['mean_rel_rms'], 5)}"
            )
    greedy = m.get("greedy_agreement", {})
    if greedy:
        parts.append(
            f"greedy {greedy['agreed']}/{greedy['total']}"
            f"{'' if greedy.get('pass', True) else ' FAIL'}"
        )
    gain = m.get("mean_gain", {})
    if "gain" in gain:
        parts.append(f"gain {gain['gain']:.5f}{'' if gain.get('pass', True) else ' FAIL'}")
    parts.append(f"fp32_gates: {m.get('fp32_gates', '?')}")
    return "; ".join(parts)


def failures_of(report):
    """The smoke's failure lines, step by step."""
    lines = []
    for step in report.get("steps", []):
        for failure in step.get("failures", []):
            lines.append(f"step {step.get('number')} {step.get('name')}: {failure}")
    if report.get("error"):
        lines.insert(0, f"error: {report['error']}")
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("calrt", help="the calrt executable")
    parser.add_argument("simdev", help="the simdev executable")
    parser.add_argument("workdir", type=pathlib.Path, help="scratch directory (reused)")
    parser.add_argument("--config", required=True, help="model file for `simdev gen --config`")
    parser.add_argument("--seed", type=int, default=1, help="weight seed (default 1)")
    parser.add_argument("--cases", help="comma-separated case names (default: the short cases)")
    parser.add_argument(
        "--perturbations",
        default=",".join(PERTURBATIONS),
        help=f"comma-separated subset of {', '.join(PERTURBATIONS)} (default: all; '' for none)",
    )
    args = parser.parse_args(argv)
    perturbations = [p for p in args.perturbations.split(",") if p]
    unknown = sorted(set(perturbations) - set(PERTURBATIONS))
    if unknown:
        parser.error(f"--perturbations: unknown {', '.join(unknown)}")

    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    calbin = work / "calbin"
    gen = [args.simdev, "gen", "--config", args.config, "--seed", str(args.seed), "--no-long"]
    gen += ["--force", "--out", str(calbin)]
    status, output, seconds = run(gen)
    if status != 0:
        print(f"numpy_golden_smoke: `{' '.join(gen)}` exited {status}:\n{output}", file=sys.stderr)
        return 2
    print(f"calbin: {calbin} ({args.config}, seed {args.seed}) in {seconds:.1f} s")

    cases = ["--cases", args.cases] if args.cases else []
    unexpected = []
    for name in ["clean"] + perturbations:
        golden = work / ("golden" if name == "clean" else f"golden-{name}")
        write = [sys.executable, str(REFERENCE), str(calbin), "--write-golden", str(golden)]
        write += cases + ([] if name == "clean" else ["--perturb", name])
        status, output, write_seconds = run(write)
        if status != 0:
            print(f"numpy_golden_smoke: `{' '.join(write)}` exited {status}:\n{output}",
                  file=sys.stderr)
            return 2
        report_path = work / f"{name}.json"
        report_path.unlink(missing_ok=True)
        smoke = [args.calrt, "smoke", str(calbin), "--golden", str(golden)]
        smoke += ["--json", str(report_path)] + cases
        status, output, smoke_seconds = run(smoke)
        expected = EXIT_PASS if name == "clean" else EXIT_FAIL
        verdict = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL"}.get(status, f"exit {status}")
        ok = status == expected
        try:
            report = json.loads(report_path.read_text())
        except (OSError, json.JSONDecodeError):
            report = {}
        print(
            f"{name:<15} {verdict:<6} (expected {'PASS' if expected == EXIT_PASS else 'FAIL'}) "
            f"{'ok' if ok else 'UNEXPECTED'}  [{write_seconds:.0f} s + {smoke_seconds:.0f} s]  "
            f"{metrics_line(report)}"
        )
        failures = failures_of(report)
        shown = failures if not ok else failures[:FAILURES_SHOWN]
        for line in shown:
            print(f"    {line}")
        if len(failures) > len(shown):
            print(f"    ... {len(failures) - len(shown)} more in {report_path}")
        if not ok:
            if not report:
                # No report to show: the smoke's own output says why.
                print("\n".join(f"    | {line}" for line in output.splitlines()[-30:]))
            what = "passed" if status == EXIT_PASS else verdict
            unexpected.append(
                f"{name}: smoke {what}, expected {'PASS' if expected == EXIT_PASS else 'FAIL'} "
                f"(`{' '.join(smoke)}`)"
            )
    if unexpected:
        for line in unexpected:
            print(f"numpy_golden_smoke: UNEXPECTED {line}", file=sys.stderr)
        return 1
    print(f"numpy_golden_smoke: all {1 + len(perturbations)} runs as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
