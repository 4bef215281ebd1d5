//! A partition's first segment and its index; the first byte says where the
//! input splits between the two.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let Some((&cut, rest)) = bytes.split_first() else {
        return;
    };
    let at = (cut as usize * rest.len()) / 255;
    let (segment, index) = rest.split_at(at);
    kappa::log::fuzz::read_partition(segment, index);
});
