//! CSV parse floor for the batch benchmark: the cost of reading a `key,value`
//! CSV file with the `csv` crate and nothing else (no dataflow, no output).
//!
//! Usage: csv_floor PATH
//!
//! Reads every record into one reused `csv::ByteRecord`, parses both fields as
//! i64 with a plain byte loop, and prints the row count and (wrapping) sums so
//! the work cannot be optimised away. Uses only std + csv.

use std::process::ExitCode;

#[inline]
fn parse_i64(field: &[u8]) -> Option<i64> {
    let (neg, digits) = match field.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, field),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(d as i64)?;
    }
    Some(if neg { -n } else { n })
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: csv_floor PATH   (a CSV file with a header and two integer columns)");
        return ExitCode::from(2);
    };
    let mut reader = match csv::ReaderBuilder::new()
        .has_headers(true)
        .buffer_capacity(1 << 20)
        .from_path(&path)
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("csv_floor: {}: {e}", path.to_string_lossy());
            return ExitCode::FAILURE;
        }
    };
    let mut record = csv::ByteRecord::new();
    let (mut rows, mut sum0, mut sum1) = (0u64, 0i64, 0i64);
    loop {
        match reader.read_byte_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                eprintln!("csv_floor: {e}");
                return ExitCode::FAILURE;
            }
        }
        let (Some(a), Some(b)) = (
            record.get(0).and_then(parse_i64),
            record.get(1).and_then(parse_i64),
        ) else {
            eprintln!(
                "csv_floor: record {} is not two integers: {record:?}",
                rows + 1
            );
            return ExitCode::FAILURE;
        };
        rows += 1;
        sum0 = sum0.wrapping_add(a);
        sum1 = sum1.wrapping_add(b);
    }
    println!("rows={rows} sum_col0={sum0} sum_col1={sum1}");
    ExitCode::SUCCESS
}
