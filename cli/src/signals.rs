//! The signals `redlock` itself receives. They are caught from the start, so that an
//! interrupted `redlock` never dies holding a lease: while waiting for the lease it stops
//! waiting, and while the command runs it passes the signal on to the command and exits
//! when the command does, after releasing the lease.

use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

/// The signals that would otherwise end `redlock` and that a process is commonly sent
/// (`SIGINT` from a terminal's Ctrl-C, `SIGTERM` from a service manager or `kill`, `SIGHUP`
/// from a closed terminal, `SIGQUIT`, `SIGUSR1` and `SIGUSR2` for a log rotation or a
/// reload, `SIGALRM`): an ended `redlock` would leave the command running unguarded.
/// (`SIGPIPE` is ignored by Rust's runtime; `SIGKILL` and `SIGSTOP` cannot be caught.)
#[derive(Debug)]
pub(crate) struct Incoming {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Incoming {
    /// Starts catching the signals; requires a tokio runtime.
    ///
    /// # Errors
    ///
    /// When a handler cannot be installed.
    pub(crate) fn install() -> io::Result<Self> {
        let kinds = [
            (Signal::SIGINT, SignalKind::interrupt()),
            (Signal::SIGTERM, SignalKind::terminate()),
            (Signal::SIGHUP, SignalKind::hangup()),
            (Signal::SIGQUIT, SignalKind::quit()),
            (Signal::SIGUSR1, SignalKind::user_defined1()),
            (Signal::SIGUSR2, SignalKind::user_defined2()),
            (Signal::SIGALRM, SignalKind::alarm()),
        ];
        let mut streams = Vec::with_capacity(kinds.len());
        for (name, kind) in kinds {
            streams.push((name, signal(kind)?));
        }
        Ok(Self { streams })
    }

    /// The next signal received. Cancel safe: a signal is never lost by dropping this
    /// future.
    pub(crate) async fn recv(&mut self) -> Signal {
        let waits = self.streams.iter_mut().map(|(name, stream)| {
            let name = *name;
            Box::pin(async move {
                stream.recv().await;
                name
            })
        });
        futures::future::select_all(waits).await.0
    }
}
