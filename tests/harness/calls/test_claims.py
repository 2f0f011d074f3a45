"""The claims table (`harness.calls.claims`): exclusive, lapsing, and one SQL statement per
operation on the path of an uncached call (issue 26: diskcache spent a transaction of five)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness.calls.claims import Claims, Holder, is_dead, owner


def test_claim_renew_and_release_are_one_statement_each(tmp_path: Path) -> None:
    claims = Claims(tmp_path / "claims")
    statements: list[str] = []
    claims._connection().set_trace_callback(statements.append)
    assert claims.claim("k", 60.0)
    claims.renew("k", 60.0)
    claims.release("k")
    claims.close()
    assert len(statements) == 3, statements


def test_a_claim_is_exclusive_until_released_or_lapsed(tmp_path: Path) -> None:
    claims = Claims(tmp_path / "claims")
    assert claims.claim("k", 60.0) and not claims.claim("k", 60.0)
    assert claims.holder("k") == owner()
    claims.release("k")
    assert claims.holder("k") is None and len(claims) == 0
    assert claims.claim("short", 0.05)
    time.sleep(0.1)
    assert claims.holder("short") is None  # lapsed: nobody holds it
    assert claims.claim("short", 60.0)
    claims.close()


def test_a_release_by_another_holder_leaves_the_claim(tmp_path: Path) -> None:
    claims = Claims(tmp_path / "claims")
    other = Holder("elsewhere", 1, "t")
    claims._connection().execute("INSERT INTO claims VALUES ('k', ?, ?, ?, ?)", (*other, 1e12))
    claims.release("k")
    assert claims.holder("k") == other
    assert claims.held_elsewhere("k")  # another host: its lease decides
    claims.close()


def test_a_dead_holders_claim_is_dropped(tmp_path: Path) -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    dead = Holder(owner().host, pid, "gone")
    assert is_dead(dead) and not is_dead(owner())
    claims = Claims(tmp_path / "claims")
    claims._connection().execute("INSERT INTO claims VALUES ('k', ?, ?, ?, ?)", (*dead, 1e12))
    assert not claims.held_elsewhere("k") and claims.holder("k") is None
    claims.close()
