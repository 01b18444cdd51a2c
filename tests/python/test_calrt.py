"""The calrt Python package against the simulator: the tiny calbin's prefill and teacher-forced
decode match its golden set (written by the generator's FP32 reference, read here with
NumPy), mapped arrays are the device's buffers, errors carry code and fault class, and the
device service is reached over a Unix socket.

Run by ctest (`python_tests`) with PYTHONPATH at the build tree's package and CALRT_TEST_CALBIN,
CALRT_SIMDEV at the fixture calbin and the simdev executable."""
import os
import socket as socket_module
import subprocess
import tempfile
import time

import numpy as np
import pytest

import calrt

CALBIN = os.environ["CALRT_TEST_CALBIN"]


def golden(case, name):
    return np.load(os.path.join(CALBIN, "golden", f"{case}.{name}.npy"))


def cosine(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class Session:
    """A configured tiny calbin with one buffer pair per model and a KV handle."""

    def __init__(self, device="sim", config="seed=1"):
        self.device = calrt.open_device(device, config=config)
        self.calbin = self.device.load_calbin(CALBIN)
        self.calbin.configure()
        self.info = self.calbin.info()
        models = {m["type"]: m for m in self.calbin.models()}
        self.prefill, self.decode = models["prefill"], models["decode"]
        self.io = {}
        for model in (self.prefill, self.decode):
            self.io[model["name"]] = (self.calbin.buffer(model["name"], "input"),
                                      self.calbin.buffer(model["name"], "output"))

    def run(self, model, tokens, first_position, kv, position_offset=0):
        """One job: tokens at positions first_position.., continuing the KV; its last
        token's logits as float32. position_offset shifts the positions alone (a defect)."""
        inp, out = self.io[model["name"]]
        roles = {t["role"]: t for t in inp.tensors}
        start = first_position + position_offset
        for role, values in (("token", tokens),
                             ("position", np.arange(start, start + len(tokens)))):
            view = inp.map(roles[role]["index"])
            view[:] = 0
            view[: len(values)] = values
            del view  # unmapped: the device sees the bytes
        csr = {c["name"]: c["index"] for c in model["csrs"]}
        inp.set_csr(csr["cur_seq_len"], len(tokens))
        inp.set_csr(csr["past_kv_cur_seq_len"], first_position)
        kv.apply(inp)
        job = self.calbin.submit(model["name"], inp, out)
        assert job.wait(timeout_ms=30000) == "ready"
        status = job.status()
        assert status["state"] == "completed", status
        logits = next(t for t in out.tensors if t["role"] == "logits")  # the last token's row
        return calrt.read_row(out.map(logits["index"]), logits)


def check_case(s, case):
    tokens = golden(case, "tokens")
    greedy = golden(case, "greedy")
    kv = s.calbin.allocate_kv(len(tokens) + len(greedy))
    logits = s.run(s.prefill, tokens, 0, kv)
    assert cosine(logits, golden(case, "prefill_logits")) > 0.9995
    assert int(np.argmax(logits)) == int(greedy[0])
    decode_golden = golden(case, "decode_logits")
    agree = 0
    for step in range(len(greedy) - 1):
        logits = s.run(s.decode, [int(greedy[step])], len(tokens) + step, kv)
        assert cosine(logits, decode_golden[step]) > 0.9995, f"{case} decode step {step}"
        agree += int(np.argmax(logits)) == int(greedy[step + 1])
    assert agree >= len(greedy) - 2  # a near-tie may swap, as the smoke allows
    assert kv.info()["filled_tokens"] == len(tokens) + len(greedy) - 1
    kv.free()


def test_device_status_and_calbin_info():
    s = Session()
    status = s.device.status()
    assert status["state"] in ("open", "configured")
    assert status["chip_count"] == 2
    assert status["abi"][0] == calrt.ABI_VERSION[0]
    assert s.info["vocab"] == 1000 and s.info["configured"]
    assert {m["type"] for m in s.calbin.models()} == {"prefill", "decode"}


@pytest.mark.parametrize("case", ["len2", "len17"])
def test_prefill_and_decode_match_the_golden_set(case):
    check_case(Session(), case)


def test_a_wrong_position_is_caught():
    # The negative control of the test above: the same loop with the decode's position one
    # too high (the KV continues correctly) leaves the golden row.
    s = Session()
    tokens = golden("len17", "tokens")
    first = int(golden("len17", "greedy")[0])
    kv = s.calbin.allocate_kv(64)
    s.run(s.prefill, tokens, 0, kv)
    right = s.run(s.decode, [first], len(tokens), kv)
    kv.clear()
    s.run(s.prefill, tokens, 0, kv)
    wrong = s.run(s.decode, [first], len(tokens), kv, position_offset=1)
    assert cosine(right, golden("len17", "decode_logits")[0]) > 0.9995
    assert cosine(wrong, golden("len17", "decode_logits")[0]) < 0.9995


def test_mapped_arrays_are_the_buffer():
    s = Session()
    inp, _ = s.io[s.prefill["name"]]
    token = next(t for t in inp.tensors if t["role"] == "token")
    view = inp.map(token["index"])
    assert view.dtype == np.int32 and view.nbytes == token["bytes"]
    view[:5] = [7, 8, 9, 10, 11]
    del view
    again = inp.map(token["index"])
    assert list(again[:5]) == [7, 8, 9, 10, 11]


def test_errors_carry_code_and_fault_class():
    s = Session()
    held = []
    with pytest.raises(calrt.Error) as caught:
        for _ in range(1000):  # bounded: the reservation holds a few context-sized handles
            held.append(s.calbin.allocate_kv(s.info["context"]))
    assert held, "not even one context-sized KV handle"
    assert caught.value.code_name == "KV_EXHAUSTED"
    assert caught.value.fault_class == "request"
    assert caught.value.function == "Kv_Allocate"
    for handle in held:
        handle.free()
    kv = s.calbin.allocate_kv(16)
    kv.free()
    with pytest.raises(calrt.Error) as caught:
        kv.info()
    assert caught.value.code_name in ("INVALID_HANDLE", "INVALID_ARGUMENT")
    with pytest.raises(calrt.Error) as caught:
        s.device.load_calbin(os.path.join(CALBIN, "no-such-calbin"))
    assert caught.value.fault_class in ("request", "model")
    with pytest.raises(calrt.Error):
        s.calbin.buffer("no_such_model", "input")
    with pytest.raises(calrt.Error):
        s.calbin.buffer(s.prefill["name"], "sideways")
    with pytest.raises(OSError):
        calrt.open_device(os.path.join(CALBIN, "no-such-runtime.so"))


def test_a_wait_that_times_out_is_not_ready_and_a_cancel_ends_the_job():
    # 10 s of device time before the input DMA: a 1 ms wait cannot see the job finish.
    s = Session(config="seed=1;submit_overhead_ns=10000000000")
    kv = s.calbin.allocate_kv(64)
    inp, out = s.io[s.prefill["name"]]
    csr = {c["name"]: c["index"] for c in s.prefill["csrs"]}
    inp.set_csr(csr["cur_seq_len"], 1)
    inp.set_csr(csr["past_kv_cur_seq_len"], 0)
    kv.apply(inp)
    job = s.calbin.submit(s.prefill["name"], inp, out)
    assert job.wait(timeout_ms=1) == "not_ready"
    job.cancel()
    assert job.wait() == "ready"
    status = job.status()
    assert status["state"] == "cancelled"
    assert status["code"] == "CANCELLED" and status["fault_class"] == "request"


def test_through_the_device_service():
    simdev = os.environ.get("CALRT_SIMDEV")
    if not simdev:
        pytest.skip("CALRT_SIMDEV not set")
    with tempfile.TemporaryDirectory() as tmp:
        socket = os.path.join(tmp, "calrt.sock")
        daemon = subprocess.Popen([simdev, "serve", "--socket", socket, "--allow-root"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # Until a connection is accepted, not until the path exists: between the daemon's
            # bind() and listen() the kernel refuses a client (bounded: 10 s).
            listening = False
            for _ in range(200):
                probe = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
                try:
                    probe.connect(socket)
                    listening = True
                    break
                except OSError:
                    time.sleep(0.05)
                finally:
                    probe.close()
            assert listening, daemon.stderr.read1().decode()
            check_case(Session(device="unix:" + socket, config=""), "len2")
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)


README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python",
                      "README.md")


def readme_snippet():
    text = open(README).read()
    start = text.index("```python\n") + len("```python\n")
    return text[start:text.index("```", start)]


def test_the_readme_snippet_runs():
    """python/README.md's snippet, verbatim but for the calbin's path: a prefill whose row
    is finite and is the one the same three tokens give through Session."""
    code = readme_snippet().replace('"build/calbins/tiny"', repr(CALBIN))
    scope = {}
    exec(compile(code, README, "exec"), scope)
    logits = scope["logits"]
    assert logits.shape[0] > 0 and np.all(np.isfinite(logits))
    s = Session()
    same = s.run(s.prefill, [11, 12, 13], 0, s.calbin.allocate_kv(64))
    assert np.array_equal(logits, same)


def test_a_failed_job_raises_from_wait():
    """A prefill submitted without its CSRs fails on the device (cur_seq_len 0): wait()
    raises with the job's code and fault class instead of returning "ready" over zeros."""
    s = Session()
    inp, out = s.io[s.prefill["name"]]
    kv = s.calbin.allocate_kv(64)
    kv.apply(inp)
    job = s.calbin.submit(s.prefill["name"], inp, out)
    with pytest.raises(calrt.Error) as raised:
        job.wait(timeout_ms=30000)
    assert raised.value.code_name == "OUT_OF_RANGE", raised.value
    assert raised.value.fault_class == "request"
    assert "cur_seq_len" in str(raised.value)
    assert job.status()["state"] == "failed"
