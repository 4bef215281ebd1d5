//! Typed collections: a job reads an input as a collection of its own
//! `#[derive(Deserialize)]` struct and emits an output from a collection of
//! its own `#[derive(Serialize)]` struct, besides the dynamic [`Row`]s the
//! generic built-in jobs use.
//!
//! A struct's fields are columns, by name: [`Record::columns`] reads them
//! (and their types) off the struct itself, so a typed input is declared
//! once, by its struct ([`crate::job::InputSpec::typed`]). Fields may be
//! integers (`i64`, `i32`, `u32`, ...), floats, `String`s, or `Option`s of
//! those; a column whose field is not an `Option` must hold a value, and a
//! row where it is empty is a bad row, reported with its file, line and
//! column (or topic, partition and offset) by the source, like any other.
//!
//! Invariant: a projected row handed to [`from_row`] has the struct's
//! fields in order, typed as [`Record::columns`] says and non-null where the
//! field is not optional, so the conversion cannot fail for rows that came
//! through a source.

mod de;
mod probe;
mod ser;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use differential_dataflow::ExchangeData;
use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::schema::{ColumnType, ValueRule};
use crate::value::Row;

/// A struct a job reads rows as, or writes rows from.
pub trait Record: Serialize + DeserializeOwned + ExchangeData + std::hash::Hash {
    /// The struct's columns: name, type, and whether it may be null (an
    /// `Option` field), in field order; or why the type cannot be a record
    /// (it is not a struct of plain fields). Computed once per type.
    fn columns() -> Result<&'static Columns, TypedError> {
        columns_of::<Self>()
    }
}

impl<T: Serialize + DeserializeOwned + ExchangeData + std::hash::Hash> Record for T {}

/// The columns of a [`Record`].
#[derive(Debug)]
pub struct Columns {
    /// Name and type per field, in field order (what an `InputSpec` declares).
    pub declared: &'static [(&'static str, ColumnType)],
    /// Per field, what its values must be beyond the column type.
    pub rules: Vec<ValueRule>,
}

impl Columns {
    /// The field names, in order.
    pub fn names(&self) -> Vec<String> {
        self.declared.iter().map(|(n, _)| n.to_string()).collect()
    }
}

/// Why a value does not convert to or from a row: a struct a record cannot
/// be (not a struct of plain fields), or a value that does not fit.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct TypedError(pub String);

impl serde::de::Error for TypedError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        TypedError(msg.to_string())
    }
}

impl serde::ser::Error for TypedError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        TypedError(msg.to_string())
    }
}

/// The struct's value of a projected row (its fields in order).
pub fn from_row<T: DeserializeOwned>(row: &Row) -> Result<T, TypedError> {
    T::deserialize(de::RowDeserializer(row))
}

/// The row of a struct's value (its fields in order).
pub fn to_row<T: Serialize>(value: &T) -> Result<Row, TypedError> {
    value.serialize(ser::RowSerializer)
}

/// The columns of `T`, read off its `Deserialize` implementation once and
/// kept for the life of the process (one small entry per type).
fn columns_of<T: DeserializeOwned + 'static>() -> Result<&'static Columns, TypedError> {
    type Cache = HashMap<TypeId, Result<&'static Columns, TypedError>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    let entry = cache.entry(TypeId::of::<T>()).or_insert_with(|| {
        let fields = probe::fields::<T>().map_err(|e| {
            TypedError(format!(
                "{} cannot be a record: {e}",
                std::any::type_name::<T>()
            ))
        })?;
        let declared = fields.iter().map(|f| (f.name, f.ty)).collect::<Vec<_>>();
        let rules = fields.iter().map(|f| ValueRule {
            required: !f.nullable,
            range: f.range,
        });
        Ok(&*Box::leak(Box::new(Columns {
            declared: Box::leak(declared.into_boxed_slice()),
            rules: rules.collect(),
        })))
    });
    entry.clone()
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::value::Value;

    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    struct Payment {
        card: String,
        amount: i64,
        note: Option<String>,
        cents: u32,
    }

    #[test]
    fn columns_come_from_the_struct() {
        let c = Payment::columns().unwrap();
        assert_eq!(
            c.declared,
            &[
                ("card", ColumnType::Str),
                ("amount", ColumnType::Int),
                ("note", ColumnType::Str),
                ("cents", ColumnType::Int)
            ]
        );
        let required: Vec<bool> = c.rules.iter().map(|r| r.required).collect();
        assert_eq!(required, [false, false, true, false].map(|n| !n));
        assert_eq!(c.rules[3].range, Some((0, u32::MAX.into())));
        assert!(c.rules[3].check(&Value::Int(-1)).is_err());
        assert!(c.rules[0].check(&Value::Null).is_err());
        assert!(c.rules[2].check(&Value::Null).is_ok());
    }

    #[test]
    fn rows_convert_both_ways() {
        let row = vec![Value::str("c1"), Value::Int(5), Value::Null, Value::Int(7)];
        let p: Payment = from_row(&row).unwrap();
        assert_eq!(p.card, "c1");
        assert_eq!(p.note, None);
        assert_eq!(to_row(&p).unwrap(), row);
        let with_note = vec![
            Value::str("c1"),
            Value::Int(5),
            Value::str("n"),
            Value::Int(7),
        ];
        assert_eq!(
            to_row(&from_row::<Payment>(&with_note).unwrap()).unwrap(),
            with_note
        );
        let too_big = vec![Value::str("c1"), Value::Int(5), Value::Null, Value::Int(-1)];
        assert!(from_row::<Payment>(&too_big).is_err());
        assert!(from_row::<Payment>(&row[..2].to_vec()).is_err());
    }

    #[test]
    fn floats_and_mixed_columns_convert() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Reading {
            sensor: String,
            value: f64,
        }
        let r: Reading = from_row(&vec![Value::Int(12), Value::Int(3)]).unwrap();
        assert_eq!(
            r,
            Reading {
                sensor: "12".into(),
                value: 3.0
            }
        );
        assert_eq!(
            to_row(&r).unwrap(),
            vec![Value::str("12"), Value::float(3.0)]
        );
    }
}
