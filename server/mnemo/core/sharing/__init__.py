"""Sharing: snapshots (snapshot_file.py: the file format, written atomically and validated completely;
snapshot.py: export / diff / merge) and branch memory (branches.py: diff / merge / delete, merged-branch
detection). Every merge is planned first and applied in ONE transaction."""

from mnemo.core.sharing.branches import branch_delete, branch_diff, branch_merge, merged_branches
from mnemo.core.sharing.snapshot import (
    STRATEGIES,
    _remote_memory,
    check_strategy,
    diff_snapshot,
    export_snapshot,
    merge_snapshot,
    plan_merge,
)
from mnemo.core.sharing.snapshot_file import (
    FORMAT_VERSION,
    MAGIC,
    canonical,
    read_snapshot,
    sha256,
    write_atomic,
)

__all__ = ["FORMAT_VERSION", "MAGIC", "STRATEGIES", "_remote_memory", "branch_delete", "branch_diff", "branch_merge",
           "canonical", "check_strategy", "diff_snapshot", "export_snapshot", "merge_snapshot", "merged_branches",
           "plan_merge", "read_snapshot", "sha256", "write_atomic"]
