"""Provenance reads the checkout it runs from without writing to it."""

import os
import subprocess

from workbench.records.provenance import git_commit


def test_reading_the_commit_leaves_the_checkouts_index_alone(tmp_path):
    # `git status` refreshes the index and rewrites it (under .git/index.lock) when a
    # file's stat changed: every run did so, and a user's own `git commit` at that moment
    # failed on the lock
    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    tracked = tmp_path / "tracked.txt"
    tracked.write_text("a")
    git("add", "tracked.txt")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "first")
    stat = tracked.stat()
    os.utime(tracked, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    index = tmp_path / ".git" / "index"
    before = index.read_bytes()
    assert git_commit(str(tmp_path)) == (git("rev-parse", "HEAD"), False)
    assert index.read_bytes() == before and not (tmp_path / ".git" / "index.lock").exists()
    git("status", "--porcelain")  # the plain command does rewrite it: the check can fail
    assert index.read_bytes() != before
