"""The host never touches what the candidate wrote (evaluator issue: worker output, folders, waits).

A candidate here knows where the parent used to read its log (`stderr.txt` in its working dir)
and what the parent does with its folder afterwards, and attacks both: a symlink there to a host
secret, a FIFO there (an open() of it blocks forever), a tree 3000 folders deep (recursive
removal raises), megabytes of output. Checked from OUTSIDE, in this test process: the record
holds only what the worker printed, bounded; no secret of the host reaches it; nothing hangs
(each test has a timeout far below "forever"); nothing is left in the host's temp folder.

Neither the measuring worker nor the compile pool's worker sees the parent's environment: the
candidate looks in os.environ, /proc/self/environ and /proc/1/environ (the sandbox's init).
"""

import secrets
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.unit.test_sandbox import HEAD, _forward, needs_bwrap
from tests.unit.test_sandbox import _measure as _measure_warm
from warpk.evaluator import identity
from warpk.evaluator.lane import compile_candidate
from warpk.evaluator.sandbox import Limits


def _measure(source: str, **kw):
    """As test_sandbox's, with workers of its own, closed before it returns: these tests look
    at what the host holds afterwards (its temp folders, its environment as the workers got it)."""
    return _measure_warm(source, fresh=True, **kw)

MODES = [pytest.param("bwrap", marks=needs_bwrap), "process"]
pytestmark = pytest.mark.timeout(180)  # the FIFO attack hung the old parent forever


@pytest.fixture
def host_tmp(tmp_path, monkeypatch):
    """The host's temp folder for this test alone: every host folder the evaluator makes for its
    workers lands here, so what is left afterwards can be listed."""
    from warpk.evaluator.pool_gate import run_gate

    run_gate()  # the run's gate folder lives as long as this process, wherever it was made first
    root = tmp_path / "host-tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root
    # whatever a failing evaluator left (a 3000-deep tree breaks pytest's own clean-up of old
    # temp dirs, for every later session on this machine): rm -rf copes, shutil.rmtree does not
    subprocess.run(["rm", "-rf", "--", str(root)], check=False, timeout=300)


def _import_then_die(body: str, marker: str) -> str:
    """A candidate that runs `body` at import in its working dir, prints `marker` last and dies."""
    return _forward("pass", prelude=(
        "import os, sys\n" + body + f"\nprint('noise ' * 50, file=sys.stderr)\n"
        f"print({marker!r}, file=sys.stderr, flush=True)\nos._exit(3)\n"
    ))  # fmt: skip


def _plant(kind: str, target: str = "") -> str:
    """Replace `stderr.txt` in the working dir (the old log) with a symlink or a FIFO."""
    make = f"os.symlink({target!r}, 'stderr.txt')" if kind == "symlink" else "os.mkfifo('stderr.txt')"
    return f"if os.path.lexists('stderr.txt'):\n    os.unlink('stderr.txt')\n{make}"


def _secret_file(tmp_path: Path) -> tuple[Path, str]:
    token = secrets.token_hex(12)
    path = tmp_path / "host-secret.txt"
    path.write_text(f"host secret {token}\n")
    return path, token


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_symlink_where_the_log_was_never_reads_a_host_file(mode, tmp_path, host_tmp):
    secret, token = _secret_file(tmp_path)
    marker = f"LAST-WORDS-{secrets.token_hex(4)}"
    record = _measure(_import_then_die(_plant("symlink", str(secret)), marker), sandbox=mode)
    assert record.status == "crashed", record.error
    assert token not in record.error and marker in record.error
    assert len(record.error) < 600
    assert not list(host_tmp.iterdir())


@pytest.mark.parametrize("mode", MODES)
def test_a_fifo_where_the_log_was_hangs_nothing(mode, host_tmp):
    marker = f"LAST-WORDS-{secrets.token_hex(4)}"
    start = time.monotonic()
    record = _measure(_import_then_die(_plant("fifo"), marker), sandbox=mode)
    assert record.status == "crashed" and marker in record.error, record.error
    assert time.monotonic() - start < 120
    assert not list(host_tmp.iterdir())


