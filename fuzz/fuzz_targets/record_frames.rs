//! Record frames back to back, as a reader scans a segment.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| kappa::log::fuzz::decode_frames(bytes));
