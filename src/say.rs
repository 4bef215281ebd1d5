//! Lines for the terminal. [`say!`](crate::say) formats a whole line first
//! and hands it to stderr in one write call.
//!
//! Why: `eprintln!` writes each piece of its format string separately, and
//! stderr is unbuffered, so two processes sharing a terminal or a pipe (a
//! cluster started with `&`, a supervisor collecting logs) interleave
//! mid-line (`kappa run kappa run count-by: ...`). A single `write` of a
//! line shorter than `PIPE_BUF` (4 KiB on Linux) is never split by the
//! kernel.

use std::io::Write;

/// Writes `line` and a newline to stderr in one call; a closed stderr is
/// ignored, as `eprintln!` would panic there instead.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut text = args.to_string();
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `eprintln!`, but the line is written whole (see [the module](crate::say)).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::line(format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_like_eprintln() {
        // Only that it compiles with the forms eprintln! takes and does
        // not panic; the single write is the kernel's promise.
        crate::say!("plain");
        crate::say!("{} and {x}", 1, x = 2);
    }
}
