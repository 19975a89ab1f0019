# The SQLite workload (deterministic): individual INSERTs through the parser, bulk inserts
# from a recursive CTE, an index, joins with grouping and sorting, and a recursive CTE.
# `awk -v scale=S` sizes it (default 1; the boards' emulated CPUs run a small fraction).
BEGIN {
    if (scale == "") scale = 1
    customers = int(20000 * scale)
    orders = int(300000 * scale)
    starts = int(30000 * scale)
    print "PRAGMA cache_size = -65536;"
    print "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, region INTEGER);"
    print "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount REAL, note TEXT);"
    print "BEGIN;"
    for (i = 1; i <= customers; i++)
        printf "INSERT INTO customers VALUES(%d, 'customer-%d', %d);\n", i, i, (i * 37) % 17
    print "COMMIT;"
    printf "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)\n", orders
    printf "INSERT INTO orders SELECT i, (i * 7919) %% %d + 1, ((i * 31) %% 1000) / 10.0,\n", customers
    printf "    printf('order %%d for %%d', i, (i * 7919) %% %d + 1) FROM n;\n", customers
    print "CREATE INDEX orders_customer ON orders(customer);"
    print "CREATE INDEX orders_note ON orders(note);"
    print "SELECT c.region, count(*), sum(o.amount) FROM customers c JOIN orders o ON o.customer = c.id"
    print "    GROUP BY c.region ORDER BY 3 DESC LIMIT 3;"
    print "SELECT c.name, sum(o.amount) AS total FROM customers c JOIN orders o ON o.customer = c.id"
    print "    GROUP BY c.id ORDER BY total DESC, c.name LIMIT 3;"
    print "SELECT count(*) FROM orders a JOIN orders b ON a.customer = b.customer AND a.id < b.id"
    print "    WHERE a.amount > 99.0;"
    print "WITH RECURSIVE collatz(start, x, steps) AS ("
    print "    SELECT value, value, 0 FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL"
    printf "        SELECT value + 1 FROM s WHERE value < %d) SELECT value FROM s)\n", starts
    print "    UNION ALL SELECT start, CASE WHEN x % 2 = 0 THEN x / 2 ELSE 3 * x + 1 END, steps + 1"
    print "        FROM collatz WHERE x > 1)"
    print "SELECT start, max(steps) FROM collatz GROUP BY start ORDER BY 2 DESC, 1 LIMIT 3;"
}
