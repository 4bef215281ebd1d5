//! Values in and out of SQLite, and reading a version table back as rows
//! with multiplicities.
//!
//! A [`Value`] is stored as the SQLite value of the same kind: `Null` as
//! NULL, `Int` as INTEGER, `Float` as REAL, `Str` as TEXT (UTF-8), always
//! through bound parameters; a boolean, date or timestamp as its text
//! ([`Value::stored`]), and so read back as text. Columns have no declared type, so SQLite keeps
//! each value as given and reading it back gives the same `Value` (except a
//! NaN float, which SQLite stores as NULL). A BLOB, or TEXT that is not
//! UTF-8, is never written by kappa; reading one is a `Corrupt` error naming
//! the table and column.

use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

use crate::value::{Row, Value};

use super::catalog::deployment_in;
use super::deployment::{Deployment, DeploymentState, is_bag};
use super::epoch::half_written_refusal;
use super::ident::{quote, split_version};
use super::{SqliteStore, TableError, TablePage};

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Float(f) => ValueRef::Real(f.get()),
            Value::Str(s) => ValueRef::Text(s.as_bytes()),
            Value::Bool(_) | Value::Date(_) | Value::Timestamp(_) => {
                return Ok(ToSqlOutput::Owned(rusqlite::types::Value::Text(
                    self.to_string(),
                )));
            }
        }))
    }
}

/// The `Value` SQLite holds, or why it is not one kappa wrote.
fn value_of(v: ValueRef<'_>, table: &str, column: &str) -> Result<Value, TableError> {
    let corrupt = |reason: &str| TableError::Corrupt {
        what: format!("table '{table}', column '{column}'"),
        reason: reason.to_string(),
    };
    match v {
        ValueRef::Null => Ok(Value::Null),
        ValueRef::Integer(i) => Ok(Value::Int(i)),
        ValueRef::Real(f) => Ok(Value::float(f)),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .map(Value::str)
            .map_err(|_| corrupt("TEXT that is not UTF-8")),
        ValueRef::Blob(_) => Err(corrupt("a BLOB, which kappa never writes")),
    }
}

impl SqliteStore {
    /// Every row of version table `table` (`OUTPUT__vN`) with its
    /// multiplicity, sorted by `Row`'s order. `TableNotFound` for a name
    /// that is not a version table of a deployment that still has its tables.
    pub(super) fn read_rows(&self, table: &str) -> Result<Vec<(Row, isize)>, TableError> {
        let mut rows = self.read_whole(table, |d, index| self.select(d, index, None))?;
        rows.sort();
        Ok(rows)
    }

    /// `read(deployment, output index)` of version table `table`, in one
    /// read transaction that sees no epoch half-written: a building version
    /// written in pieces (`epoch::PIECE_ROWS`) is read once its epoch is
    /// whole ([`SqliteStore::await_whole`]).
    fn read_whole<T>(
        &self,
        table: &str,
        read: impl Fn(&Deployment, usize) -> Result<T, TableError>,
    ) -> Result<T, TableError> {
        let since = std::time::Instant::now();
        loop {
            let tx = self.conn.unchecked_transaction()?;
            let (d, index) = self.resolve_table(table)?;
            if !d.half_written {
                let value = read(&d, index)?;
                tx.commit()?;
                return Ok(value);
            }
            drop(tx);
            self.await_whole(&d, since, half_written_refusal!("be read"))?;
        }
    }

    /// The first `limit` rows of `table` in SQL order (which is `Row`'s order
    /// except that an integer and an equal float may come in either order),
    /// with the table's row counts.
    pub(super) fn read_page(&self, table: &str, limit: usize) -> Result<TablePage, TableError> {
        self.read_whole(table, |d, index| {
            let name = d.table(index);
            let (distinct, total) = self.counts(&name)?;
            let mut rows = self.select(d, index, Some(limit))?;
            rows.sort();
            let schema = &d.outputs[index];
            Ok(TablePage {
                table: name,
                columns: schema.columns.clone(),
                bag: is_bag(schema),
                rows,
                distinct,
                total,
            })
        })
    }

    /// The number of distinct rows of `table`, and of rows counted with
    /// their multiplicities.
    pub(super) fn row_counts(&self, table: &str) -> Result<(u64, u64), TableError> {
        self.read_whole(table, |d, index| self.counts(&d.table(index)))
    }

    fn counts(&self, table: &str) -> Result<(u64, u64), TableError> {
        let (distinct, total): (u64, Option<u64>) = self.conn.query_row(
            &format!("SELECT count(*), sum(kappa_n) FROM {}", quote(table)),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((distinct, total.unwrap_or(0)))
    }

    /// The deployment and output index of a version table that exists.
    fn resolve_table(&self, table: &str) -> Result<(Deployment, usize), TableError> {
        let not_found = || TableError::TableNotFound {
            table: table.to_string(),
        };
        let (output, version) = split_version(table).ok_or_else(not_found)?;
        let id: i64 = self
            .conn
            .query_row(
                "SELECT deployment FROM kappa_outputs WHERE output = ?1 AND version = ?2",
                rusqlite::params![output, version],
                |r| r.get(0),
            )
            .map_err(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => not_found(),
                e => e.into(),
            })?;
        let d = deployment_in(&self.conn, id)?;
        if d.state == DeploymentState::Dropped {
            return Err(not_found());
        }
        let index = d.output_index(output).ok_or_else(not_found)?;
        Ok((d, index))
    }

    /// The rows of output `index`, ordered by SQL when limited.
    fn select(
        &self,
        d: &Deployment,
        index: usize,
        limit: Option<usize>,
    ) -> Result<Vec<(Row, isize)>, TableError> {
        let table = d.table(index);
        let columns = &d.outputs[index].columns;
        let quoted: Vec<String> = columns.iter().map(|c| quote(c)).collect();
        let mut sql = format!(
            "SELECT {}, kappa_n FROM {}",
            quoted.join(", "),
            quote(&table)
        );
        if let Some(limit) = limit {
            sql.push_str(&format!(" ORDER BY {} LIMIT {limit}", quoted.join(", ")));
        }
        let mut stmt = self.conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut row = Row::with_capacity(columns.len());
            for (i, c) in columns.iter().enumerate() {
                row.push(value_of(r.get_ref(i)?, &table, c)?);
            }
            let n: i64 = r.get(columns.len())?;
            out.push((row, n as isize));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_map_to_sqlite_kinds_and_back() {
        let values = [
            Value::Null,
            Value::Int(i64::MIN),
            Value::float(-2.5),
            Value::str("it's \"quoted\"; DROP TABLE x; --"),
        ];
        for v in values {
            let out = v.to_sql().unwrap();
            let ToSqlOutput::Borrowed(r) = out else {
                panic!("borrowed")
            };
            assert_eq!(value_of(r, "t", "c").unwrap(), v);
        }
        let err = value_of(ValueRef::Blob(b"x"), "t__v1", "c").unwrap_err();
        assert!(err.to_string().contains("BLOB"), "{err}");
    }
}
