//! The binary row encoding: how a row value of the current version is laid
//! out in bytes, and read back without copying its strings.
//!
//! ```text
//! value   = VERSION count:varint element*count
//! element = 0                          null
//!         | 1 zigzag(i):varint         Int(i)
//!         | 2 len:varint utf8[len]     Str
//!         | 3 len:varint utf8[len]     Text
//!         | 4 len:varint utf8[len]     Lit
//! ```
//!
//! A varint is LEB128 (seven bits a byte, low first). What each tag means
//! for a CSV or a JSON lines topic is [`Element`]'s to say; this module
//! only moves bytes. The first byte tells this encoding from version 0's
//! JSON array, which always starts with `[`, so one topic may hold both.
//! Everything is checked on the way in: a truncated value, an unknown tag,
//! a string that is not UTF-8 or bytes after the last element are errors,
//! never a panic (the frame's CRC guards against the disk, not against a
//! value some other program wrote).

use smallvec::SmallVec;

use super::Element;
use crate::log::varint::{self, VarintError};

/// The first byte of a value in this encoding (a JSON array starts with `[`).
pub const VERSION: u8 = 1;

/// Elements held inline by [`Elements`] before it allocates.
pub const INLINE: usize = 16;

const NULL: u8 = 0;
const INT: u8 = 1;
const STR: u8 = 2;
const TEXT: u8 = 3;
const LIT: u8 = 4;

/// Appends the value of a row of `count` elements.
pub fn encode<'a>(
    count: usize,
    elements: impl IntoIterator<Item = Element<'a>>,
    out: &mut Vec<u8>,
) {
    out.push(VERSION);
    varint::put(count as u64, out);
    for element in elements {
        match element {
            Element::Null => out.push(NULL),
            Element::Int(i) => {
                out.push(INT);
                varint::put_signed(i, out);
            }
            Element::Str(s) => put_str(STR, s, out),
            Element::Text(s) => put_str(TEXT, s, out),
            Element::Lit(s) => put_str(LIT, s, out),
        }
    }
}

/// The elements of a row value, inline up to [`INLINE`] of them.
pub type Elements<'a> = SmallVec<[Element<'a>; INLINE]>;

/// The elements of a value written by [`encode`], borrowed from it.
pub fn decode(value: &[u8]) -> Result<Elements<'_>, String> {
    let mut elements = Elements::new();
    decode_into(value, &mut elements)?;
    Ok(elements)
}

/// [`decode`] into `elements` (cleared first). A reader that keeps the
/// buffer on its own stack saves moving it out: 16 inline elements are
/// 390 bytes, and moving them twice a record was 6% of a stream's time.
pub fn decode_into<'a>(value: &'a [u8], elements: &mut Elements<'a>) -> Result<(), String> {
    elements.clear();
    let mut at = match value.first() {
        Some(&VERSION) => 1,
        _ => return Err("not a binary row value".into()),
    };
    let count = varint(value, &mut at)?;
    // Every element takes at least a byte: a count beyond the bytes left
    // is damage, and must not size an allocation.
    if count > (value.len() - at) as u64 {
        return Err(format!(
            "{count} elements do not fit in {} bytes",
            value.len()
        ));
    }
    elements.reserve(count as usize);
    for _ in 0..count {
        let tag = *value.get(at).ok_or("the value ends inside an element")?;
        at += 1;
        elements.push(match tag {
            NULL => Element::Null,
            INT => {
                let z = varint(value, &mut at)?;
                Element::Int(varint::unzigzag(z))
            }
            STR => Element::Str(string(value, &mut at)?),
            TEXT => Element::Text(string(value, &mut at)?),
            LIT => Element::Lit(string(value, &mut at)?),
            other => return Err(format!("unknown element tag {other} at byte {}", at - 1)),
        });
    }
    if at != value.len() {
        return Err(format!(
            "stray bytes after the last element: {}",
            value.len() - at
        ));
    }
    Ok(())
}

fn put_str(tag: u8, s: &str, out: &mut Vec<u8>) {
    out.push(tag);
    varint::put(s.len() as u64, out);
    out.extend_from_slice(s.as_bytes());
}

fn varint(value: &[u8], at: &mut usize) -> Result<u64, String> {
    varint::get(value, at).map_err(|e| match e {
        VarintError::Truncated => "the value ends inside a number".into(),
        VarintError::TooLong => "a number longer than 64 bits".into(),
    })
}

fn string<'a>(value: &'a [u8], at: &mut usize) -> Result<&'a str, String> {
    let len = varint(value, at)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| at.checked_add(len))
        .filter(|&end| end <= value.len())
        .ok_or("the value ends inside a string")?;
    let s = std::str::from_utf8(&value[*at..end]).map_err(|_| "a string that is not UTF-8")?;
    *at = end;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn element() -> impl Strategy<Value = (u8, i64, String)> {
        (0u8..5, any::<i64>(), "(.|\\n){0,8}")
    }

    fn make((tag, i, s): &(u8, i64, String)) -> Element<'_> {
        match tag {
            0 => Element::Null,
            1 => Element::Int(*i),
            2 => Element::Str(s),
            3 => Element::Text(s),
            _ => Element::Lit(s),
        }
    }

    proptest! {
        #[test]
        fn elements_read_back_as_written(parts in proptest::collection::vec(element(), 0..20)) {
            let elements: Vec<Element> = parts.iter().map(make).collect();
            let mut v = Vec::new();
            encode(elements.len(), elements.iter().copied(), &mut v);
            prop_assert_eq!(decode(&v).unwrap().to_vec(), elements);
        }

        /// Damage is an error or another row, never a panic.
        #[test]
        fn damaged_values_never_panic(
            parts in proptest::collection::vec(element(), 0..6),
            (at, byte, cut) in (any::<usize>(), any::<u8>(), any::<usize>()),
        ) {
            let elements: Vec<Element> = parts.iter().map(make).collect();
            let mut v = Vec::new();
            encode(elements.len(), elements.iter().copied(), &mut v);
            let mut changed = v.clone();
            changed[at % v.len()] = byte;
            crate::log::fuzz::decode_row_value(&changed);
            prop_assert!(decode(&v[..cut % v.len()]).is_err());
        }
    }

    #[test]
    fn damage_is_named() {
        let err = |bytes: &[u8]| decode(bytes).unwrap_err();
        assert_eq!(err(b"[\"7\"]"), "not a binary row value");
        assert_eq!(err(&[VERSION, 2, NULL]), "2 elements do not fit in 3 bytes");
        assert_eq!(err(&[VERSION, 1, 9]), "unknown element tag 9 at byte 2");
        assert_eq!(
            err(&[VERSION, 1, STR, 5, b'a']),
            "the value ends inside a string"
        );
        assert_eq!(
            err(&[VERSION, 1, STR, 1, 0xff]),
            "a string that is not UTF-8"
        );
        assert_eq!(
            err(&[VERSION, 1, NULL, NULL]),
            "stray bytes after the last element: 1"
        );
        let long = [
            VERSION, 1, INT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
        ];
        assert_eq!(err(&long), "a number longer than 64 bits");
        assert_eq!(
            err(&[VERSION, 1, INT, 0x80]),
            "the value ends inside a number"
        );
        let mut max = Vec::new();
        encode(
            2,
            [Element::Int(i64::MIN), Element::Int(i64::MAX)],
            &mut max,
        );
        assert_eq!(
            decode(&max).unwrap().to_vec(),
            vec![Element::Int(i64::MIN), Element::Int(i64::MAX)]
        );
    }
}
