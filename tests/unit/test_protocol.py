"""The wire between the trusted and the untrusted worker: typed frames and sealed memfds.

Everything the untrusted side sends is attacker-controlled: these tests send what a candidate
could, and check the trusted side's decoding refuses it instead of believing or crashing.
"""

import errno
import fcntl
import mmap
import os
import socket
import struct

import pytest
import torch

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict, check_correct
from warpk.evaluator.speed import median_interval
from warpk.evaluator.transport import Outbox, decode_calls, encode_calls, pack, unpack


class Tol:
    tolerance_fp32 = 1e-4
    tolerance_low_precision = 1e-2


def test_a_message_round_trips_with_its_types():
    a, b = socket.socketpair()
    spec = wire.TensorSpec(offset=64, dtype="float32", shape=[2, 3])
    wire.send(a, wire.Ran("ok", None, "abc", [[spec]], []))
    got, fd = wire.recv(b, (wire.Ran,), timeout_s=5)
    assert fd is None and got == wire.Ran("ok", None, "abc", [[spec]], [])
    assert isinstance(got.outputs[0][0], wire.TensorSpec)


@pytest.mark.parametrize(
    "raw, match",
    [
        ({"type": "Reply", "status": "ok", "seconds": "fast"}, "expected float"),
        ({"type": "Ran", "status": "ok", "compute_ms": 0.001}, "unknown fields"),  # v2's self-report
        ({"type": "Ran", "status": "ok", "outputs": [[{"offset": 0, "dtype": "float32"}]]}, "shape"),
        ({"type": "Ran", "status": "ok", "stolen": 1}, "unknown fields"),
        ({"type": "Measurement", "status": "ok"}, "unexpected message"),
        ({"type": "__import__"}, "unexpected message"),
        ([1, 2], "without a message type"),
    ],
)
def test_forged_frames_are_refused(raw, match):
    with pytest.raises(wire.ProtocolError, match=match):
        wire.decode(raw, wire.UNTRUSTED_REPLIES)


def test_a_frame_that_is_not_json_or_too_long_is_refused():
    a, b = socket.socketpair()
    a.sendall(struct.pack("!I", 5) + b"\x80abcd")
    with pytest.raises(wire.ProtocolError, match="not JSON"):
        wire.recv(b, wire.UNTRUSTED_REPLIES, timeout_s=5)
    a.sendall(struct.pack("!I", wire.MAX_FRAME_BYTES + 1))
    with pytest.raises(wire.ProtocolError, match="limit"):
        wire.recv(b, wire.UNTRUSTED_REPLIES, timeout_s=5)


def test_silence_is_a_timeout_and_a_closed_peer_is_closed():
    a, b = socket.socketpair()
    with pytest.raises(wire.PeerTimeout):
        wire.recv(b, wire.UNTRUSTED_REPLIES, timeout_s=0.2)
    a.close()
    with pytest.raises(wire.PeerClosed):
        wire.recv(b, wire.UNTRUSTED_REPLIES, timeout_s=1)


def test_a_lazy_conjugate_travels_as_its_values():
    # a dtype view of a conjugate view raises: packed raw, a task whose output is x.conj() would
    # fail the reference worker's harness on a GPU lane (by reading; seen on the CPU's other path)
    lazy = torch.randn(4, dtype=torch.complex64).conj()
    negative = torch.randn(3, dtype=torch.complex64).conj().imag
    assert lazy.is_conj() and negative.is_neg()
    fd, specs = pack(torch, [lazy, negative])
    out = unpack(torch, fd, specs, "cpu", 1 << 30)
    assert torch.equal(out[0], lazy.resolve_conj()) and torch.equal(out[1], negative.resolve_neg())


