//! What a client quota is: its key ([`QuotaKind`]), the entity it applies to ([`Entity`]:
//! user, client id or ip, each named or the default) and the checks AlterClientQuotas makes.

use std::net::IpAddr;

/// Kafka's quota keys served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaKind {
    /// `producer_byte_rate`: Produce request bytes per second.
    ProducerByteRate,
    /// `consumer_byte_rate`: Fetch response bytes per second.
    ConsumerByteRate,
    /// `request_percentage`: handler time, in percent of one thread (100 = one thread's whole
    /// time); the one key that may be fractional.
    RequestPercentage,
    /// Of `ip` entities only.
    ConnectionCreationRate,
}

impl QuotaKind {
    /// Every key served, in the order [`Quotas::effective`](super::Quotas::effective) lists
    /// them.
    pub const ALL: [QuotaKind; 4] = [
        QuotaKind::ProducerByteRate,
        QuotaKind::ConsumerByteRate,
        QuotaKind::RequestPercentage,
        QuotaKind::ConnectionCreationRate,
    ];

    /// The key as Kafka's messages and the `client-quotas` file spell it.
    pub fn name(self) -> &'static str {
        match self {
            QuotaKind::ProducerByteRate => "producer_byte_rate",
            QuotaKind::ConsumerByteRate => "consumer_byte_rate",
            QuotaKind::RequestPercentage => "request_percentage",
            QuotaKind::ConnectionCreationRate => "connection_creation_rate",
        }
    }

    /// The key spelled `name` (exact, case-sensitive); `None` for a key lograil does not serve.
    pub fn parse(name: &str) -> Option<QuotaKind> {
        QuotaKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One component of a quota entity: a name, or the default (a null name in Kafka's messages).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Name {
    /// The default: applies to every name of its type without a quota of its own, each name
    /// at its own rate.
    Default,
    /// One user, client id or address.
    Named(String),
}

impl Name {
    /// `None` (Kafka's null name) is [`Name::Default`].
    pub fn from_wire(name: Option<&str>) -> Name {
        name.map_or(Name::Default, |n| Name::Named(n.to_string()))
    }

    /// [`Name::Default`] is `None` (Kafka's null name).
    pub fn to_wire(&self) -> Option<&str> {
        match self {
            Name::Default => None,
            Name::Named(n) => Some(n),
        }
    }
}

/// A quota entity: a user, a client id, or both; or an address (`ip`, alone).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entity {
    /// `None`: the entity has no user component.
    pub user: Option<Name>,
    /// `None`: the entity has no client-id component.
    pub client_id: Option<Name>,
    /// A named address is kept in its canonical text form.
    pub ip: Option<Name>,
}

/// Kafka's entity type of a user (its authenticated principal's name).
pub const USER: &str = "user";
/// Kafka's entity type of a client id (the request header's `client_id`).
pub const CLIENT_ID: &str = "client-id";
/// Kafka's entity type of a client address (KIP-612).
pub const IP: &str = "ip";

/// Why an entity, a key or a value was refused (INVALID_REQUEST, as Kafka answers).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuotaError {
    /// An entity type other than `user`, `client-id` and `ip`.
    #[error("unknown quota entity type {0:?} (lograil serves \"user\", \"client-id\" and \"ip\")")]
    UnknownEntityType(String),
    /// An `ip` component together with a `user` or `client-id` one.
    #[error("an ip quota entity cannot be combined with a user or a client-id")]
    IpCombined,
    /// A named `ip` that does not parse as an IPv4 or IPv6 address.
    #[error("{0:?} is not an IP address")]
    NotAnAddress(String),
    /// `connection_creation_rate` on a user / client-id entity, or another key on an `ip`
    /// entity.
    #[error("{key} applies to ip entities only, and ip entities take only {}", QuotaKind::ConnectionCreationRate.name())]
    WrongEntityForKey {
        /// The key's name.
        key: &'static str,
    },
    /// One entity type given twice in one entity.
    #[error("entity type {0:?} is named twice")]
    DuplicateEntityType(String),
    /// An entity with no component at all.
    #[error("an entity needs a user or a client-id")]
    EmptyEntity,
    /// A key lograil does not serve (see [`QuotaKind`]).
    #[error(
        "unknown quota key {0:?} (producer_byte_rate, consumer_byte_rate, request_percentage, \
         connection_creation_rate)"
    )]
    UnknownKey(String),
    /// A value that is zero, negative, infinite or NaN.
    #[error("{key} must be a positive number, not {value}")]
    NotPositive {
        /// The key's name.
        key: &'static str,
        /// The value refused.
        value: f64,
    },
    /// A fractional value of a key other than `request_percentage`.
    #[error("{key} must be a whole number, not {value}")]
    NotWhole {
        /// The key's name.
        key: &'static str,
        /// The value refused.
        value: f64,
    },
}

