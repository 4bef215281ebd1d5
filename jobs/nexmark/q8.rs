//! `nexmark-q8`, monitor new users: people who opened an auction in the
//! same 10 s tumbling window as they registered.
//!
//! ```sql
//! SELECT P.id, P.name, P.starttime
//! FROM (
//!   SELECT id, name, window_start AS starttime, window_end AS endtime
//!   FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//!   GROUP BY id, name, window_start, window_end
//! ) P
//! JOIN (
//!   SELECT seller, window_start AS starttime, window_end AS endtime
//!   FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//!   GROUP BY seller, window_start, window_end
//! ) A
//! ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
//! ```
//!
//! Output `nexmark_q8`: `id,name,window_start`; key: all three. Both sides
//! are distinct per window (the `GROUP BY`s), so each person appears once
//! per window however many auctions they opened in it. Windows are
//! [`crate::ops::window::tumbling`].

use super::{Query, Source, int};
use crate::ops::window::tumbling;
use crate::schema::ColumnType::{Int, Str};
use crate::value::Value;

/// Window size (ms).
const SIZE: i64 = 10_000;

/// The `nexmark-q8` job: people who opened an auction in the window they registered in (see the
/// module docs).
pub static Q8: Query = Query {
    name: "nexmark-q8",
    about: "Nexmark q8: people who opened an auction in the 10 s window they registered in",
    inputs: &[
        Source {
            name: "person",
            reads: &[("id", Int), ("name", Str), ("date_time", Int)],
        },
        Source {
            name: "auction",
            reads: &[("seller", Int), ("date_time", Int)],
        },
    ],
    output: "nexmark_q8",
    columns: &["id", "name", "window_start"],
    key: None,
    build: |inputs| {
        Ok({
            let (person, auction) = (inputs.take("person")?, inputs.take("auction")?);
            let people = person
                .flat_map(|r| {
                    let start = tumbling(int(&r, 2)?, SIZE).0;
                    Some(((start, int(&r, 0)?), r[1].clone()))
                })
                .distinct();
            let sellers = auction
                .flat_map(|r| Some((tumbling(int(&r, 1)?, SIZE).0, int(&r, 0)?)))
                .distinct();
            people
                .semijoin(sellers)
                .map(|((start, id), name)| vec![Value::Int(id), name, Value::Int(start)])
        })
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{auction, person, run};
    use super::*;

    #[test]
    fn sellers_in_the_window_they_registered_in() {
        let people = vec![
            person(1, "ann", "or", 1_000),
            person(2, "bob", "or", 9_999),
            person(3, "cy", "or", 15_000),
        ];
        let auctions = vec![
            auction(100, 5_000, 0, 1, 10),
            auction(101, 10_000, 0, 2, 10), // bob registered in [0, 10 s)
            auction(102, 19_999, 0, 3, 10),
            auction(103, 12_000, 0, 3, 10), // a second auction: cy still once
        ];
        let out = run(&Q8, vec![people, auctions]);
        let row = |id, n: &str, s| vec![Value::Int(id), Value::str(n), Value::Int(s)];
        assert_eq!(out, vec![row(1, "ann", 0), row(3, "cy", 10_000)]);
    }
}
