"""A writer process for the concurrency and crash tests: remembers N notes through the owner, printing each
acknowledged id (`ACK <id> <index>`) only after the owner confirmed the commit."""

import sys
import uuid
from pathlib import Path

from mnemo.core.identity import detect_context
from mnemo.daemon.client import DaemonService


def main() -> None:
    home, root, tag, n = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    ctx = detect_context(root).to_dict()
    svc = DaemonService(home, client_name=f"writer-{tag}")
    svc.connect()
    print(f"OWNER {svc.owner['pid']}", flush=True)
    for i in range(n):
        # distinct random words: no two notes are near-duplicates (conflict detection stays out of the way)
        words = " ".join(uuid.uuid4().hex[:10] for _ in range(6))
        r = svc.remember(ctx, f"{words} {tag}x{i}")
        print(f"ACK {r['memory']['id']} {i} {r['status']}", flush=True)
    svc.close()


if __name__ == "__main__":
    main()
