//! Aggregation by windows that close, releasing their state — for inputs
//! under the `drop` late-event policy (`late=drop`, a SQL `WATERMARK`).
//!
//! Differential's `reduce` keeps every window it has seen: it cannot know
//! that a window will never change again. Under `drop` it can be known.
//! Each stream worker announces, after each epoch, a low watermark for its
//! partitions ([`Watermark`]): every event it will still admit has a time at
//! or after it. Once every worker has announced, the minimum over them
//! bounds every future event, so a window whose end is at or before it is
//! closed: no event can enter it again, its output row is final (it stays
//! in the table), and its state here is dropped.
//!
//! [`close_groups`] keeps, per open group (a key holding a window's bound),
//! the multiset of its events' value rows and its current output row. At
//! each completed epoch it applies the epoch's changes and emits, per
//! touched group, the retraction of the old row and the new one — exactly
//! the updates the differential path (`group_aggregate`) produces, so
//! outputs are identical with and without release, and in every runner.
//! Announcements are applied only after all data of their epoch, so a
//! window is never dropped while events admitted before the watermark rose
//! are still on their way. [`ClosingWindow`] is the built-in `window-agg`'s
//! use of it; SQL groupings by `TUMBLE`/`HOP` bounds are the other.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::atomic::Ordering;

use differential_dataflow::AsCollection;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::vec::Broadcast;

use crate::job::{BuildContext, Rows, Time};
use crate::ops::aggregate::Aggregates;
use crate::ops::announced::Announced;
use crate::ops::pending::Pending;
use crate::ops::window::{WindowSpec, windowed_rows};
use crate::value::{Row, Value};

type Update = (Row, Time, isize);

/// One open window: its events' value rows and its current output row.
#[derive(Default)]
struct OpenWindow {
    values: BTreeMap<Row, isize>,
    output: Option<Row>,
}

/// Where the window to aggregate and release is described.
#[derive(Clone, Debug)]
pub struct ClosingWindow {
    /// The index of the integer event-time column in the input rows.
    pub time: usize,
    /// The indices of the key columns.
    pub key: Vec<usize>,
    /// The indices of the columns the aggregates read, in the order of the
    /// value rows [`Aggregates::resolve`] describes.
    pub values: Vec<usize>,
    /// The window kind and sizes, in the time column's unit: tumbling or
    /// hopping only (others never close).
    pub window: WindowSpec,
    /// The aggregates computed per key and window.
    pub aggs: Aggregates,
    /// The job input whose watermarks close windows.
    pub input: usize,
}

impl ClosingWindow {
    /// The aggregate rows: key columns, `window_start`, `window_end`, then
    /// one column per aggregate (as [`crate::ops::window::WindowAggregate`]).
    pub fn aggregate<'s>(self, rows: Rows<'s>, context: &BuildContext<'s>) -> Rows<'s> {
        let ClosingWindow {
            time,
            key,
            values,
            window,
            aggs,
            input,
        } = self;
        assert!(
            matches!(
                window,
                WindowSpec::Tumbling { .. } | WindowSpec::Hopping { .. }
            ),
            "only tumbling and hopping windows close"
        );
        let closes = Closes {
            input,
            column: key.len() + 1,
            time: |v| match v {
                Value::Int(t) => Some(*t),
                _ => None,
            },
            shift: 0,
            scale: 1,
        };
        let width = key.len() + 2;
        let windowed = rows.flat_map(move |row| windowed_rows(&row, time, &key, &values, window));
        close_groups(windowed, width, aggs, closes, context)
    }
}

/// When a group of [`close_groups`] closes: its end is the time in its key's
/// `column` (as `time` reads it) plus `shift`; it closes once that end is
/// at or before the low watermark of `input` times `scale`. Sound only when
/// every row of the group has a time before its end, and that time is the
/// input's event time times `scale` (or a non-decreasing function of it
/// bounded below by that): then no row the input still admits falls in it.
#[derive(Clone, Copy, Debug)]
pub struct Closes {
    /// The job input whose watermarks close groups.
    pub input: usize,
    /// The key column holding the time.
    pub column: usize,
    /// Reads the time (`None`: the group never closes).
    pub time: fn(&Value) -> Option<i64>,
    /// Added to the time to give the group's end (a window's size when the
    /// key holds its start).
    pub shift: i64,
    /// The key's time unit over the input's event-time unit.
    pub scale: i64,
}

