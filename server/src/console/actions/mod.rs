//! The console's actions, off unless `--console-actions` is given: reset a group's offsets
//! ([`reset`]), delete a partition's records up to an offset ([`delete`]), redrive a dead letter
//! ([`redrive`]).
//!
//! Each is two requests. `GET /actions/<name>?…` changes nothing: it shows what would change
//! (or why it may not be done) and a form to confirm it. `POST /actions/<name>`, that form, does
//! it: checked for its CSRF token ([`token`]: this viewer, this action, these fields, once,
//! within 10 minutes) and, when the browser says where it comes from, for its origin. Doing is
//! a Kafka request run as the viewer through the broker's own handler ([`kafka::call`]:
//! OffsetCommit, DeleteRecords, Produce), so the authorizer decides exactly as for a client.
//! Each action done or refused by the broker is logged with its principal and address.

mod delete;
mod kafka;
mod redrive;
mod reset;
mod token;

pub use token::Tokens;

use super::html::{self, Html};
use super::pages::{page, Context};
use super::Query;
use crate::http::{Request, Response};

type Page = Result<String, Response>;

/// One kind of action: its parameters, what it would do, and doing it.
trait Action: Sized {
    /// Its path under `/actions/`, and its name in the log.
    const NAME: &'static str;
    const TITLE: &'static str;
    /// The confirmation button's label.
    const BUTTON: &'static str;

    /// Its parameters from a query string or a form; 400 when one is missing or malformed.
    fn parse(query: &Query) -> Result<Self, Response>;

