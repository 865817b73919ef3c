//! What every librdkafka client of the harness shares, whatever its mode: `-X NAME=VALUE`
//! properties, and a client context that prints librdkafka's warnings and errors to stderr (the
//! `rdkafka` crate would send them to the `log` crate, which this binary does not set up).

use anyhow::{bail, Context};
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;

/// `-X NAME=VALUE` flags as pairs.
pub fn parse_properties(flags: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    flags
        .iter()
        .map(|flag| {
            let (name, value) = flag
                .split_once('=')
                .with_context(|| format!("-X {flag:?}: expected NAME=VALUE"))?;
            if name.trim().is_empty() {
                bail!("-X {flag:?}: empty property name");
            }
            Ok((name.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}

/// A client context that prints librdkafka's warnings and errors to stderr.
#[derive(Debug, Clone, Copy, Default)]
pub struct StderrLog;

impl ClientContext for StderrLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_stderr(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka error: {error}: {reason}");
    }
}

impl ConsumerContext for StderrLog {}

/// Prints a librdkafka log line if it is a warning or worse.
pub fn log_to_stderr(level: RDKafkaLogLevel, fac: &str, message: &str) {
    if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
        eprintln!("librdkafka {level:?} {fac}: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse() {
        let flags = vec![
            "linger.ms=0".to_string(),
            " fetch.wait.max.ms = 10".to_string(),
        ];
        let props = parse_properties(&flags).unwrap();
        assert_eq!(
            props,
            vec![
                ("linger.ms".to_string(), "0".to_string()),
                ("fetch.wait.max.ms".to_string(), "10".to_string())
            ]
        );
        assert!(parse_properties(&["novalue".to_string()]).is_err());
        assert!(parse_properties(&["=1".to_string()]).is_err());
    }
}
