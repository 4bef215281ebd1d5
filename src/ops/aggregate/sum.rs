//! An exact, order-independent sum of numbers, usable as (part of) a
//! differential difference: sums of disjoint parts add, and a retracted
//! value subtracts exactly what it added.
//!
//! Integers are kept in an `i128`; floats as Shewchuk's non-overlapping
//! partials (their exact sum, as Python's `math.fsum`), rounded once when the
//! value is read. Zero partials are dropped, so the partials of an exact
//! zero are empty and a sum that returns to zero is the zero of the group
//! ([`IsZero`]): consolidation can remove it.
//!
//! Floats of magnitude [`HUGE`] and above are summed apart, scaled down by
//! [`SCALE`] (exactly: they stay far from the subnormal range), so that no
//! intermediate sum overflows: with values below `2^960` (or scaled below
//! it) and multiplicities below `2^63`, no sum of either list reaches
//! `f64::MAX`. (Summed together, `1.5e308 + 7e307` overflowed to an
//! infinity and its error term to the opposite one; the retraction of both
//! then left NaN partials instead of the zero.) A total beyond the float
//! range reads as an infinity, as IEEE rounding gives it.

use differential_dataflow::difference::{Abelian, IsZero, Monoid, Semigroup};
use serde::{Deserialize, Serialize};

use crate::value::{F64, Value};

/// The sum of the non-null values of a column over part of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Sum {
    /// Non-null values added (with multiplicity): a sum of none is null.
    values: i64,
    /// Float values among them: the sum is a float as soon as one is.
    floats: i64,
    ints: i128,
    /// Floats of magnitude below [`HUGE`].
    partials: Vec<F64>,
    /// Floats of magnitude [`HUGE`] and above, times [`SCALE`].
    huge: Vec<F64>,
}

/// The magnitude from which a float is summed scaled down.
const HUGE: f64 = f64::from_bits((1023 + 960) << 52);

/// What a float of magnitude [`HUGE`] or more is multiplied by: `2^-64`.
const SCALE: f64 = f64::from_bits((1023 - 64) << 52);

/// The inverse of [`SCALE`]: `2^64`.
const UNSCALE: f64 = f64::from_bits((1023 + 64) << 52);

impl Sum {
    /// Adds `v` `m` times (`m` negative retracts); nulls are not values.
    pub fn add(&mut self, v: &Value, m: i64) {
        match v {
            Value::Null => return,
            Value::Int(i) => self.ints += *i as i128 * m as i128,
            Value::Float(f) => {
                self.floats += m;
                self.add_float(f.get(), m);
            }
            // The plan types sum/avg columns as numbers, so the source layer
            // rejects anything else as a bad row before it gets here.
            _ => unreachable!(
                "non-numeric value {v:?} in a sum: the plan must type the column as a number"
            ),
        }
        self.values += m;
    }

    /// Non-null values summed.
    pub fn count(&self) -> i64 {
        self.values
    }

    /// The SQL value: null over no values, an integer while every value is
    /// one and the sum fits, a float otherwise.
    pub fn value(&self) -> Value {
        if self.values == 0 {
            return Value::Null;
        }
        match (self.floats, i64::try_from(self.ints)) {
            (0, Ok(i)) => Value::Int(i),
            _ => Value::float(self.as_f64()),
        }
    }

    /// The average of the values, null over none.
    pub fn average(&self) -> Value {
        if self.values == 0 {
            return Value::Null;
        }
        if self.huge.is_empty() {
            return Value::float(self.as_f64() / self.values as f64);
        }
        // The average of huge values is itself within range: divide first.
        let scaled_ints = self.ints as f64 * SCALE;
        Value::float((scaled_ints + self.scaled_floats()) / self.values as f64 * UNSCALE)
    }

    /// Adds float `x` `m` times, to the list its magnitude belongs in.
    fn add_float(&mut self, x: f64, m: i64) {
        if x.abs() < HUGE {
            add_times(&mut self.partials, x, m);
        } else {
            add_times(&mut self.huge, x * SCALE, m);
        }
    }

    fn as_f64(&self) -> f64 {
        if self.huge.is_empty() {
            return self.ints as f64 + round_partials(&self.partials);
        }
        self.ints as f64 + self.scaled_floats() * UNSCALE
    }

    /// The sum of the floats times [`SCALE`], correctly rounded; for sums
    /// with huge floats only (scaling the others is exact but for those
    /// below `2^-958`, which cannot move a sum with a huge float in it).
    fn scaled_floats(&self) -> f64 {
        let mut all = self.huge.clone();
        for p in &self.partials {
            add_exact(&mut all, p.get() * SCALE);
        }
        round_partials(&all)
    }

    /// `other` added `m` times.
    pub fn add_sum(&mut self, other: &Sum, m: i64) {
        self.values += other.values * m;
        self.floats += other.floats * m;
        self.ints += other.ints * m as i128;
        for p in &other.partials {
            add_times(&mut self.partials, p.get(), m);
        }
        for p in &other.huge {
            add_times(&mut self.huge, p.get(), m);
        }
    }
}

impl IsZero for Sum {
    fn is_zero(&self) -> bool {
        self.values == 0
            && self.floats == 0
            && self.ints == 0
            && self.partials.is_empty()
            && self.huge.is_empty()
    }
}

impl Semigroup for Sum {
    fn plus_equals(&mut self, rhs: &Self) {
        self.add_sum(rhs, 1);
    }
}

impl Monoid for Sum {
    fn zero() -> Self {
        Sum::default()
    }
}

