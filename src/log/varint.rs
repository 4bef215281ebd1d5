//! LEB128 varints and their zigzag form for signed numbers: the integers of
//! a record batch's records (`batch.rs`) and of binary row values
//! (`rows/binary.rs`).
//!
//! Invariants: reading never panics and never reads past the slice; a
//! number takes at most ten bytes, and the tenth may carry one bit only, so
//! every `u64` has exactly one shortest encoding, which is what `put` writes.

/// Why a varint did not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The bytes end inside the number.
    Truncated,
    /// More than 64 bits.
    TooLong,
}

/// Appends `n` as a varint.
#[inline]
pub fn put(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends `n` zigzag-encoded, so that small negative numbers stay short.
#[inline]
pub fn put_signed(n: i64, out: &mut Vec<u8>) {
    put(((n << 1) ^ (n >> 63)) as u64, out);
}

/// The varint at `buf[*at]`; moves `at` past it.
#[inline]
pub fn get(buf: &[u8], at: &mut usize) -> Result<u64, VarintError> {
    // The common case, one byte, without the loop.
    if let Some(&byte) = buf.get(*at)
        && byte < 0x80
    {
        *at += 1;
        return Ok(u64::from(byte));
    }
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*at).ok_or(VarintError::Truncated)?;
        *at += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return match shift == 63 && byte > 1 {
                true => Err(VarintError::TooLong),
                false => Ok(n),
            };
        }
    }
    Err(VarintError::TooLong)
}

/// The zigzag varint at `buf[*at]`; moves `at` past it.
#[inline]
pub fn get_signed(buf: &[u8], at: &mut usize) -> Result<i64, VarintError> {
    get(buf, at).map(unzigzag)
}

/// The signed number `put_signed` zigzagged into `n`.
#[inline]
pub fn unzigzag(n: u64) -> i64 {
    (n >> 1) as i64 ^ -((n & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bytes the shortest encoding of `n` takes: seven bits each.
    fn len(n: u64) -> usize {
        (64 - (n | 1).leading_zeros() as usize).div_ceil(7)
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn numbers_read_back_from_their_shortest_encoding(n in any::<u64>(), s in any::<i64>()) {
            let mut out = Vec::new();
            put(n, &mut out);
            prop_assert_eq!(out.len(), len(n));
            put_signed(s, &mut out);
            let mut at = 0;
            prop_assert_eq!(get(&out, &mut at), Ok(n));
            prop_assert_eq!(get_signed(&out, &mut at), Ok(s));
            prop_assert_eq!(at, out.len());
            for cut in 0..len(n) {
                prop_assert_eq!(get(&out[..cut], &mut 0), Err(VarintError::Truncated));
            }
        }

        #[test]
        fn any_bytes_read_as_a_number_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let mut at = 0;
            if get(&bytes, &mut at).is_ok() {
                prop_assert!(at <= bytes.len() && at <= 10);
            }
        }
    }

    #[test]
    fn more_than_64_bits_is_an_error() {
        let eleven = [0xff; 10].iter().copied().chain([0x01]).collect::<Vec<_>>();
        assert_eq!(get(&eleven, &mut 0), Err(VarintError::TooLong));
        let mut tenth_two_bits = vec![0xff; 9];
        tenth_two_bits.push(0x02);
        assert_eq!(get(&tenth_two_bits, &mut 0), Err(VarintError::TooLong));
        let mut max = Vec::new();
        put(u64::MAX, &mut max);
        assert_eq!(max.len(), 10);
        assert_eq!(get(&max, &mut 0), Ok(u64::MAX));
        assert_eq!(put_signed_len(i64::MIN), 10);
    }

    fn put_signed_len(n: i64) -> usize {
        let mut out = Vec::new();
        put_signed(n, &mut out);
        out.len()
    }
}
