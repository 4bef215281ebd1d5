//! Scalar expressions, bound to column positions, and their evaluation
//! over a row.
//!
//! Semantics are SQL's (PostgreSQL's where dialects differ), as documented
//! in the README's SQL section:
//! - Three-valued logic: a comparison with null is null, `AND`/`OR` follow
//!   Kleene's tables, `WHERE` keeps a row only when its condition is true.
//! - Booleans are [`Value::Bool`]; the text values `true` and `false` (as
//!   an inferred JSON or CSV column gives them) count as booleans too.
//! - Dates and timestamps are [`Value::Date`] and [`Value::Timestamp`]
//!   ([`crate::calendar`]): a date plus or minus an integer is a date, the
//!   difference of two dates an integer number of days, a date or timestamp
//!   plus an interval a timestamp; a result outside years 1 to 9999 is null.
//! - Integer arithmetic is exact; a result beyond `i64` becomes a float
//!   (as `sum` does). `/` of two integers truncates (PostgreSQL, Flink);
//!   division or modulo by zero is null (DuckDB), never an error, so that a
//!   running stream cannot fail on one row.
//! - `CAST` of a value that does not convert (`CAST('x' AS INT)`) is null,
//!   as `TRY_CAST`; declare the input column's type (`CREATE TABLE`) to
//!   have such rows reported as bad rows by the source instead.
//!
//! Evaluation never panics and never depends on anything but the row.

use std::cmp::Ordering;

use compact_str::{CompactString, ToCompactString};

use crate::calendar::{self, Field, Interval};
use crate::value::{F64, Value};

/// A bound expression over the columns of one row.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// The value at a position of the row.
    Column(usize),
    /// A constant.
    Literal(Value),
    /// `-x`.
    Neg(Box<Scalar>),
    /// `NOT x`.
    Not(Box<Scalar>),
    /// `x + y` and the other arithmetic operators.
    Arith(Arith, Box<Scalar>, Box<Scalar>),
    /// `x = y` and the other comparisons.
    Compare(Compare, Box<Scalar>, Box<Scalar>),
    /// `x AND y`.
    And(Box<Scalar>, Box<Scalar>),
    /// `x OR y`.
    Or(Box<Scalar>, Box<Scalar>),
    /// `x || y`: null if either is.
    Concat(Box<Scalar>, Box<Scalar>),
    /// `x IS NULL` (`true`) or `x IS NOT NULL` (`false`).
    IsNull(Box<Scalar>, bool),
    /// `CASE WHEN c THEN r ... ELSE e END` (a `CASE x WHEN v` is bound to
    /// comparisons).
    Case(Vec<(Scalar, Scalar)>, Box<Scalar>),
    /// `CAST(x AS t)`.
    Cast(Box<Scalar>, CastTo),
    /// A function call.
    Call(Func, Vec<Scalar>),
    /// `x [NOT] LIKE p` (`ILIKE` when `insensitive`).
    Like {
        /// The text matched.
        expr: Box<Scalar>,
        /// The pattern: `%` any text, `_` one character.
        pattern: Box<Scalar>,
        /// An escape character for `%`, `_` and itself.
        escape: Option<char>,
        /// `NOT LIKE`.
        negated: bool,
        /// `ILIKE`.
        insensitive: bool,
    },
    /// `x [NOT] IN (a, b, ...)`.
    InList(Box<Scalar>, Vec<Scalar>, bool),
    /// A date or timestamp plus an interval: a timestamp.
    Shift(Box<Scalar>, Interval),
}

/// Arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl Compare {
    /// The same comparison with its operands swapped (`a < b` is `b > a`).
    pub fn flipped(self) -> Compare {
        match self {
            Compare::Lt => Compare::Gt,
            Compare::LtEq => Compare::GtEq,
            Compare::Gt => Compare::Lt,
            Compare::GtEq => Compare::LtEq,
            same => same,
        }
    }
}

/// The types `CAST` converts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastTo {
    /// `INTEGER`, `BIGINT`, ...: floats round half away from zero.
    Int,
    /// `DOUBLE`, `FLOAT`, `REAL`, `DECIMAL`, `NUMERIC`.
    Float,
    /// `TEXT`, `VARCHAR`, ...
    Text,
    /// `BOOLEAN`.
    Bool,
    /// `DATE` (a timestamp's date; text as `YYYY-MM-DD`, or a timestamp's text).
    Date,
    /// `TIMESTAMP` (a date's midnight; ISO text).
    Timestamp,
}

/// Scalar functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// The first non-null argument.
    Coalesce,
    /// `NULLIF(a, b)`: null when `a = b`, else `a`.
    NullIf,
    /// Lower case.
    Lower,
    /// Upper case.
    Upper,
    /// Length in characters.
    Length,
    /// `TRIM([BOTH] [chars FROM] s)`; the second argument is the characters (default space).
    Trim,
    /// `TRIM(LEADING ...)`.
    LTrim,
    /// `TRIM(TRAILING ...)`.
    RTrim,
    /// `SUBSTRING(s FROM start [FOR len])`, 1-based, in characters.
    Substring,
    /// `REPLACE(s, from, to)`.
    Replace,
    /// Absolute value.
    Abs,
    /// `ROUND(x [, digits])`, half away from zero.
    Round,
    /// Largest integer not above.
    Floor,
    /// Smallest integer not below.
    Ceil,
    /// `CONCAT(a, b, ...)`: nulls are skipped.
    ConcatFn,
    /// The largest non-null argument.
    Greatest,
    /// The smallest non-null argument.
    Least,
    /// `EXTRACT(field FROM d)` of a date or timestamp.
    Extract(Field),
    /// `date_trunc('field', d)`: a date stays a date.
    DateTrunc(Field),
    /// `to_timestamp(seconds)`: seconds since 1970-01-01 (a fraction kept to
    /// the microsecond).
    ToTimestamp,
    /// `epoch_ms(ms)`: milliseconds since 1970-01-01.
    EpochMs,
    /// `make_date(year, month, day)`.
    MakeDate,
}