impl Abelian for Sum {
    fn negate(&mut self) {
        self.values = -self.values;
        self.floats = -self.floats;
        self.ints = -self.ints;
        // Negating every partial keeps them non-overlapping and sorted by magnitude.
        for p in self.partials.iter_mut().chain(&mut self.huge) {
            *p = F64::new(-p.get());
        }
    }
}

/// Adds `x * m` to the partials exactly (the product's rounding error is
/// recovered with a fused multiply-add).
fn add_times(partials: &mut Vec<F64>, x: f64, m: i64) {
    if m == 1 {
        add_exact(partials, x);
        return;
    }
    let m = m as f64;
    let p = x * m;
    let e = x.mul_add(m, -p);
    add_exact(partials, p);
    if e != 0.0 {
        add_exact(partials, e);
    }
}

/// Shewchuk's exact addition: keeps the partials non-overlapping, in
/// increasing magnitude, without zeros, summing exactly to everything added.
fn add_exact(partials: &mut Vec<F64>, mut x: f64) {
    let mut i = 0;
    for j in 0..partials.len() {
        let mut y = partials[j].get();
        if x.abs() < y.abs() {
            std::mem::swap(&mut x, &mut y);
        }
        let hi = x + y;
        let lo = y - (hi - x);
        if lo != 0.0 {
            partials[i] = F64::new(lo);
            i += 1;
        }
        x = hi;
    }
    partials.truncate(i);
    if x != 0.0 {
        partials.push(F64::new(x));
    }
}

/// The exact sum of the partials, correctly rounded (as `math.fsum`).
fn round_partials(partials: &[F64]) -> f64 {
    let mut n = partials.len();
    if n == 0 {
        return 0.0;
    }
    n -= 1;
    let mut hi = partials[n].get();
    let mut lo = 0.0;
    while n > 0 {
        let x = hi;
        n -= 1;
        let y = partials[n].get();
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if n > 0
        && ((lo < 0.0 && partials[n - 1].get() < 0.0) || (lo > 0.0 && partials[n - 1].get() > 0.0))
    {
        let y = lo * 2.0;
        let x = hi + y;
        let yr = x - hi;
        if y == yr {
            hi = x;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sum_of(values: &[Value]) -> Sum {
        let mut s = Sum::default();
        for v in values {
            s.add(v, 1);
        }
        s
    }

    #[test]
    fn integer_sums_are_exact_beyond_i64_and_f64() {
        let s = sum_of(&[Value::Int(i64::MAX), Value::Int(-1)]);
        assert_eq!(s.value(), Value::Int(i64::MAX - 1));
        let s = sum_of(&[Value::Int(i64::MAX), Value::Int(1)]);
        assert_eq!(s.value(), Value::float(i64::MAX as f64 + 1.0));
    }

    #[test]
    fn nulls_are_not_values() {
        assert_eq!(sum_of(&[Value::Null]).value(), Value::Null);
        assert!(sum_of(&[Value::Null]).is_zero());
        assert_eq!(
            sum_of(&[Value::Null, Value::Int(2)]).average(),
            Value::float(2.0)
        );
    }

    #[test]
    fn a_retracted_float_leaves_an_integer_sum_and_the_zero() {
        let mut s = sum_of(&[Value::Int(3), Value::float(0.1)]);
        s.add(&Value::float(0.1), -1);
        assert_eq!(s.value(), Value::Int(3));
        s.add(&Value::Int(3), -1);
        assert!(s.is_zero(), "{s:?}");
    }

    #[test]
    fn floats_whose_sum_overflows_read_as_infinity_and_retract_to_zero() {
        let (a, b) = (
            Value::float(1.4879526696005472e308),
            Value::float(6.827355422621279e307),
        );
        let mut s = sum_of(&[a.clone(), b.clone()]);
        assert_eq!(s.value(), Value::float(f64::INFINITY));
        assert_eq!(
            s.average(),
            Value::float((1.4879526696005472e308 / 2.0) + (6.827355422621279e307 / 2.0))
        );
        s.add(&Value::float(-1e308), 1);
        // Back in range once a large negative value comes: 1.1707e308.
        let Value::Float(back) = s.value() else {
            panic!("{:?}", s.value())
        };
        let expected = 1.4879526696005472e308 - (1e308 - 6.827355422621279e307);
        assert!((back.get() - expected).abs() <= 1e293, "{back:?}");
        s.add(&Value::float(-1e308), -1);
        s.add(&a, -1);
        assert_eq!(s.value(), b);
        s.add(&b, -1);
        assert!(s.is_zero(), "{s:?}");
        let small = sum_of(&[Value::float(1e308), Value::float(0.5), Value::float(-1e308)]);
        assert_eq!(small.value(), Value::float(0.5));
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i32>().prop_map(|i| Value::Int(i as i64)),
            (-1e12f64..1e12).prop_map(Value::float),
            prop::num::f64::NORMAL.prop_map(Value::float),
        ]
    }

    proptest! {
        /// Any split of the values into parts, in any order, gives the
        /// same sum; adding the negation gives the zero.
        #[test]
        fn sums_of_parts_in_any_order_are_the_sum(
            values in prop::collection::vec(value(), 0..40),
            cut in 0usize..40,
        ) {
            let whole = sum_of(&values);
            let cut = cut.min(values.len());
            let mut parts = sum_of(&values[cut..]);
            parts.plus_equals(&sum_of(&values[..cut]));
            let mut reversed: Vec<Value> = values.clone();
            reversed.reverse();
            prop_assert_eq!(parts.value(), whole.value());
            prop_assert_eq!(sum_of(&reversed).value(), whole.value());
            let mut neg = whole.clone();
            neg.negate();
            neg.plus_equals(&parts);
            prop_assert!(neg.is_zero(), "{:?}", neg);
        }
    }
}
