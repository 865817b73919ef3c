//! The client properties of a `lograil` client command: Kafka's tools' `--command-config FILE`
//! (a Java `.properties` file: `security.protocol`, `sasl.*`, `ssl.*`, …), then
//! `--bootstrap-server`, then (console commands) each `--config NAME=VALUE`.

use std::path::Path;

use anyhow::Context;
use consumer::ClientConfig;

/// Where the commands connect when neither `--bootstrap-server` nor the file says.
const DEFAULT_BOOTSTRAP: &str = "127.0.0.1:9092";

/// The properties of `command_config` (if given), with `bootstrap` (if given) as
/// `bootstrap.servers`, else the file's, else 127.0.0.1:9092.
pub fn client_config(
    bootstrap: Option<&str>,
    command_config: Option<&Path>,
) -> anyhow::Result<ClientConfig> {
    let mut config = match command_config {
        Some(path) => ClientConfig::from_properties_file(path).context("--command-config")?,
        None => ClientConfig::new(),
    };
    match bootstrap {
        Some(b) => {
            config.set("bootstrap.servers", b);
        }
        None if config.get("bootstrap.servers").is_none() => {
            config.set("bootstrap.servers", DEFAULT_BOOTSTRAP);
        }
        None => {}
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_beats_the_file_and_the_file_beats_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("client.properties");
        std::fs::write(&file, "bootstrap.servers=k:9093\nsecurity.protocol: SSL\n").unwrap();
        let c = client_config(None, Some(&file)).unwrap();
        assert_eq!(c.get("bootstrap.servers"), Some("k:9093"));
        assert_eq!(c.get("security.protocol"), Some("SSL"));
        let c = client_config(Some("b:1"), Some(&file)).unwrap();
        assert_eq!(c.get("bootstrap.servers"), Some("b:1"));
        let c = client_config(None, None).unwrap();
        assert_eq!(c.get("bootstrap.servers"), Some(DEFAULT_BOOTSTRAP));
        let e = client_config(None, Some(&dir.path().join("missing"))).unwrap_err();
        assert!(format!("{e:#}").contains("missing"), "{e:#}");
    }
}
