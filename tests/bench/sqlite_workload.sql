-- The "sqlite" benchmark workload: an in-memory table of @ROWS@ rows built, indexed and queried by
-- the sqlite3 CLI (`sqlite3 :memory: < this file`; scripts/bench substitutes @ROWS@).
-- Deterministic: the output is compared across tools to catch a run that went wrong.
PRAGMA cache_size = -262144;
CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, score REAL, tag TEXT);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < @ROWS@)
INSERT INTO items(id, name, grp, score, tag)
  SELECT x, printf('item-%08d-%s', (x * 7919) % 1000003, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26)),
         x % 997, (x * 31 % 10007) / 7.0, 't' || (x % 13)
  FROM n;
CREATE INDEX items_name ON items(name);
CREATE INDEX items_grp_score ON items(grp, score);
SELECT count(*), sum(length(name)) FROM items;
SELECT grp, count(*), round(avg(score), 3) FROM items GROUP BY grp ORDER BY 2 DESC, 1 LIMIT 5;
SELECT name FROM items WHERE name > 'item-0050' ORDER BY name LIMIT 3;
SELECT tag, count(DISTINCT grp), max(name) FROM items GROUP BY tag ORDER BY tag;
