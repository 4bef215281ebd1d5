//! Log topics as input collections: records become typed, projected rows
//! with differences, exactly as the same rows would be read from files.
//!
//! The records come from a [`RecordLog`] (the embedded log or Kafka); how a
//! record's value encodes a row is the input's [`ValueFormat`]. In the
//! embedded log, values are rows of [`crate::log::rows`]: in a CSV topic
//! each element is a field's raw text and is typed with the same
//! [`ColumnType::parse`](crate::schema::ColumnType::parse) as a CSV file; in a
//! JSON lines topic elements are already typed and only coerced. Kafka values
//! are JSON objects (columns by name) or CSV lines, typed the same ways. So a
//! job reading a topic sees the same collection it would see reading the
//! files that were produced into it.
//!
//! Plain topics are append-only event collections: each record inserts its
//! row. Compacted topics are changelogs, read as tables: a record with a key
//! replaces the previous row for that key (retract the old, insert the new)
//! and a tombstone (empty value) retracts it. Keyless records in a compacted
//! topic are appended like events. The previous row per key is kept in
//! memory, and rebuilt on restart by replaying the partition.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::late::LateFilter;
use super::records::{LogTopic, RecordLog, RecordReader};
use super::state::{Capture, PartitionState, StateDelta};
use super::{BadRowPolicy, BadRows, Place, ReadOptions, RowLocation, SourceError};
use crate::format::{csv_reader, csv_width};
use crate::log::rows::{self, RowFormat, borrowed_csv_fields, decode_fields, typed};
use crate::log::{Log, RecordRef};
use crate::schema::{InputSchema, Projection};
use crate::value::{Row, Value};

/// How a record's value encodes a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueFormat {
    /// The embedded log's rows: one element per column of the topic.
    Array(RowFormat),
    /// A JSON object, columns by name (Kafka's default).
    Object,
    /// One CSV line of the declared columns, no header (Kafka's `format=csv`).
    CsvLine,
}

/// One job input bound to a log topic.
#[derive(Clone, Debug)]
pub struct TopicInput {
    /// The topic as the input names it: a topic of the embedded log, or a
    /// `kafka://` URL. Deployments record it; it is the input's identity.
    pub topic: String,
    /// Where its records are read from.
    pub log: Arc<dyn RecordLog>,
    /// The job's input name and the topic's columns.
    pub schema: InputSchema,
    /// How the topic's record values encode rows.
    pub format: ValueFormat,
    /// Whether the topic is compacted: a changelog, read as a table (a keyed
    /// record replaces its key's row, a tombstone retracts it) and never
    /// filtered as late.
    pub compacted: bool,
    /// The topic's number of partitions.
    pub partitions: u32,
}

impl TopicInput {
    /// Looks the topic up; it must already carry rows (its columns are set
    /// by the first producer).
    pub fn resolve(log: &Log, name: &str, topic: &str) -> Result<TopicInput, SourceError> {
        let info = log.topic(topic).map_err(|cause| SourceError::Log {
            topic: topic.into(),
            cause,
        })?;
        let format = match (info.config.row_format, info.config.columns.is_empty()) {
            (Some(f), false) => f,
            _ => {
                return Err(SourceError::NoColumns {
                    topic: topic.into(),
                });
            }
        };
        Ok(TopicInput {
            topic: topic.into(),
            log: LogTopic::shared(log, topic, info.config.partitions),
            schema: InputSchema {
                name: name.into(),
                columns: info.config.columns.clone(),
            },
            format: ValueFormat::Array(format),
            compacted: info.config.compact,
            partitions: info.config.partitions,
        })
    }
}

/// One partition of one input, read by one worker. Its reader lends each
/// record from its own buffer ([`RecordReader::visit`]); the record is typed
/// there, and only the last one consumed is copied (for its fingerprint).
pub struct PartitionSource {
    reader: Box<dyn RecordReader>,
    rows: PartitionRows,
}

