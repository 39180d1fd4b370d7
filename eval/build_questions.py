#!/usr/bin/env python3
"""Source of the pgcite evaluation questions; writes pgdocs-dev.jsonl, tiny.jsonl and offtopic.jsonl.

The questions were written by reading the PostgreSQL 15 manual chapters only
(no retrieval system was run on them).  Edit the tables below, then run
    python3 eval/build_questions.py && python3 eval/check_questions.py

Split rule (deterministic): within each kind, questions are taken in the order
of this file (chapter by chapter: idx, fts, mnt, bak; for out_of_corpus the
hard negatives first, then the easy ones) and alternately assigned
calibration, test, calibration, ...  So each kind alternates within each
chapter and is split about half/half overall.  tiny.jsonl is all "test".
DEV_CALIBRATION and OFFTOPIC_CALIBRATION (session 7), OFFTOPIC_CALIBRATION_2 (session 8) and
OFFTOPIC_CALIBRATION_3 (session 10) are appended
after them, all "calibration": the test split stays the one earlier rounds scored.
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# (id, kind, question, expect)
A, T, O = "answerable", "typo", "out_of_corpus"  # noqa: E741

DEV = [
    # ---------------- Chapter 11: Indexes ----------------
    (
        "idx-001",
        A,
        "I look rows up by id in a big table and every query reads the whole table. "
        "How do I add an index on that column, and how do I remove it later if it turns out to be useless?",
        ["INDEXES-INTRO"],
    ),
    (
        "idx-002",
        A,
        "Can an ordinary index speed up a LIKE 'abc%' search? What about LIKE '%abc'?",
        ["INDEXES-TYPES-BTREE", "INDEXES-OPCLASS"],
    ),
    (
        "idx-003",
        A,
        "What kinds of WHERE conditions can a hash index actually be used for?",
        ["INDEXES-TYPES-HASH"],
    ),
    (
        "idx-004",
        A,
        "When does a BRIN index make sense, and what does it store for each block range?",
        ["INDEXES-TYPES-BRIN"],
    ),
    (
        "idx-005",
        A,
        "With an index on (a, b, c), how much of the index is scanned for WHERE a = 5 AND b >= 42 AND c < 77, "
        "and does the condition on c reduce that?",
        ["INDEXES-MULTICOLUMN"],
    ),
    (
        "idx-006",
        A,
        "My query sorts with ORDER BY x ASC, y DESC. How should I define a two-column index so it can "
        "return rows in that order without a separate sort step?",
        ["INDEXES-ORDERING"],
    ),
    (
        "idx-007",
        A,
        "I have an index on (a, b). Why can't a query with WHERE a = 5 OR b = 6 use it directly, "
        "and how does PostgreSQL handle OR conditions using several indexes?",
        ["INDEXES-BITMAP-SCANS"],
    ),
    (
        "idx-008",
        A,
        "Should I create an index on my primary key or unique column myself to make lookups fast?",
        ["INDEXES-UNIQUE"],
    ),
    (
        "idx-009",
        A,
        "How do I make case-insensitive lookups like WHERE lower(email) = 'bob@example.com' use an index?",
        ["INDEXES-EXPRESSIONAL"],
    ),
    (
        "idx-010",
        A,
        "What does the INCLUDE clause do when creating an index, and when is it worth adding extra columns that way?",
        ["INDEXES-INDEX-ONLY-SCANS"],
    ),
    (
        "idx-011",
        A,
        "When should I build a B-tree index with varchar_pattern_ops instead of the default operator class, "
        "and can that index still serve < and > comparisons?",
        ["INDEXES-OPCLASS", "INDEXES-TYPES-BTREE"],
    ),
    (
        "idx-012",
        A,
        "While testing whether an index would help, how can I stop the planner from picking a sequential scan?",
        ["INDEXES-EXAMINE"],
    ),
    (
        "idx-013",
        T,
        "wich index type can do nearest-neighbour serches like ORDER BY location <-> point '(101,456)' LIMIT 10?",
        ["INDEXES-TYPE-GIST", "INDEXES-TYPE-SPGIST"],
    ),
    (
        "idx-014",
        T,
        "how do i use a partail index to enforce uniqeness only among the rows where success is true?",
        ["INDEXES-PARTIAL"],
    ),
    (
        "idx-015",
        T,
        "my query compares with a diffrent COLLATE than the column's colation - can the existing index on that column still be used?",
        ["INDEXES-COLLATIONS"],
    ),
    # ---------------- Chapter 12: Full Text Search ----------------
    (
        "fts-001",
        A,
        "Why would I use full text search instead of LIKE or regular expressions to search documents?",
        ["TEXTSEARCH-INTRO"],
    ),
    (
        "fts-002",
        A,
        "Why does 'fat cats ate fat rats'::tsvector @@ to_tsquery('fat & rat') return false, "
        "while the same match with to_tsvector returns true?",
        ["TEXTSEARCH-MATCHING"],
    ),
    (
        "fts-003",
        A,
        "How can different databases in the same cluster use different default text search configurations?",
        ["TEXTSEARCH-INTRO-CONFIGURATIONS"],
    ),
    (
        "fts-004",
        A,
        "Should I index an expression like to_tsvector('english', body) or store a separate tsvector column? "
        "What are the trade-offs?",
        ["TEXTSEARCH-TABLES-INDEX"],
    ),
    (
        "fts-005",
        A,
        "Why did to_tsvector drop the words 'a', 'on' and 'it' and the dash from my sentence, and turn 'rats' into 'rat'?",
        ["TEXTSEARCH-PARSING-DOCUMENTS"],
    ),
    (
        "fts-006",
        A,
        "Which function should I use to turn whatever a user types into a search box into a tsquery "
        "without ever getting a syntax error?",
        ["TEXTSEARCH-PARSING-QUERIES"],
    ),
    (
        "fts-007",
        A,
        "How do I stop long documents from ranking higher just because they contain more words?",
        ["TEXTSEARCH-RANKING"],
    ),
    (
        "fts-008",
        A,
        "How can I show an excerpt of each matching document with the search terms highlighted, "
        "and is that output safe to put straight into a web page?",
        ["TEXTSEARCH-HEADLINE"],
    ),
    (
        "fts-009",
        A,
        "How can I make searches for 'supernovae' also match 'sn' without rebuilding my index?",
        ["TEXTSEARCH-QUERY-REWRITING"],
    ),
    (
        "fts-010",
        A,
        "The English stemmer turns 'Paris' into 'pari'. How do I keep it indexed as 'paris'?",
        ["TEXTSEARCH-SYNONYM-DICTIONARY"],
    ),
    (
        "fts-011",
        A,
        "Which index type is better for full text search, GIN or GiST, and why?",
        ["TEXTSEARCH-INDEXES"],
    ),
    (
        "fts-012",
        A,
        "Is there a maximum size for a tsvector value, or a limit on how many positions are stored per word?",
        ["TEXTSEARCH-LIMITATIONS"],
    ),
    (
        "fts-013",
        T,
        "how do i keep a tsvectr column up to date automaticaly when the title or body text changes?",
        ["TEXTSEARCH-TABLES-INDEX", "TEXTSEARCH-UPDATE-TRIGGERS"],
    ),
    (
        "fts-014",
        T,
        "how can i test what lexemes a singel dictionery returns for one word, ts_lexise?",
        ["TEXTSEARCH-DICTIONARY-TESTING"],
    ),
    # ---------------- Chapter 25: Routine Database Maintenance Tasks ----------------
    (
        "mnt-001",
        A,
        "What is the difference between plain VACUUM and VACUUM FULL, and which one should I run routinely?",
        ["VACUUM-BASICS", "VACUUM-FOR-SPACE-RECOVERY"],
    ),
    (
        "mnt-002",
        A,
        "I deleted most rows from a table but its file on disk is still just as big. "
        "Why, and how do I actually give the space back to the operating system?",
        ["VACUUM-FOR-SPACE-RECOVERY"],
    ),
    (
        "mnt-003",
        A,
        "If I empty a table completely every night, is it better to DELETE everything and then VACUUM, or to use TRUNCATE?",
        ["VACUUM-FOR-SPACE-RECOVERY"],
    ),
    (
        "mnt-004",
        A,
        "Autovacuum never seems to analyze my partitioned table. Why, and what should I do about it?",
        ["VACUUM-FOR-STATISTICS", "AUTOVACUUM"],
    ),
    (
        "mnt-005",
        A,
        "Which columns need their planner statistics refreshed more often, say a last-modified timestamp "
        "versus a column of page URLs?",
        ["VACUUM-FOR-STATISTICS"],
    ),
    (
        "mnt-006",
        A,
        "How does vacuuming help index-only scans avoid visiting the table?",
        ["VACUUM-FOR-VISIBILITY-MAP", "VACUUM-BASICS"],
    ),
    (
        "mnt-007",
        A,
        "Why does PostgreSQL have to freeze old rows, and at minimum how often must every table be vacuumed to stay safe?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-008",
        A,
        "How can I check how close each of my databases is to transaction ID wraparound?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-009",
        A,
        "What are multixact IDs, and can they run out or wrap around like transaction IDs do?",
        ["VACUUM-FOR-MULTIXACT-WRAPAROUND"],
    ),
    (
        "mnt-010",
        A,
        "My autovacuum runs keep getting cancelled before they finish. What could be interrupting them?",
        ["AUTOVACUUM"],
    ),
    (
        "mnt-011",
        A,
        "When is it worth rebuilding B-tree indexes periodically, and how can I do it without locking the table exclusively?",
        ["ROUTINE-REINDEX"],
    ),
    (
        "mnt-012",
        A,
        "How should I rotate the server's log files so they don't grow forever?",
        ["LOGFILE-MAINTENANCE"],
    ),
    (
        "mnt-013",
        T,
        "what does vacum_freeze_min_age control, and why not just set it very low so vacum freeze happens early?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-014",
        T,
        "getting 'database is not accepting commands to avoid wraparund data loss' - do i really have to stop the "
        "postmaster and vacuum in single-user mode?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-015",
        T,
        "how does autovaccum decide that a table needs vaccuming, what is the treshold formula?",
        ["AUTOVACUUM"],
    ),
    # ---------------- Chapter 26: Backup and Restore ----------------
    (
        "bak-001",
        A,
        "Can people keep using the database while pg_dump runs, and will the dump be consistent?",
        ["BACKUP-DUMP"],
    ),
    (
        "bak-002",
        A,
        "How do I make a psql restore of a plain-text dump stop at the first error, or roll back completely if anything fails?",
        ["BACKUP-DUMP-RESTORE"],
    ),
    (
        "bak-003",
        A,
        "pg_dump didn't include my roles and tablespaces. How do I back those up?",
        ["BACKUP-DUMP-ALL"],
    ),
    (
        "bak-004",
        A,
        "My dump would be larger than the maximum file size my filesystem allows. What can I do?",
        ["BACKUP-DUMP-LARGE"],
    ),
    (
        "bak-005",
        A,
        "Without WAL archiving, can I get a usable backup by running tar on the data directory while the server keeps running?",
        ["BACKUP-FILE"],
    ),
    (
        "bak-006",
        A,
        "Can I combine a pg_dump file with archived WAL files to do point-in-time recovery?",
        ["CONTINUOUS-ARCHIVING", "BACKUP-LOWLEVEL-BASE-BACKUP"],
    ),
    (
        "bak-007",
        A,
        "Which configuration settings do I need to change to start archiving WAL files?",
        ["BACKUP-ARCHIVING-WAL"],
    ),
    (
        "bak-008",
        A,
        "My server writes very little WAL, so recent transactions can sit for hours before they reach the archive. "
        "How can I limit that delay?",
        ["BACKUP-ARCHIVING-WAL"],
    ),
    (
        "bak-009",
        A,
        "Someone dropped an important table at 5:15 PM. How do I restore the cluster to the state just before that?",
        ["BACKUP-PITR-RECOVERY"],
    ),
    (
        "bak-010",
        A,
        "After a point-in-time recovery, how does PostgreSQL keep the WAL written afterwards from overwriting "
        "the WAL of the original history?",
        ["BACKUP-TIMELINES"],
    ),
    (
        "bak-011",
        A,
        "When I take a backup with pg_backup_start and pg_backup_stop, what am I supposed to do with the values pg_backup_stop returns?",
        ["BACKUP-LOWLEVEL-BASE-BACKUP"],
    ),
    (
        "bak-012",
        A,
        "Which files and directories can I leave out when copying the data directory for a base backup?",
        ["BACKUP-LOWLEVEL-BASE-BACKUP-DATA"],
    ),
    (
        "bak-013",
        A,
        "Once a base backup has finished and been archived, which older archived WAL files can I safely delete?",
        ["BACKUP-BASE-BACKUP"],
    ),
    (
        "bak-014",
        T,
        "if i run pg_basebakup with -X, do i still need the wal archive to restore that backup?",
        ["BACKUP-STANDALONE"],
    ),
    (
        "bak-015",
        T,
        "why should i take a new base bakup after creating a tablspace when using continous archiving?",
        ["CONTINUOUS-ARCHIVING-CAVEATS"],
    ),
    # ---------------- Out of corpus: hard negatives (other chapters, corpus vocabulary) ----------------
    (
        "ooc-001",
        O,
        "How do I edit pg_hba.conf so the backup user can connect from another host with scram-sha-256 password authentication?",
        [],
    ),
    (
        "ooc-002",
        O,
        "How do I set up a streaming replication standby with primary_conninfo so it continuously receives WAL from the primary?",
        [],
    ),
    (
        "ooc-003",
        O,
        "How do I create a publication and a subscription to logically replicate only a few tables' changes to another server?",
        [],
    ),
    (
        "ooc-004",
        O,
        "How do I write an AFTER DELETE trigger that copies each deleted row into an audit table before vacuum removes it?",
        [],
    ),
    (
        "ooc-005",
        O,
        "What is the syntax to create a table partitioned by range on a date column and attach a new partition every month, "
        "and do indexes created on the parent apply to the partitions?",
        [],
    ),
    (
        "ooc-006",
        O,
        "How large should I set shared_buffers so that my most-used indexes stay cached in memory?",
        [],
    ),
    (
        "ooc-007",
        O,
        "How do I grant a backup role read-only SELECT access to all tables in a schema, including tables created in the "
        "future, so it can run pg_dump without being superuser?",
        [],
    ),
    (
        "ooc-008",
        O,
        "For a GIN index on a jsonb column, what is the difference between the jsonb_ops and jsonb_path_ops operator classes?",
        [],
    ),
    (
        "ooc-009",
        O,
        "How do I set up postgres_fdw with CREATE SERVER and a user mapping so I can query a tsvector column stored on another PostgreSQL server?",
        [],
    ),
    (
        "ooc-010",
        O,
        "What does checkpoint_completion_target control, and what value is recommended to spread out checkpoint I/O while WAL is being written?",
        [],
    ),
    (
        "ooc-011",
        O,
        "How should I set work_mem so that ORDER BY sorts that cannot use an index don't spill to disk?",
        [],
    ),
    # ---------------- Out of corpus: easy negatives ----------------
    ("ooc-012", O, "What is the capital of Australia?", []),
    ("ooc-013", O, "How long should I boil an egg to get a soft, runny yolk?", []),
    ("ooc-014", O, "Who painted the Mona Lisa?", []),
]

# ---------------- Session 6 (issue #11, round 3): more calibration power ----------------
# 56 questions over the same four chapters (52 answerable, 4 typo), written from the sections' own text
# (answer_has copied from it) before pgcite was run on any of them; none shaped after a known miss. Appended
# after the questions above, so the split rule leaves every earlier question's split as it was.
DEV += [
    # ---- Chapter 11: Indexes ----
    (
        "idx-016",
        A,
        "Which index types support index-only scans, and why can't a GIN index be used for one?",
        ["INDEXES-INDEX-ONLY-SCANS"],
    ),
    (
        "idx-017",
        A,
        "Can a unique index be made to treat NULL values as equal, so that only one NULL is allowed?",
        ["INDEXES-UNIQUE", "INDEXES-PARTIAL"],
    ),
    ("idx-018", A, "Which index types can be declared unique?", ["INDEXES-UNIQUE"]),
    (
        "idx-019",
        A,
        "Why doesn't my prepared statement WHERE x < $1 use the partial index defined WHERE x < 2?",
        ["INDEXES-PARTIAL"],
    ),
    (
        "idx-020",
        A,
        "Should I create one partial index per category value instead of a single index on the table?",
        ["INDEXES-PARTIAL"],
    ),
    (
        "idx-021",
        A,
        "Why do I have to run ANALYZE before experimenting with which indexes my queries use?",
        ["INDEXES-EXAMINE"],
    ),
    (
        "idx-022",
        A,
        "Why is it misleading to decide on indexes using a very small test table?",
        ["INDEXES-EXAMINE"],
    ),
    (
        "idx-023",
        A,
        "How do I create a B-tree index that stores NULL values before the other values?",
        ["INDEXES-ORDERING"],
    ),
    (
        "idx-024",
        A,
        "Which operators can the built-in GIN operator class for arrays accelerate?",
        ["INDEXES-TYPES-GIN"],
    ),
    (
        "idx-025",
        A,
        "How can I index first_name || ' ' || last_name so that lookups by full name are fast?",
        ["INDEXES-EXPRESSIONAL"],
    ),
    (
        "idx-026",
        A,
        "What do expression indexes cost, and when are they worth having?",
        ["INDEXES-EXPRESSIONAL"],
    ),
    ("idx-027", T, "wat kinds of data structres can an SP-GiST indx implement?", ["INDEXES-TYPE-SPGIST"]),
    (
        "idx-028",
        A,
        "If I create a unique index with INCLUDE (y), is uniqueness enforced on y as well?",
        ["INDEXES-INDEX-ONLY-SCANS"],
    ),
    # ---- Chapter 12: Full Text Search ----
    (
        "fts-015",
        A,
        "Which psql commands list text search dictionaries, parsers and templates?",
        ["TEXTSEARCH-PSQL"],
    ),
    (
        "fts-016",
        A,
        "How can I find the most frequent words in my tsvector column, for example to pick stop words?",
        ["TEXTSEARCH-STATISTICS"],
    ),
    (
        "fts-017",
        A,
        "Stop words are not stored in a tsvector, so do they still change how documents are ranked?",
        ["TEXTSEARCH-STOPWORDS"],
    ),
    (
        "fts-018",
        A,
        "I edited a dictionary's stop-word file. How do I make sessions that are already connected "
        "pick up the new contents?",
        ["TEXTSEARCH-SIMPLE-DICTIONARY"],
    ),
    (
        "fts-019",
        A,
        "Where does PostgreSQL look for the stop-word file of a simple dictionary, and what format "
        "must it have?",
        ["TEXTSEARCH-SIMPLE-DICTIONARY"],
    ),
    ("fts-020", A, "Do I need to reindex after changing a thesaurus dictionary?", ["TEXTSEARCH-THESAURUS"]),
    (
        "fts-021",
        A,
        "What steps do I follow to use a Hunspell dictionary downloaded from OpenOffice?",
        ["TEXTSEARCH-ISPELL-DICTIONARY"],
    ),
    (
        "fts-022",
        A,
        "How many token types does the built-in text search parser recognize?",
        ["TEXTSEARCH-PARSERS"],
    ),
    (
        "fts-023",
        A,
        "Why should I wrap columns in coalesce when I concatenate title and body into one document "
        "for searching?",
        ["TEXTSEARCH-DOCUMENT", "TEXTSEARCH-TABLES-SEARCH"],
    ),
    (
        "fts-024",
        A,
        "How can I tell whether a tsquery consists only of stop words before I run it?",
        ["TEXTSEARCH-MANIPULATE-TSQUERY"],
    ),
    (
        "fts-025",
        A,
        "How do I change the default text search configuration for just my current session?",
        ["TEXTSEARCH-CONFIGURATION", "TEXTSEARCH-INTRO-CONFIGURATIONS"],
    ),
    (
        "fts-026",
        T,
        "wat does a text serch dictionry return for a stopword, and for a word it doesnt know?",
        ["TEXTSEARCH-DICTIONARIES"],
    ),
    (
        "fts-027",
        A,
        "Can I run a full text search on a table that has no index at all?",
        ["TEXTSEARCH-TABLES-SEARCH"],
    ),
    # ---- Chapter 25: Routine Database Maintenance Tasks ----
    ("mnt-016", A, "For what reasons does every table need to be vacuumed regularly?", ["VACUUM-BASICS"]),
    (
        "mnt-017",
        A,
        "Can my application keep running SELECT and UPDATE on a table while a plain VACUUM processes it?",
        ["VACUUM-BASICS"],
    ),
    (
        "mnt-018",
        A,
        "Do GiST or GIN indexes bloat the way B-tree indexes can, and what should I keep an eye on?",
        ["ROUTINE-REINDEX"],
    ),
    (
        "mnt-019",
        A,
        "How much extra disk space does VACUUM FULL need while it rewrites a table?",
        ["VACUUM-FOR-SPACE-RECOVERY"],
    ),
    (
        "mnt-020",
        A,
        "If I turn autovacuum off, how often should I schedule VACUUM myself?",
        ["VACUUM-FOR-SPACE-RECOVERY"],
    ),
    (
        "mnt-021",
        A,
        "A column used in many WHERE clauses has a very irregular distribution. How do I make ANALYZE "
        "collect a finer histogram for it?",
        ["VACUUM-FOR-STATISTICS"],
    ),
    (
        "mnt-022",
        A,
        "Does autovacuum keep the statistics of foreign tables up to date?",
        ["VACUUM-FOR-STATISTICS"],
    ),
    ("mnt-023", A, "What happens if I set vacuum_freeze_table_age to 0?", ["VACUUM-FOR-WRAPAROUND"]),
    (
        "mnt-024",
        A,
        "Where are the members of a multixact stored, and how can I see which transactions belong to one?",
        ["VACUUM-FOR-MULTIXACT-WRAPAROUND"],
    ),
    (
        "mnt-025",
        A,
        "When multixact IDs run out, are all write transactions blocked as with transaction IDs?",
        ["VACUUM-FOR-MULTIXACT-WRAPAROUND"],
    ),
    ("mnt-026", T, "does autovacum still work if i turn track_counts of?", ["AUTOVACUUM"]),
    ("mnt-027", A, "Who vacuums and analyzes temporary tables?", ["AUTOVACUUM"]),
    (
        "mnt-028",
        A,
        "Besides index-only scans, what does the visibility map save VACUUM itself?",
        ["VACUUM-FOR-VISIBILITY-MAP"],
    ),
    # ---- Chapter 26: Backup and Restore ----
    (
        "bak-016",
        A,
        "How do I tell pg_dump which server, port and user name to connect with?",
        ["BACKUP-DUMP"],
    ),
    (
        "bak-017",
        A,
        "Can a pg_dump file be loaded into a newer PostgreSQL version or onto a machine with a "
        "different architecture?",
        ["BACKUP-DUMP"],
    ),
    (
        "bak-018",
        A,
        "Before restoring a plain-text dump with psql, how should I create the target database?",
        ["BACKUP-DUMP-RESTORE"],
    ),
    (
        "bak-019",
        A,
        "What should I run after restoring a dump so that the planner has good statistics?",
        ["BACKUP-DUMP-RESTORE"],
    ),
    (
        "bak-020",
        A,
        "How do I copy a database from one server to another without writing a dump file in between?",
        ["BACKUP-DUMP-RESTORE"],
    ),
    (
        "bak-021",
        A,
        "How can I make pg_dump of a large database faster by dumping several tables at once?",
        ["BACKUP-DUMP-LARGE"],
    ),
    (
        "bak-022",
        A,
        "Can I back up or restore a single table by copying its files from the data directory?",
        ["BACKUP-FILE"],
    ),
    (
        "bak-023",
        A,
        "Why does the second rsync pass of a file system backup need --checksum?",
        ["BACKUP-FILE"],
    ),
    ("bak-024", A, "What do %p and %f stand for in archive_command?", ["BACKUP-ARCHIVING-WAL"]),
    (
        "bak-025",
        A,
        "What exit status must my archive command return, and what happens when it returns nonzero?",
        ["BACKUP-ARCHIVING-WAL"],
    ),
    (
        "bak-026",
        A,
        "How do I compress archived WAL files, and how are they read back during recovery?",
        ["COMPRESSED-ARCHIVE-LOGS"],
    ),
    (
        "bak-027",
        A,
        "What is written in the backup history file that a base backup creates?",
        ["BACKUP-BASE-BACKUP"],
    ),
    (
        "bak-028",
        A,
        "How do I recover into the timeline that was current when the base backup was taken instead of "
        "the latest one?",
        ["BACKUP-TIMELINES"],
    ),
    (
        "bak-029",
        T,
        "why would i use a scrpt as archive_comand, and how do i see its eror messages?",
        ["BACKUP-SCRIPTS"],
    ),
    (
        "bak-030",
        A,
        "How can I reduce the amount of WAL that has to be archived?",
        ["CONTINUOUS-ARCHIVING-CAVEATS", "COMPRESSED-ARCHIVE-LOGS"],
    ),
    (
        "bak-031",
        A,
        "Is it safe to modify a template database while a base backup is being taken?",
        ["CONTINUOUS-ARCHIVING-CAVEATS"],
    ),
    (
        "bak-032",
        A,
        "What should restore_command do when it is asked for a file that is not in the archive?",
        ["BACKUP-PITR-RECOVERY"],
    ),
]

# ---------------- Session 7 (issue #11, round 4): calibration power where the misses are ----------------
# 57 questions over the same four chapters (53 answerable, 4 typo), written from the sections' own text
# (answer_has copied from it) before pgcite was run on any of them, in the same mix of forms (what / how /
# which / why / how many, lists, settings, commands, files). All in the calibration split (DEV_CALIBRATION is
# not alternated), so the test split stays the one earlier rounds scored.
DEV_CALIBRATION = [
    # ---- Chapter 11: Indexes ----
    ("idx-029", A, "How many columns can one index have?", ["INDEXES-MULTICOLUMN"]),
    ("idx-030", A, "Which index types support indexes on more than one key column?", ["INDEXES-MULTICOLUMN"]),
    (
        "idx-031",
        A,
        "Why would I create several BRIN indexes on one table instead of a single multicolumn BRIN index?",
        ["INDEXES-MULTICOLUMN"],
    ),
    (
        "idx-032",
        A,
        "While CREATE INDEX runs on a big table, can other sessions still read it and insert into it?",
        ["INDEXES-INTRO"],
    ),
    ("idx-033", A, "Why is it a bad idea to keep indexes that queries never use?", ["INDEXES-INTRO"]),
    ("idx-034", A, "How do I create a hash index instead of the default kind?", ["INDEXES-TYPES"]),
    ("idx-035", A, "Which index types can return rows already sorted for an ORDER BY?", ["INDEXES-ORDERING"]),
    (
        "idx-036",
        A,
        "Why is an index so much better than sorting for ORDER BY ... LIMIT 10 on a large table?",
        ["INDEXES-ORDERING"],
    ),
    ("idx-037", A, "Can a B-tree index be used for ILIKE searches?", ["INDEXES-TYPES-BTREE"]),
    (
        "idx-038",
        A,
        "Which psql commands show operator classes, operator families and their operators?",
        ["INDEXES-OPCLASS"],
    ),
    (
        "idx-039",
        A,
        "My database uses the C locale. Do I still need text_pattern_ops for LIKE 'abc%' queries?",
        ["INDEXES-OPCLASS"],
    ),
    (
        "idx-040",
        A,
        "When PostgreSQL combines two indexes with a bitmap, why does an ORDER BY then need a separate sort?",
        ["INDEXES-BITMAP-SCANS"],
    ),
    ("idx-041", T, "wat kind of data is a GIN indx good for?", ["INDEXES-TYPES-GIN"]),
    # ---- Chapter 12: Full Text Search ----
    (
        "fts-028",
        A,
        "My trigger keeps a tsvector column up to date. How do I give the title more weight than the body?",
        ["TEXTSEARCH-UPDATE-TRIGGERS"],
    ),
    (
        "fts-029",
        A,
        "Why should a trigger that builds a tsvector name the text search configuration explicitly?",
        ["TEXTSEARCH-UPDATE-TRIGGERS"],
    ),
    (
        "fts-030",
        A,
        "What does tsvector_update_trigger do when one of the text columns is NULL?",
        ["TEXTSEARCH-UPDATE-TRIGGERS"],
    ),
    (
        "fts-031",
        A,
        "What is the advantage of concatenating tsvector values instead of concatenating the text before to_tsvector?",
        ["TEXTSEARCH-MANIPULATE-TSVECTOR"],
    ),
    ("fts-032", A, "What do I lose if I strip a tsvector?", ["TEXTSEARCH-MANIPULATE-TSVECTOR"]),
    (
        "fts-033",
        A,
        "Which function lists the token types a text search parser recognizes, with their aliases?",
        ["TEXTSEARCH-PARSER-TESTING"],
    ),
    (
        "fts-034",
        A,
        "Where in a configuration's list of dictionaries should a Snowball stemmer go, and why?",
        ["TEXTSEARCH-SNOWBALL-DICTIONARY"],
    ),
    (
        "fts-035",
        A,
        "Where does PostgreSQL look for the file of a thesaurus dictionary defined with DictFile = mythesaurus?",
        ["TEXTSEARCH-THESAURUS-CONFIG"],
    ),
    (
        "fts-036",
        A,
        "How many words long are ts_headline excerpts by default?",
        ["TEXTSEARCH-HEADLINE"],
    ),
    ("fts-037", A, "Why can ts_headline be slow?", ["TEXTSEARCH-HEADLINE"]),
    (
        "fts-038",
        A,
        "What weights do the ranking functions give to the D, C, B and A labels when I pass none?",
        ["TEXTSEARCH-RANKING"],
    ),
    ("fts-039", A, "How can I scale text search ranks into the range zero to one?", ["TEXTSEARCH-RANKING"]),
    (
        "fts-040",
        A,
        "What is the largest distance I can give the <N> FOLLOWED BY operator in a tsquery?",
        ["TEXTSEARCH-LIMITATIONS"],
    ),
    (
        "fts-041",
        T,
        "what does ts_rank_cd return if all lexemes of the tsvectr were striped?",
        ["TEXTSEARCH-RANKING"],
    ),
    # ---- Chapter 25: Routine Database Maintenance Tasks ----
    (
        "mnt-029",
        A,
        "Why is redirecting the server's stderr into a plain file a poor way to keep logs in production?",
        ["LOGFILE-MAINTENANCE"],
    ),
    ("mnt-030", A, "How do I turn on PostgreSQL's built-in log rotation?", ["LOGFILE-MAINTENANCE"]),
    ("mnt-031", A, "Do the log rotation methods also delete old log files for me?", ["LOGFILE-MAINTENANCE"]),
    ("mnt-032", A, "What are the drawbacks of sending the server log to syslog?", ["LOGFILE-MAINTENANCE"]),
    (
        "mnt-033",
        A,
        "Why is a freshly rebuilt B-tree index faster to access than one that has been updated many times?",
        ["ROUTINE-REINDEX"],
    ),
    (
        "mnt-034",
        A,
        "Do autovacuum worker processes count against max_connections?",
        ["AUTOVACUUM"],
    ),
    (
        "mnt-035",
        A,
        "With several databases in the cluster, how often does the autovacuum launcher start a new worker?",
        ["AUTOVACUUM"],
    ),
    (
        "mnt-036",
        A,
        "Can a table that only ever receives inserts be vacuumed by autovacuum, and which settings control when?",
        ["AUTOVACUUM"],
    ),
    (
        "mnt-037",
        A,
        "Will a conflicting lock request interrupt an autovacuum that runs to prevent wraparound?",
        ["AUTOVACUUM"],
    ),
    (
        "mnt-038",
        A,
        "How big can pg_xact get if I set autovacuum_freeze_max_age to its maximum?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-039",
        A,
        "How close to wraparound does a database get before the server starts emitting warnings?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-040",
        A,
        "Why shouldn't I run VACUUM FULL on a database that refuses commands to avoid wraparound data loss?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-041",
        T,
        "why must the vacum that fixes a wraparound warnig be run by a superuser?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    (
        "mnt-042",
        A,
        "What is the highest value vacuum_freeze_table_age can effectively take?",
        ["VACUUM-FOR-WRAPAROUND"],
    ),
    # ---- Chapter 26: Backup and Restore ----
    (
        "bak-033",
        A,
        "What are timeline history files for, and is it safe to keep them forever?",
        ["BACKUP-TIMELINES"],
    ),
    (
        "bak-034",
        A,
        "Can I recover into a timeline that branched off before my base backup was taken?",
        ["BACKUP-TIMELINES"],
    ),
    (
        "bak-035",
        A,
        "My archive recovery ended with a 'file not found' error from restore_command. Did something go wrong?",
        ["BACKUP-PITR-RECOVERY"],
    ),
    (
        "bak-036",
        A,
        "In which ways can I specify the point where a point-in-time recovery should stop?",
        ["BACKUP-PITR-RECOVERY"],
    ),
    (
        "bak-037",
        A,
        "Can I use a base backup to recover to a moment while that backup was still being taken?",
        ["BACKUP-PITR-RECOVERY"],
    ),
    (
        "bak-038",
        A,
        "What happens if recovery stops halfway because the WAL archive became unreachable?",
        ["BACKUP-PITR-RECOVERY"],
    ),
    (
        "bak-039",
        A,
        "Why might my server get slower while a base backup is running?",
        ["BACKUP-BASE-BACKUP"],
    ),
    ("bak-040", A, "How should I decide how often to take a base backup?", ["BACKUP-BASE-BACKUP"]),
    (
        "bak-041",
        A,
        "Why does pg_backup_start take so long to return, and how can I make the backup start right away?",
        ["BACKUP-LOWLEVEL-BASE-BACKUP"],
    ),
    (
        "bak-042",
        A,
        "Can I disconnect the session that called pg_backup_start before the backup is finished?",
        ["BACKUP-LOWLEVEL-BASE-BACKUP"],
    ),
    (
        "bak-043",
        A,
        "Which tools should copy the data files during a backup made with pg_backup_start?",
        ["BACKUP-LOWLEVEL-BASE-BACKUP"],
    ),
    ("bak-044", A, "How do I restore a dump made by pg_dumpall?", ["BACKUP-DUMP-ALL"]),
    (
        "bak-045",
        A,
        "Are all the databases in a pg_dumpall dump taken from one consistent snapshot?",
        ["BACKUP-DUMP-ALL"],
    ),
    ("bak-046", T, "how do i restor a custum format dump made with pg_dump -Fc?", ["BACKUP-DUMP-LARGE"]),
    ("bak-047", A, "Which archive format does a parallel pg_dump require?", ["BACKUP-DUMP-LARGE"]),
    (
        "bak-048",
        A,
        "With full_page_writes left on, how can I reduce the number of page snapshots in the WAL I archive?",
        ["CONTINUOUS-ARCHIVING-CAVEATS"],
    ),
]

# Fast-test set over only routine-vacuuming.html and indexes-types.html; all split "test".
TINY = [
    ("tiny-001", A, "Which comparison operators can a hash index be used with?", ["INDEXES-TYPES-HASH"]),
    (
        "tiny-002",
        A,
        "Why should I usually prefer plain VACUUM over VACUUM FULL?",
        ["VACUUM-BASICS", "VACUUM-FOR-SPACE-RECOVERY"],
    ),
    (
        "tiny-003",
        A,
        "How often does the autovacuum launcher start a worker in each database, and how many workers can run at once?",
        ["AUTOVACUUM"],
    ),
    ("tiny-004", T, "whne is a BRIN indx most efective?", ["INDEXES-TYPES-BRIN"]),
    (
        "tiny-005",
        O,
        "How do I configure pg_hba.conf to require password authentication for remote connections?",
        [],
    ),
    ("tiny-006", O, "What is the capital of Australia?", []),
]

# Strings (case-insensitive; runs of white space count as one space) any one of which a correct answer's text
# must contain: the fact that answers the question, copied from the expected section's own text. Written from
# the sections alone, before any pgcite answer to these questions was looked at; check_questions.py checks that
# each occurs in an expected section. Every answerable and typo question of DEV has them.
ANSWER_HAS = {
    # ---------------- Chapter 11: Indexes ----------------
    "idx-001": ["CREATE INDEX test1_id_index", "DROP INDEX"],
    "idx-002": ["anchored to the beginning of the string", "col LIKE 'foo%'"],
    "idx-003": ["simple equality comparisons", "using the equal operator"],
    "idx-004": [
        "well-correlated with the physical order",
        "minimum and maximum values",
        "store summaries about the values",
    ],
    "idx-005": [
        "scanned from the first entry with a = 5 and b = 42",
        "do not reduce the portion of the index that has to be scanned",
        "they'd still have to be scanned through",
    ],
    "idx-006": ["(x ASC, y DESC)", "(x DESC, y ASC)"],
    "idx-007": [
        "could not directly use the index",
        "combine multiple indexes",
        "form AND and OR conditions across several index scans",
        "bitmaps are then ANDed and ORed",
    ],
    "idx-008": [
        "no need to manually create indexes on unique columns",
        "automatically creates a unique index",
    ],
    "idx-009": ["CREATE INDEX test1_lower_col1_idx", "defined on the result of the lower(col1) function"],
    "idx-010": [
        "INCLUDE clause listing the extra columns",
        "are not part of the search key",
        "INCLUDE (y)",
        "covering index",
        "unless the table changes slowly enough",
    ],
    "idx-011": [
        "pattern matching expressions (LIKE or POSIX regular expressions)",
        "cannot use the xxx_pattern_ops",
        "default operator class if you want queries involving ordinary",
        "special operator class to support indexing of pattern-matching queries",
    ],
    "idx-012": ["enable_seqscan", "turning off sequential scans"],
    "idx-013": ["nearest-neighbor"],
    "idx-014": [
        "CREATE UNIQUE INDEX tests_success_constraint",
        "unique index over a subset of a table",
        "enforces uniqueness among the rows that satisfy the index predicate",
    ],
    "idx-015": [
        "cannot accelerate queries that involve some other collation",
        "only one collation per index column",
        "additional index could be created that supports",
    ],
    # ---------------- Chapter 12: Full Text Search ----------------
    "fts-001": [
        "no linguistic support",
        "no ordering (ranking)",
        "no index support",
        "index saved for later",
    ],
    "fts-002": ["no normalization of the word rats", "rats does not match rat", "assumed already normalized"],
    "fts-003": ["ALTER DATABASE"],
    "fts-004": [
        "separate-column approach",
        "expression-index approach is simpler",
        "requires less disk space",
        "searches will be faster",
    ],
    "fts-005": [
        "recognized as stop words",
        "plural form of rat",
        "no dictionaries assigned for its token type",
    ],
    "fts-006": ["never raise syntax errors", "raw user-supplied input"],
    "fts-007": [
        "normalization option",
        "how a document's length should impact its rank",
        "divides the rank by the document length",
        "divides the rank by 1 + the logarithm of the document length",
    ],
    "fts-008": [
        "function ts_headline",
        "returns an excerpt from the document in which terms from the query are highlighted",
        "not guaranteed to be safe for direct inclusion in web pages",
    ],
    "fts-009": ["ts_rewrite", "without reindexing"],
    "fts-010": ["Paris paris line", "synonym dictionary", "TEMPLATE = synonym"],
    "fts-011": [
        "GIN indexes are the preferred text search index type",
        "GiST index is lossy",
        "limits the usefulness of GiST indexes",
    ],
    "fts-012": [
        "less than 2 kilobytes",
        "256 positions per lexeme",
        "less than 1 megabyte",
        "no more than 16,383",
    ],
    "fts-013": [
        "stored generated column",
        "GENERATED ALWAYS AS",
        "tsvector_update_trigger",
        "trigger to update the tsvector column",
    ],
    "fts-014": ["ts_lexize function facilitates dictionary testing", "ts_lexize returns an array of lexemes"],
    # ---------------- Chapter 25: Routine Database Maintenance Tasks ----------------
    "mnt-001": [
        "VACUUM FULL can reclaim more disk space but runs much more slowly",
        "strive to use standard VACUUM and avoid VACUUM FULL",
        "moderately-frequent standard VACUUM runs are a better approach",
        "VACUUM FULL actively compacts tables",
    ],
    "mnt-002": [
        "will not return the space to the operating system",
        "VACUUM FULL actively compacts tables",
        "return the disk space to the operating system",
        "you will need to use VACUUM FULL",
    ],
    "mnt-003": [
        "TRUNCATE rather than using DELETE followed by VACUUM",
        "TRUNCATE removes the entire content",
    ],
    "mnt-004": [
        "does not issue ANALYZE commands for partitioned tables",
        "do not trigger analyze on the parent table",
        "run ANALYZE on the parent table manually",
        "manually running ANALYZE on partitioned tables",
        "not processed by autovacuum",
        "manual ANALYZE on those tables",
    ],
    "mnt-005": ["timestamp column that contains the time of row update", "more frequent statistics updates"],
    "mnt-006": [
        "checks the visibility map first",
        "heap fetch can be skipped",
        "answer some queries using only the index",
        "visibility map, which speeds up index-only scans",
    ],
    "mnt-007": [
        "once every two billion transactions",
        "suffer transaction ID wraparound",
        "catastrophic data loss",
        "VACUUM will mark rows as frozen",
    ],
    "mnt-008": ["age(datfrozenxid)", "age(c.relfrozenxid)"],
    "mnt-009": [
        "row locking by multiple transactions",
        "implemented as a 32-bit counter",
        "refuse to generate new MXIDs",
        "20GB before reaching wraparound",
    ],
    "mnt-010": [
        "will interrupt the autovacuum",
        "conflicts with the SHARE UPDATE EXCLUSIVE lock",
        "prevent autovacuums from ever completing",
    ],
    "mnt-011": [
        "CONCURRENTLY",
        "most, but not all, keys in each range are eventually deleted",
        "periodic reindexing is recommended",
        "freshly-constructed index is slightly faster",
    ],
    "mnt-012": [
        "logging_collector",
        "rotatelogs",
        "logrotate",
        "built-in log rotation facility",
        "send it to syslog",
    ],
    "mnt-013": [
        "how old an XID value has to be before rows bearing that XID will be frozen",
        "soon be modified again",
        "useless work",
    ],
    "mnt-014": ["not necessary or desirable to stop the postmaster", "this is no longer necessary"],
    "mnt-015": ["vacuum threshold", "vacuum base threshold", "autovacuum_vacuum_scale_factor"],
    # ---------------- Chapter 26: Backup and Restore ----------------
    "bak-001": ["internally consistent", "does not block other operations"],
    "bak-002": ["ON_ERROR_STOP", "--single-transaction", "as a single transaction"],
    "bak-003": ["pg_dumpall", "--globals-only"],
    "bak-004": [
        "compressed dumps",
        "| gzip",
        "split -b",
        "split command allows you to split the output",
        "custom dump format",
        "pg_dump -Fc",
    ],
    "bak-005": ["must be shut down in order to get a usable backup", "frozen snapshot", "rsync"],
    "bak-006": [
        "cannot be used as part of a continuous-archiving solution",
        "do not contain enough information to be used by WAL replay",
    ],
    "bak-007": ["archive_mode to on", "wal_level configuration parameter to replica"],
    "bak-008": ["archive_timeout", "pg_switch_wal"],
    "bak-009": ["recovery target", "required stopping point", "restore_command", "recovery.signal"],
    "bak-010": [
        "notion of timelines",
        "new timeline is created",
        "timeline ID number is part of WAL segment file names",
    ],
    "bak-011": ["backup_label", "tablespace_map", "second of these fields should be written"],
    "bak-012": [
        "omit from the backup",
        "pg_replslot/",
        "postmaster.pid",
        "pgsql_tmp",
        "pg_internal.init",
        "pg_dynshmem/",
        "can be omitted from the backup",
    ],
    "bak-013": ["numerically less are no longer needed", "can be deleted"],
    "bak-014": ["-X parameter", "no special action is required to restore"],
    "bak-015": [
        "WAL-logged with the literal absolute path",
        "overwrite the contents of the original tablespace",
        "new base backup after creating or dropping tablespaces",
    ],
    # ---------------- tiny.jsonl ----------------
    "tiny-001": ["simple equality comparisons", "using the equal operator"],
    "tiny-002": [
        "strive to use standard VACUUM and avoid VACUUM FULL",
        "can run in parallel with production database operations",
        "moderately-frequent standard VACUUM runs are a better approach",
    ],
    "tiny-003": ["autovacuum_naptime", "autovacuum_max_workers"],
    "tiny-004": ["well-correlated with the physical order"],
}

# Session 6 (issue #11, round 3): written from the sections' own text before pgcite was run on the questions.
ANSWER_HAS.update(
    {
        "idx-016": [
            "B-tree indexes always do",
            "GIN indexes cannot support index-only scans",
            "each index entry typically holds only part of the original data value",
        ],
        "idx-017": [
            "NULLS NOT DISTINCT",
            "treat nulls as equal",
            "unique partial index with an IS NULL restriction",
        ],
        "idx-018": ["only B-tree indexes can be declared unique"],
        "idx-019": [
            "parameterized query clauses do not work with a partial index",
            "Matching takes place at query planning time",
        ],
        "idx-020": [
            "This is a bad idea",
            "better off with a single non-partial index",
            "CREATE INDEX mytable_cat_data ON mytable (category, data)",
        ],
        "idx-021": [
            "collects statistics about the distribution of the values",
            "is therefore a lost cause",
            "almost certain to be inaccurate",
        ],
        "idx-022": ["especially fatal to use very small test data sets", "fit within a single disk page"],
        "idx-023": [
            "CREATE INDEX test2_info_nulls_low ON test2 (info NULLS FIRST)",
            "including the options ASC, DESC, NULLS FIRST, and/or NULLS LAST when creating the index",
        ],
        "idx-024": ["<@ @> = &&"],
        "idx-025": ["CREATE INDEX people_names", "((first_name || ' ' || last_name))"],
        "idx-026": [
            "relatively expensive to maintain",
            "retrieval speed is more important than insertion and update speed",
        ],
        "idx-027": ["quadtrees, k-d trees, and radix trees"],
        "idx-028": ["uniqueness condition applies to just column x"],
        "fts-015": [
            "\\dFd[+] [PATTERN]",
            "\\dFp[+] [PATTERN]",
            "\\dFt[+] [PATTERN]",
            "\\dF{d,p,t}[+] [PATTERN]",
        ],
        "fts-016": ["ts_stat"],
        "fts-017": [
            "stop words do affect the positions in tsvector",
            "Ranks calculated for documents with and without stop words are quite different",
        ],
        "fts-018": ["issue an ALTER TEXT SEARCH DICTIONARY command"],
        "fts-019": ["$SHAREDIR/tsearch_data/english.stop", "list of words, one per line"],
        "fts-020": ["requires reindexing"],
        "fts-021": [
            "extract .aff and .dic files",
            "change extensions to .affix and .dict",
            "copy files to the $SHAREDIR/tsearch_data directory",
            "CREATE TEXT SEARCH DICTIONARY english_hunspell",
        ],
        "fts-022": ["23 token types"],
        "fts-023": [
            "prevent a single NULL attribute from causing a NULL result",
            "find rows that contain NULL in one of the two fields",
        ],
        "fts-024": ["numnode", "querytree"],
        "fts-025": [
            "SET default_text_search_config",
            "set for an individual session using the SET command",
            "set default_text_search_config in each session",
        ],
        "fts-026": [
            "an empty array if the dictionary knows the token, but it is a stop word",
            "NULL if the dictionary does not recognize the input token",
        ],
        "fts-027": ["possible to do a full text search without an index", "will work without an index"],
        "mnt-016": [
            "To recover or reuse disk space occupied by updated or deleted rows",
            "To update data statistics used by the PostgreSQL query planner",
            "To update the visibility map",
            "To protect against loss of very old data",
        ],
        "mnt-017": [
            "can run in parallel with production database operations",
            "will continue to function normally",
        ],
        "mnt-018": ["has not been well researched", "periodically monitor the index's physical size"],
        "mnt-019": [
            "extra disk space for the new copy of the table",
            "extra disk space approximately equal to the size of the table",
        ],
        "mnt-020": ["database-wide VACUUM once a day during a low-usage period"],
        "mnt-021": ["ALTER TABLE SET STATISTICS", "default_statistics_target"],
        "mnt-022": ["does not issue ANALYZE commands for foreign tables"],
        "mnt-023": ["forces VACUUM to always use its aggressive strategy"],
        "mnt-024": ["pg_multixact subdirectory", "pg_get_multixact_members()"],
        "mnt-025": ["only block a subset of write transactions"],
        "mnt-026": ["autovacuum cannot be used unless track_counts is set to true"],
        "mnt-027": [
            "Temporary tables cannot be accessed by autovacuum",
            "performed via session SQL commands",
        ],
        "mnt-028": ["vacuum itself can skip such pages on the next run"],
        "bak-016": ["-h host and -p port", "specify the -U option", "PGUSER"],
        "bak-017": [
            "can generally be re-loaded into newer versions of PostgreSQL",
            "transferring a database to a different machine architecture",
        ],
        "bak-018": ["createdb -T template0", "create it yourself from template0"],
        "bak-019": ["run ANALYZE on each database"],
        "bak-020": ["pg_dump -h host1 dbname | psql -X -h host2 dbname"],
        "bak-021": [
            "pg_dump -j num -F d -f out.dir dbname",
            "parallel mode",
            "degree of parallelism with the -j",
        ],
        "bak-022": [
            "not usable without the commit log files",
            "pg_xact/*",
            "only work for complete backup and restoration of an entire database cluster",
        ],
        "bak-023": ["file modification-time granularity of one second"],
        "bak-024": [
            "%p is replaced by the path name of the file to archive",
            "%f is replaced by only the file name",
        ],
        "bak-025": [
            "return zero exit status if and only if it succeeds",
            "will try again periodically until it succeeds",
        ],
        "bak-026": ["gzip < %p > /mnt/server/archivedir/%f.gz", "gunzip < /mnt/server/archivedir/%f.gz > %p"],
        "bak-027": ["label string you gave to pg_basebackup", "starting and ending times and WAL segments"],
        "bak-028": ["recovery_target_timeline"],
        "bak-029": ["enable logging_collector", "more than a single command in the archiving process"],
        "bak-030": [
            "full_page_writes",
            "turning off page snapshots",
            "increasing the checkpoint interval parameters",
            "use gzip to compress the archive files",
        ],
        "bak-031": ["best not to modify any template databases while taking a base backup"],
        "bak-032": ["must return nonzero when so asked"],
    }
)

ANSWER_HAS.update(
    {
        # ---- session 7: DEV_CALIBRATION, copied from the sections before any run ----
        "idx-029": ["up to 32 columns"],
        "idx-030": ["only the b-tree, gist, gin, and brin index types support"],
        "idx-031": ["different pages_per_range storage parameter"],
        "idx-032": ["are blocked until the index build is finished", "allows reads (select statements)"],
        "idx-033": [
            "adds overhead to data manipulation operations",
            "prevent the creation of heap-only tuples",
        ],
        "idx-034": ["USING HASH"],
        "idx-035": ["only b-tree can produce sorted output"],
        "idx-036": [
            "the first n rows can be retrieved directly",
            "explicit sort will have to process all the data",
        ],
        "idx-037": ["only if the pattern starts with non-alphabetic characters"],
        "idx-038": ["\\dAc"],
        "idx-039": [
            "you do not need the xxx_pattern_ops",
            "usable for pattern-matching queries in the c locale",
        ],
        "idx-040": ["visited in physical order", "any ordering of the original indexes is lost"],
        "idx-041": ["inverted indexes", "contain multiple component values"],
        "fts-028": [
            "setweight(to_tsvector('pg_catalog.english', coalesce(new.title,'')), 'A')",
            "necessary to write a custom trigger",
        ],
        "fts-029": [
            "not be affected by changes to default_text_search_config",
            "search results changing after a dump and restore",
        ],
        "fts-030": ["null values will be skipped"],
        "fts-031": ["use different configurations to parse different sections"],
        "fts-032": [
            "lacks any position or weight information",
            "relevance ranking does not work as well",
            "will never match stripped input",
        ],
        "fts-033": ["ts_token_type"],
        "fts-034": ["placed at the end of the dictionary list", "recognizes everything"],
        "fts-035": ["tsearch_data/mythesaurus.ths"],
        "fts-036": ["the default values are 35 and 15"],
        "fts-037": ["uses the original document, not a tsvector summary"],
        "fts-038": ["{0.1, 0.2, 0.4, 1.0}"],
        "fts-039": ["normalization option 32", "rank/(rank+1)"],
        "fts-040": ["16,384"],
        "fts-041": ["the result will be zero"],
        "mnt-029": ["only way to truncate the log file is to stop and restart the server"],
        "mnt-030": ["logging_collector to true"],
        "mnt-031": ["do not handle deletion of old"],
        "mnt-032": ["syslog is not very reliable", "truncate or drop messages", "flush each message to disk"],
        "mnt-033": ["logically adjacent pages are usually also physically adjacent"],
        "mnt-034": ["does not count towards max_connections"],
        "mnt-035": ["autovacuum_naptime/n seconds"],
        "mnt-036": ["insert threshold", "autovacuum_vacuum_insert_threshold"],
        "mnt-037": ["is not automatically interrupted"],
        "mnt-038": ["about half a gigabyte"],
        "mnt-039": ["forty million transactions from the wraparound point"],
        "mnt-040": ["requires an xid and will therefore fail"],
        "mnt-041": ["fail to process system catalogs"],
        "mnt-042": ["0.95 * autovacuum_freeze_max_age"],
        "bak-033": [
            "pick the right wal segment files",
            "cheap and appropriate to keep them around indefinitely",
        ],
        "bak-034": ["cannot recover into timelines that branched off earlier than the base backup"],
        "bak-035": ["normal recovery will end with a", "this is not an error condition"],
        "bak-036": ["date/time, named restore point or by completion of a specific transaction id"],
        "bak-037": [
            "cannot use a base backup to recover to a time when that backup was in progress",
            "must be after the ending time of the base backup",
        ],
        "bak-038": ["restart almost from where it failed", "recovery can simply be restarted"],
        "bak-039": ["full_page_writes is effectively forced on during backup mode"],
        "bak-040": [
            "how much storage you want to expend on archived wal",
            "how long you are prepared to spend recovering",
        ],
        "bak-041": ["wait for the next regularly scheduled checkpoint", "request an immediate checkpoint"],
        "bak-042": [
            "must be maintained until the end of the backup",
            "the backup will be automatically aborted",
        ],
        "bak-043": ["tar or cpio"],
        "bak-044": ["psql -x -f dumpfile postgres"],
        "bak-045": ["snapshots of different databases are not synchronized"],
        "bak-046": ["pg_restore -d dbname filename", "must be restored with pg_restore"],
        "bak-047": ['only supported for the "directory" archive format', "-F d -f out.dir"],
        "bak-048": ["increasing the checkpoint interval parameters"],
    }
)

# offtopic.jsonl: questions the four chapters do not answer, for the gate's false-answer rate on a broad set:
# short generic questions whose words the chapters use in other senses, other languages' and tools' FAQs, other
# database products, general knowledge, everyday life. Written without running pgcite on them. All
# out_of_corpus, ids off-NNN, split alternately calibration, test, ... in this order.
OFFTOPIC = [
    # ---- short and generic (the words are common, the subject is not these chapters') ----
    "What is a class?",
    "How do I copy a file?",
    "What's a negative index?",
    "What is a pointer?",
    "How do I rename a folder?",
    "What is a closure?",
    "How do I delete a branch?",
    "What is a lambda?",
    "How do I reverse a string?",
    "What is recursion?",
    "How do I sort a list?",
    "What is an interface?",
    "How do I merge two dictionaries?",
    "What does a compiler do?",
    "How do I restart my computer?",
    "What is a hash map?",
    "How do I install a package?",
    "What is a thread?",
    "How do I format a date?",
    "What is an operator?",
    # ---- programming languages ----
    "In Python, what is the difference between a list and a tuple?",
    "How do I read a CSV file with pandas?",
    "What does the yield keyword do in a Python function?",
    "How do I create a virtual environment with venv?",
    "Why does Python say 'IndentationError: unexpected indent'?",
    "What is the difference between == and === in JavaScript?",
    "How do I debounce a function in JavaScript?",
    "What does async/await do in JavaScript?",
    "How do I center a div with CSS flexbox?",
    "What is the virtual DOM in React?",
    "How do I handle a NullPointerException in Java?",
    "What is the difference between an abstract class and an interface in Java?",
    "How does garbage collection work in the JVM?",
    "What is a segmentation fault in C?",
    "How do I allocate memory with malloc and free it?",
    "What does the borrow checker do in Rust?",
    "How do I spawn a goroutine and wait for it with a WaitGroup?",
    "What is the difference between a struct and a class in C#?",
    "How do I use a regular expression to validate an email address in Perl?",
    "What are generics in TypeScript?",
    "How do I write a unit test with JUnit 5?",
    "What is dependency injection in Spring Boot?",
    "How do I convert a string to an integer in Go?",
    "What is list comprehension in Python?",
    "How do I catch multiple exceptions in one except clause?",
    "What is the global interpreter lock?",
    "How do I profile a slow Python script?",
    "What is monkey patching?",
    "How do pointers to pointers work in C++?",
    "What is the difference between let, const and var?",
    # ---- tools, operating systems, applications ----
    "How do I undo the last git commit but keep my changes?",
    "How do I resolve a merge conflict in git?",
    "What is the difference between git fetch and git pull?",
    "How do I squash several commits into one?",
    "How do I write a Dockerfile for a Node.js app?",
    "How do I remove all stopped Docker containers?",
    "What is a Kubernetes pod?",
    "How do I scale a Kubernetes deployment to five replicas?",
    "How do I find which process is listening on port 8080 on Linux?",
    "How do I make a shell script executable?",
    "How do I schedule a job with cron every Monday at 3 AM?",
    "How do I change file permissions with chmod?",
    "How do I mount a USB drive on Ubuntu?",
    "How do I check free disk space on Linux?",
    "How do I set an environment variable permanently in Windows 11?",
    "How do I exit vim?",
    "How do I search and replace across files in VS Code?",
    "How do I create a pivot table in Excel?",
    "What does the VLOOKUP function do in Excel?",
    "How do I freeze the top row in Google Sheets?",
    "How do I configure an nginx reverse proxy?",
    "How do I renew a Let's Encrypt certificate with certbot?",
    "How do I generate an SSH key pair?",
    "Why is my Wi-Fi connection dropping on my laptop?",
    "How do I take a screenshot on a Mac?",
    "How do I set up a Python project with Poetry?",
    "What is the difference between TCP and UDP?",
    "How does DNS resolve a domain name?",
    "What is a load balancer?",
    "How do I configure a firewall rule with ufw?",
    "How do I compress a folder into a zip file?",
    "How do I install Node.js with nvm?",
    "What is the difference between RAID 1 and RAID 5?",
    "How do I write a GitHub Actions workflow that runs tests on every push?",
    "How do I add a custom domain to a GitHub Pages site?",
    "How do I convert a video to MP4 with ffmpeg?",
    "How do I make a bootable USB stick?",
    "How do I clear the browser cache in Firefox?",
    "How do I recover a deleted file from the recycle bin?",
    "How do I print a PDF double-sided?",
    # ---- other database products ----
    "How do I enable the slow query log in MySQL?",
    "What is the difference between InnoDB and MyISAM?",
    "How do I reset the MySQL root password?",
    "How do I back up a MySQL database with mysqldump?",
    "How do I set up MySQL group replication?",
    "What is the maximum database size in SQLite?",
    "How do I enable WAL journal mode in SQLite?",
    "How do I run VACUUM INTO in SQLite to make a compact copy?",
    "What is an Oracle tablespace quota and how do I grant one to a user?",
    "How do I use RMAN to back up an Oracle database?",
    "What does the Oracle optimizer hint /*+ INDEX */ do?",
    "How do I rebuild a fragmented index in SQL Server?",
    "What is the SQL Server transaction log and why does it keep growing?",
    "How do I create a full-text catalog in SQL Server?",
    "How do I shrink a SQL Server database?",
    "How do I create an index on a field in MongoDB?",
    "What is a MongoDB replica set arbiter?",
    "How do I use the aggregation pipeline in MongoDB?",
    "How do I shard a MongoDB collection?",
    "How do I set a TTL on a Redis key?",
    "What is the difference between RDB and AOF persistence in Redis?",
    "How do I use Redis pub/sub?",
    "How do I create an index mapping in Elasticsearch?",
    "What is an Elasticsearch analyzer and how do I define a custom one?",
    "How do I reindex data from one Elasticsearch index to another?",
    "What is a Cassandra partition key?",
    "How do I run nodetool repair in Cassandra?",
    "How do I choose a DynamoDB partition key?",
    "How do I create a secondary index in DynamoDB?",
    "What is a Snowflake virtual warehouse?",
    "How do I partition a table in BigQuery?",
    "How do I write a Cypher query in Neo4j to find shortest paths?",
    "What is the difference between a clustered and a nonclustered index in SQL Server?",
    "How do I configure the InnoDB buffer pool size?",
    "How do I use Oracle Data Pump to export a schema?",
    "What is a MySQL binlog and how do I purge old ones?",
    "How do I set up a MariaDB Galera cluster?",
    "How do I query JSON documents in Couchbase with N1QL?",
    "What are column families in HBase?",
    "How do I use InfluxDB retention policies?",
    # ---- general knowledge ----
    "What is the capital of Canada?",
    "Who wrote Pride and Prejudice?",
    "How far is the Moon from the Earth?",
    "Why is the sky blue?",
    "What causes the seasons on Earth?",
    "How many bones are in the human body?",
    "Who was the first person to walk on the Moon?",
    "What is photosynthesis?",
    "When did the Second World War end?",
    "What is the speed of light?",
    "What is the largest ocean on Earth?",
    "How does a vaccine work?",
    "What is inflation in economics?",
    "Who composed the Four Seasons?",
    "What is the boiling point of water at high altitude?",
    "How do bees make honey?",
    "What is the theory of relativity about?",
    "Which planet has the most moons?",
    "What language is spoken in Brazil?",
    "How tall is Mount Everest?",
    "What is the difference between weather and climate?",
    "Who invented the telephone?",
    "What is the Pythagorean theorem?",
    "How do tides work?",
    "What is a black hole?",
    "What is the population of Japan?",
    "Why do leaves change color in autumn?",
    "What is the main ingredient of guacamole?",
    "How many players are on a soccer team?",
    "What is the longest river in Africa?",
    # ---- everyday life ----
    "How do I make sourdough bread?",
    "How long should I rest a steak after cooking?",
    "How do I remove a red wine stain from a carpet?",
    "How often should I water a cactus?",
    "How do I change a flat tire?",
    "What is a good stretching routine for back pain?",
    "How do I file my tax return online?",
    "How do I improve my credit score?",
    "What should I pack for a week-long hiking trip?",
    "How do I train my puppy to stop biting?",
    "How do I negotiate a higher salary?",
    "How much sleep does a teenager need?",
    "How do I write a cover letter?",
    "How do I descale a coffee machine?",
    "How do I get rid of fruit flies in the kitchen?",
    "How do I learn to play the guitar?",
    "What is a good beginner running plan for 5 km?",
    "How do I unclog a bathroom sink?",
    "How do I keep basil fresh?",
    "How do I apply for a passport?",
    # ---- database concepts worded for other products or general ----
    "How do I design a star schema for a data warehouse?",
    "What is the CAP theorem?",
    "What is eventual consistency?",
    "How do I normalize a database to third normal form?",
    "What is an ORM and should I use one?",
    "How do I migrate a schema with Flyway?",
    "How do I configure a connection pool in HikariCP?",
    "What is a materialized view in Oracle and how is it refreshed?",
    "How do I write a stored procedure in T-SQL?",
    "What is sharding?",
    # ---- session 5 (issue #11): 60 more, written before pgcite was run on them: other software's FAQs, other
    # database products, general knowledge ----
    "How do I create a topic with three partitions in Apache Kafka?",
    "What is a consumer group in Kafka and how are partitions assigned to it?",
    "How do I declare a durable queue in RabbitMQ?",
    "How do I import existing infrastructure into Terraform state?",
    "How do I run an Ansible playbook against a single host?",
    "How do I trigger a Jenkins pipeline from a webhook?",
    "How do I remove the background of a photo in Photoshop?",
    "How do I change the permalink structure in WordPress?",
    "How do I add a custom slash command to a Discord bot?",
    "How do I set up two-factor authentication on my Google account?",
    "How do I split a long audio recording into tracks in Audacity?",
    "How do I render a scene with Cycles in Blender?",
    "How do I enable dark mode in Microsoft Outlook?",
    "How do I rebase a feature branch onto main in Mercurial?",
    "How do I configure log rotation with logrotate for an Apache access log?",
    "How do I limit the memory of a systemd service?",
    "How do I create a materialized view in ClickHouse that aggregates inserts?",
    "What is a MergeTree table engine in ClickHouse?",
    "How do I add a node to a CockroachDB cluster?",
    "How do I back up an IBM Db2 database online?",
    "How do I collect statistics on a Teradata table?",
    "What is the Firebird gbak utility used for?",
    "How do I create a vector search index in Pinecone?",
    "How do I compact a CouchDB database?",
    "How do I tune the checkpoint interval in Apache Flink?",
    "How do I cache a DataFrame in Apache Spark?",
    "How do I write a MapReduce job in Hadoop?",
    "What is a keyspace in ScyllaDB?",
    "How do I configure the Memcached maximum item size?",
    "How do I run a Prometheus query for the 95th percentile latency?",
    "How do I create a dashboard variable in Grafana?",
    "What does the Oracle ORA-01555 snapshot too old error mean?",
    "How do I enable change data capture in SQL Server?",
    "How do I use the EXPLAIN FORMAT=JSON output in MySQL 8?",
    "How do I restore a Realm database on an Android device?",
    "How do I define a Mongoose schema with a unique field?",
    "Who painted the ceiling of the Sistine Chapel?",
    "What is the chemical symbol for gold?",
    "How many time zones does Russia have?",
    "Why did the Roman Empire fall?",
    "What is the difference between a virus and a bacterium?",
    "How does a rainbow form?",
    "What year did the Berlin Wall come down?",
    "How do volcanoes erupt?",
    "What is the tallest building in the world?",
    "Who discovered penicillin?",
    "How do I convert Celsius to Fahrenheit?",
    "What is the difference between an alligator and a crocodile?",
    "How many strings does a standard violin have?",
    "What is the plot of Moby-Dick?",
    "How do I knit a scarf for beginners?",
    "How do I replace a bicycle chain?",
    "How do I season a cast iron pan?",
    "What are the rules of chess castling?",
    "How do I prepare for a marathon in sixteen weeks?",
    "How do I get a refund for a cancelled flight in the EU?",
    "How do I plant tulip bulbs in the autumn?",
    "How do I calculate compound interest on a savings account?",
    "What documents do I need to rent an apartment?",
    "How do I teach a child to ride a bike without training wheels?",
    # ---- session 6 (issue #11, round 3): 60 more, written before pgcite was run on them ----
    # short and generic
    "What is a variable?",
    "How do I undo a commit?",
    "What is a callback?",
    "What is an array?",
    "How do I free up memory?",
    "What is a stack trace?",
    "How do I split a string?",
    "What is a key?",
    "How do I zip a folder?",
    "What is a deadlock?",
    "What is a null pointer?",
    "How do I check my disk space?",
    "What is a loop?",
    "How do I clear the cache?",
    "What is an enum?",
    # other database products
    "How do I create a global secondary index in DynamoDB?",
    "What is the difference between the MyISAM and InnoDB storage engines?",
    "How do I back up a MongoDB database with mongodump?",
    "How do I turn on write-ahead logging mode in SQLite?",
    "How do I run VACUUM in SQLite to shrink the database file?",
    "How do I shrink the transaction log file of a SQL Server database?",
    "What does Oracle RMAN do?",
    "How do I configure replication in Redis?",
    "How do I create a FULLTEXT index in MySQL?",
    "What is a keyspace in Cassandra?",
    "How do I take a snapshot of an Elasticsearch index?",
    "How do I write a map function for a CouchDB view?",
    "What is the Cypher query language in Neo4j?",
    "How do I set a TTL on documents in MongoDB?",
    "How do I use point-in-time restore in Azure SQL Database?",
    # other software
    "How do I squash the last three commits in git?",
    "How do I list the running containers in Docker?",
    "How do I set environment variables in a Kubernetes pod?",
    "How do I configure nginx as a reverse proxy?",
    "How do I schedule a cron job to run every five minutes?",
    "How do I increase the maximum heap size of the JVM?",
    "How do I search for text in all files of a directory with grep?",
    "What does npm audit fix do?",
    "How do I freeze the top row in a Google Sheets spreadsheet?",
    "How do I sign my git commits with GPG?",
    "How do I resize a partition on Linux with parted?",
    "How do I enable two-factor authentication on GitHub?",
    "What is the difference between HTTP/1.1 and HTTP/2?",
    "How do I set up a virtual host in the Apache HTTP server?",
    "How do I rotate an SSH key pair on a server?",
    # general knowledge and everyday life
    "How many players are on a rugby union team?",
    "Who designed the Eiffel Tower?",
    "How many bones are in the adult human body?",
    "What causes the tides?",
    "Which river is the longest in Africa?",
    "How do I make a sourdough starter?",
    "How do I get chewing gum out of clothes?",
    "What does the liver do in the human body?",
    "When was the printing press invented?",
    "How do I change a flat tyre?",
    "Why does water boil at a lower temperature at high altitude?",
    "How do I write a cover letter for a job application?",
    "What is inflation?",
    "How do I back up the photos on my phone?",
    "How do I repot an orchid?",
]


# Session 7 (issue #11, round 4): off-topic questions near the corpus's vocabulary (other databases' and tools'
# questions that share words with the chapters: logs, indexes, backups, vacuum, dictionaries, statistics, ...),
# written before pgcite was run on any of them. All in the calibration split (not alternated).
OFFTOPIC_CALIBRATION = [
    "How do I rotate the access logs of nginx?",
    "What is a MySQL storage engine, and how do I change the engine of a table?",
    "What is a clustered index in SQL Server?",
    "How does the Elasticsearch standard analyzer tokenize text?",
    "How do I search text with MATCH ... AGAINST in MySQL?",
    "What does PRAGMA auto_vacuum do in SQLite?",
    "How do I take a hot backup of a MySQL InnoDB database with Percona XtraBackup?",
    "How long does MySQL keep binary logs, and how do I change that?",
    "Why does the SQL Server transaction log keep growing?",
    "How do I export a schema with Oracle Data Pump?",
    "How do I purge old document revisions in CouchDB?",
    "How do I create a secondary index in Cassandra?",
    "What is a covering index in MySQL?",
    "How do I add a custom stop word list to an Elasticsearch analyzer?",
    "How does Apache Solr rank its search results?",
    "How do I back up a Redis database with RDB snapshots?",
    "How does MongoDB reclaim disk space after I delete documents?",
    "How do I schedule a nightly task with a systemd timer?",
    "How do I limit the size of Docker container log files?",
    "How do I configure logrotate to compress old syslog files?",
    "How do I archive old emails in Outlook?",
    "How do I restore files from a Time Machine backup on a Mac?",
    "How do I back up a WordPress site before updating plugins?",
    "How do I make incremental backups with rsync and hard links?",
    "How is a B-tree kept balanced when keys are inserted?",
    "How do I build an inverted index for a small search engine in Python?",
    "How does Lucene store its inverted index on disk?",
    "How do I create a synonym for a table in Oracle?",
    "How do I use the thesaurus in Microsoft Word?",
    "How do I iterate over the keys and values of a dictionary in Python?",
    "How do I parse a JSON document in JavaScript?",
    "How do I highlight the matching terms in Elasticsearch search results?",
    "How do I change the default collation of a MySQL database?",
    "How do I see which indexes are never used in MySQL?",
    "How do I defragment a hard drive on Windows?",
    "How do I free up disk space on Ubuntu?",
    "What is the redo log in Oracle?",
    "How do I take a snapshot of an AWS EBS volume?",
    "How do I restore an Amazon RDS for MySQL instance to a point in time?",
    "How do I tune the garbage collector in Go?",
    "How do I remove unused Docker images and volumes?",
    "What transaction isolation levels does SQL Server offer?",
    "How do I detect integer overflow in C?",
    "How do I count how often each word occurs in a text file with awk?",
    "How do I update the statistics of a table in SQL Server?",
    "How do I create a partial index in MongoDB?",
    "How do I gather optimizer statistics for a table in Oracle?",
    "How do I split a large file into smaller pieces on Windows?",
    "How do I compress a directory into a tar.gz archive?",
    "How do I dump a SQLite database to a SQL text file?",
    "How do I restore a mysqldump file into a new MySQL database?",
]


# Session 8 (issue #11, round 6): short generic questions whose few words the chapters use in other senses ("How
# do I copy a file?" is the kind), written before pgcite was run on any of them, to measure the gate's signals
# for such questions and to give rag.calibrate more negatives. All in the calibration split (not alternated).
OFFTOPIC_CALIBRATION_2 = [
    "What is a socket?",
    "How do I rename a file?",
    "What is a function?",
    "How do I delete a folder?",
    "What is a bookmark?",
    "What is a string?",
    "How do I move a file to another directory?",
    "What is a hash table?",
    "What is a queue?",
    "How do I merge two lists?",
    "What is a driver?",
    "What is a process?",
    "How do I close a window?",
    "What is a record?",
    "How do I print a document?",
    "What is a register?",
    "How do I open a terminal?",
    "What is a tree?",
    "How do I undo my last change?",
    "What is a stack?",
    "How do I find a word in a file?",
    "What is the scope of a variable?",
    "How do I compare two files?",
    "What is an object?",
    "How do I resize an image?",
    "What is a class method?",
    "How do I count the lines in a file?",
    "What is a binary number?",
    "How do I join two strings?",
    "What is a map?",
    "How do I reverse a list?",
    "What is a byte?",
    "How do I change my password?",
    "How do I lock my screen?",
    "What is a block?",
    "How do I unzip a file?",
    "How do I sort numbers in descending order?",
    "What is a set?",
    "How do I empty the trash?",
    "What is a buffer?",
    "How do I write a loop?",
    "What is a module?",
    "How do I schedule a meeting?",
    "How do I copy text?",
    "How do I restart a service?",
    "How do I mute my microphone?",
    "How do I save a file?",
    "What is a cursor?",
    "How do I clean my keyboard?",
    "What is a compiler?",
]


# Session 10 (issue #11, round 7): 40 more short generic questions and other software's FAQs that the PostgreSQL
# manual cannot answer, written before pgcite was run on any of them. All in the calibration split (not
# alternated), so the test split stays the one earlier rounds scored.
OFFTOPIC_CALIBRATION_3 = [
    "How do I reset my router?",
    "What is a closure in JavaScript?",
    "How do I update my graphics driver?",
    "What is a mutex?",
    "How do I format a USB stick?",
    "What is big O notation?",
    "How do I take a screenshot?",
    "What is a singleton?",
    "How do I connect to a Wi-Fi network?",
    "What is a monad?",
    "How do I rotate a PDF page?",
    "What is inheritance?",
    "How do I install a package with pip?",
    "What is a promise in JavaScript?",
    "How do I uninstall an app on my phone?",
    "What is a tuple?",
    "How do I convert a video to MP4?",
    "What is a linked list?",
    "How do I find my IP address?",
    "What is a decorator in Python?",
    "How do I back up my iPhone?",
    "What is a virtual machine?",
    "How do I speed up my laptop?",
    "What is a regular expression?",
    "How do I add a printer?",
    "What is a generic type?",
    "How do I merge cells in Excel?",
    "What is polymorphism?",
    "How do I stop a program that is not responding?",
    "What is a namespace?",
    "How do I block a phone number?",
    "What is garbage collection in Java?",
    "How do I share my screen in Zoom?",
    "What is a microservice?",
    "How do I clear my browser history?",
    "What is a token?",
    "How do I set an alarm?",
    "What is a container image?",
    "How do I update all packages with Homebrew?",
    "What is a race condition?",
]


def record(qid, kind, question, expect, split):
    r = {"id": qid, "question": question, "expect": expect, "kind": kind, "split": split}
    if qid in ANSWER_HAS:
        r["answer_has"] = ANSWER_HAS[qid]
    return r


def assign_splits(rows):
    out = []
    seen = {}
    for qid, kind, question, expect in rows:
        i = seen.get(kind, 0)
        seen[kind] = i + 1
        split = "calibration" if i % 2 == 0 else "test"
        out.append(record(qid, kind, question, expect, split))
    return out


def write(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} questions to {path}")


def main():
    dev = assign_splits(DEV) + [record(q, k, t, e, "calibration") for q, k, t, e in DEV_CALIBRATION]
    write(os.path.join(HERE, "pgdocs-dev.jsonl"), dev)
    tiny = [record(q, k, t, e, "test") for q, k, t, e in TINY]
    write(os.path.join(HERE, "tiny.jsonl"), tiny)
    offtopic = [(f"off-{i:03d}", O, text, []) for i, text in enumerate(OFFTOPIC, start=1)]
    start = len(OFFTOPIC) + 1
    offtopic_calibration = [
        record(f"off-{i:03d}", O, text, [], "calibration")
        for i, text in enumerate(
            OFFTOPIC_CALIBRATION + OFFTOPIC_CALIBRATION_2 + OFFTOPIC_CALIBRATION_3, start=start
        )
    ]
    write(os.path.join(HERE, "offtopic.jsonl"), assign_splits(offtopic) + offtopic_calibration)


if __name__ == "__main__":
    main()
