//! The read-only web console (`lograil serve --console-listen ADDR`): server-rendered HTML
//! pages of the broker's state, on the broker's bounded HTTP responder ([`crate::http`]).
//!
//! Pages: `/` (overview), `/topics` (partitions, offsets, sizes, append rates; internal topics
//! with `?internal=true`), `/topics/<name>` (a topic's partitions, damage, cleaner, readers and
//! configs) and `/topics/<name>/messages` (its records, [`records`]), `/groups`
//! (consumer-group lag in records and seconds, time to drain: [`crate::scrape::Scraper::lag`],
//! the numbers `/metrics` exposes), `/groups/<id>` (a group's members, assignment and lag), `/shares` (share groups: record states, per-tenant
//! waits) and `/shares/<id>` (a share group's members, windows and delivery counts), `/dead-letters` (dead-letter topics) and `/dead-letters/records` (their records'
//! origin, error and attempts), `/limits` (backlog bounds, quota throttles), `/security`
//! (ACLs, SCRAM users without their secrets, client quotas). No page changes the broker:
//! every method but GET and HEAD gets 405, but on `/actions/…` with `--console-actions`
//! ([`actions`]: reset offsets, delete records, redrive a dead letter, each confirmed).
//!
//! Safety: [`html`] is the one place text becomes markup; every response carries a strict
//! Content-Security-Policy (scripts and styles only from the console's own `/console.js` and
//! `/console.css`, no inline script, no external asset, no framing). What a page reads is
//! bounded: [`PAGE_PARTITIONS`] partitions per topics page, [`records::PAGE_RECORDS`]
//! records (and a byte budget) per page of records. Who may look is [`access`]'s.

mod access;
mod actions;
mod dead_letters;
mod history;
mod html;
mod records;

pub use html::escape as escape_html;
mod pages;
mod rates;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::broker::Broker;
use crate::http::{Request, Responder, Response};
use crate::scrape::Scraper;

pub use access::Gate;

/// Partitions listed per topics page.
pub const PAGE_PARTITIONS: usize = 200;

/// Every console response's Content-Security-Policy, then `form-action`: `'none'`, or `'self'`
/// with actions.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action ";

const STYLE: &str = include_str!("console.css");
const SCRIPT: &str = include_str!("console.js");

/// What `--console-listen` serves.
#[derive(Debug)]
pub struct Console {
    broker: Arc<Broker>,
    /// Shared with `/metrics`, so both see the same consume rates.
    scraper: Arc<Scraper>,
    gate: Gate,
    rates: rates::Rates,
    history: history::History,
    /// With `--console-actions`: their CSRF tokens.
    actions: Option<actions::Tokens>,
}

impl Console {
    /// The console; with `actions`, its `/actions/…` too. `None` when actions are asked for
    /// and the OS gives no random bytes for their tokens' key.
    pub fn new(
        broker: Arc<Broker>,
        scraper: Arc<Scraper>,
        gate: Gate,
        actions: bool,
    ) -> Option<Console> {
        let actions = match actions {
            true => Some(actions::Tokens::new()?),
            false => None,
        };
        Some(Console {
            broker,
            scraper,
            gate,
            rates: rates::Rates::default(),
            history: history::History::default(),
            actions,
        })
    }
}

impl Responder for Console {
    const NAME: &'static str = "console";

    fn respond(&self, request: &Request, peer: SocketAddr) -> Response {
        let mut response = self.route(request, peer);
        let form_action = if self.actions.is_some() {
            "'self'"
        } else {
            "'none'"
        };
        response.headers.extend([
            ("Content-Security-Policy", format!("{CSP}{form_action}")),
            ("X-Content-Type-Options", "nosniff".to_string()),
            ("X-Frame-Options", "DENY".to_string()),
            // Not no-referrer: a browser then sends a form's `Origin` as `null`, and the
            // actions' origin check needs it.
            ("Referrer-Policy", "same-origin".to_string()),
            ("Cache-Control", "no-store".to_string()),
        ]);
        response
    }
}

impl Console {
    fn route(&self, request: &Request, peer: SocketAddr) -> Response {
        let viewer = match access::admit(self.gate, &self.broker, request, peer.ip()) {
            Ok(viewer) => viewer,
            Err(refused) => return refused,
        };
        let action = request.path.strip_prefix("/actions/");
        if action.is_none() && !matches!(request.method.as_str(), "GET" | "HEAD") {
            return Response::get_only();
        }
        let query = match Query::parse(&request.query) {
            Some(query) => query,
            None => return Response::text("400 Bad Request", "malformed query string"),
        };
        let context = pages::Context {
            broker: &self.broker,
            viewer: &viewer,
            query: &query,
            actions: self.actions.is_some(),
        };
        let page = match (request.path.as_str(), action, &self.actions) {
            (_, Some(name), Some(tokens)) => actions::respond(tokens, &context, request, name),
            (_, Some(_), None) => {
                return Response::not_found(
                    "console actions are off: start the broker with --console-actions",
                )
            }
            (path, None, _) => self.page(&context, path),
        };
        match page {
            Ok(body) => Response {
                status: "200 OK",
                content_type: "text/html; charset=utf-8",
                headers: Vec::new(),
                body: body.into_bytes(),
            },
            Err(refused) => refused,
        }
    }

    /// The page at `path`.
    fn page(&self, context: &pages::Context<'_>, path: &str) -> Result<String, Response> {
        match path {
            // Not pages: answered as they are.
            "/console.css" => Err(asset("text/css; charset=utf-8", STYLE)),
            "/console.js" => Err(asset("text/javascript; charset=utf-8", SCRIPT)),
            "/" => pages::overview(context, &self.scraper, &self.rates),
            "/topics" => pages::topics(context, &self.rates),
            "/groups" => pages::groups(context, &self.scraper),
            "/shares" => pages::shares(context),
            "/dead-letters" => pages::dead_letter_topics(context),
            "/dead-letters/records" => pages::dead_letter_records(context),
            "/limits" => pages::limits(context),
            "/security" => pages::security(context),
            path => match (
                topic_path(path),
                id_path(path, "/groups/"),
                id_path(path, "/shares/"),
            ) {
                (Some((name, false)), _, _) => pages::topic(context, &self.scraper, &name),
                (Some((name, true)), _, _) => pages::messages(context, &name),
                (_, Some(id), _) => pages::group(context, &self.scraper, &self.history, &id),
                (_, _, Some(id)) => pages::share(context, &id),
                _ => Err(Response::not_found("no such console page")),
            },
        }
    }
}

/// `/topics/<name>` (false) or `/topics/<name>/messages` (true), the name percent-decoded.
fn topic_path(path: &str) -> Option<(String, bool)> {
    let rest = path.strip_prefix("/topics/")?;
    let (name, messages) = match rest.strip_suffix("/messages") {
        Some(name) => (name, true),
        None => (rest, false),
    };
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some((html::percent_decode(name)?, messages))
}

/// `<prefix><id>` (`/groups/<id>`, `/shares/<id>`), the id percent-decoded.
fn id_path(path: &str, prefix: &str) -> Option<String> {
    let id = path.strip_prefix(prefix)?;
    if id.is_empty() || id.contains('/') {
        return None;
    }
    html::percent_decode(id)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    Response {
        status: "200 OK",
        content_type,
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
    }
}

/// A query string's `name=value` pairs, decoded.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// `None` when a pair is not percent-encoded UTF-8.
    fn parse(query: &str) -> Option<Query> {
        let mut pairs = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            pairs.push((html::percent_decode(name)?, html::percent_decode(value)?));
        }
        Some(Query(pairs))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
