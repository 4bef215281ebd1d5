//! `nexmark-q7`, highest bid: per tumbling window of 10 s, the bids with
//! the highest price.
//!
//! ```sql
//! SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
//! from bid B
//! JOIN (
//!   SELECT MAX(price) AS maxprice, window_end as dateTime
//!   FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//!   GROUP BY window_start, window_end
//! ) B1
//! ON B.price = B1.maxprice
//! WHERE B.dateTime BETWEEN B1.dateTime  - INTERVAL '10' SECOND AND B1.dateTime;
//! ```
//!
//! Output `nexmark_q7`: `auction,price,bidder,date_time,extra`, a bag.
//! `BETWEEN` includes both ends, so besides the bids of a window `[start,
//! end)` ([`crate::ops::window::tumbling`]) a bid at exactly `end` (which
//! belongs to the next window) also matches if it has the window's highest
//! price, and then appears twice if it is also the top of its own window.
//! One `reduce` per window holds its bids (members) and the bids at its
//! end (candidates, which do not count towards the maximum); a window with
//! no member has no maximum and outputs nothing.

use super::{Query, Source, int};
use crate::ops::window::tumbling;
use crate::schema::ColumnType::{Int, Str};
use crate::value::Row;

/// Window size (ms).
const SIZE: i64 = 10_000;

/// The `nexmark-q7` job: the highest bids per tumbling window (see the module docs).
pub static Q7: Query = Query {
    name: "nexmark-q7",
    about: "Nexmark q7: the highest bids of every 10 s tumbling window",
    inputs: &[Source {
        name: "bid",
        reads: &[
            ("auction", Int),
            ("price", Int),
            ("bidder", Int),
            ("date_time", Int),
            ("extra", Str),
        ],
    }],
    output: "nexmark_q7",
    columns: &["auction", "price", "bidder", "date_time", "extra"],
    key: None,
    build: |inputs| {
        Ok(inputs
            .take("bid")?
            .flat_map(|r| {
                let (Some(price), Some(t)) = (int(&r, 1), int(&r, 3)) else {
                    return Vec::new();
                };
                let (start, end) = tumbling(t, SIZE);
                let mut placed = Vec::with_capacity(2);
                if t == start {
                    placed.push((t, (price, false, r.clone())));
                }
                placed.push((end, (price, true, r)));
                placed
            })
            .reduce(|_end, bids, out| {
                let Some(max) = bids.iter().rev().find(|(b, _)| b.1).map(|(b, _)| b.0) else {
                    return;
                };
                for (top, n) in bids.iter().rev().take_while(|(b, _)| b.0 == max) {
                    out.push((top.2.clone(), *n));
                }
            })
            .map(|(_end, row): (i64, Row)| row))
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{bid, run};
    use super::*;
    use crate::value::Value;

    #[test]
    fn highest_bids_per_window_including_bids_at_its_end() {
        let bids = vec![
            bid(1, 0, 5, 0, ""),
            bid(2, 0, 9, 5_000, ""),
            bid(3, 0, 9, 9_999, ""),
            bid(4, 0, 9, 10_000, ""), // tops [10 s, 20 s) and matches [0, 10 s) at its end
            bid(5, 0, 3, 10_001, ""),
            bid(6, 0, 1, 25_000, ""),
            bid(7, 0, 1, 30_000, ""), // tops [30 s, 40 s) and matches [20 s, 30 s)
            bid(8, 0, 2, 50_000, ""), // [40 s, 50 s) is empty: no maximum to match
        ];
        let out = run(&Q7, vec![bids]);
        let auctions: Vec<i64> = out.iter().map(|r| r[0].as_i64().unwrap()).collect();
        assert_eq!(auctions, vec![2, 3, 4, 4, 6, 7, 7, 8]);
        assert_eq!(
            out[0],
            vec![
                Value::Int(2),
                Value::Int(9),
                Value::Int(0),
                Value::Int(5_000),
                Value::str("")
            ]
        );
    }
}
