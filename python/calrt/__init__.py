"""The Calculet runtime ABI from Python: open a device (the simulator, a runtime library, or
the device service over `unix:` or `tcp:`), load and configure a calbin, map buffers as NumPy
arrays, submit and wait for jobs, and manage KV handles. A failed call raises calrt.Error with
the ABI's code, its name and its fault class. See python/README.md.

    import calrt
    device = calrt.open_device("sim", config="seed=1")
    calbin = device.load_calbin("tiny")
    calbin.configure()
"""
import os

import numpy as np

from . import _calrt
from ._paths import client_library, sim_library

__all__ = ["Error", "open_device", "load_runtime", "bf16_to_float32", "read_row", "ABI_VERSION"]

ABI_VERSION = _calrt.ABI_VERSION
load_runtime = _calrt.load_runtime


class Error(Exception):
    """A runtime call failed: `code` (int), `code_name` (e.g. "KV_EXHAUSTED"), `fault_class`
    ("request", "model" or "device": whose fault, and what recovers it), `function` (the ABI
    call) and `message` (the runtime's own words)."""

    def __init__(self, code, code_name, fault_class, function, message):
        super().__init__(f"{function}: {code_name} ({fault_class}): {message}")
        self.code = code
        self.code_name = code_name
        self.fault_class = fault_class
        self.function = function
        self.message = message


_calrt._set_error_class(Error)


def open_device(device="sim", kind="sim", index=0, config="", timeout_ms=30000.0):
    """Opens a device. `device` is "sim" (the simulator's library), a runtime library's path,
    or a device service endpoint "unix:SOCKET" / "tcp:HOST:PORT" (through the client library;
    a TCP daemon also needs CALRT_TOKEN_FILE)."""
    if device == "sim":
        runtime = load_runtime(sim_library())
    elif device.startswith(("unix:", "tcp:")):
        runtime = load_runtime(client_library())
        endpoint = "service.endpoint=" + device
        config = endpoint if not config else endpoint + ";" + config
    else:
        runtime = load_runtime(os.fspath(device))
    return _calrt.Device(runtime, kind=kind, index=index, config=config, timeout_ms=timeout_ms)


def bf16_to_float32(words):
    """BF16 values, as the uint16 words a mapped BF16 tensor holds, widened to float32."""
    return (np.asarray(words, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def read_row(array, tensor, row=0):
    """Logical row `row` (over every dimension but the last) of a mapped tensor, given its
    description (`buffer.tensors[i]`), untiled: a tiled tensor stores `[ceil(C / tile_d0)]
    [rows][tile_d0]` (calbin/FORMAT.md). BF16 comes back as float32."""
    cols = tensor["shape"][-1]
    if tensor["layout"] == "tiled":
        tile = tensor["tile_d0"]
        tiles = -(-cols // tile)
        padded_rows = array.size // (tiles * tile)
        grid = np.asarray(array)[: tiles * padded_rows * tile].reshape(tiles, padded_rows, tile)
        values = grid[:, row, :].reshape(-1)[:cols]
    else:
        values = np.asarray(array)[row * cols:(row + 1) * cols]
    return bf16_to_float32(values) if tensor["dtype"] == "bf16" else values.copy()