impl Entity {
    /// From Kafka's (entity type, name) pairs.
    pub fn from_components<'a>(
        components: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Entity, QuotaError> {
        let mut entity = Entity {
            user: None,
            client_id: None,
            ip: None,
        };
        for (kind, name) in components {
            let slot = match kind {
                USER => &mut entity.user,
                CLIENT_ID => &mut entity.client_id,
                IP => &mut entity.ip,
                other => return Err(QuotaError::UnknownEntityType(other.to_string())),
            };
            if slot.is_some() {
                return Err(QuotaError::DuplicateEntityType(kind.to_string()));
            }
            let mut name = Name::from_wire(name);
            if kind == IP {
                if let Name::Named(text) = &name {
                    let addr: IpAddr = text
                        .parse()
                        .map_err(|_| QuotaError::NotAnAddress(text.clone()))?;
                    name = Name::Named(addr.to_string());
                }
            }
            *slot = Some(name);
        }
        if entity.ip.is_some() && (entity.user.is_some() || entity.client_id.is_some()) {
            return Err(QuotaError::IpCombined);
        }
        if entity.user.is_none() && entity.client_id.is_none() && entity.ip.is_none() {
            return Err(QuotaError::EmptyEntity);
        }
        Ok(entity)
    }

    /// Kafka's (entity type, name) pairs, user first.
    pub fn components(&self) -> Vec<(&'static str, Option<&str>)> {
        let mut out = Vec::with_capacity(2);
        if let Some(user) = &self.user {
            out.push((USER, user.to_wire()));
        }
        if let Some(client) = &self.client_id {
            out.push((CLIENT_ID, client.to_wire()));
        }
        if let Some(ip) = &self.ip {
            out.push((IP, ip.to_wire()));
        }
        out
    }
}

/// Checks that a key applies to an entity, as Kafka does: `connection_creation_rate` to ip
/// entities only, and only it to them.
pub fn check_key(entity: &Entity, kind: QuotaKind) -> Result<(), QuotaError> {
    if entity.ip.is_some() != (kind == QuotaKind::ConnectionCreationRate) {
        return Err(QuotaError::WrongEntityForKey { key: kind.name() });
    }
    Ok(())
}

/// Checks one quota value as Kafka does: positive, and whole for the byte and connection
/// rates.
pub fn check_value(kind: QuotaKind, value: f64) -> Result<(), QuotaError> {
    let key = kind.name();
    if !(value.is_finite() && value > 0.0) {
        return Err(QuotaError::NotPositive { key, value });
    }
    if kind != QuotaKind::RequestPercentage && value.fract() != 0.0 {
        return Err(QuotaError::NotWhole { key, value });
    }
    Ok(())
}

/// One change of an AlterClientQuotas entry: set a key, or remove it.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// The key set or removed.
    pub kind: QuotaKind,
    /// `None`: remove.
    pub value: Option<f64>,
}

/// How a DescribeClientQuotas filter component matches one entity component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// The component is there and named this (Kafka's match type 0).
    Exact(String),
    /// The component is there and is the default (match type 1).
    Default,
    /// Any name, the default included, as long as the component is there.
    Any,
}
