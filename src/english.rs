//! Counts in messages, singular or plural as the count asks: `1 record`,
//! `0 records`, `2 records` — never `1 records` or `record(s)`; and sizes
//! in binary units.

/// `n` followed by `noun`, with an `s` unless `n` is 1 (every noun kappa
/// counts takes a regular plural).
pub fn count(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// `1536` -> `1.5 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut unit = 0;
    while x >= 1024.0 && unit < UNITS.len() - 1 {
        x /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{x:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_and_the_rest_plural() {
        assert_eq!(super::count(0, "record"), "0 records");
        assert_eq!(super::count(1, "bad row"), "1 bad row");
        assert_eq!(super::count(3, "partition"), "3 partitions");
    }
}