impl Func {
    /// The function of a name, and the numbers of arguments it takes.
    pub fn by_name(name: &str) -> Option<(Func, std::ops::RangeInclusive<usize>)> {
        Some(match name {
            "coalesce" => (Func::Coalesce, 1..=usize::MAX),
            "nullif" => (Func::NullIf, 2..=2),
            "lower" => (Func::Lower, 1..=1),
            "upper" => (Func::Upper, 1..=1),
            "length" | "char_length" | "character_length" => (Func::Length, 1..=1),
            "trim" | "btrim" => (Func::Trim, 1..=2),
            "ltrim" => (Func::LTrim, 1..=2),
            "rtrim" => (Func::RTrim, 1..=2),
            "substring" | "substr" => (Func::Substring, 2..=3),
            "replace" => (Func::Replace, 3..=3),
            "abs" => (Func::Abs, 1..=1),
            "round" => (Func::Round, 1..=2),
            "floor" => (Func::Floor, 1..=1),
            "ceil" | "ceiling" => (Func::Ceil, 1..=1),
            "concat" => (Func::ConcatFn, 1..=usize::MAX),
            "greatest" => (Func::Greatest, 1..=usize::MAX),
            "least" => (Func::Least, 1..=usize::MAX),
            "to_timestamp" => (Func::ToTimestamp, 1..=1),
            "epoch_ms" => (Func::EpochMs, 1..=1),
            "make_date" => (Func::MakeDate, 3..=3),
            _ => return None,
        })
    }
}

/// A boolean value.
pub fn boolean(b: bool) -> Value {
    Value::Bool(b)
}

/// A value as a truth value: null (and any text but `true` and `false`) is
/// unknown.
pub fn truth(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Str(s) if s == "true" => Some(true),
        Value::Str(s) if s == "false" => Some(false),
        _ => None,
    }
}

fn tri(b: Option<bool>) -> Value {
    b.map_or(Value::Null, boolean)
}

impl Scalar {
    /// Shorthand for a binary node.
    pub fn binary(make: fn(Box<Scalar>, Box<Scalar>) -> Scalar, a: Scalar, b: Scalar) -> Scalar {
        make(Box::new(a), Box::new(b))
    }

    /// Whether the expression is true for `row` (what `WHERE` keeps).
    pub fn holds(&self, row: &[Value]) -> bool {
        truth(&self.eval(row)) == Some(true)
    }

    /// The value for `row`.
    pub fn eval(&self, row: &[Value]) -> Value {
        match self {
            Scalar::Column(i) => row[*i].clone(),
            Scalar::Literal(v) => v.clone(),
            Scalar::Neg(x) => match x.eval(row) {
                Value::Int(i) => i
                    .checked_neg()
                    .map_or(Value::float(-(i as f64)), Value::Int),
                Value::Float(f) => Value::float(-f.get()),
                _ => Value::Null,
            },
            Scalar::Not(x) => tri(truth(&x.eval(row)).map(|b| !b)),
            Scalar::Arith(op, a, b) => arith(*op, a.eval(row), b.eval(row)),
            Scalar::Compare(op, a, b) => tri(compare(*op, &a.eval(row), &b.eval(row))),
            Scalar::And(a, b) => tri(and(truth(&a.eval(row)), || truth(&b.eval(row)))),
            Scalar::Or(a, b) => tri(or(truth(&a.eval(row)), || truth(&b.eval(row)))),
            Scalar::Concat(a, b) => match (a.eval(row), b.eval(row)) {
                (Value::Null, _) | (_, Value::Null) => Value::Null,
                (a, b) => Value::Str(format!("{a}{b}").into()),
            },
            Scalar::IsNull(x, is) => boolean(x.eval(row).is_null() == *is),
            Scalar::Case(branches, otherwise) => branches
                .iter()
                .find(|(when, _)| when.holds(row))
                .map_or_else(|| otherwise.eval(row), |(_, then)| then.eval(row)),
            Scalar::Cast(x, to) => cast(x.eval(row), *to),
            Scalar::Call(f, args) => call(*f, args, row),
            Scalar::Like {
                expr,
                pattern,
                escape,
                negated,
                insensitive,
            } => match (expr.eval(row), pattern.eval(row)) {
                (Value::Null, _) | (_, Value::Null) => Value::Null,
                (text, pattern) => {
                    let (text, pattern) = (text.to_compact_string(), pattern.to_compact_string());
                    let matched = if *insensitive {
                        like(&text.to_lowercase(), &pattern.to_lowercase(), *escape)
                    } else {
                        like(&text, &pattern, *escape)
                    };
                    boolean(matched != *negated)
                }
            },
            Scalar::InList(x, list, negated) => {
                let v = x.eval(row);
                let mut found = Some(false);
                for item in list {
                    match compare(Compare::Eq, &v, &item.eval(row)) {
                        Some(true) => {
                            found = Some(true);
                            break;
                        }
                        None => found = None,
                        Some(false) => {}
                    }
                }
                tri(found.map(|f| f != *negated))
            }
            Scalar::Shift(x, by) => match instant(&x.eval(row)) {
                Some(t) => shift(t, *by),
                None => Value::Null,
            },
        }
    }

