//! A record value read as a row: binary elements, or a JSON array.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| kappa::log::fuzz::decode_row_value(bytes));
