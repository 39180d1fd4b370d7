"""The catalog of schema rag as text lines: what two installs are compared by (tests/test_extension.py,
tests/test_install.py)."""

from __future__ import annotations

import re

import psycopg

# Everything a version defines, by name and text (internal RI trigger names carry OIDs: left out; an ACL
# is a set, its items sorted).
CATALOG = """
SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid))
       || ' acl '
       || coalesce((SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(p.proacl) AS a), '')
       || ' comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '')
FROM pg_proc AS p WHERE p.pronamespace = 'rag'::regnamespace
UNION ALL
SELECT 'member ' || e.extname || ' ' || pg_describe_object(d.classid, d.objid, d.objsubid)
FROM pg_depend AS d JOIN pg_extension AS e ON e.oid = d.refobjid
WHERE d.deptype = 'e' AND e.extname LIKE 'pgcite%'
UNION ALL
SELECT format('policy %s %s %s %s %s', tablename, policyname, roles, qual, with_check)
FROM pg_policies WHERE schemaname = 'rag'
UNION ALL
SELECT 'trigger ' || tgname || ' ' || pg_get_triggerdef(oid) FROM pg_trigger
WHERE NOT tgisinternal AND tgrelid::regclass::text LIKE 'rag.%'
UNION ALL
SELECT format('column %s.%s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull)
FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
WHERE c.relnamespace = 'rag'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'table acl ' || c.relname || ' '
       || coalesce((SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(c.relacl) AS a), '')
FROM pg_class AS c WHERE c.relnamespace = 'rag'::regnamespace
ORDER BY 1
"""


def catalog(conn: psycopg.Connection, installer: str | None = None) -> list[str]:
    """CATALOG without what only one kind of install has: extension membership lines, the bookkeeping
    tables of `pgcite install` (rag.install_*). `installer`: the role that ran the install script (owner of
    the functions that are not handed to pgcite_owner), written as <installer> in ACLs so that two installs
    by different roles compare."""
    lines = []
    for (line,) in conn.execute(CATALOG).fetchall():
        if line.startswith("member ") or re.search(r"\binstall_(version|migration)", line):
            continue
        if installer and " acl " in line:
            head, _, rest = line.partition(" acl ")
            if head == "table":  # table acl <relname> <items>
                name, _, items = rest.partition(" ")
                head, tail = f"table acl {name}", ""
            else:  # function ... acl <items> comment ...
                items, _, tail = rest.partition(" comment ")
                head, tail = f"{head} acl", f" comment {tail}"
            who = re.compile(rf"(?<![\w\"]){re.escape(installer)}(?=[=/]|$)")
            acl = ",".join(sorted(who.sub("<installer>", a) for a in items.split(",") if a))
            line = f"{head} {acl}{tail}"
        lines.append(line)
    return lines