    /// The column positions the expression reads.
    pub fn columns(&self, out: &mut Vec<usize>) {
        self.visit(&mut |s| {
            if let Scalar::Column(i) = s {
                out.push(*i)
            }
        });
    }

    /// The expression with each column position replaced by `map(position)`.
    pub fn remap(&self, map: &dyn Fn(usize) -> usize) -> Scalar {
        let mut s = self.clone();
        s.visit_mut(&mut |s| {
            if let Scalar::Column(i) = s {
                *i = map(*i)
            }
        });
        s
    }

    fn children(&self) -> Vec<&Scalar> {
        match self {
            Scalar::Column(_) | Scalar::Literal(_) => vec![],
            Scalar::Neg(x)
            | Scalar::Not(x)
            | Scalar::IsNull(x, _)
            | Scalar::Cast(x, _)
            | Scalar::Shift(x, _) => vec![x],
            Scalar::Arith(_, a, b)
            | Scalar::Compare(_, a, b)
            | Scalar::And(a, b)
            | Scalar::Or(a, b)
            | Scalar::Concat(a, b) => vec![a, b],
            Scalar::Case(branches, otherwise) => branches
                .iter()
                .flat_map(|(w, t)| [w, t])
                .chain([&**otherwise])
                .collect(),
            Scalar::Call(_, args) => args.iter().collect(),
            Scalar::Like { expr, pattern, .. } => vec![expr, pattern],
            Scalar::InList(x, list, _) => std::iter::once(&**x).chain(list).collect(),
        }
    }

    fn visit(&self, f: &mut dyn FnMut(&Scalar)) {
        f(self);
        for c in self.children() {
            c.visit(f);
        }
    }

    fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Scalar)) {
        f(self);
        match self {
            Scalar::Column(_) | Scalar::Literal(_) => {}
            Scalar::Neg(x)
            | Scalar::Not(x)
            | Scalar::IsNull(x, _)
            | Scalar::Cast(x, _)
            | Scalar::Shift(x, _) => x.visit_mut(f),
            Scalar::Arith(_, a, b)
            | Scalar::Compare(_, a, b)
            | Scalar::And(a, b)
            | Scalar::Or(a, b)
            | Scalar::Concat(a, b) => {
                a.visit_mut(f);
                b.visit_mut(f);
            }
            Scalar::Case(branches, otherwise) => {
                for (w, t) in branches {
                    w.visit_mut(f);
                    t.visit_mut(f);
                }
                otherwise.visit_mut(f);
            }
            Scalar::Call(_, args) => args.iter_mut().for_each(|a| a.visit_mut(f)),
            Scalar::Like { expr, pattern, .. } => {
                expr.visit_mut(f);
                pattern.visit_mut(f);
            }
            Scalar::InList(x, list, _) => {
                x.visit_mut(f);
                list.iter_mut().for_each(|a| a.visit_mut(f));
            }
        }
    }

    /// The conjuncts of an `AND` chain. An `OR` whose branches share
    /// conjuncts gives those, then the `OR` of what is left of each branch
    /// — `(a AND b) OR (a AND c)` is `a AND (b OR c)`, in SQL's three-valued
    /// logic too — so that an equality written in every branch is a join
    /// key (TPC-H q19), not a condition over every pair.
    pub fn conjuncts(self) -> Vec<Scalar> {
        match self {
            Scalar::And(a, b) => {
                let mut v = a.conjuncts();
                v.extend(b.conjuncts());
                v
            }
            or @ Scalar::Or(..) => or.factored(),
            other => vec![other],
        }
    }

    /// The disjuncts of an `OR` chain.
    fn disjuncts(self) -> Vec<Scalar> {
        match self {
            Scalar::Or(a, b) => {
                let mut v = a.disjuncts();
                v.extend(b.disjuncts());
                v
            }
            other => vec![other],
        }
    }

    /// An `OR` as conjuncts: those common to every branch, then the `OR`
    /// of the rest (none when a branch has no rest: it holds whenever the
    /// common part does, and so does the `OR`).
    fn factored(self) -> Vec<Scalar> {
        let branches: Vec<Vec<Scalar>> = self
            .clone()
            .disjuncts()
            .into_iter()
            .map(Scalar::conjuncts)
            .collect();
        let mut common: Vec<Scalar> = Vec::new();
        for c in &branches[0] {
            if !common.contains(c) && branches[1..].iter().all(|b| b.contains(c)) {
                common.push(c.clone());
            }
        }
        if common.is_empty() {
            return vec![self];
        }
        let rests: Option<Vec<Scalar>> = branches
            .into_iter()
            .map(|b| Scalar::all(b.into_iter().filter(|c| !common.contains(c)).collect()))
            .collect();
        let rest = rests.and_then(|r| {
            r.into_iter()
                .reduce(|a, b| Scalar::binary(Scalar::Or, a, b))
        });
        common.extend(rest);
        common
    }

    /// The `AND` of `parts` (`None` for none).
    pub fn all(parts: Vec<Scalar>) -> Option<Scalar> {
        parts
            .into_iter()
            .reduce(|a, b| Scalar::binary(Scalar::And, a, b))
    }
}

