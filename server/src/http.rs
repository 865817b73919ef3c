//! A minimal HTTP/1.1 responder on a tokio listener, for the broker's side listeners: the
//! `/metrics` endpoint (`scrape::http`) and the web console (`console`). Each gives a
//! [`Responder`]; this file holds what bounds them both.
//!
//! Why not hyper or axum: the listeners answer a few GET routes, and tokio is here already. A
//! whole HTTP stack (hyper, http, h2, tower, …) would be the broker's largest dependency for
//! ~100 lines of request-line parsing. What it does, and what bounds it:
//!
//! - One request per connection (`Connection: close`): read the head (at most
//!   [`MAX_HEAD_BYTES`], within [`READ_TIMEOUT`]) and the body its `Content-Length` gives (at
//!   most [`MAX_BODY_BYTES`], within [`READ_TIMEOUT`] more; over it → 413, a chunked body →
//!   411), answer, close. Only the console's actions have a body (a form).
//! - A head that is not HTTP/1.x, or whose header lines are not `Name: value` → 400; a head
//!   over the limit → 431; a request line that is not text (a Kafka frame sent to the wrong
//!   port) → 400 at once; a head not whole in time → the connection is closed. The rest (paths,
//!   methods) is the [`Responder`]'s; a `HEAD` request gets its `GET` answer without the body.
//! - At most [`MAX_CONNECTIONS`] connections at once per listener. When all are taken, a new
//!   one closes the oldest connection still reading its head (a slowloris or idle connections
//!   cannot keep a scrape out); only while all are being answered does a new one wait to be
//!   accepted.
//! - The responder reads broker state and the log: it runs on the blocking pool.
//! - With a TLS acceptor (`--console-tls`, `--metrics-tls`: the broker's keystore, no client
//!   certificate) the handshake comes first, bounded as the head is (time, eviction).
//!
//! Nothing an HTTP client sends reaches the Kafka listener or the log.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// Largest request head (request line and headers) read.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// A request head must arrive whole within this long (a scraper sends its request as soon as
/// it connects).
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Writing the response must finish within this long.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once, per listener.
pub const MAX_CONNECTIONS: usize = 16;
/// Largest request body read (the console's forms are a few hundred bytes).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A parsed request head.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// Upper-case ASCII (`GET`, `HEAD`, …).
    pub method: String,
    /// The target up to `?`, still percent-encoded.
    pub path: String,
    /// The target after `?` (empty without one), still percent-encoded.
    pub query: String,
    /// Header names in lower case, values trimmed; a repeated header keeps its last value.
    pub headers: BTreeMap<String, String>,
    /// The body (`Content-Length` bytes; empty without one).
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// An answer: status line, content type, extra headers and body.
#[derive(Debug)]
pub struct Response {
    pub status: &'static str,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A `text/plain` answer of one line.
    pub fn text(status: &'static str, reason: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: format!("{reason}\n").into_bytes(),
        }
    }

    /// 404 with a line saying what is served.
    pub fn not_found(reason: &str) -> Response {
        Response::text("404 Not Found", reason)
    }

    /// 405 for a method other than GET or HEAD.
    pub fn get_only() -> Response {
        let mut response = Response::text("405 Method Not Allowed", "only GET and HEAD are served");
        response.headers.push(("Allow", "GET, HEAD".to_string()));
        response
    }
}

/// What a listener serves. Called on the blocking pool, once per request.
pub trait Responder: Send + Sync + 'static {
    /// What the listener is, for log lines (`metrics`, `console`).
    const NAME: &'static str;
    fn respond(&self, request: &Request, peer: SocketAddr) -> Response;
}

const BAD_REQUEST: &str = "400 Bad Request";

/// Parses a request head (everything up to the blank line, or what arrived of it); `Err`: the
/// answer refusing it.
pub fn parse(head: &[u8]) -> Result<Request, Response> {
    let refused = |reason| Err(Response::text(BAD_REQUEST, reason));
    let Ok(head) = std::str::from_utf8(head) else {
        return refused("the request head is not UTF-8");
    };
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return refused("expected a request line: METHOD /path HTTP/1.1");
    };
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return refused("only HTTP/1.0 and HTTP/1.1 are served");
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return refused("malformed method");
    }
    if !target.starts_with('/') {
        return refused("the target must be a path");
    }
    let mut headers = BTreeMap::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return refused("a header line is not Name: value");
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return refused("malformed header name");
        }
        headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        headers,
        body: Vec::new(),
    })
}

