//! The broker in the test's own process: `lograil::run` on 127.0.0.1:0, on a tokio runtime of
//! its own (the test's clients are blocking sockets or a runtime of their own), over a
//! temporary data dir.

use std::time::Duration;

use lograil::{BrokerConfig, ServeError};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A broker serving in this process until [`InProcess::stop`] (or drop).
#[derive(Debug)]
pub struct InProcess {
    /// `127.0.0.1:PORT`
    pub addr: String,
    runtime: Option<Runtime>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<Result<(), ServeError>>>,
    _dir: tempfile::TempDir,
}

impl InProcess {
    /// Starts a broker on a runtime of `worker_threads` workers, with the default
    /// configuration on a temporary data dir as `configure` changes it.
    pub fn start(worker_threads: usize, configure: impl FnOnce(&mut BrokerConfig)) -> InProcess {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut config = BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        };
        configure(&mut config);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = runtime.spawn(lograil::run(listener, config, async {
            let _ = stopped.await;
        }));
        InProcess {
            addr,
            runtime: Some(runtime),
            stop: Some(stop),
            server: Some(server),
            _dir: dir,
        }
    }

    /// Completes the shutdown future `run` was given.
    pub fn signal_shutdown(&mut self) {
        let _ = self.stop.take().expect("not stopped yet").send(());
    }

    /// Waits for `run` to return after [`InProcess::signal_shutdown`]; fails the test unless it
    /// returns `Ok` within `timeout`.
    pub fn wait_for_exit(&mut self, timeout: Duration) {
        let server = self.server.take().expect("still running");
        let runtime = self.runtime.as_ref().expect("the runtime");
        let exited = runtime
            .block_on(async { tokio::time::timeout(timeout, server).await })
            .expect("the broker did not exit after its shutdown signal");
        exited
            .expect("the broker task panicked")
            .expect("the broker returned an error");
    }

    /// Shuts the broker down; fails the test unless `run` returns `Ok` within `timeout`.
    pub fn stop(&mut self, timeout: Duration) {
        self.signal_shutdown();
        self.wait_for_exit(timeout);
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Blocking work still running (an fsync a test holds) is given 10 s, not forever.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(10));
        }
    }
}
