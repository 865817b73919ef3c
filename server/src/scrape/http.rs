//! The `/metrics` endpoint on the broker's HTTP responder ([`crate::http`], which bounds
//! connections and request heads): `GET` (or `HEAD`) `/metrics` (a query string is ignored)
//! → 200 with the OpenMetrics text (`application/openmetrics-text; version=1.0.0;
//! charset=utf-8`), which Prometheus asks for first; another path → 404; another method → 405.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::http::{Request, Responder, Response};

use super::Scraper;

/// The content type of `/metrics`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What `--metrics-listen` serves.
#[derive(Debug)]
pub struct Metrics(pub Arc<Scraper>);

impl Responder for Metrics {
    const NAME: &'static str = "metrics";

    fn respond(&self, request: &Request, _peer: SocketAddr) -> Response {
        if request.path != "/metrics" {
            return Response::not_found("metrics are at /metrics");
        }
        if !matches!(request.method.as_str(), "GET" | "HEAD") {
            return Response::get_only();
        }
        match self.0.encode() {
            Ok(text) => Response {
                status: "200 OK",
                content_type: CONTENT_TYPE,
                headers: Vec::new(),
                body: text.into_bytes(),
            },
            Err(_) => {
                tracing::error!("encoding the metrics failed");
                Response::text("500 Internal Server Error", "encoding the metrics failed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str) -> &'static str {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..crate::BrokerConfig::default()
        };
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let metrics = Arc::new(crate::metrics::Metrics::new(&crate::handlers::APIS));
        let broker = Arc::new(crate::broker::Broker::open(config, stopped, metrics).unwrap());
        let request = crate::http::parse(head.as_bytes()).unwrap();
        let peer = SocketAddr::from(([127, 0, 0, 1], 1));
        Metrics(Arc::new(Scraper::new(broker)))
            .respond(&request, peer)
            .status
    }

    #[test]
    fn only_get_and_head_of_metrics_are_served() {
        assert_eq!(status("GET /metrics?name[]=x HTTP/1.0"), "200 OK");
        assert_eq!(status("HEAD /metrics HTTP/1.1"), "200 OK");
        assert_eq!(status("GET / HTTP/1.1"), "404 Not Found");
        assert_eq!(status("GET /metricsx HTTP/1.1"), "404 Not Found");
        assert_eq!(status("POST /metrics HTTP/1.1"), "405 Method Not Allowed");
    }
}
