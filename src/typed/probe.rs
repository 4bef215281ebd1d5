//! Reads a struct's fields off its `Deserialize` implementation: the
//! derive passes the field names to `deserialize_struct`, and each field's
//! type asks for what it needs (`deserialize_option`, `deserialize_i64`,
//! ...), which tells its column type and whether it may be null.

use serde::de::{self, DeserializeOwned, Deserializer, SeqAccess, Visitor};

use super::TypedError;
use crate::schema::ColumnType;

/// A field of a record.
pub(super) struct Field {
    pub name: &'static str,
    pub ty: ColumnType,
    pub nullable: bool,
    /// For an integer field, the range its type holds.
    pub range: Option<(i64, i64)>,
}

/// The fields of `T`, or why `T` is not a struct of plain fields.
pub(super) fn fields<T: DeserializeOwned>() -> Result<Vec<Field>, TypedError> {
    let mut probe = Probe {
        names: None,
        found: Vec::new(),
    };
    T::deserialize(&mut probe)?;
    let names = probe
        .names
        .ok_or_else(|| TypedError("not a struct with named fields".into()))?;
    if names.len() != probe.found.len() {
        return Err(TypedError("its fields could not all be read".into()));
    }
    Ok(names
        .iter()
        .zip(probe.found)
        .map(|(name, (ty, nullable, range))| Field {
            name,
            ty,
            nullable,
            range,
        })
        .collect())
}

/// What a field's type asked for: its column type, whether it is an
/// `Option`, and an integer type's range.
type Found = (ColumnType, bool, Option<(i64, i64)>);

struct Probe {
    names: Option<&'static [&'static str]>,
    found: Vec<Found>,
}

impl<'de> Deserializer<'de> for &mut Probe {
    type Error = TypedError;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        self.names = Some(fields);
        visitor.visit_seq(FieldSeq {
            probe: self,
            left: fields.len(),
        })
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, TypedError> {
        Err(TypedError("not a struct".into()))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

struct FieldSeq<'a> {
    probe: &'a mut Probe,
    left: usize,
}

impl<'de> SeqAccess<'de> for FieldSeq<'_> {
    type Error = TypedError;

    fn next_element_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, TypedError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let at = self.probe.found.len();
        let name = self
            .probe
            .names
            .and_then(|n| n.get(at))
            .copied()
            .unwrap_or("?");
        let mut field = FieldProbe {
            name,
            ty: None,
            nullable: false,
            range: None,
        };
        let value = seed.deserialize(&mut field)?;
        let ty = field
            .ty
            .ok_or_else(|| TypedError(format!("field {name}: unsupported type")))?;
        self.probe.found.push((ty, field.nullable, field.range));
        Ok(Some(value))
    }
}

/// Records what one field's type asks for, and gives it a placeholder.
struct FieldProbe {
    name: &'static str,
    ty: Option<ColumnType>,
    nullable: bool,
    range: Option<(i64, i64)>,
}

impl FieldProbe {
    /// An integer field holding `min..=max`.
    fn integer<'de, V: Visitor<'de>>(
        &mut self,
        visitor: V,
        min: i64,
        max: i64,
    ) -> Result<V::Value, TypedError> {
        self.ty = Some(ColumnType::Int);
        self.range = Some((min, max));
        visitor.visit_i64(0)
    }

    fn unsupported<T>(&self, what: &str) -> Result<T, TypedError> {
        Err(TypedError(format!(
            "field {}: {what} is not a column type (integers, floats, strings, and Options of them are)",
            self.name
        )))
    }
}

impl<'de> Deserializer<'de> for &mut FieldProbe {
    type Error = TypedError;

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        if self.nullable {
            return self.unsupported("an Option of an Option");
        }
        self.nullable = true;
        visitor.visit_some(self)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.integer(visitor, i64::MIN, i64::MAX)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, TypedError> {
        self.unsupported("u64 (values beyond i64 do not fit a column; use i64)")
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.ty = Some(ColumnType::Float);
        visitor.visit_f64(0.0)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.ty = Some(ColumnType::Str);
        visitor.visit_str("")
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, TypedError> {
        self.unsupported("a self-describing type")
    }

    fn deserialize_bool<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, TypedError> {
        self.unsupported("bool")
    }

    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.integer(v, i8::MIN.into(), i8::MAX.into())
    }
    fn deserialize_i16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.integer(v, i16::MIN.into(), i16::MAX.into())
    }
    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.integer(v, i32::MIN.into(), i32::MAX.into())
    }
    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.integer(v, 0, u8::MAX.into())
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.integer(v, 0, u16::MAX.into())
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.integer(v, 0, u32::MAX.into())
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.deserialize_f64(v)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        self.deserialize_string(v)
    }
    fn deserialize_char<V: Visitor<'de>>(self, _v: V) -> Result<V::Value, TypedError> {
        self.unsupported("char")
    }

    serde::forward_to_deserialize_any! {
        i128 u128 bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}