fn and(a: Option<bool>, b: impl FnOnce() -> Option<bool>) -> Option<bool> {
    match a {
        Some(false) => Some(false),
        a => match (a, b()) {
            (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
    }
}

fn or(a: Option<bool>, b: impl FnOnce() -> Option<bool>) -> Option<bool> {
    match a {
        Some(true) => Some(true),
        a => match (a, b()) {
            (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
    }
}

/// SQL comparison: null with anything is unknown; numbers compare by value
/// whatever their kind (`1 = 1.0`); text bytewise.
pub fn compare(op: Compare, a: &Value, b: &Value) -> Option<bool> {
    let ord = sql_cmp(a, b)?;
    Some(match op {
        Compare::Eq => ord == Ordering::Equal,
        Compare::NotEq => ord != Ordering::Equal,
        Compare::Lt => ord == Ordering::Less,
        Compare::LtEq => ord != Ordering::Greater,
        Compare::Gt => ord == Ordering::Greater,
        Compare::GtEq => ord != Ordering::Less,
    })
}

/// The order of two non-null values (numbers by value), `None` with a null.
pub fn sql_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Int(x), Value::Float(y)) => Some(cmp_int_float(*x, y.get())),
        (Value::Float(x), Value::Int(y)) => Some(cmp_int_float(*y, x.get()).reverse()),
        (Value::Date(d), Value::Timestamp(t)) => Some(calendar::date_to_timestamp(*d).cmp(t)),
        (Value::Timestamp(t), Value::Date(d)) => Some(t.cmp(&calendar::date_to_timestamp(*d))),
        // Text met by a date or timestamp (an inferred column compared with
        // a typed one) is read as one; text that is not one is unknown.
        (Value::Str(s), t @ (Value::Date(_) | Value::Timestamp(_))) => {
            sql_cmp(&Value::timestamp(calendar::parse_timestamp(s)?), t)
        }
        (t @ (Value::Date(_) | Value::Timestamp(_)), Value::Str(s)) => {
            sql_cmp(t, &Value::timestamp(calendar::parse_timestamp(s)?))
        }
        (a, b) => Some(a.cmp(b)),
    }
}

/// Exact comparison of an integer with a float (no rounding of large integers).
fn cmp_int_float(i: i64, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Less;
    }
    if f >= 9.3e18 {
        return Ordering::Less;
    }
    if f <= -9.3e18 {
        return Ordering::Greater;
    }
    let t = f.trunc();
    match i.cmp(&(t as i64)) {
        Ordering::Equal => 0.0f64.partial_cmp(&(f - t)).unwrap_or(Ordering::Equal),
        o => o,
    }
}

/// A date or timestamp as microseconds since the epoch. Text (an inferred
/// value, such as `max` of a column read without a type) is read as a
/// timestamp; anything else is not one.
pub fn instant(v: &Value) -> Option<i64> {
    match v {
        Value::Date(d) => Some(calendar::date_to_timestamp(*d)),
        Value::Timestamp(t) => Some(*t),
        Value::Str(s) => calendar::parse_timestamp(s),
        _ => None,
    }
}

fn shift(micros: i64, by: Interval) -> Value {
    calendar::add_to_timestamp(micros, by).map_or(Value::Null, Value::Timestamp)
}

/// Date arithmetic: date ± days, date − date.
fn date_arith(op: Arith, a: &Value, b: &Value) -> Option<Value> {
    let days = |d: i32, n: i64| calendar::add_days(d, n).map_or(Value::Null, Value::Date);
    Some(match (op, a, b) {
        (Arith::Add, Value::Date(d), Value::Int(n))
        | (Arith::Add, Value::Int(n), Value::Date(d)) => days(*d, *n),
        (Arith::Sub, Value::Date(d), Value::Int(n)) => match n.checked_neg() {
            Some(n) => days(*d, n),
            None => Value::Null,
        },
        (Arith::Sub, Value::Date(x), Value::Date(y)) => Value::Int(i64::from(*x) - i64::from(*y)),
        _ => return None,
    })
}

fn arith(op: Arith, a: Value, b: Value) -> Value {
    if let Some(v) = date_arith(op, &a, &b) {
        return v;
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => {
            let exact = match op {
                Arith::Add => x.checked_add(y),
                Arith::Sub => x.checked_sub(y),
                Arith::Mul => x.checked_mul(y),
                Arith::Div if y == 0 => return Value::Null,
                Arith::Mod if y == 0 => return Value::Null,
                Arith::Div => x.checked_div(y),
                Arith::Mod => Some(x.checked_rem(y).unwrap_or(0)),
            };
            match exact {
                Some(v) => Value::Int(v),
                None => float_arith(op, x as f64, y as f64),
            }
        }
        (a, b) => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => float_arith(op, x, y),
            _ => Value::Null,
        },
    }
}

fn float_arith(op: Arith, x: f64, y: f64) -> Value {
    let r = match op {
        Arith::Add => x + y,
        Arith::Sub => x - y,
        Arith::Mul => x * y,
        Arith::Div | Arith::Mod if y == 0.0 => return Value::Null,
        Arith::Div => x / y,
        Arith::Mod => x % y,
    };
    float(r)
}

