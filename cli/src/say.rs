//! Writing to stderr and stdout without ever ending the process. `eprintln!` and
//! `println!` panic when a write fails, and a write fails with EPIPE as soon as the
//! stream's reader has gone (`redlock run … 2>&1 | logger` whose logger died; Rust ignores
//! SIGPIPE). For `redlock run` that panic came between the lease's loss and the signal to
//! the command: `redlock` exited 101 and left the command running with no lease
//! (`tests/lease_loss.rs`, `a_closed_stderr_does_not_leave_the_command_running_past_its_lease`).
//! What `redlock` writes is for people; a reader that stopped reading loses it, as with
//! `cat`, and nothing else changes.
//!
//! The crate denies `clippy::print_stderr` and `clippy::print_stdout`, so every write goes
//! through these.

/// `eprintln!` whose failure is ignored.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` whose failure is ignored.
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, $($arg)*);
        let _ = stderr.flush();
    }};
}

/// `println!` whose failure is ignored (the reader of stdout has gone: see above).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` whose failure is ignored.
macro_rules! out_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout();
        let _ = write!(stdout, $($arg)*);
        let _ = stdout.flush();
    }};
}
