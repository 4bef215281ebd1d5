//! Nexmark, the streaming benchmark of the field (Flink, Feldera/DBSP,
//! RisingWave, Arroyo), as kappa jobs: one file per query, each with its
//! intent and the reference SQL of the Flink nexmark repository
//! (`nexmark-flink/src/main/resources/queries/qN.sql`) in its doc comment.
//!
//! Inputs are the three event kinds as `kappa nexmark gen` writes them (CSV
//! files or log topics), named `person`, `auction` and `bid`, with the
//! columns below. Event time is the `date_time` column (epoch ms), a plain
//! data column: windows are computed from it, never from the wall clock or
//! from epochs, so every query gives the same output in batch and stream
//! and on any worker count.
//!
//! Shared here: the column lists, a table-driven [`Query`] (spec, plan and
//! dataflow from a few constants, so that each query file holds only its
//! semantics), and the join of bids with the auctions they fall inside
//! (q4, q9). Nulls follow SQL: a row whose key, time or compared column is
//! null takes part in no join, window or comparison.

pub mod q0;
pub mod q1;
pub mod q2;
pub mod q3;
pub mod q4;
pub mod q5;
pub mod q7;
pub mod q8;
pub mod q9;

use differential_dataflow::VecCollection;

use crate::job::Time;
use crate::prelude::*;

/// Person columns, in the order `kappa nexmark gen` writes them.
pub const PERSON: &[&str] = &[
    "id",
    "name",
    "email_address",
    "credit_card",
    "city",
    "state",
    "date_time",
    "extra",
];
/// Auction columns.
pub const AUCTION: &[&str] = &[
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
];
/// Bid columns.
pub const BID: &[&str] = &[
    "auction",
    "bidder",
    "price",
    "channel",
    "url",
    "date_time",
    "extra",
];

/// One input of a query: the event kind and the columns it reads, in the
/// order its rows carry them.
pub struct Source {
    /// The job input, named after its event kind: `person`, `auction` or
    /// `bid`.
    pub name: &'static str,
    /// The columns read (a subset of [`PERSON`], [`AUCTION`] or [`BID`])
    /// and their types.
    pub reads: &'static [(&'static str, ColumnType)],
}

/// Builds a query's output from its inputs (taken by name).
pub type Build = for<'s> fn(&mut Inputs<'s>) -> Result<Rows<'s>, BuildError>;

/// A Nexmark query as a job: one output, fixed columns, no parameters.
pub struct Query {
    /// The job's name (`nexmark-q5`).
    pub name: &'static str,
    /// One line for `kappa jobs`, also the output's.
    pub about: &'static str,
    /// The inputs, in spec order (the build function takes them by name).
    pub inputs: &'static [Source],
    /// The output's name (`nexmark_q5`).
    pub output: &'static str,
    /// The output's column names.
    pub columns: &'static [&'static str],
    /// The output's key columns; `None` when the output is a bag (the key is the whole row).
    pub key: Option<&'static [usize]>,
    /// Builds the output collection from the inputs.
    pub build: Build,
}

impl Job for Query {
    fn spec(&self) -> JobSpec {
        JobSpec {
            name: self.name,
            version: 1,
            about: self.about,
            inputs: self
                .inputs
                .iter()
                .map(|s| InputSpec {
                    name: s.name,
                    columns: s.reads,
                    format: None,
                    about: match s.name {
                        "person" => "Nexmark person events (kappa nexmark gen)",
                        "auction" => "Nexmark auction events (kappa nexmark gen)",
                        _ => "Nexmark bid events (kappa nexmark gen)",
                    },
                })
                .collect(),
            params: Vec::new(),
            outputs: vec![OutputSpec {
                name: self.output,
                about: self.about,
            }],
        }
    }