def test_tensors_round_trip_through_a_sealed_memfd():
    tensors = [torch.randn(3, 5), torch.arange(7, dtype=torch.int64), torch.tensor(True), torch.empty(0, 4)]
    fd, specs = pack(torch, tensors)
    seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    assert seals & fcntl.F_SEAL_WRITE and seals & fcntl.F_SEAL_SHRINK
    out = unpack(torch, fd, specs, "cpu", 1 << 30)
    for t, o in zip(tensors, out, strict=True):
        assert o.dtype == t.dtype and o.shape == t.shape and torch.equal(o, t)


def test_a_sealed_memfd_cannot_be_changed_after_it_is_sent():
    fd, _ = pack(torch, [torch.ones(1024)])
    with pytest.raises(OSError):
        os.pwrite(fd, b"\x00" * 16, 0)
    with pytest.raises(OSError):
        os.ftruncate(fd, 0)  # would SIGBUS a reader's mapping
    with pytest.raises(OSError):
        mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE)
    os.close(fd)


def test_an_unsealed_file_or_bad_specs_are_refused(tmp_path):
    fd = os.memfd_create("x", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 4096)
    spec = wire.TensorSpec(offset=0, dtype="float32", shape=[4])
    with pytest.raises(wire.ProtocolError, match="not sealed"):
        unpack(torch, fd, [spec], "cpu", 4096)
    plain = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    os.ftruncate(plain, 4096)
    with pytest.raises(wire.ProtocolError, match="sealable memfd"):
        unpack(torch, plain, [spec], "cpu", 4096)
    for bad, match in [
        (wire.TensorSpec(offset=0, dtype="object", shape=[4]), "dtype"),
        (wire.TensorSpec(offset=0, dtype="float32", shape=[-1]), "not a tensor shape"),
        (wire.TensorSpec(offset=8, dtype="float32", shape=[1]), "outside the memfd"),
        (wire.TensorSpec(offset=0, dtype="float32", shape=[10**6]), "outside the memfd"),
    ]:
        good_fd, _ = pack(torch, [torch.ones(16)])
        with pytest.raises(wire.ProtocolError, match=match):
            unpack(torch, good_fd, [bad], "cpu", os.fstat(good_fd).st_size)
    with pytest.raises(wire.ProtocolError, match="no memfd"):
        unpack(torch, None, [spec], "cpu", 1 << 20)


def test_outbox_allocates_ahead_and_grows_when_needed():
    box = Outbox(64)
    fd, specs = box.seal_with(torch, [torch.ones(100)])  # 400 bytes > 64 allocated
    assert torch.equal(unpack(torch, fd, specs, "cpu", 1 << 20)[0], torch.ones(100))


def test_a_busy_write_seal_is_retried_and_a_lasting_one_still_fails(monkeypatch):
    real = fcntl.fcntl
    busy = {"left": 2}

    def flaky(fd, cmd, arg=0):
        if cmd == fcntl.F_ADD_SEALS and busy["left"] > 0:
            busy["left"] -= 1
            raise OSError(errno.EBUSY, "Device or resource busy")
        return real(fd, cmd, arg)

    monkeypatch.setattr(fcntl, "fcntl", flaky)
    fd, specs = Outbox(64).seal_with(torch, [torch.ones(4)])
    assert busy["left"] == 0 and torch.equal(unpack(torch, fd, specs, "cpu", 1 << 20)[0], torch.ones(4))
    busy["left"] = 100
    with pytest.raises(OSError, match="busy"):
        Outbox(64).seal_with(torch, [torch.ones(4)])


def test_calls_with_scalars_and_tensors_cross_the_boundary():
    calls = [[torch.randn(2, 2), 3, 0.5, [1, 2]], [torch.zeros(1), -1, 2.0, []]]
    fd, encoded = encode_calls(torch, calls)
    got = decode_calls(torch, fd, encoded, "cpu")
    assert torch.equal(got[0][0], calls[0][0]) and got[0][1:] == [3, 0.5, [1, 2]]
    with pytest.raises(ValueError, match="cannot cross"):
        encode_calls(torch, [[object()]])


