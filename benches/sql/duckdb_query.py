#!/usr/bin/env python3
"""DuckDB's side of benches/sql/run.sh.

  duckdb_query.py DATA_DIR QUERY.sql OUT.csv THREADS
      Runs the query over the TPC-H CSV files of DATA_DIR (each table a view
      over read_csv, so only the tables the query reads are parsed, in the
      timed run as kappa parses them) and writes its rows to OUT.csv.

  duckdb_query.py --compare KAPPA.csv DUCKDB.csv
      Prints "yes" when both files hold the same rows (as multisets; numbers
      equal within a relative 1e-9, since float sums may differ in the last
      bit), else "NO: ..." and exits 1.
"""

import csv
import sys


def run(data, query, out, threads):
    import duckdb

    con = duckdb.connect(config={"threads": int(threads)})
    for t in ["lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region"]:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_csv('{data}/{t}.csv', header=true)")
    body = "\n".join(l for l in open(query) if not l.startswith("--"))
    con.execute(f"COPY ({body}) TO '{out}' (HEADER, DELIMITER ',')")


def value(text):
    if text == "":
        return (0, "")
    try:
        return (1, float(text))
    except ValueError:
        return (2, text)


def close(a, b):
    if a[0] == b[0] == 1:
        return abs(a[1] - b[1]) <= 1e-9 * max(abs(a[1]), abs(b[1]), 1.0)
    return a == b


def rows(path):
    with open(path, newline="") as f:
        return sorted(tuple(value(x) for x in r) for r in list(csv.reader(f))[1:])


def compare(kappa, duck):
    a, b = rows(kappa), rows(duck)
    if len(a) != len(b):
        print(f"NO: {len(a)} rows from kappa, {len(b)} from DuckDB")
        sys.exit(1)
    for x, y in zip(a, b):
        if len(x) != len(y) or not all(close(u, v) for u, v in zip(x, y)):
            print(f"NO: kappa {x} vs DuckDB {y}")
            sys.exit(1)
    print(f"yes ({len(a)} rows)")


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        run(*sys.argv[1:5])
