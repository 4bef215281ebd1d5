//! A struct as a row: its fields in order, each a value.

use serde::Serialize;
use serde::ser::{self, Impossible, Serializer};

use super::TypedError;
use crate::value::{Row, Value};

/// Serializes a struct into a row of its fields' values.
pub(super) struct RowSerializer;

/// The fields serialized so far.
pub(super) struct Fields(Row);

fn unsupported<T>(what: &str) -> Result<T, TypedError> {
    Err(TypedError(format!(
        "{what} cannot be a row (a struct of integers, floats, strings and Options of them can)"
    )))
}

impl ser::SerializeStruct for Fields {
    type Ok = Row;
    type Error = TypedError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _key: &'static str,
        value: &T,
    ) -> Result<(), TypedError> {
        self.0.push(value.serialize(ValueSerializer)?);
        Ok(())
    }

    fn end(self) -> Result<Row, TypedError> {
        Ok(self.0)
    }
}

macro_rules! not_a_struct {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $method(self, $(_: $arg),*) -> Result<Self::Ok, TypedError> {
            unsupported("a value that is not a struct")
        })*
    };
}

impl Serializer for RowSerializer {
    type Ok = Row;
    type Error = TypedError;
    type SerializeSeq = Impossible<Row, TypedError>;
    type SerializeTuple = Impossible<Row, TypedError>;
    type SerializeTupleStruct = Impossible<Row, TypedError>;
    type SerializeTupleVariant = Impossible<Row, TypedError>;
    type SerializeMap = Impossible<Row, TypedError>;
    type SerializeStruct = Fields;
    type SerializeStructVariant = Impossible<Row, TypedError>;

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Fields, TypedError> {
        Ok(Fields(Vec::with_capacity(len)))
    }

    not_a_struct! {
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_str(&str), serialize_bytes(&[u8]), serialize_none(), serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Row, TypedError> {
        unsupported("an Option")
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<Row, TypedError> {
        unsupported("a newtype")
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Row, TypedError> {
        unsupported("an enum")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, TypedError> {
        unsupported("a sequence")
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, TypedError> {
        unsupported("a tuple")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, TypedError> {
        unsupported("a tuple struct")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, TypedError> {
        unsupported("an enum")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, TypedError> {
        unsupported("a map")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, TypedError> {
        unsupported("an enum")
    }
}

/// One field's value.
struct ValueSerializer;

impl Serializer for ValueSerializer {
    type Ok = Value;
    type Error = TypedError;
    type SerializeSeq = Impossible<Value, TypedError>;
    type SerializeTuple = Impossible<Value, TypedError>;
    type SerializeTupleStruct = Impossible<Value, TypedError>;
    type SerializeTupleVariant = Impossible<Value, TypedError>;
    type SerializeMap = Impossible<Value, TypedError>;
    type SerializeStruct = Impossible<Value, TypedError>;
    type SerializeStructVariant = Impossible<Value, TypedError>;

    fn serialize_i64(self, v: i64) -> Result<Value, TypedError> {
        Ok(Value::Int(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, TypedError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Value, TypedError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Value, TypedError> {
        self.serialize_i64(v.into())
    }
    fn serialize_u8(self, v: u8) -> Result<Value, TypedError> {
        self.serialize_i64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<Value, TypedError> {
        self.serialize_i64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<Value, TypedError> {
        self.serialize_i64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<Value, TypedError> {
        i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| TypedError(format!("{v} does not fit a 64-bit signed integer")))
    }
    fn serialize_f64(self, v: f64) -> Result<Value, TypedError> {
        Ok(Value::float(v))
    }
    fn serialize_f32(self, v: f32) -> Result<Value, TypedError> {
        self.serialize_f64(v.into())
    }
    fn serialize_str(self, v: &str) -> Result<Value, TypedError> {
        Ok(Value::str(v))
    }
    fn serialize_char(self, v: char) -> Result<Value, TypedError> {
        Ok(Value::str(v.encode_utf8(&mut [0; 4])))
    }
    fn serialize_none(self) -> Result<Value, TypedError> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Value, TypedError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, TypedError> {
        Ok(Value::Null)
    }
    fn serialize_bool(self, _: bool) -> Result<Value, TypedError> {
        unsupported("a bool")
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Value, TypedError> {
        unsupported("bytes")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Value, TypedError> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Value, TypedError> {
        Ok(Value::str(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Value, TypedError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Value, TypedError> {
        unsupported("an enum with data")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, TypedError> {
        unsupported("a sequence")
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, TypedError> {
        unsupported("a tuple")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, TypedError> {
        unsupported("a tuple struct")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, TypedError> {
        unsupported("an enum")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, TypedError> {
        unsupported("a map")
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, TypedError> {
        unsupported("a nested struct")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, TypedError> {
        unsupported("an enum")
    }
}