@pytest.mark.parametrize("mode", MODES)
def test_a_deep_tree_in_the_working_dir_is_gone_afterwards(mode, host_tmp):
    """3000 nested folders (recursive removal raises RecursionError) with 8 MiB at the bottom,
    plus a symlink to a host folder the removal must not follow."""
    keep = host_tmp.parent / "must-survive"
    keep.mkdir()
    (keep / "file.txt").write_text("still here")
    body = (
        f"os.symlink({str(keep)!r}, 'link-out')\n"
        "for _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "open('bottom.bin', 'wb').write(b'x' * (8 << 20))\n"
    )
    marker = f"LAST-WORDS-{secrets.token_hex(4)}"
    record = _measure(_import_then_die(body, marker), sandbox=mode)
    assert record.status == "crashed" and marker in record.error, record.error
    assert not list(host_tmp.iterdir()), "the candidate's folder was left on the host"
    assert (keep / "file.txt").read_text() == "still here"


@pytest.mark.parametrize("mode", MODES)
def test_a_flood_of_output_is_drained_and_only_its_tail_is_kept(mode, host_tmp):
    """64 MiB to stderr (far more than a pipe holds: the worker blocks unless the parent drains),
    then one last line: the record's reason ends with that line and stays short."""
    body = "chunk = 'y' * 65535 + '\\n'\nfor _ in range(1024):\n    sys.stderr.write(chunk)\n"
    marker = f"LAST-WORDS-{secrets.token_hex(4)}"
    start = time.monotonic()
    record = _measure(_import_then_die(body, marker), sandbox=mode)
    assert record.status == "crashed" and marker in record.error, record.error
    assert len(record.error) < 600 and "yyyy" not in record.error
    assert time.monotonic() - start < 120
    assert not list(host_tmp.iterdir())


# --- the compile pool's worker --------------------------------------------------------------
def _compile(source: str, mode: str, build_dir: Path):
    limits = Limits(memory_limit_gb=2.0, threads=1, address_space_limit=True)
    return compile_candidate(source, build_dir, limits, {}, mode, 60.0, "cuda")


@pytest.mark.parametrize("mode", MODES)
def test_the_compile_pool_is_not_hung_or_fed_host_files_either(mode, tmp_path, host_tmp):
    secret, token = _secret_file(tmp_path)
    build_dir = tmp_path / "cache" / "torch_extensions" / "abc"
    start = time.monotonic()
    for kind in ("fifo", "symlink"):
        marker = f"LAST-WORDS-{secrets.token_hex(4)}"
        reply, tail = _compile(_import_then_die(_plant(kind, str(secret)), marker), mode, build_dir)
        assert reply is None and marker in tail and token not in tail, (kind, tail)
    assert time.monotonic() - start < 120
    assert not list(host_tmp.iterdir())


@pytest.mark.parametrize("mode", MODES)
def test_the_build_dir_is_only_made_by_the_parent_never_read(mode, tmp_path, host_tmp):
    """The build dir (a cache per source hash, shared by the compile pool and the lane) is the
    one host folder the candidate writes: a FIFO and a symlink planted in it change nothing for
    the parent, which only makes the folder (a read of the FIFO would hang here)."""
    build_dir = tmp_path / "cache" / "torch_extensions" / "abc"
    body = ("d = os.environ['TORCH_EXTENSIONS_DIR']\n"
            "if not os.path.lexists(os.path.join(d, 'trap.fifo')):\n"
            "    os.mkfifo(os.path.join(d, 'trap.fifo'))\n"
            "    os.symlink('/etc', os.path.join(d, 'trap.link'))\n")
    for _ in range(2):  # the second time the folder and the traps are there already
        reply, tail = _compile(_import_then_die(body, "planted"), mode, build_dir)
        assert reply is None and "planted" in tail
    assert {p.name for p in build_dir.iterdir()} >= {"trap.fifo", "trap.link"}