/// What turns one partition's records, as its reader lends them, into row
/// changes.
struct PartitionRows {
    input: TopicInput,
    partition: u32,
    projection: Projection,
    /// Compacted topics: the current row of each key.
    current: HashMap<Vec<u8>, Row>,
    /// Event topics under the `drop` late-event policy.
    late: Option<LateFilter>,
    /// The buffer each record's row is typed into: a consumer that only
    /// looks at the row (an input combiner counting it) hands it back, so
    /// reading allocates no row per record.
    scratch: Row,
    /// What the records read change in the partition's state, when a
    /// checkpoint wants it ([`PartitionSource::capture`]).
    capture: Option<Capture>,
}

impl PartitionSource {
    /// Opens `partition` of `input` at its earliest retained offset.
    pub fn open(
        input: &TopicInput,
        partition: u32,
        projection: Projection,
    ) -> Result<PartitionSource, SourceError> {
        let reader = input.log.open(partition)?;
        Ok(PartitionSource::with_reader(
            input, partition, projection, reader,
        ))
    }

    /// Opens `partition` of `input` at `offset` (or at its earliest retained
    /// offset, if retention deleted more: [`PartitionSource::position`]
    /// tells), to go on from the state that the records before it made
    /// ([`PartitionSource::restore`]).
    pub fn open_at(
        input: &TopicInput,
        partition: u32,
        projection: Projection,
        offset: u64,
    ) -> Result<PartitionSource, SourceError> {
        let reader = input.log.open_at(partition, offset)?;
        Ok(PartitionSource::with_reader(
            input, partition, projection, reader,
        ))
    }

    fn with_reader(
        input: &TopicInput,
        partition: u32,
        projection: Projection,
        reader: Box<dyn RecordReader>,
    ) -> PartitionSource {
        // Changelogs are tables, not placed in time: never filtered as late.
        let late = match (projection.late, input.compacted) {
            (Some(rule), false) => Some(LateFilter::new(
                rule,
                format!("topic {} partition {partition}", input.log.name()),
            )),
            _ => None,
        };
        PartitionSource {
            reader,
            rows: PartitionRows {
                input: input.clone(),
                partition,
                late,
                projection,
                current: HashMap::new(),
                scratch: Row::new(),
                capture: None,
            },
        }
    }

    /// From now on, keeps what the records read change in the partition's
    /// state, for [`PartitionSource::take_delta`].
    pub fn capture(&mut self) {
        self.rows.capture.get_or_insert_with(Capture::default);
    }

    /// What the records read since the last take changed in the
    /// partition's state (`None`: nothing, or not capturing).
    pub fn take_delta(&mut self) -> Option<StateDelta> {
        let rows = &mut self.rows;
        let late = rows.late.as_ref().map(LateFilter::state);
        let delta = rows.capture.as_mut()?.take(&rows.current, late);
        (!delta.is_empty()).then_some(delta)
    }

    /// Goes on from `state`, what the records before this source's
    /// position made: the changelog's rows by key and the late filter's
    /// watermark. Returns the partition's rows in its input collection, for
    /// the caller to insert.
    pub fn restore(&mut self, state: PartitionState) -> Vec<(Row, isize)> {
        if let (Some(filter), Some(late)) = (self.rows.late.as_mut(), state.late) {
            filter.restore(late);
        }
        let (rows, keys) = state.into_rows();
        self.rows.current = keys;
        rows
    }

    /// The offset and fingerprint of the last record consumed.
    pub fn last_consumed(&self) -> Option<(u64, u32)> {
        let last = self.reader.last_lent();
        last.map(|r| (r.offset, r.fingerprint))
    }

    /// The append time and event time (when the producer gave one) of the
    /// last record consumed, in unix ms.
    pub fn last_times(&self) -> Option<(i64, Option<i64>)> {
        let last = self.reader.last_lent();
        last.map(|r| (r.append_ts, r.event_ts))
    }

    /// The partition of the topic this source reads.
    pub fn partition(&self) -> u32 {
        self.rows.partition
    }

