#!/usr/bin/env python3
"""A bring-up smoke from Python: a golden set written with NumPy, then the device's prefill
and teacher-forced decode checked against it through the calrt package.

    python3 smoke.py CALBIN [--device sim|unix:SOCKET|LIB.so] [--golden-out DIR]

A numerics team has its reference's outputs as arrays. Here they come from the calbin's own
golden set (standing in for that reference); the script writes them as a golden set of the
project's format (calbin/FORMAT.md, schema 1: tokens, prefill logits, greedy tokens, top-k),
which `calrt smoke CALBIN --golden DIR` reads too, and judges the device against it: cosine
of every logits row >= 0.9995, greedy agreement >= 0.95. Exit 0 on PASS, 1 on FAIL."""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

import calrt

MIN_COSINE = 0.9995
MIN_GREEDY = 0.95
TOP_K = 20


def write_golden(out_dir, cases, vocab):
    """The NumPy side: one .npy per array and an index, as a reference team would write."""
    os.makedirs(out_dir, exist_ok=True)
    index = {"schema": 1, "vocab": vocab, "top_k": TOP_K, "cases": []}
    for name, c in cases.items():
        top_ids = np.argsort(-c["decode_logits"], axis=1, kind="stable")[:, :TOP_K].astype(np.int32)
        top_logits = np.take_along_axis(c["decode_logits"], top_ids, axis=1).astype(np.float32)
        files = {"tokens": c["tokens"].astype(np.int32),
                 "prefill_logits": c["prefill_logits"].astype(np.float32),
                 "greedy": c["greedy"].astype(np.int32),
                 "top_ids": top_ids, "top_logits": top_logits}
        entry = {"name": name, "prompt_len": int(len(c["tokens"])),
                 "decode_steps": int(len(c["greedy"]) - 1), "long_case": False}
        for key, array in files.items():
            np.save(os.path.join(out_dir, f"{name}.{key}.npy"), array)
            entry[key] = f"{name}.{key}.npy"
        index["cases"].append(entry)
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(index, f, indent=1)


def cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def run_job(calbin, model, io, tokens, position, kv):
    inp, out = io
    roles = {t["role"]: t for t in inp.tensors}
    for role, values in (("token", tokens), ("position", range(position, position + len(tokens)))):
        view = inp.map(roles[role]["index"])
        view[:] = 0
        view[: len(tokens)] = list(values)
        del view
    csr = {c["name"]: c["index"] for c in model["csrs"]}
    inp.set_csr(csr["cur_seq_len"], len(tokens))
    inp.set_csr(csr["past_kv_cur_seq_len"], position)
    kv.apply(inp)
    job = calbin.submit(model["name"], inp, out)
    if job.wait(timeout_ms=30000) != "ready" or job.status()["state"] != "completed":
        raise RuntimeError(f"{model['name']}: {job.status()}")
    logits = next(t for t in out.tensors if t["role"] == "logits")  # the last token's row
    return calrt.read_row(out.map(logits["index"]), logits)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("calbin")
    p.add_argument("--device", default="sim")
    p.add_argument("--golden-out", help="where to write the NumPy golden set (default: a "
                                        "temporary directory)")
    p.add_argument("--cases", default="len1,len2,len17,len256")
    args = p.parse_args()

    source = os.path.join(args.calbin, "golden")
    cases = {}
    for name in args.cases.split(","):
        load = lambda key: np.load(os.path.join(source, f"{name}.{key}.npy"))
        cases[name] = {"tokens": load("tokens"), "prefill_logits": load("prefill_logits"),
                       "greedy": load("greedy"), "decode_logits": load("decode_logits")}

    device = calrt.open_device(args.device)
    calbin = device.load_calbin(args.calbin)
    calbin.configure()
    info = calbin.info()
    if args.golden_out:
        write_golden(args.golden_out, cases, info["vocab"])
        print(f"golden set written with NumPy: {args.golden_out} (also: calrt smoke "
              f"{args.calbin} --golden {args.golden_out})")
    else:
        with tempfile.TemporaryDirectory(prefix="calrt-numpy-golden-") as scratch:
            write_golden(scratch, cases, info["vocab"])  # written, read back by NumPy, gone
            cases = {name: {**c, "greedy": np.load(os.path.join(scratch, f"{name}.greedy.npy"))}
                     for name, c in cases.items()}
        print("golden set written with NumPy to a temporary directory (--golden-out DIR keeps "
              "it, for calrt smoke --golden DIR too)")

    models = {m["type"]: m for m in calbin.models()}
    io = {t: (calbin.buffer(m["name"], "input"), calbin.buffer(m["name"], "output"))
          for t, m in models.items()}
    worst, agreed, total = 1.0, 0, 0
    for name, c in cases.items():
        tokens, greedy = c["tokens"], c["greedy"]
        kv = calbin.allocate_kv(len(tokens) + len(greedy))
        logits = run_job(calbin, models["prefill"], io["prefill"], list(tokens), 0, kv)
        rows = [cosine(logits, c["prefill_logits"])]
        agreed += int(np.argmax(logits)) == int(greedy[0])
        total += 1
        for step in range(len(greedy) - 1):
            logits = run_job(calbin, models["decode"], io["decode"], [int(greedy[step])],
                             len(tokens) + step, kv)
            rows.append(cosine(logits, c["decode_logits"][step]))
            agreed += int(np.argmax(logits)) == int(greedy[step + 1])
            total += 1
        kv.free()
        worst = min(worst, *rows)
        print(f"case {name}: prompt {len(tokens)}, {len(rows)} rows, cosine min {min(rows):.6f}")
    ok = worst >= MIN_COSINE and agreed / total >= MIN_GREEDY
    print(f"cosine min {worst:.6f} (>= {MIN_COSINE}), greedy {agreed}/{total} "
          f"(>= {MIN_GREEDY})")
    print("smoke PASS" if ok else "smoke FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except calrt.Error as e:
        print(f"smoke FAIL: {e} (code {e.code_name}, {e.fault_class} fault)", file=sys.stderr)
        sys.exit(1)
