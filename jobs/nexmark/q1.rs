//! `nexmark-q1`, currency conversion: every bid with its price converted
//! from dollars to euros.
//!
//! ```sql
//! SELECT auction, bidder, 0.908 * price as price, dateTime, extra FROM bid;
//! ```
//!
//! Output `nexmark_q1`: `auction,bidder,price,date_time,extra`, a bag. The
//! price is a float (`0.908 * price` computed per row, so it does not
//! depend on order; Flink keeps it a DECIMAL); a null price stays null.

use super::{Query, Source};
use crate::schema::ColumnType::{Int, Str};
use crate::value::Value;

/// Euros per dollar, as in the Flink query.
const DOL_TO_EUR: f64 = 0.908;

/// The `nexmark-q1` job: every bid with its price in euros (see the module docs).
pub static Q1: Query = Query {
    name: "nexmark-q1",
    about: "Nexmark q1: every bid with its price in euros",
    inputs: &[Source {
        name: "bid",
        reads: &[
            ("auction", Int),
            ("bidder", Int),
            ("price", Int),
            ("date_time", Int),
            ("extra", Str),
        ],
    }],
    output: "nexmark_q1",
    columns: &["auction", "bidder", "price", "date_time", "extra"],
    key: None,
    build: |inputs| {
        Ok(inputs.take("bid")?.map(|mut row| {
            if let Some(p) = row[2].as_i64() {
                row[2] = Value::float(DOL_TO_EUR * p as f64);
            }
            row
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{bid, run};
    use super::*;

    #[test]
    fn converts_prices_to_euros() {
        let out = run(&Q1, vec![vec![bid(1, 2, 1000, 4, "x")]]);
        assert_eq!(out[0][2], Value::float(908.0));
        assert_eq!(out[0][0], Value::Int(1));
    }
}