impl Closes {
    /// Whether the group of `key` is closed when every event still to come
    /// has a time of at least `low`.
    fn closed(&self, key: &[Value], low: i64) -> bool {
        (self.time)(&key[self.column])
            .is_some_and(|t| t.saturating_add(self.shift) <= low.saturating_mul(self.scale))
    }
}

/// Aggregates rows laid out as `width` key columns then the value rows
/// [`Aggregates::resolve`] describes, per key, releasing a key's state once
/// `closes` says it is closed: output key columns, then one column per
/// aggregate, exactly the updates of [`crate::ops::aggregate::GroupAggregate`]
/// over the same rows. `context.held.windows` counts the groups held.
pub fn close_groups<'s>(
    rows: Rows<'s>,
    width: usize,
    aggs: Aggregates,
    closes: Closes,
    context: &BuildContext<'s>,
) -> Rows<'s> {
    let peers = rows.inner.scope().peers();
    let hasher = foldhash::fast::FixedState::with_seed(0x5eed);
    let by_key = Exchange::new(move |(row, _, _): &Update| hasher.hash_one(&row[..width]));
    let held = context.held.windows.clone();
    rows.inner
        .binary_frontier::<_, CapacityContainerBuilder<Vec<Update>>, _, _, _, _>(
            context.watermarks.clone().broadcast(),
            by_key,
            Pipeline,
            "ClosingGroups",
            move |_capability, _info| {
                let mut open: HashMap<Row, OpenWindow> = HashMap::new();
                let mut pending: Pending<(Row, isize)> = Pending::default();
                let mut announced = Announced::new(peers);
                let mut counted = 0i64;
                move |(data, frontier), (marks, _), output| {
                    data.for_each(|cap, batch| {
                        for (row, t, diff) in batch.drain(..) {
                            pending.hold(t, || cap.delayed(&t, 0), (row, diff));
                        }
                    });
                    marks.for_each(|_cap, batch| announced.receive(batch.drain(..)));
                    while let Some((t, cap, updates)) = pending.release(|t| !frontier.less_equal(t))
                    {
                        let mut session = output.session(&cap);
                        for (row, diff) in apply(&mut open, updates, width, &aggs) {
                            session.give((row, t, diff));
                        }
                    }
                    if announced.advance(|t| !frontier.less_equal(t))
                        && let Some(bound) = announced.bound(closes.input)
                    {
                        open.retain(|key, _| !closes.closed(key, bound));
                    }
                    let now = open.len() as i64;
                    held.fetch_add(now - counted, Ordering::Relaxed);
                    counted = now;
                }
            },
        )
        .as_collection()
}

/// Applies one epoch's updates to the open windows; returns the output
/// changes (old rows retracted, new rows added).
fn apply(
    open: &mut HashMap<Row, OpenWindow>,
    updates: Vec<(Row, isize)>,
    width: usize,
    aggs: &Aggregates,
) -> Vec<(Row, isize)> {
    let mut touched: HashMap<Row, Vec<(Row, isize)>> = HashMap::new();
    for (mut row, diff) in updates {
        let values = row.split_off(width);
        touched.entry(row).or_default().push((values, diff));
    }
    let mut changes = Vec::new();
    for (window, updates) in touched {
        let state = open.entry(window.clone()).or_default();
        for (values, diff) in updates {
            let n = state.values.entry(values).or_insert(0);
            *n += diff;
            if *n == 0 {
                state.values.retain(|_, n| *n != 0);
            }
        }
        let new = (!state.values.is_empty()).then(|| {
            let group: Vec<(&Row, isize)> = state.values.iter().map(|(r, n)| (r, *n)).collect();
            let mut row = window.clone();
            row.extend(aggs.compute(&group));
            row
        });
        if new != state.output {
            if let Some(old) = state.output.take() {
                changes.push((old, -1));
            }
            if let Some(new) = &new {
                changes.push((new.clone(), 1));
            }
            state.output = new;
        }
        if state.values.is_empty() {
            open.remove(&window);
        }
    }
    changes
}
