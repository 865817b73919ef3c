//! Who is looking at the console, and what they may see.
//!
//! When every Kafka listener of the broker requires authentication (SASL, or TLS with a
//! required client certificate), the console requires it too: HTTP Basic, checked against
//! the broker's own users (the PLAIN users' file, then the SCRAM credentials, whose stored key
//! the password must give), and the principal is `User:<name>`. Otherwise it is open and the
//! viewer is `User:ANONYMOUS`, as on the broker's unauthenticated listener. Either way, with
//! an authorizer each page shows only what the principal may Describe (topics, groups) and
//! the records of topics it may Read; the cluster-wide figures (quota throttles) need
//! DescribeConfigs on the cluster, as DescribeClientQuotas does.

use std::net::IpAddr;

use acl::{Operation, ResourceType};
use base64::Engine as _;
use sasl::scram::{Credential, Hash};

use crate::broker::Broker;
use crate::http::{Request, Response};
use crate::security::Principal;

/// Longest `Authorization` value looked at: a user name and password of Kafka's sizes.
const MAX_AUTHORIZATION: usize = 1024;

/// Whether the console asks for credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No listener of the broker authenticates its clients: neither does the console.
    Open,
    /// HTTP Basic against the broker's users.
    Basic,
}

/// The principal a page is written for, and where it came from.
#[derive(Debug)]
pub struct Viewer {
    pub principal: Principal,
    host: IpAddr,
}

impl Viewer {
    /// The address the viewer connected from: the authorizer's host.
    pub fn host(&self) -> IpAddr {
        self.host
    }

    /// Whether the viewer may do `operation` on the resource (always, without an authorizer).
    pub fn may(
        &self,
        broker: &Broker,
        operation: Operation,
        kind: ResourceType,
        name: &str,
    ) -> bool {
        broker
            .access()
            .authorizer
            .authorize(&self.principal, self.host, operation, kind, name)
    }

    pub fn sees_topic(&self, broker: &Broker, topic: &str) -> bool {
        self.may(broker, Operation::Describe, ResourceType::Topic, topic)
    }

    pub fn sees_group(&self, broker: &Broker, group: &str) -> bool {
        self.may(broker, Operation::Describe, ResourceType::Group, group)
    }

    pub fn reads_topic(&self, broker: &Broker, topic: &str) -> bool {
        self.may(broker, Operation::Read, ResourceType::Topic, topic)
    }

    pub fn sees_cluster(&self, broker: &Broker) -> bool {
        self.may(
            broker,
            Operation::DescribeConfigs,
            ResourceType::Cluster,
            "kafka-cluster",
        )
    }
}

/// The viewer of `request`, or the 401 refusing it.
pub fn admit(
    gate: Gate,
    broker: &Broker,
    request: &Request,
    host: IpAddr,
) -> Result<Viewer, Response> {
    if gate == Gate::Open {
        return Ok(Viewer {
            principal: Principal::anonymous(),
            host,
        });
    }
    let refused = |reason: &str| {
        let mut response = Response::text("401 Unauthorized", reason);
        response.headers.push((
            "WWW-Authenticate",
            "Basic realm=\"lograil console\", charset=\"UTF-8\"".to_string(),
        ));
        response
    };
    let Some(value) = request.header("authorization") else {
        return Err(refused(
            "the console needs the broker's user name and password",
        ));
    };
    let Some((user, password)) = basic(value) else {
        return Err(refused("malformed Basic credentials"));
    };
    if !verify(broker, &user, &password) {
        if let Some(held_back) = broker
            .access()
            .security
            .failed_logins
            .note(host, std::time::Instant::now())
        {
            tracing::info!(user = %user, %host, held_back, "console: authentication failed");
        }
        // As on the Kafka listeners (`--connection-failed-authentication-delay-ms`): a guesser
        // gets one answer per delay per connection, and at most the responder's connections.
        std::thread::sleep(broker.access().security.sasl.failed_authentication_delay);
        return Err(refused("invalid credentials"));
    }
    Ok(Viewer {
        principal: Principal::user(&user),
        host,
    })
}

/// The user name and password of an `Authorization: Basic` value.
fn basic(value: &str) -> Option<(String, String)> {
    if value.len() > MAX_AUTHORIZATION {
        return None;
    }
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    (!user.is_empty()).then(|| (user.to_string(), password.to_string()))
}

/// Whether `password` is `user`'s, by the PLAIN users' file or a SCRAM credential.
fn verify(broker: &Broker, user: &str, password: &str) -> bool {
    let security = &broker.access().security;
    if security.plain.check(user, password) {
        return true;
    }
    [Hash::Sha512, Hash::Sha256].into_iter().any(|hash| {
        security.scram.get(user, hash).is_some_and(|stored| {
            let given =
                Credential::from_password(hash, password, stored.salt.clone(), stored.iterations);
            same(&given.stored_key, &stored.stored_key)
        })
    })
}

/// Constant-time equality (the time does not tell how much of a key matched).
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_parsed_strictly() {
        // "alice:s3:cret"
        assert_eq!(
            basic("Basic YWxpY2U6czM6Y3JldA=="),
            Some(("alice".to_string(), "s3:cret".to_string()))
        );
        assert_eq!(
            basic("basic YWxpY2U6czM6Y3JldA=="),
            basic("Basic YWxpY2U6czM6Y3JldA==")
        );
        for bad in [
            "Bearer abc",
            "Basic",
            "Basic !!!",
            "Basic YWxpY2U=",
            "Basic OnB3",
        ] {
            assert_eq!(basic(bad), None, "{bad}");
        }
        assert_eq!(basic(&format!("Basic {}", "A".repeat(2000))), None);
    }

    #[test]
    fn passwords_are_checked_against_the_plain_users_and_the_scram_credentials() {
        use crate::security::credentials::Change;
        let dir = tempfile::tempdir().unwrap();
        let users = dir.path().join("plain-users");
        std::fs::write(&users, "ops=ops-secret\n").unwrap();
        let mut config = crate::BrokerConfig {
            data_dir: dir.path().join("data"),
            ..crate::BrokerConfig::default()
        };
        config.security.sasl.plain_users = Some(users);
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let metrics = std::sync::Arc::new(crate::metrics::Metrics::new(&crate::handlers::APIS));
        let broker = Broker::open(config, stopped, metrics).unwrap();
        let salt = b"0123456789abcdef".to_vec();
        for (user, hash) in [("alice", Hash::Sha512), ("carol", Hash::Sha256)] {
            let credential = Credential::from_password(hash, "s3cret", salt.clone(), 4096);
            broker
                .access()
                .security
                .scram
                .alter(vec![Change::Upsert(user.to_string(), credential)])
                .unwrap();
        }
        assert!(verify(&broker, "ops", "ops-secret"));
        assert!(verify(&broker, "alice", "s3cret"));
        assert!(verify(&broker, "carol", "s3cret"));
        assert!(!verify(&broker, "ops", "ops-secre"));
        assert!(!verify(&broker, "alice", "s3cret "));
        assert!(!verify(&broker, "alice", ""));
        assert!(!verify(&broker, "mallory", "s3cret"));
    }

    #[test]
    fn keys_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
