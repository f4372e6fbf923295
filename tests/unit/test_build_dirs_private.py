"""The folder holding the candidates' build dirs is its owner's alone (red team round 69): a
sandbox's uid 0 is the host's where the evaluator runs as root, so a set-uid file it leaves in its
build dir (a host folder bound read-write) would run as root for any user who reached it."""

import stat

from warpk.evaluator.dispatch import folder_alone


def test_the_build_dirs_folder_is_made_and_kept_private(tmp_path):
    build_dir = tmp_path / "cache" / "torch_extensions" / "abc"
    with folder_alone(build_dir):
        pass
    assert stat.S_IMODE(build_dir.parent.stat().st_mode) == 0o700
    build_dir.parent.chmod(0o755)  # opened up by an earlier version, or by hand: shut again
    with folder_alone(build_dir):
        assert stat.S_IMODE(build_dir.parent.stat().st_mode) == 0o700
