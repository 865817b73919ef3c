//! Work that may block (file I/O, fsyncs, scans of the log) runs on tokio's blocking pool, in
//! the tracing span of whoever started it: a line logged there names its connection and
//! request like the lines of the handler that asked for it.

use tokio::task::JoinHandle;

#[cfg(test)]
tokio::task_local! {
    /// Set in a test: every blocking task the task starts panics (a forced internal failure).
    pub static FAIL_TASKS: bool;
}

/// `tokio::task::spawn_blocking` inside the caller's current span.
pub fn spawn<F, R>(work: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let span = tracing::Span::current();
    #[cfg(test)]
    if FAIL_TASKS.try_with(|fail| *fail).unwrap_or(false) {
        return tokio::task::spawn_blocking(|| panic!("a forced blocking-task failure"));
    }
    tokio::task::spawn_blocking(move || span.in_scope(work))
}

/// `work(item)` for each of `items` on the blocking pool, in the caller's span. If the task
/// fails (it panicked: logged), each item is answered by `failed(item)` instead, so that every
/// item a request named gets an answer.
pub async fn map_each<I, R>(
    items: Vec<I>,
    work: impl Fn(I) -> R + Send + 'static,
    failed: impl Fn(I) -> R,
) -> Vec<R>
where
    I: Clone + Send + 'static,
    R: Send + 'static,
{
    let copy = items.clone();
    match spawn(move || items.into_iter().map(work).collect::<Vec<_>>()).await {
        Ok(results) => results,
        Err(e) => {
            tracing::error!(error = %e, "blocking task failed");
            copy.into_iter().map(failed).collect()
        }
    }
}
