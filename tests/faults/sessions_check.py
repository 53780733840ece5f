"""Sessions: no session is expired while its client keeps being served (issue 29's session property).

A client learns that its session expired (SessionExpiredError) at some time `f`; the leader decided it at
or before `f`. A write the client had acknowledged at `c` was served by a node connected to a committing
leader, and it touched the session there (followers pass touches on every tickTime/2), so the leader's
deadline for the session was at least about `c + timeout`. An expiry learned before `c + timeout - margin`
was decided while the session was alive and served: an anomaly. Only the first SessionExpiredError of a
burst counts (the ones after it belong to the same dead session until a call succeeds again).

Only a write answered within `margin` of its invocation proves that: its node reached a committing leader
while the write was out, so the touch made when it arrived reached that leader too. A write that waited out
a partition on a cut-off node and went through after the heal was answered at `c`, but its touch came to a
leader that had not heard from the session for longer than its timeout; that leader may expire it a moment
after the write is applied (the close is a later entry than the write), as ZooKeeper's leader may.
"""

from __future__ import annotations

from typing import Any

EXPIRED = "SessionExpiredError"


def expired_while_active(records: dict[int, list[dict[str, Any]]], timeout_s: float, margin_s: float) -> list[str]:
    """One line per expiry a worker learned less than `timeout_s - margin_s` after an acknowledged write."""
    found = []
    for worker, rows in sorted(records.items()):
        last_ack_s: float | None = None
        for row in sorted(rows, key=lambda r: r["c"] if r["c"] is not None else r.get("f", r["i"])):
            if row["c"] is not None and row["k"] != "read" and row.get("ok"):
                if row["c"] - row["i"] <= margin_s:
                    last_ack_s = row["c"]
            elif row.get("why") == EXPIRED and "f" in row:
                if last_ack_s is not None and row["f"] - last_ack_s < timeout_s - margin_s:
                    found.append(
                        f"worker {worker}: session expired (learned at {row['f']:.3f}) "
                        f"{row['f'] - last_ack_s:.2f} s after its write acknowledged at {last_ack_s:.3f}"
                        f" (session timeout {timeout_s:g} s)"
                    )
                last_ack_s = None  # the rest of the burst belongs to the same expired session
    return found
