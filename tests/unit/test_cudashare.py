"""Device memory across processes (warpk.evaluator.cudashare): on a GPU only."""

from __future__ import annotations

import array
import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

# The other process: imports the fd it is sent, answers with the sum and 2x the data in an
# allocation of its own, which it drops before its fd is read (the fd keeps it alive).
CHILD = r"""
import array, os, socket, torch
from warpk.evaluator import cudashare as cs
sock = socket.socket(fileno=int(os.environ["SOCK"]))
dev = torch.device("cuda:0"); torch.zeros(1, device=dev)
msg, fds, _, _ = sock.recvmsg(64, socket.CMSG_LEN(4))
fd = array.array("i", fds[0][2][:4])[0]
n = int(msg)
x = cs.import_fd(torch, dev, fd, n)[:n].view(torch.float32)
out, export = cs.allocate(torch, dev, n)
out[:n].view(torch.float32).copy_(x * 2)
torch.cuda.synchronize()
reply = export()
del out, export, x
sock.sendmsg([b"ok"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [reply]))])
sock.recv(1)
"""


def _send(sock, data: bytes, fd: int) -> None:
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])


def test_device_memory_crosses_to_another_process_and_back():
    torch = pytest.importorskip("torch")
    from warpk.evaluator import cudashare as cs

    dev = torch.device("cuda:0")
    n = 64 << 20
    mine, export = cs.allocate(torch, dev, n)
    x = mine[:n].view(torch.float32).uniform_()
    torch.cuda.synchronize()
    ours, theirs = socket.socketpair()
    env = {**os.environ, "SOCK": str(theirs.fileno())}
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, pass_fds=(theirs.fileno(),))
    theirs.close()
    fd = export()
    _send(ours, str(n).encode(), fd)
    os.close(fd)
    _, fds, _, _ = ours.recvmsg(8, socket.CMSG_LEN(4))
    reply = array.array("i", fds[0][2][:4])[0]
    got = cs.import_fd(torch, dev, reply, n)[:n].view(torch.float32).clone()
    os.close(reply)
    ours.send(b"x")
    assert child.wait(timeout=60) == 0
    assert torch.equal(got, x * 2)


def test_memory_is_given_back_when_the_last_view_goes():
    torch = pytest.importorskip("torch")
    from warpk.evaluator import cudashare as cs

    dev = torch.device("cuda:0")
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info(dev)[0]
    buffer, export = cs.allocate(torch, dev, 2 << 30)
    view = buffer[:1024]
    del buffer, export
    assert free_before - torch.cuda.mem_get_info(dev)[0] >= 2 << 30  # a view keeps it
    del view
    assert free_before - torch.cuda.mem_get_info(dev)[0] < 1 << 30


def test_what_is_not_an_allocation_of_the_announced_size_is_refused():
    torch = pytest.importorskip("torch")
    from warpk.evaluator import cudashare as cs

    dev = torch.device("cuda:0")
    small, export = cs.allocate(torch, dev, 2 << 20)
    # a memfd, /dev/null, an allocation smaller than announced
    for fd in (os.memfd_create("x"), os.open("/dev/null", os.O_RDONLY), export()):
        with pytest.raises(cs.CudaShareError):
            cs.import_fd(torch, dev, fd, 1 << 30)
        os.close(fd)