/// A float result; not-a-number (which no finite input gives but ∞ - ∞) is null.
fn float(x: f64) -> Value {
    if x.is_nan() {
        Value::Null
    } else {
        Value::Float(F64::new(x))
    }
}

/// `CAST`: null when the value does not convert.
pub fn cast(v: Value, to: CastTo) -> Value {
    match (to, v) {
        (_, Value::Null) => Value::Null,
        (CastTo::Text, v) => Value::Str(v.to_compact_string()),
        (CastTo::Date, Value::Date(d)) => Value::Date(d),
        (CastTo::Date, Value::Timestamp(t)) => Value::date(calendar::timestamp_to_date(t)),
        (CastTo::Date, Value::Str(s)) => match calendar::parse_date(&s) {
            Some(d) => Value::Date(d),
            None => calendar::parse_timestamp(&s)
                .map_or(Value::Null, |t| Value::date(calendar::timestamp_to_date(t))),
        },
        (CastTo::Timestamp, Value::Timestamp(t)) => Value::Timestamp(t),
        (CastTo::Timestamp, Value::Date(d)) => Value::timestamp(calendar::date_to_timestamp(d)),
        (CastTo::Timestamp, Value::Str(s)) => {
            calendar::parse_timestamp(&s).map_or(Value::Null, Value::Timestamp)
        }
        (CastTo::Date | CastTo::Timestamp, _) => Value::Null,
        (CastTo::Int, Value::Bool(b)) => Value::Int(i64::from(b)),
        (CastTo::Bool, Value::Bool(b)) => Value::Bool(b),
        (CastTo::Int | CastTo::Float | CastTo::Bool, Value::Date(_) | Value::Timestamp(_)) => {
            Value::Null
        }
        (CastTo::Float, Value::Bool(_)) => Value::Null,
        (CastTo::Int, Value::Int(i)) => Value::Int(i),
        (CastTo::Int, Value::Float(f)) => round_to_int(f.get()),
        (CastTo::Int, Value::Str(s)) => match s.trim().parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => match s.trim().parse::<f64>() {
                Ok(f) if f.is_finite() => round_to_int(f),
                _ => Value::Null,
            },
        },
        (CastTo::Float, Value::Int(i)) => Value::float(i as f64),
        (CastTo::Float, Value::Float(f)) => Value::Float(f),
        (CastTo::Float, Value::Str(s)) => match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() => Value::float(f),
            _ => Value::Null,
        },
        (CastTo::Bool, Value::Int(i)) => boolean(i != 0),
        (CastTo::Bool, Value::Float(f)) => boolean(f.get() != 0.0),
        (CastTo::Bool, Value::Str(s)) => crate::schema::parse_bool(&s).map_or(Value::Null, boolean),
    }
}

fn round_to_int(f: f64) -> Value {
    let r = f.round();
    if r.is_finite() && r >= i64::MIN as f64 && r < i64::MAX as f64 {
        Value::Int(r as i64)
    } else {
        Value::Null
    }
}

fn text(v: &Value) -> Option<CompactString> {
    (!v.is_null()).then(|| v.to_compact_string())
}

fn call(f: Func, args: &[Scalar], row: &[Value]) -> Value {
    let arg = |i: usize| args.get(i).map_or(Value::Null, |a| a.eval(row));
    match f {
        Func::Coalesce => args
            .iter()
            .map(|a| a.eval(row))
            .find(|v| !v.is_null())
            .unwrap_or(Value::Null),
        Func::NullIf => {
            let (a, b) = (arg(0), arg(1));
            if compare(Compare::Eq, &a, &b) == Some(true) {
                Value::Null
            } else {
                a
            }
        }
        Func::Lower => text(&arg(0)).map_or(Value::Null, |s| Value::str(&s.to_lowercase())),
        Func::Upper => text(&arg(0)).map_or(Value::Null, |s| Value::str(&s.to_uppercase())),
        Func::Length => text(&arg(0)).map_or(Value::Null, |s| Value::Int(s.chars().count() as i64)),
        Func::Trim | Func::LTrim | Func::RTrim => trim(f, arg(0), args.get(1).map(|a| a.eval(row))),
        Func::Substring => substring(arg(0), arg(1), args.get(2).map(|a| a.eval(row))),
        Func::Replace => match (text(&arg(0)), text(&arg(1)), text(&arg(2))) {
            (Some(s), Some(from), Some(to)) if !from.is_empty() => {
                Value::str(&s.replace(from.as_str(), &to))
            }
            (Some(s), Some(_), Some(_)) => Value::Str(s),
            _ => Value::Null,
        },
        Func::Abs => match arg(0) {
            Value::Int(i) => i
                .checked_abs()
                .map_or(Value::float((i as f64).abs()), Value::Int),
            Value::Float(x) => Value::float(x.get().abs()),
            _ => Value::Null,
        },
        Func::Round => round(arg(0), args.get(1).map(|a| a.eval(row))),
        Func::Floor | Func::Ceil => match arg(0) {
            Value::Int(i) => Value::Int(i),
            Value::Float(x) if f == Func::Floor => Value::float(x.get().floor()),
            Value::Float(x) => Value::float(x.get().ceil()),
            _ => Value::Null,
        },
        Func::ConcatFn => {
            let mut s = CompactString::default();
            for a in args {
                if let Some(t) = text(&a.eval(row)) {
                    s.push_str(&t);
                }
            }
            Value::Str(s)
        }
        Func::Greatest | Func::Least => args
            .iter()
            .map(|a| a.eval(row))
            .filter(|v| !v.is_null())
            .reduce(|best, v| {
                let ord = sql_cmp(&v, &best).unwrap_or(Ordering::Equal);
                let better = if f == Func::Greatest {
                    ord == Ordering::Greater
                } else {
                    ord == Ordering::Less
                };
                if better { v } else { best }
            })
            .unwrap_or(Value::Null),
        Func::Extract(field) => extract(field, arg(0)),
        Func::DateTrunc(field) => {
            let v = arg(0);
            match instant(&v).and_then(|t| calendar::truncate(field, t)) {
                Some(t) if matches!(v, Value::Date(_)) => {
                    Value::date(calendar::timestamp_to_date(t))
                }
                Some(t) => Value::Timestamp(t),
                None => Value::Null,
            }
        }
        Func::ToTimestamp => match arg(0) {
            Value::Int(s) => s
                .checked_mul(1_000_000)
                .map_or(Value::Null, Value::timestamp),
            Value::Float(s) => {
                let micros = (s.get() * 1e6).round();
                if micros.abs() < 9.2e18 {
                    Value::timestamp(micros as i64)
                } else {
                    Value::Null
                }
            }
            _ => Value::Null,
        },
        Func::EpochMs => match arg(0) {
            Value::Int(ms) => ms.checked_mul(1000).map_or(Value::Null, Value::timestamp),
            _ => Value::Null,
        },
        Func::MakeDate => match (arg(0), arg(1), arg(2)) {
            (Value::Int(y), Value::Int(m), Value::Int(d)) => {
                match (i32::try_from(y), u32::try_from(m), u32::try_from(d)) {
                    (Ok(y), Ok(m), Ok(d)) => {
                        calendar::date_from_ymd(y, m, d).map_or(Value::Null, Value::Date)
                    }
                    _ => Value::Null,
                }
            }
            _ => Value::Null,
        },
    }
}

