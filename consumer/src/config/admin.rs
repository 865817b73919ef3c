//! The admin client's settings ([`AdminConfig`]).

use super::{ClientConfig, ConfigError, NetConfig, Reader};

/// An admin client's settings.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// The connection settings every client has (`allow.auto.create.topics` is ignored: the
    /// admin client never creates topics by asking for their metadata).
    pub net: NetConfig,
}

impl AdminConfig {
    /// The defaults, for `bootstrap`.
    pub fn new(bootstrap: &str) -> AdminConfig {
        AdminConfig {
            net: NetConfig::new(bootstrap),
        }
    }

    /// Parses the Java admin client's properties (those of [`NetConfig`] only).
    pub fn from_config(config: &ClientConfig) -> Result<AdminConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-admin")?;
        r.finish()?;
        Ok(AdminConfig { net })
    }
}
