# Compares each model the dbt package built with docpipe's own trend table, row for row: the
# same keys, counts, texts, days and instants equal, shares within 1e-9. argv: where the models
# are (a DuckDB file, or a postgres:// URL and the schema), the lake, then "table:key,key" for
# each table. Prints one line a table: "<table> <rows> equal", or what differs.
import duckdb, math, sys

where, specs = sys.argv[1], sys.argv[2:]
if where.startswith("postgres://"):
    import psycopg2
    schema, specs = specs[0], specs[1:]
    con = psycopg2.connect(where)

    def fetch(sql):
        cur = con.cursor()
        cur.execute(sql)
        return cur.fetchall()

    prefix = f'"{schema}".'
else:
    con = duckdb.connect(where, read_only=True)

    def fetch(sql):
        return con.sql(sql).fetchall()

    prefix = "main."

lake, specs = specs[0], specs[1:]

for spec in specs:
    table, keys = spec.split(":")
    keys = keys.split(",")
    ours = f"read_parquet('{lake}/trends/{table}.parquet')"
    cols = duckdb.sql(f"SELECT * FROM {ours}").columns
    # Sorted here, not by each engine: their collations order texts differently.
    at = [cols.index(k) for k in keys]
    by_key = lambda r: tuple(r[i] for i in at)
    want = sorted(duckdb.sql(f"SELECT * FROM {ours}").fetchall(), key=by_key)
    quoted = ", ".join(f'"{c}"' for c in cols)
    got = sorted(fetch(f'SELECT {quoted} FROM {prefix}"{table}"'), key=by_key)
    problems = []
    if len(got) != len(want):
        problems.append(f"{len(got)} rows, docpipe {len(want)}")
    for g, w in zip(got, want):
        for c, a, b in zip(cols, g, w):
            near = isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=0, abs_tol=1e-9)
            if not (a == b or near):
                problems.append(f"{[w[cols.index(k)] for k in keys]} {c}: dbt {a!r}, docpipe {b!r}")
    if problems:
        print(table, "differs:", len(problems), "; ".join(problems[:5]))
    else:
        print(table, len(want), "equal")