    /// Under the `drop` policy, the lowest time an event read from now on can
    /// have and be admitted: `Some(i64::MIN)` before any timed event, `None`
    /// for a source that does not filter (a changelog, or `correct`).
    pub fn low_watermark(&self) -> Option<i64> {
        self.rows
            .late
            .as_ref()
            .map(|f| f.low_watermark().unwrap_or(i64::MIN))
    }

    /// Late events dropped since this source opened (it opens at the start
    /// of the partition, so this is the partition's total so far).
    pub fn late_dropped(&self) -> u64 {
        self.rows.late.as_ref().map_or(0, LateFilter::dropped)
    }

    /// The offset of the next record this source will read.
    pub fn position(&self) -> u64 {
        self.reader.position()
    }

    /// Whether the last read reached the end of the partition as the log
    /// knows it (a short read may otherwise mean records still on their way).
    pub fn at_end(&self) -> bool {
        self.reader.at_end()
    }

    /// Reads up to `max` records that are visible now and lie below `until`
    /// (if given), calling `emit` with each row change. Returns the number of
    /// records consumed (bad ones included). `emit` may take the row, or
    /// swap it for another buffer (as [`crate::runner::combine::Combiner`]
    /// does): the next record's row is typed into whatever it leaves.
    pub fn read(
        &mut self,
        max: usize,
        until: Option<u64>,
        options: &ReadOptions,
        bad: &mut BadRows,
        emit: &mut dyn FnMut(&mut Row, isize),
    ) -> Result<usize, SourceError> {
        let rows = &mut self.rows;
        let mut failed = None;
        let consumed = self.reader.visit(max, until, &mut |record| {
            if let Err((column, problem)) = rows.apply(record, options, emit) {
                let at = rows.locate(record.offset, column);
                match options.on_bad_row {
                    BadRowPolicy::Fail => {
                        failed = Some(SourceError::BadRow { at, problem });
                        return ControlFlow::Break(());
                    }
                    BadRowPolicy::Skip => bad.record(at, problem),
                }
            }
            ControlFlow::Continue(())
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(consumed),
        }
    }
}

impl PartitionRows {
    /// Where a record's (0-based) column is, for a bad row's message.
    fn locate(&self, offset: u64, column: Option<usize>) -> RowLocation {
        RowLocation {
            place: Place::Record {
                topic: self.input.log.name().to_string(),
                partition: self.partition,
                offset,
            },
            column: column.map(|c| (c + 1, self.input.schema.columns[c].clone())),
        }
    }

    /// Turns one record into row changes.
    fn apply(
        &mut self,
        record: RecordRef<'_>,
        options: &ReadOptions,
        emit: &mut dyn FnMut(&mut Row, isize),
    ) -> Result<(), (Option<usize>, String)> {
        let keyed = self.input.compacted.then_some(record.key).flatten();
        if record.is_tombstone() {
            let Some(key) = keyed else {
                return Err((
                    None,
                    "empty value (a tombstone) in a topic that is not a keyed changelog".into(),
                ));
            };
            if let Some(mut old) = self.current.remove(key) {
                if let Some(c) = self.capture.as_mut() {
                    c.keys.insert(key.to_vec());
                }
                emit(&mut old, -1);
            }
            return Ok(());
        }
        let mut row = std::mem::take(&mut self.scratch);
        row.clear();
        let decoded = self.decode(record.value, options, &mut row);
        if decoded.is_ok() {
            self.emit_row(keyed, &mut row, emit);
        }
        self.scratch = row;
        decoded
    }

