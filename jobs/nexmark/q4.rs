//! `nexmark-q4`, average price per category: the winning price of each
//! auction (its highest bid within its lifetime), averaged per category.
//!
//! ```sql
//! SELECT Q.category, AVG(Q.final)
//! FROM (
//!     SELECT MAX(B.price) AS final, A.category
//!     FROM auction A, bid B
//!     WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//!     GROUP BY A.id, A.category
//! ) Q
//! GROUP BY Q.category;
//! ```
//!
//! Output `nexmark_q4`: `category,avg`; key: `category`. The average is a
//! float, computed from the exact integer sum of the winning prices (so it
//! does not depend on order); Flink's `AVG` of a `BIGINT` truncates to an
//! integer instead. Auctions without a bid in their lifetime have no
//! winning price and do not count.

use super::{Query, Source, bids_in_lifetime, int};
use crate::schema::ColumnType::Int;
use crate::value::Value;

/// The `nexmark-q4` job: the average winning price per category (see the module docs).
pub static Q4: Query = Query {
    name: "nexmark-q4",
    about: "Nexmark q4: average winning bid price per category",
    inputs: &[
        Source {
            name: "auction",
            reads: &[
                ("id", Int),
                ("date_time", Int),
                ("expires", Int),
                ("category", Int),
            ],
        },
        Source {
            name: "bid",
            reads: &[("auction", Int), ("price", Int), ("date_time", Int)],
        },
    ],
    output: "nexmark_q4",
    columns: &["category", "avg"],
    key: Some(&[0]),
    build: |inputs| {
        Ok({
            let (auction, bid) = (inputs.take("auction")?, inputs.take("bid")?);
            let auctions =
                auction.flat_map(|r| Some((int(&r, 0)?, (int(&r, 1)?, int(&r, 2)?, int(&r, 3)?))));
            let bids = bid.flat_map(|r| Some((int(&r, 0)?, (int(&r, 2)?, int(&r, 1)?))));
            let finals = bids_in_lifetime(auctions, bids, |id, category, price| {
                ((id, *category), *price)
            })
            .reduce(|_, prices, out| out.push((*prices.last().expect("a group").0, 1isize)));
            finals
                .map(|((_, category), price)| (category, price))
                .reduce(|_, finals, out| {
                    let (mut sum, mut n) = (0i128, 0i128);
                    for (price, m) in finals {
                        sum += **price as i128 * *m as i128;
                        n += *m as i128;
                    }
                    out.push((Value::float(sum as f64 / n as f64), 1isize));
                })
                .map(|(category, avg)| vec![Value::Int(category), avg])
        })
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{auction, bid, run};
    use super::*;

    #[test]
    fn averages_the_highest_bid_within_each_auction_lifetime() {
        let auctions = vec![
            auction(1, 100, 200, 0, 10),
            auction(2, 100, 200, 0, 10),
            auction(3, 100, 200, 0, 11),
            auction(4, 100, 200, 0, 12), // no bid in its lifetime
        ];
        let bids = vec![
            bid(1, 0, 50, 100, ""), // at the start: counts
            bid(1, 0, 999, 99, ""), // before the auction
            bid(1, 0, 70, 200, ""), // at expiry: counts
            bid(2, 0, 20, 150, ""),
            bid(2, 0, 999, 201, ""), // after expiry
            bid(3, 0, 5, 150, ""),
            bid(4, 0, 5, 300, ""),
        ];
        let out = run(&Q4, vec![auctions, bids]);
        let row = |c, avg| vec![Value::Int(c), Value::float(avg)];
        assert_eq!(out, vec![row(10, 45.0), row(11, 5.0)]);
    }
}