/// `EXTRACT(field FROM v)`: an integer (the epoch with a fraction, a float).
fn extract(field: Field, v: Value) -> Value {
    let Some(micros) = instant(&v) else {
        return Value::Null;
    };
    if field == Field::Epoch {
        return match calendar::epoch_seconds(micros) {
            Ok(s) => Value::Int(s),
            Err(s) => Value::float(s),
        };
    }
    calendar::extract(field, micros).map_or(Value::Null, Value::Int)
}

fn trim(f: Func, s: Value, chars: Option<Value>) -> Value {
    let Some(s) = text(&s) else {
        return Value::Null;
    };
    let chars: Vec<char> = match chars {
        None => vec![' '],
        Some(c) => match text(&c) {
            Some(c) => c.chars().collect(),
            None => return Value::Null,
        },
    };
    let strip = |c: char| chars.contains(&c);
    Value::str(match f {
        Func::LTrim => s.trim_start_matches(strip),
        Func::RTrim => s.trim_end_matches(strip),
        _ => s.trim_matches(strip),
    })
}

/// SQL `SUBSTRING`: positions from 1; a start before 1 shortens the length
/// (PostgreSQL); a negative length is null.
fn substring(s: Value, start: Value, len: Option<Value>) -> Value {
    let (Some(s), Value::Int(start)) = (text(&s), start) else {
        return Value::Null;
    };
    let end = match len {
        None => i64::MAX,
        Some(Value::Int(n)) if n >= 0 => start.saturating_add(n),
        Some(_) => return Value::Null,
    };
    let from = start.max(1);
    if end <= from {
        return Value::str("");
    }
    let taken: String = s
        .chars()
        .skip((from - 1) as usize)
        .take(usize::try_from(end - from).unwrap_or(usize::MAX))
        .collect();
    Value::str(&taken)
}

fn round(x: Value, digits: Option<Value>) -> Value {
    let digits = match digits {
        None => 0,
        Some(Value::Int(d)) => d.clamp(-20, 20) as i32,
        Some(_) => return Value::Null,
    };
    match x {
        Value::Int(i) if digits >= 0 => Value::Int(i),
        Value::Int(i) => round(Value::float(i as f64), Some(Value::Int(digits as i64))),
        Value::Float(f) => Value::float(round_float(f.get(), digits)),
        _ => Value::Null,
    }
}

/// `x` rounded to `digits` decimals as its exact binary value says
/// (`54.55` is stored as 54.5499… and rounds to 54.5), exact ties away
/// from zero (`0.25` to 0.3), as DuckDB does.
fn round_float(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits.abs());
    if digits < 0 || !x.is_finite() {
        let r = if digits < 0 {
            (x / scale).round() * scale
        } else {
            x
        };
        return if r.is_finite() { r } else { x };
    }
    let d = digits as usize;
    // 25 more digits than kept: an exact tie's expansion ends at d + 1.
    let wide = format!("{:.*}", d + 25, x.abs());
    let dot = wide.find('.').expect("a fixed-point rendering");
    let tail = &wide[dot + 1 + d..];
    let tie = tail.starts_with('5') && tail[1..].bytes().all(|b| b == b'0');
    let r = if tie {
        (x.abs() * scale).round() / scale
    } else {
        format!("{:.*}", d, x.abs()).parse().unwrap_or(x.abs())
    };
    r.copysign(x)
}