    /// The changes a record's typed row makes: in a changelog it replaces
    /// its key's row; an event passes the late-event filter, if any.
    fn emit_row(
        &mut self,
        keyed: Option<&[u8]>,
        row: &mut Row,
        emit: &mut dyn FnMut(&mut Row, isize),
    ) {
        match keyed {
            Some(key) => {
                if let Some(c) = self.capture.as_mut() {
                    c.keys.insert(key.to_vec());
                }
                if let Some(mut old) = self.current.insert(key.to_vec(), row.clone()) {
                    emit(&mut old, -1);
                }
                emit(row, 1);
            }
            None => {
                let admitted = match self.late.as_mut() {
                    Some(f) => {
                        let before = f.state();
                        let admitted = f.admit(row);
                        if let Some(c) = self.capture.as_mut() {
                            c.late_moved |= f.state() != before;
                        }
                        admitted
                    }
                    None => true,
                };
                if admitted {
                    if let Some(c) = self.capture.as_mut() {
                        c.add(row, 1);
                    }
                    emit(row, 1);
                }
            }
        }
    }

    /// Types the projected row of a record value into `row` (empty).
    fn decode(
        &self,
        value: &[u8],
        options: &ReadOptions,
        row: &mut Row,
    ) -> Result<(), (Option<usize>, String)> {
        match self.input.format {
            ValueFormat::Array(format) => self.decode_array(value, format, options, row),
            ValueFormat::Object => self.decode_object(value, options, row),
            ValueFormat::CsvLine => self.decode_csv_line(value, options, row),
        }
    }

    /// A row of the embedded log, one element per column of the topic.
    fn decode_array(
        &self,
        value: &[u8],
        format: RowFormat,
        options: &ReadOptions,
        row: &mut Row,
    ) -> Result<(), (Option<usize>, String)> {
        if rows::is_binary(value) {
            let columns = self.input.schema.columns.len();
            let mut elements = rows::Elements::new();
            rows::elements_into(value, columns, &mut elements)
                .map_err(|e| (None, e.to_string()))?;
            let null = options.null.as_deref();
            row.reserve(self.projection.columns.len());
            for &(col, ty) in &self.projection.columns {
                let element = elements[col];
                match element.plain_int(ty, null) {
                    Some(i) => row.push(Value::Int(i)),
                    None => row.push(
                        element
                            .typed(format, ty, null)
                            .map_err(|e| (Some(col), e))?,
                    ),
                }
            }
            return self.checked(row);
        }
        // A version 0 value (a JSON array).
        if format == RowFormat::Csv {
            // Fast path: field texts borrowed from the value, no allocation
            // per field. Only strings without escapes borrow; anything else
            // takes the general path below, which types them the same way.
            if let Some(fields) = borrowed_csv_fields(value)
                && fields.len() == self.input.schema.columns.len()
            {
                return self.type_fields(&fields, options, row);
            }
        }
        let mut fields = decode_fields(value, format, self.input.schema.columns.len())
            .map_err(|e| (None, e.to_string()))?;
        row.reserve(self.projection.columns.len());
        for &(col, ty) in &self.projection.columns {
            let json = std::mem::take(&mut fields[col]);
            let null = options.null.as_deref();
            row.push(typed(json, format, ty, null).map_err(|e| (Some(col), e))?);
        }
        self.checked(row)
    }

    /// A JSON object, columns by name; a missing column is a bad row (a
    /// null one is a null).
    fn decode_object(
        &self,
        value: &[u8],
        options: &ReadOptions,
        row: &mut Row,
    ) -> Result<(), (Option<usize>, String)> {
        let mut object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(value).map_err(|e| (None, format!("not a JSON object: {e}")))?;
        row.reserve(self.projection.columns.len());
        for &(col, ty) in &self.projection.columns {
            let name = &self.input.schema.columns[col];
            let json = object
                .get_mut(name)
                .map(serde_json::Value::take)
                .ok_or_else(|| (Some(col), format!("no field {name:?} in the object")))?;
            let null = options.null.as_deref();
            row.push(typed(json, RowFormat::Jsonl, ty, null).map_err(|e| (Some(col), e))?);
        }
        self.checked(row)
    }

    /// One CSV line of the declared columns; an empty field is a null, as in
    /// a CSV file.
    fn decode_csv_line(
        &self,
        value: &[u8],
        options: &ReadOptions,
        row: &mut Row,
    ) -> Result<(), (Option<usize>, String)> {
        let record = csv_line(value).map_err(|e| (None, e))?;
        csv_width(self.input.schema.columns.len(), record.len(), false).map_err(|e| (None, e))?;
        let fields: Vec<Option<&str>> = record
            .iter()
            .map(|f| (!f.is_empty()).then_some(f))
            .collect();
        self.type_fields(&fields, options, row)
    }

