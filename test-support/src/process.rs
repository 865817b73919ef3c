//! What the suites need around the child processes they run (Java programs, test workers,
//! Prometheus): their stdout collected line by line, and a free port to give them.

use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};

/// Collects `stdout`'s lines, as they come, on a thread of their own; the vector holds every
/// line read so far.
pub fn collect_lines(stdout: impl Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

/// A port free on 127.0.0.1 now (for a program that cannot listen on port 0 and report it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