    fn plan(
        &self,
        _params: &Params,
        inputs: &Schemas,
        _data: &dyn DataContext,
    ) -> Result<Plan, PlanError> {
        let projections = self
            .inputs
            .iter()
            .map(|source| inputs.project(source.name))
            .collect::<Result<Vec<_>, _>>()?;
        let width = self.columns.len();
        Ok(Plan::new(
            projections,
            vec![OutputSchema {
                name: self.output.into(),
                columns: self.columns.iter().map(|c| c.to_string()).collect(),
                key: self
                    .key
                    .map_or_else(|| (0..width).collect(), |k| k.to_vec()),
            }],
            QueryFlow {
                output: self.output,
                build: self.build,
            },
        ))
    }
}

struct QueryFlow {
    output: &'static str,
    build: Build,
}

impl Dataflow for QueryFlow {
    fn build<'s>(
        &self,
        mut inputs: Inputs<'s>,
        _context: &BuildContext<'s>,
    ) -> Result<Outputs<'s>, BuildError> {
        Ok(Outputs::new().with(self.output, (self.build)(&mut inputs)?))
    }
}

/// The integer at `i`, or `None` for a null (the plan types the column as an integer).
pub fn int(row: &Row, i: usize) -> Option<i64> {
    row[i].as_i64()
}

/// A keyed collection in a query's scope.
pub type Keyed<'s, K, V> = VecCollection<'s, Time, (K, V)>;

/// Joins auctions `(id, (date_time, expires, A))` with bids
/// `(auction, (date_time, B))`, keeping the pairs whose bid falls inside the
/// auction's lifetime: `B.dateTime BETWEEN A.dateTime AND A.expires`
/// (inclusive at both ends, as SQL's `BETWEEN`). Yields `(id, A, B)` through
/// `f`.
pub fn bids_in_lifetime<'s, A, B, R>(
    auctions: Keyed<'s, i64, (i64, i64, A)>,
    bids: Keyed<'s, i64, (i64, B)>,
    f: impl Fn(i64, &A, &B) -> R + 'static,
) -> VecCollection<'s, Time, R>
where
    A: differential_dataflow::ExchangeData,
    B: differential_dataflow::ExchangeData,
    R: differential_dataflow::Data,
{
    let auctions = auctions.arrange_by_key();
    bids.arrange_by_key()
        .join_core(auctions, move |id, (t, b), (start, expires, a)| {
            (start <= t && t <= expires).then(|| f(*id, a, b))
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::run_job;

    /// Runs `query` (on 1 and 3 workers) over inputs given as full rows of
    /// their event kind; returns its output rows, sorted.
    pub fn run(query: &'static Query, inputs: Vec<Vec<Row>>) -> Vec<Row> {
        let columns: Vec<String> = query
            .inputs
            .iter()
            .map(|s| match s.name {
                "person" => PERSON.join(","),
                "auction" => AUCTION.join(","),
                _ => BID.join(","),
            })
            .collect();
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        run_job(query, &[], &columns, inputs).remove(0)
    }

    /// A bid row: auction, bidder, price, date_time, extra (channel and url made up).
    pub fn bid(auction: i64, bidder: i64, price: i64, t: i64, extra: &str) -> Row {
        vec![
            Value::Int(auction),
            Value::Int(bidder),
            Value::Int(price),
            Value::str("Google"),
            Value::str("https://example.com/"),
            Value::Int(t),
            Value::str(extra),
        ]
    }

    /// An auction row: id, date_time, expires, seller, category (other columns made up).
    pub fn auction(id: i64, t: i64, expires: i64, seller: i64, category: i64) -> Row {
        vec![
            Value::Int(id),
            Value::str("item"),
            Value::str("desc"),
            Value::Int(10),
            Value::Int(20),
            Value::Int(t),
            Value::Int(expires),
            Value::Int(seller),
            Value::Int(category),
            Value::str(""),
        ]
    }

    /// A person row: id, name, state, date_time (other columns made up).
    pub fn person(id: i64, name: &str, state: &str, t: i64) -> Row {
        vec![
            Value::Int(id),
            Value::str(name),
            Value::str("x@y.com"),
            Value::str("1111 2222 3333 4444"),
            Value::str("boise"),
            Value::str(state),
            Value::Int(t),
            Value::str(""),
        ]
    }
}
