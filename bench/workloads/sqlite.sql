-- Database workload for bench/heap_real.py, run as `sqlite3 -lookaside 0 0 :memory:`
-- (with the lookaside allocator off every small allocation reaches malloc): about 12 M
-- allocations with Debian's sqlite3, twice: inserts, two indexes, a grouping, updates, a
-- sort, deletes. Deterministic (no random data), so every run makes the same calls.
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c INTEGER);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 1350000)
INSERT INTO t SELECT i, printf('row-%d-%08x', i, (i * 2654435761) % 4294967296), i % 1000 FROM s;
CREATE INDEX tb ON t(b);
CREATE INDEX tc ON t(c);
SELECT c, count(*), max(b) FROM t GROUP BY c ORDER BY 2 DESC LIMIT 3;
UPDATE t SET b = b || 'x' WHERE c % 3 = 0;
SELECT count(*) FROM t WHERE b LIKE '%7x';
UPDATE t SET b = b || 'y' WHERE c % 2 = 0;
SELECT count(*) FROM (SELECT b FROM t ORDER BY c, b DESC);
DELETE FROM t WHERE c % 5 = 0;
SELECT sum(length(b)) FROM t;
DROP TABLE t;
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c INTEGER);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 1350000)
INSERT INTO t SELECT i, printf('row-%08x-%d', (i * 2654435761) % 4294967296, i), i % 1000 FROM s;
CREATE INDEX tb ON t(b);
CREATE INDEX tc ON t(c);
UPDATE t SET b = b || 'x' WHERE c % 3 = 0;
SELECT count(*) FROM (SELECT b FROM t ORDER BY c, b DESC);
DELETE FROM t WHERE c % 5 = 0;
SELECT sum(length(b)) FROM t;
