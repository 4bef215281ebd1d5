#!/usr/bin/env python3
"""Deterministic data for the skew benchmark (stdlib only).

Writes into OUT_DIR:
  follows_skew.csv     follower,followee  FOLLOWS distinct pairs (no one follows
                       an account twice), in random order. followee: Zipf(s=S,
                       default 1.1) over the accounts by rank (rank r has weight
                       r^-s), with rank 1 (account 1, the celebrity) boosted to a
                       share of TOP (default 0.25) of all follows. Other ranks map
                       to scrambled account ids.
  follows_uniform.csv  the same size, followee uniform over the accounts.
  posts.csv            author,post  POSTS_PER posts for every account (so both
                       follow tables fan out to the same number of timeline rows).
Followers are uniform over the accounts in both. Each file gets a `.done` marker
with its parameters; a file whose marker matches is not regenerated.

Usage: gen_data.py OUT_DIR [--follows N] [--accounts N] [--posts-per N] [--s S] [--top P] [--seed S]
"""

import argparse
import itertools
from collections import Counter
import json
import os
import sys
from random import Random

CHUNK = 500_000


def write(path, header, params, rows_fn):
    marker = path + ".done"
    if os.path.exists(marker) and os.path.exists(path):
        with open(marker) as f:
            if json.load(f) == params:
                print(f"  {os.path.basename(path)}: up to date", file=sys.stderr)
                return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(header + "\n")
        for lines in rows_fn():
            f.write("".join(lines))
    os.replace(tmp, path)
    with open(marker, "w") as f:
        json.dump(params, f)
    print(f"  {os.path.basename(path)}: {os.path.getsize(path) / 1e6:.0f} MB", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--follows", type=int, default=5_000_000)
    # Enough accounts for the celebrity's followers to be distinct people.
    ap.add_argument("--accounts", type=int, default=2_000_000)
    ap.add_argument("--posts-per", type=int, default=1)
    ap.add_argument("--s", type=float, default=1.1)
    ap.add_argument("--top", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    n = a.accounts
    # Account ids for ranks 1..n: a fixed scramble, the celebrity (rank 1) is id 1.
    ids = list(range(2, n + 1))
    Random(a.seed).shuffle(ids)
    ids = [1] + ids
    weights = [r ** -a.s for r in range(1, n + 1)]
    total = sum(weights)
    # Mixture: P(celebrity extra) = hot, else Zipf; cumulative weights for choices().
    # The celebrity's share `top` = hot + (1 - hot) * z1, z1 its Zipf share.
    z1 = weights[0] / total
    hot = max(0.0, (a.top - z1) / (1.0 - z1))
    mix = [w / total * (1.0 - hot) for w in weights]
    mix[0] += hot
    cum = list(itertools.accumulate(mix))
    cum[-1] = 1.0
    base = dict(follows=a.follows, accounts=n, seed=a.seed, version=2)

    def follows(skew):
        """Distinct (follower, followee) pairs, in random order: draw each
        follow's followee, then give every followee as many distinct
        followers (uniform) as it was drawn."""
        def gen():
            rng = Random(a.seed + (1 if skew else 2))
            if skew:
                drawn = rng.choices(range(n), cum_weights=cum, k=a.follows)
            else:
                drawn = [rng.randrange(n) for _ in range(a.follows)]
            counts = Counter(drawn)
            del drawn
            pairs = []
            for rank, c in sorted(counts.items()):
                followee = ids[rank] if skew else rank + 1
                pairs.extend((u, followee) for u in rng.sample(range(1, n + 1), min(c, n)))
            rng.shuffle(pairs)
            for i in range(0, len(pairs), CHUNK):
                yield [f"{u},{v}\n" for u, v in pairs[i:i + CHUNK]]
        return gen

    def posts():
        for start in range(1, n + 1, CHUNK):
            yield [f"{u},p{u}_{j}\n" for u in range(start, min(n, start + CHUNK - 1) + 1) for j in range(a.posts_per)]

    write(os.path.join(a.out, "follows_skew.csv"), "follower,followee",
          dict(base, s=a.s, top=a.top, kind="skew"), follows(True))
    write(os.path.join(a.out, "follows_uniform.csv"), "follower,followee",
          dict(base, kind="uniform"), follows(False))
    write(os.path.join(a.out, "posts.csv"), "author,post",
          dict(accounts=n, posts_per=a.posts_per, version=1), posts)
    top = cum[0]
    print(f"  celebrity (account 1) share: {top:.3f}; rank 2: {cum[1] - cum[0]:.3f}; "
          f"rank 10: {cum[9] - cum[8]:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
