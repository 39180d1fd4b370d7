"""Session 27 review: a hostile tenant role against the current main (0.9.0), the parts earlier reviews did
not cover. What held is listed in the helper's report; this module keeps the one defect it found.

Found: rag._answer_context (behind rag.answer, which every pgcite role may call) locks the rag.context row of
the id it is given (SELECT ... FOR UPDATE, as pgcite_owner) *before* it checks that the caller is a member of
that context's tenant. A context that a member of another tenant is answering in an open transaction (its
first reply checked: status retry, the row updated and locked until that transaction ends) therefore makes a
non-member's rag.answer wait for that other tenant's transaction, and with a lock_timeout fail with 55P03
(lock_not_available) instead of the 42704 ("context N not found") that every other id gives. So a member of
one tenant can tell, without waiting, which context ids of other tenants are being answered right now (a
probe per id, ids being one global sequence), and its own call is held up by another tenant's transaction.
docs/security.md promises that rag.answer answers "for a member of its tenant (42704 for anyone else, which
does not say whose it is)", and that a reader learns nothing of other tenants. The lock belongs after the
membership test (read the row's tenant first, check, then lock).
"""

from __future__ import annotations

import uuid

import pytest
from conftest import connect, fails, two_tenant_database

SFX = uuid.uuid4().hex[:6]
R = {k: f"s27_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
Q1 = "When does the alpha team vacuum its tables?"
Q2 = "Which index handles range queries on sortable data?"
CONTEXT = "SELECT status, context_id FROM rag.context(%s, 'alpha')"
ANSWER = 'SELECT status FROM rag.answer(%s, \'{"answer": "x"}\'::jsonb)'


@pytest.fixture(scope="module")
def sdb(pg):
    yield from two_tenant_database(pg, f"pgcite_s27_{SFX}", R)


def test_another_tenants_context_being_answered_is_42704_not_a_lock_wait(pg, sdb):
    """alpha's reader takes a context and sends a first (invalid) reply inside a transaction it leaves open:
    rag.answer returns status retry and the context row stays locked by alpha's transaction. bravo's writer
    calls rag.answer with that id under a 300 ms lock_timeout: it must get 42704 at once, exactly as for an id
    that does not exist or a context of another tenant nobody is answering. On the current code it waits for
    alpha's transaction and gets 55P03."""
    with connect(pg, sdb, R["reader"]) as alpha:
        status, ctx = alpha.execute(CONTEXT, (Q1,)).fetchone()
        assert status == "ready" and ctx is not None
        # a second context of alpha's that nobody is answering: the baseline a non-member must not tell apart
        idle_ctx = alpha.execute(CONTEXT, (Q2,)).fetchone()[1]
        with connect(pg, sdb, R["bravo"]) as bravo:
            bravo.execute("SET lock_timeout = '300ms'")
            sql = ANSWER
            # not being answered: 42704, as for an id that does not exist
            assert fails(bravo, sql, (idle_ctx,)) == "42704"
            assert fails(bravo, sql, (ctx + 1_000_000,)) == "42704"
            alpha.execute("BEGIN")
            try:
                assert alpha.execute(ANSWER, (ctx,)).fetchone()[0] == "retry"
                # alpha's transaction is open and holds its context row; bravo is no member of alpha
                got = fails(bravo, sql, (ctx,))
                assert got == "42704", (
                    f"a non-member's rag.answer of another tenant's context being answered gave {got} "
                    "(55P03: it locked the row before checking membership, and waited on alpha's transaction)"
                )
            finally:
                alpha.execute("ROLLBACK")
            # and after alpha's transaction ended: 42704 again (nothing of alpha's was changed by bravo)
            assert fails(bravo, sql, (ctx,)) == "42704"
        assert alpha.execute(
            "SELECT attempts, ask_id FROM rag.context WHERE context_id = %s", (ctx,)
        ).fetchone() == ([], None)


def test_a_non_member_waits_on_no_other_tenants_transaction(pg, sdb):
    """The same without a lock_timeout (statement_timeout 2 s as the bound): bravo's rag.answer of alpha's
    context must return 42704 at once, not wait until alpha's transaction ends."""
    with connect(pg, sdb, R["reader"]) as alpha:
        ctx = alpha.execute(CONTEXT, (Q1,)).fetchone()[1]
        alpha.execute("BEGIN")
        try:
            alpha.execute(ANSWER, (ctx,))
            with connect(pg, sdb, R["bravo"]) as bravo:
                bravo.execute("SET statement_timeout = '2s'")
                got = fails(bravo, ANSWER, (ctx,))
                assert got == "42704", f"bravo's call gave {got} (57014: it waited on alpha's transaction)"
        finally:
            alpha.execute("ROLLBACK")
