//! `nexmark-q5`, hot items: per hopping window of 10 s every 2 s, the
//! auctions with the most bids.
//!
//! ```sql
//! SELECT AuctionBids.auction, AuctionBids.num
//!  FROM (
//!    SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
//!    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
//!    GROUP BY auction, window_start, window_end
//!  ) AS AuctionBids
//!  JOIN (
//!    SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
//!    FROM (
//!      SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
//!      FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
//!      GROUP BY auction, window_start, window_end
//!      ) AS CountBids
//!    GROUP BY CountBids.starttime, CountBids.endtime
//!  ) AS MaxBids
//!  ON AuctionBids.starttime = MaxBids.starttime AND
//!     AuctionBids.endtime = MaxBids.endtime AND
//!     AuctionBids.num >= MaxBids.maxn;
//! ```
//!
//! Output `nexmark_q5`: `auction,num,window_start,window_end`; key:
//! `window_start,auction`. The window bounds are added to the SQL's two
//! columns so that a row says which window it is the top of (without them
//! the output is a bag of repeated pairs). Windows are `[start, start +
//! 10 s)` with `start` a multiple of 2 s ([`crate::ops::window::hopping`]).
//! The count-then-max-then-join of the SQL is one `reduce` per window over
//! the auctions' counts: `num >= max(num)` is `num == max(num)`.

use super::{Query, Source, int};
use crate::ops::window::hopping;
use crate::schema::ColumnType::Int;
use crate::value::Value;

/// Window size and hop (ms).
const SIZE: i64 = 10_000;
const HOP: i64 = 2_000;

/// The `nexmark-q5` job: the auctions with the most bids per hopping window (see the module docs).
pub static Q5: Query = Query {
    name: "nexmark-q5",
    about: "Nexmark q5: the auctions with the most bids per 10 s window, every 2 s",
    inputs: &[Source {
        name: "bid",
        reads: &[("auction", Int), ("date_time", Int)],
    }],
    output: "nexmark_q5",
    columns: &["auction", "num", "window_start", "window_end"],
    key: Some(&[2, 0]),
    build: |inputs| {
        Ok(inputs
            .take("bid")?
            .flat_map(|r| {
                let bid = int(&r, 0).zip(int(&r, 1));
                bid.into_iter().flat_map(|(auction, t)| {
                    hopping(t, SIZE, HOP).map(move |(start, _)| (start, auction))
                })
            })
            .count()
            .map(|((start, auction), num)| (start, (num, auction)))
            .reduce(|_, counts, out| {
                let max = counts.last().expect("a group").0.0;
                for (top, _) in counts.iter().rev().take_while(|(c, _)| c.0 == max) {
                    out.push((**top, 1isize));
                }
            })
            .map(|(start, (num, auction))| {
                vec![
                    Value::Int(auction),
                    Value::Int(num as i64),
                    Value::Int(start),
                    Value::Int(start + SIZE),
                ]
            }))
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{bid, run};
    use super::*;
    use crate::value::Row;

    #[test]
    fn top_auctions_per_hopping_window_with_exact_boundaries() {
        let bids = vec![
            bid(1, 0, 5, 0, ""),
            bid(2, 0, 5, 9_999, ""),
            bid(2, 0, 5, 10_000, ""),
            bid(1, 0, 5, 10_000, ""),
        ];
        let out = run(&Q5, vec![bids]);
        let window = |start: i64| -> Vec<Row> {
            out.iter()
                .filter(|r| r[2] == Value::Int(start))
                .cloned()
                .collect()
        };
        let row = |a: i64, n: i64, s: i64| {
            vec![
                Value::Int(a),
                Value::Int(n),
                Value::Int(s),
                Value::Int(s + SIZE),
            ]
        };
        // [0, 10 s) holds t = 0 and 9.999 s, not 10 s: a tie, both are top.
        assert_eq!(window(0), vec![row(1, 1, 0), row(2, 1, 0)]);
        assert_eq!(window(2_000), vec![row(2, 2, 2_000)]);
        assert_eq!(window(8_000), vec![row(2, 2, 8_000)]);
        assert_eq!(window(10_000), vec![row(1, 1, 10_000), row(2, 1, 10_000)]);
        // t = 0 is in the windows starting at -8 s .. 0 s; 10 s in 2 s .. 10 s.
        assert_eq!(window(-8_000), vec![row(1, 1, -8_000)]);
        assert!(window(-10_000).is_empty() && window(12_000).is_empty());
        // Four windows before 0 with a1 alone, two ties, four with a2 on top.
        assert_eq!(out.len(), 4 + 2 + 4 + 2);
    }
}