/// The connections open: those still reading their head (by age; any may be closed
/// for a new connection) and how many are being answered.
#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    reading: BTreeMap<u64, Arc<Notify>>,
    answering: usize,
}

#[derive(Debug, Default)]
struct Slots {
    open: Mutex<Open>,
    /// Notified when an answered connection ends.
    freed: Notify,
}

impl Slots {
    fn open(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether every slot is taken by a connection being answered: none can be evicted.
    fn all_answering(&self) -> bool {
        let open = self.open();
        open.reading.is_empty() && open.answering >= MAX_CONNECTIONS
    }

    /// A place for a new connection; when all are taken, the oldest connection still reading
    /// its head is told to close.
    fn admit(self: &Arc<Self>) -> Ticket {
        let mut open = self.open();
        if open.reading.len() + open.answering >= MAX_CONNECTIONS {
            if let Some((_, oldest)) = open.reading.pop_first() {
                oldest.notify_one();
            }
        }
        let id = open.next_id;
        open.next_id += 1;
        let evicted = Arc::new(Notify::new());
        open.reading.insert(id, evicted.clone());
        Ticket {
            slots: self.clone(),
            id,
            evicted,
            answering: false,
        }
    }
}

/// One connection's place; given back when dropped.
#[derive(Debug)]
struct Ticket {
    slots: Arc<Slots>,
    id: u64,
    /// Notified when the connection was closed for a new one.
    evicted: Arc<Notify>,
    answering: bool,
}

impl Ticket {
    /// Moves from reading the head to being answered; `false` if the connection was evicted.
    fn answer(&mut self) -> bool {
        let mut open = self.slots.open();
        if open.reading.remove(&self.id).is_none() {
            return false;
        }
        open.answering += 1;
        self.answering = true;
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.slots.open();
        if self.answering {
            open.answering = open.answering.saturating_sub(1);
            drop(open);
            self.slots.freed.notify_one();
        } else {
            open.reading.remove(&self.id);
        }
    }
}

/// Serves `responder` on `listener` (over TLS with `tls`) until `shutdown` turns `true`.
pub async fn serve<R: Responder>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    responder: Arc<R>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Slots::default());
    loop {
        // Accepting waits only while every slot is being answered.
        while slots.all_answering() {
            tokio::select! {
                () = slots.freed.notified() => {}
                _ = shutdown.changed() => return,
            }
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let responder = responder.clone();
                    let ticket = slots.admit();
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        if let Err(e) = answer(socket, tls, peer, responder, ticket).await {
                            tracing::debug!(%peer, error = %e, listener = R::NAME, "HTTP connection failed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, listener = R::NAME, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

/// What arrived of a request head.
enum Head {
    /// Everything up to the blank line (or up to the end of the stream), and what arrived
    /// after it (the start of a body).
    Whole(Vec<u8>, Vec<u8>),
    /// Over [`MAX_HEAD_BYTES`] without a blank line.
    TooLarge,
    /// The request line holds bytes no HTTP request line has (a Kafka frame, binary junk):
    /// refused at once instead of waiting for a blank line that will not come.
    NotText,
}

/// Whether the request line begun in `head` (up to its first `\n`) could be HTTP: printable
/// ASCII and `\r`.
fn request_line_is_text(head: &[u8]) -> bool {
    head.iter()
        .take_while(|&&b| b != b'\n')
        .all(|&b| b == b'\r' || (0x20..0x7f).contains(&b))
}

async fn read_head<S: AsyncRead + Unpin>(socket: &mut S) -> std::io::Result<Head> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            // The client closed its side: answer what arrived (a bare request line is one).
            return Ok(Head::Whole(head, Vec::new()));
        }
        head.extend_from_slice(&chunk[..n]);
        if !request_line_is_text(&head) {
            return Ok(Head::NotText);
        }
        let end = head
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|at| (at, 4))
            .or_else(|| head.windows(2).position(|w| w == b"\n\n").map(|at| (at, 2)));
        if let Some((end, blank)) = end {
            let rest = head.split_off(end + blank);
            head.truncate(end);
            return Ok(Head::Whole(head, rest));
        }
        if head.len() > MAX_HEAD_BYTES {
            return Ok(Head::TooLarge);
        }
    }
}

