//! A csv input file, split into 1 to 4 chunks (the first byte), read with
//! bad rows failing and with bad rows skipped.
#![no_main]
use kappa::source::{BadRowPolicy, Format, fuzz::read_bytes};

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let Some((&parts, rest)) = bytes.split_first() else {
        return;
    };
    let parts = 1 + parts as usize % 4;
    for policy in [BadRowPolicy::Fail, BadRowPolicy::Skip] {
        let _ = read_bytes(rest, Format::Csv, policy, parts);
    }
});
