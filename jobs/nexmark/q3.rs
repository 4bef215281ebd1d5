//! `nexmark-q3`, local item suggestion: who sells items of category 10 in
//! Oregon, Idaho or California, and which auctions.
//!
//! ```sql
//! SELECT P.name, P.city, P.state, A.id
//! FROM auction AS A INNER JOIN person AS P on A.seller = P.id
//! WHERE A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
//! ```
//!
//! The `nexmark` crate (as RisingWave's version of this query) writes states
//! in lower case, so the states compared are `or`, `id` and `ca`. Output
//! `nexmark_q3`: `name,city,state,id`; key: `id` (an auction has one seller,
//! and a person id is unique in the generated stream; a repeated person
//! would repeat the row, as the SQL join would).

use super::{Query, Source, int};
use crate::schema::ColumnType::{Int, Str};
use crate::value::{Row, Value};

/// The category and the states the query selects.
const CATEGORY: i64 = 10;
const STATES: [&str; 3] = ["or", "id", "ca"];

/// The `nexmark-q3` job: sellers of category-10 items in Oregon, Idaho or California, and their
/// auctions (see the module docs).
pub static Q3: Query = Query {
    name: "nexmark-q3",
    about: "Nexmark q3: sellers in OR, ID or CA of category-10 auctions (person join auction)",
    inputs: &[
        Source {
            name: "person",
            reads: &[("id", Int), ("name", Str), ("city", Str), ("state", Str)],
        },
        Source {
            name: "auction",
            reads: &[("id", Int), ("seller", Int), ("category", Int)],
        },
    ],
    output: "nexmark_q3",
    columns: &["name", "city", "state", "id"],
    key: Some(&[3]),
    build: |inputs| {
        Ok({
            let (person, auction) = (inputs.take("person")?, inputs.take("auction")?);
            let sellers = person.flat_map(|row| {
                let local = matches!(&row[3], Value::Str(s) if STATES.contains(&s.as_str()));
                let id = int(&row, 0).filter(|_| local)?;
                Some((id, row[1..4].to_vec()))
            });
            let items = auction.flat_map(|row| {
                (int(&row, 2)? == CATEGORY).then_some((int(&row, 1)?, row[0].clone()))
            });
            sellers.join_map(items, |_seller, p: &Row, auction_id: &Value| {
                let mut row = p.clone();
                row.push(auction_id.clone());
                row
            })
        })
    },
};

#[cfg(test)]
mod tests {
    use super::super::tests::{auction, person, run};
    use super::*;

    #[test]
    fn joins_local_sellers_with_category_10_auctions() {
        let people = vec![
            person(1, "ann", "or", 0),
            person(2, "bob", "wa", 0),
            person(3, "cy", "ca", 0),
        ];
        let auctions = vec![
            auction(100, 0, 10, 1, 10),
            auction(101, 0, 10, 2, 10), // seller in wa
            auction(102, 0, 10, 3, 11), // category 11
            auction(103, 0, 10, 3, 10),
            auction(104, 0, 10, 9, 10), // unknown seller
        ];
        let out = run(&Q3, vec![people, auctions]);
        let row = |n: &str, s: &str, id| {
            vec![
                Value::str(n),
                Value::str("boise"),
                Value::str(s),
                Value::Int(id),
            ]
        };
        assert_eq!(out, vec![row("ann", "or", 100), row("cy", "ca", 103)]);
    }
}