def test_check_correct_is_exact_about_nan_inf_dtype_and_shape():
    ref = torch.tensor([1.0, float("inf"), 3.0])
    assert check_correct(torch, ref, ref.clone(), Tol, "t")[0] == 0.0
    for bad, match in [
        (torch.tensor([1.0, float("inf"), float("nan")]), "NaN"),
        (torch.tensor([1.0, 2.0, 3.0]), "inf"),
        (torch.tensor([1.0, float("inf"), 3.1]), "differs"),
        (ref.double(), "dtype"),
        (ref[:2], "shape"),
    ]:
        with pytest.raises(Verdict, match=match):
            check_correct(torch, ref, bad, Tol, "t")


def test_median_interval_is_distribution_free():
    ten = [float(i) for i in range(1, 11)]
    assert median_interval(ten) == (2.0, 9.0)  # P(Bin(10, 1/2) <= 1) = 1.1% <= 2.5%
    assert median_interval([1.0, 2.0, 3.0]) == (1.0, 3.0)  # below 6 values: min, max


@pytest.mark.parametrize(
    "raw",
    [
        '{"type": "Reply", "status": "ok", "seconds": ' + "9" * 5000 + "}",  # int beyond json's limit
        '{"type": "Reply", "status": "ok", "seconds": 1' + "0" * 400 + "}",  # float() overflows
        "[" * 100000 + "]" * 100000,  # a nesting bomb
    ],
)
def test_frames_built_to_break_the_parser_are_protocol_errors(raw):
    a, b = socket.socketpair()
    payload = raw.encode()
    a.sendall(struct.pack("!I", len(payload)) + payload)
    with pytest.raises(wire.ProtocolError):
        wire.recv(b, wire.UNTRUSTED_REPLIES, timeout_s=5)


def test_complex_and_integer_outputs_are_compared_exactly_enough():
    z = torch.tensor([1 + 1j, 2 - 1j])
    with pytest.raises(Verdict, match="differs"):
        check_correct(torch, z, torch.tensor([1 + 0j, 2 - 1j]), Tol, "t")  # imaginary part wrong
    with pytest.raises(Verdict, match="differs"):
        check_correct(torch, torch.tensor([10000]), torch.tensor([10001]), Tol, "t")  # rtol would pass
    assert check_correct(torch, torch.tensor([True, False]), torch.tensor([True, False]), Tol, "t")[0] == 0


def test_check_correct_reports_the_worst_error_and_its_scale_and_rejects_just_beyond_tolerance():
    ref = torch.linspace(-3.0, 5.0, 1000)
    near = ref + 1e-5
    abs_err, rel_err = check_correct(torch, ref, near, Tol, "t")
    assert abs_err == pytest.approx(1e-5, rel=1e-2) and rel_err == pytest.approx(1e-5 / 5.0, rel=1e-2)
    far = ref.clone()
    far[717] += 2e-4 + 1e-4 * abs(float(ref[717]))  # just beyond atol + rtol * |ref|
    with pytest.raises(Verdict, match="differs: max abs err"):
        check_correct(torch, ref, far, Tol, "t")
    big = torch.tensor([2**40 + 1, 7])  # integers are compared exactly, never through float32
    with pytest.raises(Verdict, match="differs"):
        check_correct(torch, big, torch.tensor([2**40, 7]), Tol, "t")


def test_a_float64_output_computed_in_float32_is_incorrect_and_float64_reordering_is_not():
    torch.manual_seed(0)
    x = torch.randn(4096, dtype=torch.float64)
    ref = torch.tanh(x) * x
    in_float32 = (torch.tanh(x.float()) * x.float()).double()
    with pytest.raises(Verdict, match="tolerance 1e-09"):
        check_correct(torch, ref, in_float32, Tol, "t")
    reordered = x * torch.tanh(x) + 0.0  # float64, another order: within rounding
    check_correct(torch, ref, reordered, Tol, "t")
