//! A projected row as a struct: the row's values are the struct's fields in
//! order (a sequence, so no field name is looked up per row).

use serde::de::{self, Deserializer, SeqAccess, Visitor};

use super::TypedError;
use crate::value::{Row, Value};

/// Deserializes a struct from a row holding its fields in order.
pub(super) struct RowDeserializer<'a>(pub &'a Row);

impl<'de> Deserializer<'de> for RowDeserializer<'de> {
    type Error = TypedError;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        if fields.len() != self.0.len() {
            return Err(TypedError(format!(
                "{name} has {} fields, the row {} values",
                fields.len(),
                self.0.len()
            )));
        }
        visitor.visit_seq(Values(self.0.iter()))
    }

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        visitor.visit_seq(Values(self.0.iter()))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

struct Values<'a>(std::slice::Iter<'a, Value>);

impl<'de> SeqAccess<'de> for Values<'de> {
    type Error = TypedError;

    fn next_element_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, TypedError> {
        self.0
            .next()
            .map(|v| seed.deserialize(ValueDeserializer(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// One value as a field: numbers as numbers, strings as strings, null as
/// `None`; a string field also takes a number (as its text), a float field
/// an integer.
struct ValueDeserializer<'a>(&'a Value);

impl<'de> Deserializer<'de> for ValueDeserializer<'de> {
    type Error = TypedError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Int(i) => visitor.visit_i64(*i),
            Value::Float(f) => visitor.visit_f64(f.get()),
            Value::Str(s) => visitor.visit_borrowed_str(s.as_str()),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Date(_) | Value::Timestamp(_) => visitor.visit_string(self.0.to_string()),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.0 {
            Value::Str(s) => visitor.visit_borrowed_str(s.as_str()),
            Value::Null => Err(TypedError("null for a field that is not an Option".into())),
            other => visitor.visit_string(other.to_string()),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.0 {
            Value::Int(i) => visitor.visit_f64(*i as f64),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.deserialize_f64(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 char
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}