FD_GIFT = """import os, socket, stat

from warpk.evaluator import protocol as wire

gift = os.memfd_create("warpk-fd-gift")
os.ftruncate(gift, 8 << 20)
for name in os.listdir("/proc/self/fd"):  # its link to the parent, wherever the harness keeps it
    fd = int(name)
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            wire.send(socket.socket(fileno=os.dup(fd)), wire.Reply("ok"), gift)
    except OSError:
        pass


class ModelNew:
    pass
"""


def _memfds_here() -> list[str]:
    links = []
    for name in Path("/proc/self/fd").iterdir():
        try:
            links.append(str(name.readlink()))
        except OSError:
            pass
    return [link for link in links if "warpk-fd-gift" in link]


@pytest.mark.parametrize("mode", MODES)
def test_an_fd_a_compile_worker_attaches_to_its_reply_is_not_kept(mode, tmp_path):
    """Red team round 16: a candidate in the compile pool sent its Reply with a memfd attached;
    the parent kept it for the rest of the run, its pages charged to the sandboxes' memory budget,
    and two such samples made every later honest candidate `crashed`."""
    reply, tail = _compile(FD_GIFT, mode, tmp_path / "build")
    assert reply is not None and reply.status == "ok", tail  # its forged Reply arrived
    assert _memfds_here() == []


# --- the parent's environment ----------------------------------------------------------------
ENV_PROBE = '''import os

NAME = "WARPK_TEST_SECRET"


def _probe():
    seen = ["os.environ:" + ("LEAK" if NAME in os.environ else "clean")]
    for where in ("/proc/self/environ", "/proc/1/environ"):
        try:
            data = open(where, "rb").read()
        except OSError as err:
            seen.append(f"{where}:unreadable({err.errno})")
            continue
        seen.append(f"{where}:" + ("LEAK" if NAME.encode() in data else "clean")
                    + (":read" if b"PATH=" in data else ":empty"))
    return " ".join(seen)


raise RuntimeError("ENV-PROBE " + _probe())
'''


def _assert_clean(text: str, mode: str) -> None:
    assert "ENV-PROBE" in text, text
    assert "LEAK" not in text, text
    assert "os.environ:clean" in text and "/proc/self/environ:clean:read" in text, text
    if mode == "bwrap":  # pid 1 is the sandbox's own init, started with the scrubbed environment;
        # a worker dropped to nobody (warpk.evaluator.identity) cannot read root's init's at all
        unreadable = identity.drops() and "/proc/1/environ:unreadable(13)" in text
        assert "/proc/1/environ:clean:read" in text or unreadable, text


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_no_worker_sees_the_parents_environment(mode, tmp_path, monkeypatch):
    token = secrets.token_hex(12)
    monkeypatch.setenv("WARPK_TEST_SECRET", token)
    source = HEAD + ENV_PROBE + "\nclass ModelNew(nn.Module):\n    pass\n"
    record = _measure(source, sandbox=mode)
    assert record.status == "compile_error" and token not in record.error
    _assert_clean(record.error, mode)
    reply, _ = _compile(source, mode, tmp_path / "build")
    assert reply is not None and reply.status == "compile_error" and token not in reply.error
    _assert_clean(reply.error, mode)


@needs_bwrap
def test_the_working_dir_is_a_capped_tmpfs_inside_the_sandbox(monkeypatch, host_tmp):
    """Under bwrap the working dir is the sandbox's own tmpfs (host memory no RSS shows), capped:
    a candidate that writes past the cap gets ENOSPC, and nothing lands on the host."""
    from warpk.evaluator import sandbox

    monkeypatch.setattr(sandbox, "SCRATCH_LIMIT_BYTES", 64 << 20)
    body = "open('fill.bin', 'wb').write(b'x' * (128 << 20))"  # twice the cap, in its working dir
    record = _measure(_forward("pass", prelude=body + "\n"))
    assert record.status == "compile_error" and "No space left on device" in record.error, record.error
    assert not list(host_tmp.iterdir())