/// Reads `request`'s body after `rest` (what came with the head): `Ok(Err(answer))` when it
/// is refused (chunked, over [`MAX_BODY_BYTES`], not whole within [`READ_TIMEOUT`]).
async fn read_body<S: AsyncRead + Unpin>(
    socket: &mut S,
    mut request: Request,
    mut rest: Vec<u8>,
) -> std::io::Result<Result<Request, Response>> {
    if request.header("transfer-encoding").is_some() {
        return Ok(Err(Response::text(
            "411 Length Required",
            "send the body with a Content-Length",
        )));
    }
    let length = match request.header("content-length").map(str::parse::<usize>) {
        None => return Ok(Ok(request)),
        Some(Ok(length)) if length <= MAX_BODY_BYTES => length,
        Some(Ok(_)) => {
            return Ok(Err(Response::text(
                "413 Content Too Large",
                "the request body is over 16 KiB",
            )))
        }
        Some(Err(_)) => return Ok(Err(Response::text(BAD_REQUEST, "malformed Content-Length"))),
    };
    let read = async {
        let mut chunk = [0u8; 4096];
        while rest.len() < length {
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        std::io::Result::Ok(())
    };
    if tokio::time::timeout(READ_TIMEOUT, read).await.is_err() || rest.len() < length {
        return Ok(Err(Response::text(
            "408 Request Timeout",
            "the request body did not arrive whole",
        )));
    }
    rest.truncate(length);
    request.body = rest;
    Ok(Ok(request))
}

/// After the response: reads and drops what the client still sends (a request body, the rest
/// of an oversized head), up to a bound, so that closing does not reset the connection and
/// destroy the response before the client has read it.
async fn drain<S: AsyncRead + Unpin>(socket: &mut S) {
    let mut chunk = [0u8; 4096];
    let mut left = 1usize << 20;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while left > 0 {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// Answers one connection: its TLS handshake first when there is an acceptor (within
/// [`READ_TIMEOUT`], given up when evicted), then [`exchange`].
async fn answer<R: Responder>(
    socket: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    peer: SocketAddr,
    responder: Arc<R>,
    ticket: Ticket,
) -> std::io::Result<()> {
    let Some(acceptor) = tls else {
        return exchange(socket, peer, responder, ticket).await;
    };
    let evicted = ticket.evicted.clone();
    let stream = tokio::select! {
        stream = tokio::time::timeout(READ_TIMEOUT, acceptor.accept(socket)) => match stream {
            Ok(stream) => stream?,
            Err(_) => return Ok(()),
        },
        () = evicted.notified() => return Ok(()),
    };
    exchange(stream, peer, responder, ticket).await
}

/// Reads one request head, answers it and closes.
async fn exchange<R: Responder, S: AsyncRead + AsyncWrite + Unpin>(
    mut socket: S,
    peer: SocketAddr,
    responder: Arc<R>,
    mut ticket: Ticket,
) -> std::io::Result<()> {
    let evicted = ticket.evicted.clone();
    let head = tokio::select! {
        head = tokio::time::timeout(READ_TIMEOUT, read_head(&mut socket)) => match head {
            Ok(head) => head?,
            Err(_) => return Ok(()),
        },
        () = evicted.notified() => return Ok(()),
    };
    if !ticket.answer() {
        return Ok(());
    }
    let request = match head {
        Head::Whole(head, rest) => match parse(&head) {
            Ok(request) => read_body(&mut socket, request, rest).await?,
            Err(refused) => Err(refused),
        },
        Head::TooLarge => Err(Response::text(
            "431 Request Header Fields Too Large",
            "the request head is over 8 KiB",
        )),
        Head::NotText => Err(Response::text(BAD_REQUEST, "not an HTTP request")),
    };
    let (response, send_body) = match request {
        Ok(request) => {
            let head_only = request.method == "HEAD";
            let answered = crate::blocking::spawn(move || responder.respond(&request, peer)).await;
            match answered {
                Ok(response) => (response, !head_only),
                Err(_) => {
                    tracing::error!(listener = R::NAME, "answering an HTTP request failed");
                    (
                        Response::text("500 Internal Server Error", "answering the request failed"),
                        !head_only,
                    )
                }
            }
        }
        Err(refused) => {
            tracing::debug!(
                status = refused.status,
                listener = R::NAME,
                "HTTP request refused"
            );
            (refused, true)
        }
    };
    let mut head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let written = async {
        socket.write_all(head.as_bytes()).await?;
        if send_body {
            socket.write_all(&response.body).await?;
        }
        socket.shutdown().await
    };
    tokio::time::timeout(WRITE_TIMEOUT, written)
        .await
        .unwrap_or(Ok(()))?;
    drain(&mut socket).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str) -> &'static str {
        match parse(head.as_bytes()) {
            Ok(_) => "200 OK",
            Err(refused) => refused.status,
        }
    }

    #[tokio::test]
    async fn a_new_connection_closes_the_oldest_head_still_reading_when_all_are_taken() {
        let slots = Arc::new(Slots::default());
        let mut tickets: Vec<Ticket> = (0..MAX_CONNECTIONS).map(|_| slots.admit()).collect();
        assert!(tickets[0].answer(), "the first is being answered");
        let newest = slots.admit();
        // The oldest still reading (the second) is told to close; the answered one is not.
        tokio::time::timeout(Duration::from_secs(5), tickets[1].evicted.notified())
            .await
            .unwrap();
        assert!(
            !tickets[1].answer(),
            "an evicted connection is not answered"
        );
        assert_eq!(slots.open().reading.len(), MAX_CONNECTIONS - 1);
        drop(newest);
        // Once every place is being answered, a new connection has to wait.
        for t in tickets.iter_mut().skip(2) {
            assert!(t.answer());
        }
        assert!(!slots.all_answering());
        let mut last = slots.admit();
        assert!(last.answer());
        assert!(slots.all_answering());
        drop(last);
        assert!(!slots.all_answering());
    }

    #[test]
    fn binary_request_lines_are_not_text() {
        assert!(request_line_is_text(b"GET /metrics HTTP/1.1\r\nX: \x01"));
        assert!(request_line_is_text(b"GET /met"));
        assert!(!request_line_is_text(b"\x00\x00\x00\x1f\x00\x12"));
        assert!(!request_line_is_text(b"GET /\xc3\xa9"));
    }

    #[test]
    fn requests_are_parsed_strictly() {
        assert_eq!(status("GET /metrics HTTP/1.1\r\nHost: x"), "200 OK");
        let request =
            parse(b"HEAD /a/b?x=1&y HTTP/1.0\r\nAuthorization:  Basic eA== \r\n").unwrap();
        assert_eq!(request.method, "HEAD");
        assert_eq!(request.path, "/a/b");
        assert_eq!(request.query, "x=1&y");
        assert_eq!(request.header("authorization"), Some("Basic eA=="));
        for bad in [
            "",
            "GET",
            "GET /metrics",
            "GET /metrics HTTP/2.0",
            "GET  /metrics HTTP/1.1",
            "get /metrics HTTP/1.1",
            "GET metrics HTTP/1.1",
            "GET /metrics HTTP/1.1 extra",
            "GET /metrics HTTP/1.1\r\nno colon",
            "GET /metrics HTTP/1.1\r\n: empty name",
            "\u{0}\u{1}\u{2}",
        ] {
            assert_eq!(status(bad), BAD_REQUEST, "{bad:?}");
        }
        assert_eq!(
            parse(&[0xff, 0xfe]).unwrap_err().body,
            b"the request head is not UTF-8\n"
        );
    }
}