    /// Its parameters in a fixed order: the form's fields, what the token signs, the log's.
    fn fields(&self) -> Vec<(&'static str, String)>;

    /// Writes what it would change, or refuses: 404 for what the viewer may not see (as
    /// missing), 403 for what it may not do, 409 for what cannot be done now.
    fn preview(&self, context: &Context<'_>, h: &mut Html) -> Result<(), Response>;

    /// Does it as the viewer, writing the broker's answer.
    fn run(&self, context: &Context<'_>, h: &mut Html) -> Outcome;
}

/// What doing an action came to.
#[derive(Debug)]
struct Outcome {
    /// A line for the log.
    summary: String,
    /// Whether the broker answered an authorization error (the page is then 403).
    denied: bool,
}

impl Outcome {
    /// A refusal found when the action was to be done (the state changed since its
    /// confirmation, or a Kafka request said no), written as the page's answer.
    fn refused(h: &mut Html, refused: &Response) -> Outcome {
        let reason = String::from_utf8_lossy(&refused.body).trim().to_string();
        h.raw("<p class=\"warn\">Not done: ")
            .text(&reason)
            .raw("</p>");
        Outcome {
            denied: refused.status.starts_with("403"),
            summary: format!("refused: {reason}"),
        }
    }

    /// The outcome of per-partition error codes.
    fn of_codes(results: &[(i32, i16)]) -> Outcome {
        let failed: Vec<String> = results
            .iter()
            .filter(|(_, code)| *code != 0)
            .map(|(p, code)| format!("{p}: {}", kafka::error_name(*code)))
            .collect();
        Outcome {
            denied: results.iter().any(|(_, code)| kafka::is_denied(*code)),
            summary: if failed.is_empty() {
                format!("done ({} partitions)", results.len())
            } else {
                format!("failed: {}", failed.join(", "))
            },
        }
    }
}

/// Answers `/actions/<name>`.
pub fn respond(tokens: &Tokens, context: &Context<'_>, request: &Request, name: &str) -> Page {
    match name {
        reset::ResetOffsets::NAME => handle::<reset::ResetOffsets>(tokens, context, request),
        delete::DeleteRecords::NAME => handle::<delete::DeleteRecords>(tokens, context, request),
        redrive::Redrive::NAME => handle::<redrive::Redrive>(tokens, context, request),
        _ => Err(Response::not_found("no such console action")),
    }
}

fn handle<A: Action>(tokens: &Tokens, context: &Context<'_>, request: &Request) -> Page {
    match request.method.as_str() {
        "GET" | "HEAD" => confirm::<A>(tokens, context),
        "POST" => act::<A>(tokens, context, request),
        _ => {
            let mut response = Response::text(
                "405 Method Not Allowed",
                "an action is GET (to confirm) or POST",
            );
            response
                .headers
                .push(("Allow", "GET, HEAD, POST".to_string()));
            Err(response)
        }
    }
}

/// The confirmation page: what would change and the form that does it.
fn confirm<A: Action>(tokens: &Tokens, context: &Context<'_>) -> Page {
    let action = A::parse(context.query)?;
    let mut h = Html::default();
    action
        .preview(context, &mut h)
        .map_err(|r| refused(context, A::TITLE, r))?;
    let fields = action.fields();
    let principal = context.viewer.principal.as_str();
    let token = tokens.issue(principal, A::NAME, &fields, log_core::now_ms());
    h.raw("<form method=\"post\" class=\"action\" action=\"/actions/")
        .raw(A::NAME)
        .raw("\">");
    for (name, value) in &fields {
        hidden(&mut h, name, value);
    }
    hidden(&mut h, "token", &token);
    h.raw("<button type=\"submit\">")
        .raw(A::BUTTON)
        .raw("</button> as ")
        .text(principal)
        .raw("</form>");
    Ok(page(context, "", A::TITLE, h))
}

/// A form field. Its value is percent-encoded (a name may hold characters an attribute does
/// not carry as they are, control characters) and decoded once more when the form comes back.
fn hidden(h: &mut Html, name: &str, value: &str) {
    h.raw("<input type=\"hidden\" name=\"")
        .text(name)
        .raw("\" value=\"")
        .text(&html::percent_encode(value))
        .raw("\">");
}

/// The confirmed form: checked (origin, token), done, logged, and its outcome shown.
fn act<A: Action>(tokens: &Tokens, context: &Context<'_>, request: &Request) -> Page {
    let forbidden = |reason: &str| Response::text("403 Forbidden", reason);
    if !same_origin(request) {
        return Err(forbidden(
            "the form was not sent from this console's own page (Origin)",
        ));
    }
    let form = form(request)?;
    let action = A::parse(&form)?;
    let token = form.get("token").unwrap_or_default();
    let principal = context.viewer.principal.as_str();
    tokens
        .spend(
            token,
            principal,
            A::NAME,
            &action.fields(),
            log_core::now_ms(),
        )
        .map_err(|r| forbidden(r.reason()))?;
    let mut h = Html::default();
    let outcome = action.run(context, &mut h);
    tracing::info!(
        principal,
        host = %context.viewer.host(),
        action = A::NAME,
        fields = ?action.fields(),
        outcome = %outcome.summary,
        "console action"
    );
    let body = page(context, "", A::TITLE, h);
    if outcome.denied {
        return Err(html_response("403 Forbidden", body));
    }
    Ok(body)
}

/// A refusal of the confirmation page as a page of the console (its status kept).
fn refused(context: &Context<'_>, title: &str, response: Response) -> Response {
    if response.content_type.starts_with("text/html") {
        return response;
    }
    let mut h = Html::default();
    h.raw("<p class=\"warn\">")
        .text(String::from_utf8_lossy(&response.body).trim_end())
        .raw("</p>");
    html_response(response.status, page(context, "", title, h))
}

fn html_response(status: &'static str, body: String) -> Response {
    Response {
        status,
        content_type: "text/html; charset=utf-8",
        headers: Vec::new(),
        body: body.into_bytes(),
    }
}

/// Whether the request may come from this console's own page: its `Origin`, when the browser
/// sends one, names the host it was sent to, and `Sec-Fetch-Site` does not say cross-site.
/// (Clients that send neither, curl, still need the token.)
fn same_origin(request: &Request) -> bool {
    if let Some(site) = request.header("sec-fetch-site") {
        if !matches!(site, "same-origin" | "none") {
            return false;
        }
    }
    match (request.header("origin"), request.header("host")) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host)),
        (Some(_), None) => false,
    }
}

