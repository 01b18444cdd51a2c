"""Re-writes a calbin's golden set with NumPy, as a reference team would produce it.

Usage: numpy_golden.py SRC_GOLDEN_DIR DST_DIR

Every FP32 array is loaded and saved again by NumPy (np.save), so the destination holds files
NumPy wrote, and the index is written as schema 1 without the device-contract rows: a reference
team's set has FP32 logits only. The smoke must accept the result via --golden, and report the
contract gate as not available.
"""
import json
import pathlib
import shutil
import sys

import numpy as np


def main() -> int:
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    index = json.loads((src / "golden.json").read_text())
    index["schema"] = 1
    index.pop("contract_reference", None)
    count = 0
    for case in index["cases"]:
        case.pop("contract_rows", None)
        case.pop("contract_logits", None)
        for key in ("tokens", "prefill_logits", "greedy", "top_ids", "top_logits",
                    "decode_logits"):
            name = case.get(key)
            if not name:
                continue
            array = np.load(src / name)
            np.save(dst / name, np.ascontiguousarray(array))
            count += 1
    (dst / "golden.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"numpy {np.__version__} re-wrote {count} arrays into {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
