//! `nexmark-q0`, pass-through: every bid, unchanged. It measures the cost
//! of reading and writing events, with no computation between.
//!
//! ```sql
//! SELECT auction, bidder, price, dateTime, extra FROM bid;
//! ```
//!
//! Output `nexmark_q0`: `auction,bidder,price,date_time,extra`, a bag (the
//! key is the whole row).

use super::{Query, Source};
use crate::schema::ColumnType::{Int, Str};

/// The `nexmark-q0` job: pass-through of every bid (see the module docs).
pub static Q0: Query = Query {
    name: "nexmark-q0",
    about: "Nexmark q0: pass-through of every bid",
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
    output: "nexmark_q0",
    columns: &["auction", "bidder", "price", "date_time", "extra"],
    key: None,
    build: |inputs| inputs.take("bid"),
};

#[cfg(test)]
mod tests {
    use super::super::tests::{bid, run};
    use super::*;
    use crate::value::Value;

    #[test]
    fn passes_bids_through_repeats_included() {
        let bids = vec![
            bid(1, 2, 30, 4, "x"),
            bid(1, 2, 30, 4, "x"),
            bid(5, 6, 70, 8, ""),
        ];
        let out = run(&Q0, vec![bids]);
        let row = |a, b, p, t, e: &str| {
            vec![
                Value::Int(a),
                Value::Int(b),
                Value::Int(p),
                Value::Int(t),
                Value::str(e),
            ]
        };
        assert_eq!(
            out,
            vec![
                row(1, 2, 30, 4, "x"),
                row(1, 2, 30, 4, "x"),
                row(5, 6, 70, 8, "")
            ]
        );
    }
}
