//! The admin client's settings ([`AdminConfig`]).

use super::{ClientConfig, ConfigError, NetConfig, Reader};

/// An admin client's settings.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    pub net: NetConfig,
}

impl AdminConfig {
    pub fn new(bootstrap: &str) -> AdminConfig {
        AdminConfig {
            net: NetConfig::new(bootstrap),
        }
    }

    pub fn from_config(config: &ClientConfig) -> Result<AdminConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-admin")?;
        r.finish()?;
        Ok(AdminConfig { net })
    }
}
