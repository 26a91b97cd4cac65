//! The logging set-up of `kf` and the examples, for programs (feature `logging`): the library
//! itself only emits `tracing` events and never installs a subscriber; a program that wants
//! the shipped one calls [`init`] at the start of `main`, after `kf_search::init()`.
//!
//! A program with its own subscriber keeps the progress bar intact by writing through
//! [`BarAwareStderr`].

use std::io::{self, IsTerminal};

use tracing_subscriber::EnvFilter;

use crate::report::{verbosity_filter, BarAwareStderr};

/// Installs a global `tracing` subscriber writing to stderr, filtered by `RUST_LOG` when it is
/// set and valid, else by the verbosity (see [`verbosity_filter`]). Lines do not tear a
/// [`ProgressObserver`](crate::report::ProgressObserver)'s bar. Returns `false` (and changes
/// nothing) when a global subscriber was already installed.
pub fn init(verbosity: u8) -> bool {
    let default = verbosity_filter(verbosity);
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(BarAwareStderr::default)
        .with_ansi(io::stderr().is_terminal())
        .with_target(verbosity >= 2)
        .try_init()
        .is_ok()
}
