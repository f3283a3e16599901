"""`hebbs export -o FILE` (issue 26, item 12): the real CLI and daemon. A symlink planted at FILE is
replaced, not followed; a file another user created there (0666) is replaced by the user's own 0600
file, never written into."""

from __future__ import annotations

import json
import os
import stat

pytest_plugins = ["daemon_fixtures"]


def test_export_replaces_a_planted_symlink_and_another_users_file(shared_daemon, tmp_path):
    with shared_daemon.client(global_=True) as client:
        client.remember("The door code is 8842.")
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o1777)  # like /tmp: anyone may create files, only their owner may remove them
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's own file\n")
    link = folder / "linked.jsonl"
    link.symlink_to(victim)
    done = shared_daemon.hebbs("export", "--global", "-o", str(link))
    assert victim.read_text() == "the victim's own file\n", "the export was written through the symlink"
    assert not link.is_symlink() and "8842" in link.read_text()
    assert stat.S_IMODE(link.stat().st_mode) == 0o600 and "exported" in done.stdout

    planted = folder / "planted.jsonl"
    planted.write_text("")
    os.chmod(planted, 0o666)
    os.chown(planted, 65534, 65534)  # created beforehand by user nobody (tests run as root)
    shared_daemon.hebbs("export", "--global", "-o", str(planted))
    info = planted.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (os.getuid(), 0o600)
    assert any("8842" in json.dumps(json.loads(line)) for line in planted.read_text().splitlines())
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_failed_export_leaves_the_named_file_as_it_was(shared_daemon, tmp_path):
    target = tmp_path / "kept.jsonl"
    target.write_text("an earlier export\n")
    done = shared_daemon.hebbs("export", "--vault", str(tmp_path / "no-such-vault"), "-o", str(target), check=False)
    assert done.returncode != 0
    assert target.read_text() == "an earlier export\n"