/// SQL `LIKE` matching of `text` against `pattern`.
pub fn like(text: &str, pattern: &str, escape: Option<char>) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Tok {
        Any,
        One,
        Char(char),
    }
    let mut toks = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        toks.push(match c {
            c if Some(c) == escape => Tok::Char(chars.next().unwrap_or(c)),
            '%' => Tok::Any,
            '_' => Tok::One,
            c => Tok::Char(c),
        });
    }
    let text: Vec<char> = text.chars().collect();
    // Iterative matching with backtracking to the last `%` (linear for
    // patterns with one `%`, never exponential).
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match toks.get(p) {
            Some(Tok::Any) => {
                star = Some((p, t));
                p += 1;
            }
            Some(Tok::One) => {
                t += 1;
                p += 1;
            }
            Some(Tok::Char(c)) if *c == text[t] => {
                t += 1;
                p += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    toks[p..].iter().all(|t| *t == Tok::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: Value) -> Scalar {
        Scalar::Literal(v)
    }

    /// Factoring an `OR` keeps its value on every row of three-valued
    /// columns, and pulls out what each branch shares.
    #[test]
    fn factored_or_keeps_its_value() {
        let c = |i| Scalar::Column(i);
        let and = |a, b| Scalar::binary(Scalar::And, a, b);
        let or = |a, b| Scalar::binary(Scalar::Or, a, b);
        let cases = [
            (or(and(c(0), c(1)), and(c(0), c(2))), 2),
            (or(and(c(0), c(1)), c(0)), 1),
            (
                or(and(and(c(0), c(1)), c(2)), and(c(2), and(c(1), c(3)))),
                3,
            ),
            (and(or(and(c(0), c(1)), and(c(0), c(2))), c(3)), 3),
            (or(or(and(c(0), c(1)), and(c(1), c(2))), and(c(3), c(1))), 2),
            (or(c(0), c(1)), 1),
            (or(and(c(0), c(1)), and(c(2), c(3))), 1),
        ];
        let values = [boolean(true), boolean(false), Value::Null];
        for (expr, parts) in cases {
            let factored = expr.clone().conjuncts();
            assert_eq!(factored.len(), parts, "{expr:?} -> {factored:?}");
            let all = Scalar::all(factored).unwrap();
            for n in 0..81 {
                let row: Vec<Value> = (0..4)
                    .map(|i| values[n / 3usize.pow(i) % 3].clone())
                    .collect();
                assert_eq!(all.eval(&row), expr.eval(&row), "{expr:?} on {row:?}");
            }
        }
    }

    #[test]
    fn three_valued_logic() {
        let t = lit(boolean(true));
        let f = lit(boolean(false));
        let n = lit(Value::Null);
        let and =
            |a: &Scalar, b: &Scalar| Scalar::binary(Scalar::And, a.clone(), b.clone()).eval(&[]);
        let or =
            |a: &Scalar, b: &Scalar| Scalar::binary(Scalar::Or, a.clone(), b.clone()).eval(&[]);
        assert_eq!(and(&n, &f), boolean(false));
        assert_eq!(and(&n, &t), Value::Null);
        assert_eq!(or(&n, &t), boolean(true));
        assert_eq!(or(&n, &f), Value::Null);
        assert_eq!(Scalar::Not(Box::new(n.clone())).eval(&[]), Value::Null);
        let eq = Scalar::binary(
            |a, b| Scalar::Compare(Compare::Eq, a, b),
            lit(Value::Int(1)),
            lit(Value::float(1.0)),
        );
        assert_eq!(eq.eval(&[]), boolean(true));
    }

    #[test]
    fn arithmetic_is_exact_and_total() {
        let a = |op, x, y| arith(op, x, y);
        assert_eq!(a(Arith::Div, Value::Int(7), Value::Int(2)), Value::Int(3));
        assert_eq!(a(Arith::Div, Value::Int(-7), Value::Int(2)), Value::Int(-3));
        assert_eq!(a(Arith::Div, Value::Int(7), Value::Int(0)), Value::Null);
        assert_eq!(
            a(Arith::Mod, Value::Int(i64::MIN), Value::Int(-1)),
            Value::Int(0)
        );
        assert_eq!(
            a(Arith::Add, Value::Int(i64::MAX), Value::Int(1)),
            Value::float(i64::MAX as f64 + 1.0)
        );
        assert_eq!(
            a(Arith::Mul, Value::Int(3), Value::float(0.5)),
            Value::float(1.5)
        );
        assert_eq!(a(Arith::Add, Value::Null, Value::Int(1)), Value::Null);
    }

    #[test]
    fn int_float_comparison_is_exact() {
        assert_eq!(
            cmp_int_float(9007199254740993, 9007199254740992.0),
            Ordering::Greater
        );
        assert_eq!(cmp_int_float(2, 2.5), Ordering::Less);
        assert_eq!(cmp_int_float(-2, -2.5), Ordering::Greater);
        assert_eq!(cmp_int_float(3, 3.0), Ordering::Equal);
    }

    #[test]
    fn like_patterns() {
        assert!(like("hello", "h%o", None));
        assert!(like("hello", "_ello", None));
        assert!(!like("hello", "h_o", None));
        assert!(like("50%", "50!%", Some('!')));
        assert!(!like("50x", "50!%", Some('!')));
        assert!(like("", "%", None));
        assert!(like("abcabc", "%abc", None));
        assert!(like("a%b", "a%%b", None));
    }

    #[test]
    fn string_functions() {
        let s = |v: &str| lit(Value::str(v));
        let call = |f, args: Vec<Scalar>| Scalar::Call(f, args).eval(&[]);
        assert_eq!(
            call(
                Func::Substring,
                vec![s("hello"), lit(Value::Int(2)), lit(Value::Int(3))]
            ),
            Value::str("ell")
        );
        assert_eq!(
            call(
                Func::Substring,
                vec![s("hello"), lit(Value::Int(0)), lit(Value::Int(2))]
            ),
            Value::str("h")
        );
        assert_eq!(call(Func::Trim, vec![s("  x ")]), Value::str("x"));
        assert_eq!(call(Func::Length, vec![s("héllo")]), Value::Int(5));
        assert_eq!(
            call(Func::Coalesce, vec![lit(Value::Null), s("a")]),
            Value::str("a")
        );
        assert_eq!(
            call(
                Func::NullIf,
                vec![lit(Value::Int(1)), lit(Value::float(1.0))]
            ),
            Value::Null
        );
        assert_eq!(
            call(Func::Round, vec![lit(Value::float(2.5))]),
            Value::float(3.0)
        );
        assert_eq!(cast(Value::str(" 12 "), CastTo::Int), Value::Int(12));
        assert_eq!(cast(Value::str("x"), CastTo::Int), Value::Null);
        assert_eq!(cast(Value::float(2.5), CastTo::Int), Value::Int(3));
        assert_eq!(cast(Value::Int(2), CastTo::Text), Value::str("2"));
    }

    #[test]
    fn dates_timestamps_and_intervals() {
        let d = |s: &str| Value::Date(calendar::parse_date(s).unwrap());
        let ts = |s: &str| Value::Timestamp(calendar::parse_timestamp(s).unwrap());
        assert_eq!(
            arith(Arith::Add, d("2024-02-28"), Value::Int(1)),
            d("2024-02-29")
        );
        assert_eq!(
            arith(Arith::Sub, d("2024-03-01"), d("2024-02-01")),
            Value::Int(29)
        );
        assert_eq!(
            arith(Arith::Add, d("9999-12-31"), Value::Int(1)),
            Value::Null
        );
        assert_eq!(
            arith(Arith::Sub, d("2024-03-01"), Value::Int(i64::MIN)),
            Value::Null
        );
        let month = Interval {
            months: 1,
            micros: 0,
        };
        let shifted = Scalar::Shift(Box::new(lit(d("2024-01-31"))), month);
        assert_eq!(shifted.eval(&[]), ts("2024-02-29 00:00:00"));
        // Text where a date or timestamp is needed is read as one.
        let text = Scalar::Shift(Box::new(lit(Value::str("2024-01-31 10:00"))), month);
        assert_eq!(text.eval(&[]), ts("2024-02-29 10:00:00"));
        let at = Value::str("2024-01-01 10:00");
        assert_eq!(compare(Compare::Lt, &at, &d("2024-01-02")), Some(true));
        assert_eq!(
            compare(Compare::Eq, &d("2024-01-01"), &ts("2024-01-01 00:00")),
            Some(true)
        );
        assert_eq!(
            compare(Compare::Eq, &Value::str("x"), &d("2024-01-02")),
            None
        );
        assert_eq!(
            cast(Value::str("2024-01-02 10:00:00"), CastTo::Date),
            d("2024-01-02")
        );
        assert_eq!(cast(d("2024-01-02"), CastTo::Timestamp), ts("2024-01-02"));
        assert_eq!(
            cast(d("2024-01-02"), CastTo::Text),
            Value::str("2024-01-02")
        );
        assert_eq!(cast(Value::str("nope"), CastTo::Timestamp), Value::Null);
        assert_eq!(cast(Value::Bool(true), CastTo::Int), Value::Int(1));
        assert_eq!(cast(Value::str("t"), CastTo::Bool), Value::Bool(true));
        let call1 = |f: Func, v: Value| Scalar::Call(f, vec![lit(v)]).eval(&[]);
        let frac = ts("1970-01-01 00:00:01.5");
        assert_eq!(
            call1(Func::Extract(Field::Epoch), frac.clone()),
            Value::float(1.5)
        );
        assert_eq!(
            call1(Func::Extract(Field::Year), d("2024-05-01")),
            Value::Int(2024)
        );
        assert_eq!(
            call1(Func::DateTrunc(Field::Month), d("2024-05-19")),
            d("2024-05-01")
        );
        assert_eq!(
            call1(Func::DateTrunc(Field::Second), frac),
            ts("1970-01-01 00:00:01")
        );
        assert_eq!(
            call1(Func::ToTimestamp, Value::float(1.5)),
            ts("1970-01-01 00:00:01.5")
        );
        assert_eq!(
            call1(Func::EpochMs, Value::Int(-1)),
            ts("1969-12-31 23:59:59.999")
        );
        assert_eq!(call1(Func::ToTimestamp, Value::Int(i64::MAX)), Value::Null);
        assert!(Scalar::Literal(Value::Bool(true)).holds(&[]));
        assert!(Scalar::Literal(Value::str("true")).holds(&[]));
    }
}