    /// Whether `row` passes the projection's value rules.
    #[inline]
    fn checked(&self, row: &Row) -> Result<(), (Option<usize>, String)> {
        if self.projection.rules.is_empty() {
            return Ok(());
        }
        self.projection
            .check(row)
            .map_err(|(col, e)| (Some(col), e))
    }

    /// Types borrowed CSV field texts exactly as [`typed`] types them.
    fn type_fields(
        &self,
        fields: &[Option<&str>],
        options: &ReadOptions,
        row: &mut Row,
    ) -> Result<(), (Option<usize>, String)> {
        let null = options.null.as_deref();
        row.reserve(self.projection.columns.len());
        for &(col, ty) in &self.projection.columns {
            let value = match fields[col] {
                None => Value::Null,
                Some(text) if null == Some(text) => Value::Null,
                Some(text) => ty.parse(text).map_err(|e| (Some(col), e))?,
            };
            row.push(value);
        }
        self.checked(row)
    }
}

/// One message holding one CSV line (no header), read as CSV files are.
pub(crate) fn csv_line(value: &[u8]) -> Result<csv::StringRecord, String> {
    let mut record = csv::StringRecord::new();
    match csv_reader(value, value.len() + 1).read_record(&mut record) {
        Ok(true) => Ok(record),
        Ok(false) => Err("an empty message".into()),
        Err(e) => Err(format!("bad CSV: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::rows::encode_csv_row;
    use crate::log::{RecordIn, TopicConfig};
    use crate::schema::ColumnType;
    use crate::source::BadRowPolicy;

    /// A record to produce: its key, and its two fields (`None`: a tombstone).
    type TestRecord<'a> = (Option<&'a str>, Option<[Option<&'a str>; 2]>);

    /// A topic `t` with columns `k,v` holding `records`.
    fn topic(compact: bool, records: &[TestRecord]) -> (tempfile::TempDir, TopicInput) {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path()).unwrap();
        log.create_topic(
            "t",
            TopicConfig {
                compact,
                ..TopicConfig::default()
            },
        )
        .unwrap();
        let mut writer = log.writer("t").unwrap();
        writer
            .ensure_columns(&["k".to_string(), "v".to_string()], RowFormat::Csv)
            .unwrap();
        let values: Vec<Vec<u8>> = records
            .iter()
            .map(|(_, fields)| {
                let mut out = Vec::new();
                if let Some(fields) = fields {
                    encode_csv_row(fields.iter().copied(), &mut out);
                }
                out
            })
            .collect();
        let recs: Vec<RecordIn> = records
            .iter()
            .zip(&values)
            .map(|((key, _), v)| RecordIn::new(key.map(str::as_bytes), v))
            .collect();
        writer.append(&recs).unwrap();
        drop(writer);
        let input = TopicInput::resolve(&log, "in", "t").unwrap();
        (dir, input)
    }

    /// Both columns of the test topic, typed as `types`.
    fn projection(types: [ColumnType; 2]) -> Projection {
        Projection {
            input: "input".into(),
            columns: vec![(0, types[0]), (1, types[1])],
            late: None,
            rules: Vec::new(),
        }
    }

    fn read_all(
        input: &TopicInput,
        types: [ColumnType; 2],
        options: &ReadOptions,
    ) -> (Vec<(Row, isize)>, BadRows) {
        let mut part = PartitionSource::open(input, 0, projection(types)).unwrap();
        let (mut out, mut bad) = (Vec::new(), BadRows::default());
        part.read(1000, None, options, &mut bad, &mut |row, diff| {
            out.push((std::mem::take(row), diff))
        })
        .unwrap();
        (out, bad)
    }

    #[test]
    fn a_consumer_may_keep_swap_or_leave_the_row_buffer() {
        let (_d, input) = topic(
            false,
            &[
                (None, Some([Some("1"), Some("a")])),
                (None, Some([Some("2"), None])),
                (None, Some([Some("3"), Some("c")])),
                (None, Some([Some("4"), Some("d")])),
            ],
        );
        let types = [ColumnType::Int, ColumnType::Any];
        let mut part = PartitionSource::open(&input, 0, projection(types)).unwrap();
        let mut seen = Vec::new();
        let mut spare = vec![Value::str("stale"); 5];
        part.read(
            10,
            None,
            &ReadOptions::default(),
            &mut BadRows::default(),
            &mut |row, _| {
                seen.push(row.clone());
                // Records in turn: the buffer is left as it is, left with a
                // stale value pushed, swapped for a stale buffer, or taken.
                match seen.len() {
                    1 => {}
                    2 => row.push(Value::Int(99)),
                    3 => std::mem::swap(row, &mut spare),
                    _ => drop(std::mem::take(row)),
                }
            },
        )
        .unwrap();
        let row = |k: i64, v: Option<&str>| vec![Value::Int(k), v.map_or(Value::Null, Value::str)];
        assert_eq!(
            seen,
            vec![
                row(1, Some("a")),
                row(2, None),
                row(3, Some("c")),
                row(4, Some("d"))
            ]
        );
    }

    #[test]
    fn csv_fields_are_typed_like_a_csv_file_with_or_without_escapes() {
        let (_d, input) = topic(
            false,
            &[
                (None, Some([Some("7"), Some("007")])),
                (None, Some([Some("a\"b"), None])),
                (None, Some([Some("NA"), Some("1.5")])),
            ],
        );
        let options = ReadOptions {
            null: Some("NA".into()),
            on_bad_row: BadRowPolicy::Fail,
        };
        let (rows, _) = read_all(&input, [ColumnType::Any, ColumnType::Any], &options);
        let expected = vec![
            (vec![Value::Int(7), Value::str("007")], 1),
            (vec![Value::str("a\"b"), Value::Null], 1),
            (vec![Value::Null, Value::float(1.5)], 1),
        ];
        assert_eq!(rows, expected);
    }

    #[test]
    fn bad_fields_are_located_by_offset_or_counted() {
        let (_d, input) = topic(
            false,
            &[
                (None, Some([Some("1"), Some("x")])),
                (None, Some([Some("2"), Some("3")])),
            ],
        );
        let skip = ReadOptions {
            null: None,
            on_bad_row: BadRowPolicy::Skip,
        };
        let (rows, bad) = read_all(&input, [ColumnType::Int, ColumnType::Int], &skip);
        assert_eq!(rows, vec![(vec![Value::Int(2), Value::Int(3)], 1)]);
        assert_eq!(bad.count, 1);
        assert_eq!(
            bad.examples[0].0.to_string(),
            "topic t, partition 0, offset 0, column 2 (v)"
        );
        let types = [ColumnType::Int, ColumnType::Int];
        let mut part = PartitionSource::open(&input, 0, projection(types)).unwrap();
        let err = part
            .read(
                10,
                None,
                &ReadOptions::default(),
                &mut BadRows::default(),
                &mut |_, _| {},
            )
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("offset 0, column 2 (v): expected an integer"),
            "{err}"
        );
    }

    #[test]
    fn changelogs_are_read_as_tables() {
        let (_d, input) = topic(
            true,
            &[
                (Some("a"), Some([Some("a"), Some("1")])),
                (Some("b"), Some([Some("b"), Some("2")])),
                (Some("a"), Some([Some("a"), Some("3")])),
                (Some("b"), None),
                (Some("c"), None),
            ],
        );
        let (mut changes, _) = read_all(
            &input,
            [ColumnType::Any, ColumnType::Any],
            &ReadOptions::default(),
        );
        differential_dataflow::consolidation::consolidate(&mut changes);
        assert_eq!(changes, vec![(vec![Value::str("a"), Value::Int(3)], 1)]);
    }
}
