//! `nexmark-q2`, selection: the bids on a few auctions.
//!
//! ```sql
//! SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
//! ```
//!
//! Output `nexmark_q2`: `auction,price`, a bag (an auction gets many bids
//! of the same price). `MOD` follows SQL (and Rust's `%`): the sign of the
//! dividend, so `-123` is selected too.

use super::{Query, Source, int};
use crate::schema::ColumnType::Int;

/// The `nexmark-q2` job: the bids on auctions whose id is a multiple of 123 (see the module docs).
pub static Q2: Query = Query {
    name: "nexmark-q2",
    about: "Nexmark q2: auction and price of the bids on auctions divisible by 123",
    inputs: &[Source {
        name: "bid",
        reads: &[("auction", Int), ("price", Int)],
    }],
    output: "nexmark_q2",
    columns: &["auction", "price"],
    key: None,
    build: |inputs| {
        Ok(inputs
            .take("bid")?
            .filter(|row| int(row, 0).is_some_and(|a| a % 123 == 0)))
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{bid, run};
    use super::*;
    use crate::value::Value;

    #[test]
    fn keeps_auctions_divisible_by_123() {
        let bids = vec![
            bid(123, 1, 5, 0, ""),
            bid(124, 1, 6, 0, ""),
            bid(0, 1, 7, 0, ""),
            bid(246, 2, 5, 1, ""),
        ];
        let out = run(&Q2, vec![bids]);
        let row = |a, p| vec![Value::Int(a), Value::Int(p)];
        assert_eq!(out, vec![row(0, 7), row(123, 5), row(246, 5)]);
    }
}
