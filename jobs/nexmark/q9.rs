//! `nexmark-q9`, winning bids: every auction with its winning bid, the
//! highest bid within the auction's lifetime, ties to the earliest.
//!
//! ```sql
//! SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller,
//!        category, extra, auction, bidder, price, bid_dateTime, bid_extra
//! FROM (
//!    SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime,
//!      B.extra AS bid_extra,
//!      ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC) AS rownum
//!    FROM auction A, bid B
//!    WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//! )
//! WHERE rownum <= 1;
//! ```
//!
//! Output `nexmark_q9`: the auction's columns, then `auction,bidder,price,
//! bid_date_time,bid_extra`; key: `id`. Bids of the same price at the same
//! time (which SQL leaves to chance) go to the smallest bidder, then the
//! smallest extra, so the winner is a function of the bids. Auctions with no
//! bid in their lifetime have no row. The winner is found from the bids and
//! the auctions' times alone; the full auction rows join the winners only.

use super::{Query, Source, bids_in_lifetime, int};
use crate::schema::ColumnType::{Int, Str};
use crate::value::Row;

/// The `nexmark-q9` job: every auction with its winning bid (see the module docs).
pub static Q9: Query = Query {
    name: "nexmark-q9",
    about: "Nexmark q9: each auction with its winning bid (highest in its lifetime, earliest on ties)",
    inputs: &[
        Source {
            name: "auction",
            reads: &[
                ("id", Int),
                ("item_name", Str),
                ("description", Str),
                ("initial_bid", Int),
                ("reserve", Int),
                ("date_time", Int),
                ("expires", Int),
                ("seller", Int),
                ("category", Int),
                ("extra", Str),
            ],
        },
        Source {
            name: "bid",
            reads: &[
                ("auction", Int),
                ("bidder", Int),
                ("price", Int),
                ("date_time", Int),
                ("extra", Str),
            ],
        },
    ],
    output: "nexmark_q9",
    columns: &[
        "id",
        "item_name",
        "description",
        "initial_bid",
        "reserve",
        "date_time",
        "expires",
        "seller",
        "category",
        "extra",
        "auction",
        "bidder",
        "price",
        "bid_date_time",
        "bid_extra",
    ],
    key: Some(&[0]),
    build: |inputs| {
        Ok({
            let (auction, bid) = (inputs.take("auction")?, inputs.take("bid")?);
            let auctions = auction.flat_map(|r| Some((int(&r, 0)?, r)));
            let lifetimes = auctions
                .clone()
                .flat_map(|(id, r)| Some((id, (int(&r, 5)?, int(&r, 6)?, ()))));
            // The rank of a bid within its auction, smallest first: price
            // descending (`!price` reverses the order of an i64 without
            // overflow), then time, then the rest of the bid.
            let bids = bid.flat_map(|r| {
                let (price, t) = (int(&r, 2)?, int(&r, 3)?);
                Some((int(&r, 0)?, (t, (!price, t, r))))
            });
            let winners = bids_in_lifetime(lifetimes, bids, |id, _, ranked| (id, ranked.clone()))
                .reduce(|_, ranked, out| out.push((ranked[0].0.2.clone(), 1isize)));
            auctions.join_map(winners, |_, a: &Row, b: &Row| {
                let mut row = a.clone();
                row.extend(b.iter().cloned());
                row
            })
        })
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{auction, bid, run};
    use super::*;
    use crate::value::Value;

    fn winners(bids: Vec<Row>) -> Vec<(i64, Row)> {
        let auctions = vec![auction(1, 100, 200, 7, 10), auction(2, 100, 200, 7, 10)];
        run(&Q9, vec![auctions, bids])
            .into_iter()
            .map(|r| (r[0].as_i64().unwrap(), r[10..].to_vec()))
            .collect()
    }

    #[test]
    fn highest_bid_wins_ties_to_the_earliest() {
        let out = winners(vec![
            bid(1, 11, 50, 150, "a"),
            bid(1, 12, 80, 160, "late"),
            bid(1, 13, 80, 120, "early"),
            bid(1, 14, 70, 110, ""),
        ]);
        assert_eq!(out, vec![(1, bid_cols(1, 13, 80, 120, "early"))]);
    }

    #[test]
    fn bids_outside_the_lifetime_never_win() {
        let out = winners(vec![
            bid(1, 11, 999, 99, "before"),
            bid(1, 12, 10, 100, "at start"),
            bid(1, 13, 998, 201, "after"),
            bid(2, 14, 5, 200, "at expiry"),
            bid(2, 15, 4, 150, ""),
        ]);
        assert_eq!(
            out,
            vec![
                (1, bid_cols(1, 12, 10, 100, "at start")),
                (2, bid_cols(2, 14, 5, 200, "at expiry"))
            ]
        );
    }

    #[test]
    fn equal_price_and_time_go_to_the_smallest_bid() {
        let out = winners(vec![
            bid(1, 12, 50, 150, "b"),
            bid(1, 11, 50, 150, "z"),
            bid(1, 11, 50, 150, "a"),
        ]);
        assert_eq!(out, vec![(1, bid_cols(1, 11, 50, 150, "a"))]);
    }

    fn bid_cols(a: i64, b: i64, p: i64, t: i64, e: &str) -> Row {
        vec![
            Value::Int(a),
            Value::Int(b),
            Value::Int(p),
            Value::Int(t),
            Value::str(e),
        ]
    }
}
