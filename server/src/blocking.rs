//! Work that may block (file I/O, fsyncs, scans of the log) runs on tokio's blocking pool, in
//! the tracing span of whoever started it: a line logged there names its connection and
//! request like the lines of the handler that asked for it.

use tokio::task::JoinHandle;

/// `tokio::task::spawn_blocking` inside the caller's current span.
pub fn spawn<F, R>(work: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(work))
}