/// The form of a POST: `application/x-www-form-urlencoded`, its fields decoded (twice for
/// all but the token: see [`hidden`]).
fn form(request: &Request) -> Result<Query, Response> {
    let bad = |reason: &str| Response::text("400 Bad Request", reason);
    let content_type = request.header("content-type").unwrap_or_default();
    if !content_type.split(';').next().is_some_and(|t| {
        t.trim()
            .eq_ignore_ascii_case("application/x-www-form-urlencoded")
    }) {
        return Err(bad("an action's form is application/x-www-form-urlencoded"));
    }
    let body = std::str::from_utf8(&request.body).map_err(|_| bad("the form is not UTF-8"))?;
    let outer = Query::parse(body).ok_or_else(|| bad("malformed form"))?;
    let mut pairs = Vec::new();
    for (name, value) in outer.0 {
        let value = if name == "token" {
            value
        } else {
            html::percent_decode(&value).ok_or_else(|| bad("malformed form field"))?
        };
        pairs.push((name, value));
    }
    Ok(Query(pairs))
}

/// A required query parameter; 400 naming it when absent or empty.
fn required<'q>(query: &'q Query, name: &str) -> Result<&'q str, Response> {
    query
        .get(name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Response::text("400 Bad Request", &format!("{name} is required")))
}

/// A required integer query parameter.
fn number<T: std::str::FromStr>(query: &Query, name: &str) -> Result<T, Response> {
    required(query, name)?
        .parse()
        .map_err(|_| Response::text("400 Bad Request", &format!("{name} must be a number")))
}

/// The record (or position) an action names: `topic`, `partition` and `offset`.
#[derive(Debug)]
struct RecordAt {
    topic: String,
    partition: i32,
    offset: i64,
}

impl RecordAt {
    fn parse(query: &Query) -> Result<RecordAt, Response> {
        Ok(RecordAt {
            topic: required(query, "topic")?.to_string(),
            partition: number(query, "partition")?,
            offset: number(query, "offset")?,
        })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("topic", self.topic.clone()),
            ("partition", self.partition.to_string()),
            ("offset", self.offset.to_string()),
        ]
    }
}

/// The answer for what the viewer may not see, or that does not exist: the same 404.
fn missing(what: &str) -> Response {
    Response::not_found(&format!("no such {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "POST".into(),
            path: "/actions/reset-offsets".into(),
            query: String::new(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn only_a_form_from_the_consoles_own_origin_is_taken() {
        let host = ("host", "127.0.0.1:9309");
        assert!(same_origin(&request(&[host])));
        assert!(same_origin(&request(&[
            host,
            ("origin", "http://127.0.0.1:9309")
        ])));
        assert!(same_origin(&request(&[
            host,
            ("origin", "https://127.0.0.1:9309")
        ])));
        assert!(!same_origin(&request(&[
            host,
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&request(&[host, ("origin", "null")])));
        assert!(!same_origin(&request(&[(
            "origin",
            "http://127.0.0.1:9309"
        )])));
        assert!(!same_origin(&request(&[
            host,
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(!same_origin(&request(&[
            host,
            ("sec-fetch-site", "same-site")
        ])));
    }

    #[test]
    fn form_fields_are_decoded_twice_but_the_token() {
        let mut r = request(&[("content-type", "application/x-www-form-urlencoded")]);
        r.body = b"group=a%2520b%253C&token=1.ab%2520".to_vec();
        let form = form(&r).unwrap();
        assert_eq!(form.get("group"), Some("a b<"));
        assert_eq!(form.get("token"), Some("1.ab%20"));
        r.headers.insert("content-type".into(), "text/plain".into());
        assert_eq!(super::form(&r).unwrap_err().status, "400 Bad Request");
    }
}
