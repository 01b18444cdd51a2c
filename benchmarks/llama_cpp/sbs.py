#!/usr/bin/python3
"""Helpers of side_by_side.sh: the idle check, timed runs and the final report.

    sbs.py idle [--seconds S]                 the load average and the CPU busy in S seconds
    sbs.py timed --out FILE [--log FILE] [--label L] -- CMD...   runs CMD; writes its wall and CPU time
                                              and the CPU other processes used meanwhile
    sbs.py report --llama FILE --sim-dir DIR ...     prints both sides and the ratios
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

IDLE_LOAD = 0.5       # 1-minute load average above which the machine is not idle
IDLE_BUSY = 0.10      # share of all cores busy in the sample
OTHERS_SHARE = 0.05   # others' CPU during a measured run, as a share of one core


def cpu_ticks():
    """(busy, total) jiffies of all cores from /proc/stat: user .. steal."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def idle_check(seconds):
    """Prints the load and a short sample of CPU use; returns the warnings."""
    load = load_average()
    busy0, total0 = cpu_ticks()
    time.sleep(seconds)
    busy1, total1 = cpu_ticks()
    busy = (busy1 - busy0) / max(1, total1 - total0)
    cores = os.cpu_count() or 1
    print(f"machine: {cores} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"{busy * 100:.0f} % busy over {seconds:g} s")
    warnings = []
    if load[0] > IDLE_LOAD:
        warnings.append(f"1-minute load average {load[0]:.2f} > {IDLE_LOAD}")
    if busy > IDLE_BUSY:
        warnings.append(f"the cores were {busy * 100:.0f} % busy before the run")
    for w in warnings:
        print(f"WARNING: the machine is not idle ({w}): the figures below are not meaningful; "
              "another process on the cores slows llama.cpp's decode most of all")
    return warnings


def timed(cmd, log_path):
    """Runs cmd; wall time, its CPU time (descendants included) and the others' CPU time."""
    busy0, _ = cpu_ticks()
    start = time.monotonic()
    log = open(log_path, "ab") if log_path else None
    try:
        proc = subprocess.Popen(cmd, stdout=log or None, stderr=subprocess.STDOUT if log else None)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        if log:
            log.close()
    wall = time.monotonic() - start
    busy1, _ = cpu_ticks()
    hz = os.sysconf("SC_CLK_TCK")
    own = usage.ru_utime + usage.ru_stime
    return {
        "cmd": cmd,
        "rc": os.waitstatus_to_exitcode(status),
        "wall_s": wall,
        "cpu_s": own,
        "others_cpu_s": max(0.0, (busy1 - busy0) / hz - own),
    }


def others_note(runs, label):
    """A warning when other processes took a noticeable share of a core during the runs."""
    others = sum(r["others_cpu_s"] for r in runs)
    wall = sum(r["wall_s"] for r in runs)
    if wall > 0 and others / wall > OTHERS_SHARE:
        return (f"WARNING: other processes used {others:.1f} CPU-s during the {label} runs "
                f"({others / wall * 100:.0f} % of a core over {wall:.1f} s): contended")
    return None


def median_wall(runs):
    return statistics.median(r["wall_s"] for r in runs)


def sim_figures(sim_dir, prompt_short, prompt_long, gen_short, gen_long):
    """The simulator's tokens/s from whole-process wall times of calrt bench."""
    def runs(name):
        with open(os.path.join(sim_dir, f"{name}.json")) as f:
            return json.load(f)
    base, pre, dec = runs("base"), runs("prefill"), runs("decode")
    t_base, t_pre, t_dec = median_wall(base), median_wall(pre), median_wall(dec)
    return {
        "prefill_tok_s": (prompt_long - prompt_short) / (t_pre - t_base),
        "decode_tok_s": (gen_long - gen_short) / (t_dec - t_base),
        "walls": (t_base, t_pre, t_dec),
        "notes": [n for n in (others_note(base + pre + dec, "simulator"),) if n],
    }


def decode_step_bytes(calbin):
    """Bytes a decode step streams: every weight (and its scales) once, but the embedding
    table, of which a step reads one row."""
    with open(os.path.join(calbin, "manifest.json")) as f:
        manifest = json.load(f)
    return sum(w["bytes"] + 4 * w["quant"]["scale_count"] for w in manifest["weights"]
               if w["role"] != "embedding")


def memory_read_gbps(path):
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    return max(r["bytes_per_second"] for r in runs) / 1e9


def ratio(a, b):
    return f"{a / b:.2f}x" if b > 0 and a > 0 else "n/a"


def fmt(x):
    return f"{x:8.1f}" if x > 0 else "   (neg)"


def report(args):
    with open(args.llama) as f:
        llama = json.load(f)
    sim = sim_figures(args.sim_dir, args.prompt_short, args.prompt_long, args.gen_short,
                      args.gen_long)
    notes = list(sim["notes"])
    with open(args.llama_timing) as f:
        note = others_note(json.load(f), "llama.cpp")
        if note:
            notes.append(note)
    t_base, t_pre, t_dec = sim["walls"]
    print()
    print(f"== side by side: {args.shape}, {args.threads} threads")
    print(f"llama.cpp {llama['llama_cpp_release']} (commit {llama['llama_cpp_commit'][:12]}, "
          f"node-llama-cpp {llama['node_llama_cpp']}), Q8_0, {llama['threads']} threads")
    print(f"simulator: calrt bench --device sim --device-config host_threads={args.threads}, "
          f"{args.build_type} build")
    print(f"{'':32}{'simulator':>10}{'llama.cpp':>11}{'sim / llama':>13}")
    for label, key in ((f"prefill tok/s ({args.prompt_long} vs {args.prompt_short})",
                        "prefill_tok_s"),
                       (f"decode tok/s ({args.gen_long} vs {args.gen_short} tokens)",
                        "decode_tok_s")):
        print(f"{label:32}{fmt(sim[key]):>10}{fmt(llama[key]):>11}"
              f"{ratio(sim[key], llama[key]):>13}")
    pre, gen = llama["prefill_s"], llama["generate_s"]
    print(f"simulator, whole-process walls: {t_base:.2f} s at prompt {args.prompt_short} + "
          f"gen {args.gen_short}, {t_pre:.2f} s at {args.prompt_long} + {args.gen_short}, "
          f"{t_dec:.2f} s at {args.prompt_short} + {args.gen_long}")
    print(f"llama.cpp, medians of {len(pre['long'])}: prefill {statistics.median(pre['short']):.3f}"
          f" s at {args.prompt_short}, {statistics.median(pre['long']):.3f} s at "
          f"{args.prompt_long} ({llama['prefill_plain_tok_s']:.1f} tok/s alone); "
          f"{statistics.median(gen['short']):.3f} s to {args.gen_short} tokens, "
          f"{statistics.median(gen['long']):.3f} s to {args.gen_long}")
    if min(sim["prefill_tok_s"], sim["decode_tok_s"], llama["prefill_tok_s"],
           llama["decode_tok_s"]) <= 0:
        print("(neg): the longer run was not slower than the shorter one; the difference is "
              "within the noise: raise --prompt-long, --gen-long or --sim-reps")
    step = decode_step_bytes(args.calbin)
    if sim["decode_tok_s"] > 0:
        line = (f"decode step: {step / 1e6:.1f} MB of weights per token (the calbin's, all but "
                f"the embedding table), read at {step * sim['decode_tok_s'] / 1e9:.1f} GB/s")
        if args.memory_read:
            read = memory_read_gbps(args.memory_read)
            line += (f"; the machine reads {read:.1f} GB/s on {args.threads} threads "
                     f"(calrt_kernel_bench BM_MemoryRead): "
                     f"{step * sim['decode_tok_s'] / 1e9 / read * 100:.0f} %")
        print(line)
    for n in notes:
        print(n)
    if args.idle_warnings:
        print("WARNING: the machine was not idle when the run began (see above): treat these "
              "figures as provisional")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("idle")
    i.add_argument("--seconds", type=float, default=2.0)
    t = sub.add_parser("timed")
    t.add_argument("--out", required=True, help="JSON list to append this run to")
    t.add_argument("--log", help="the command's stdout and stderr go here")
    t.add_argument("--label", help="print a line with this label and the wall time")
    t.add_argument("command", nargs=argparse.REMAINDER)
    r = sub.add_parser("report")
    r.add_argument("--llama", required=True, help="llama_bench.mjs's JSON result")
    r.add_argument("--llama-timing", required=True, help="sbs.py timed's record of it")
    r.add_argument("--sim-dir", required=True, help="base/prefill/decode.json of sbs.py timed")
    r.add_argument("--calbin", required=True, help="the calbin the simulator ran")
    r.add_argument("--memory-read", help="calrt_kernel_bench's BM_MemoryRead JSON")
    r.add_argument("--shape", required=True)
    r.add_argument("--build-type", default="Release")
    for name in ("threads", "prompt-short", "prompt-long", "gen-short", "gen-long"):
        r.add_argument(f"--{name}", type=int, required=True)
    r.add_argument("--idle-warnings", type=int, default=0)
    args = p.parse_args(argv)

    if args.cmd == "idle":
        return 1 if idle_check(args.seconds) else 0
    if args.cmd == "timed":
        cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not cmd:
            p.error("timed: no command after --")
        result = timed(cmd, args.log)
        runs = []
        if os.path.exists(args.out):
            with open(args.out) as f:
                runs = json.load(f)
        runs = runs if isinstance(runs, list) else [runs]
        with open(args.out, "w") as f:
            json.dump(runs + [result], f, indent=1)
        if args.label:
            print(f"  {args.label}: {result['wall_s']:.2f} s wall, {result['cpu_s']:.2f} s CPU"
                  + (f" (exit {result['rc']})" if result["rc"] else ""))
        return result["rc"]
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
