//! What a handler names as its needs ([`crate::handlers::Handler::Needs`]): one facade, or a
//! tuple of them, picked from the broker by the request path.

use std::sync::Arc;

use tokio::sync::watch;

use super::{Access, Admin, Backlog, Broker, Groups, Storage, Txns};
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use crate::shares::Shares;

/// A part of the broker a handler may be handed.
pub(crate) trait Pick: Send + Sync + 'static {
    fn pick(broker: &Broker) -> Self;
}

macro_rules! pick_field {
    ($($ty:ty => $field:ident),* $(,)?) => {
        $(impl Pick for $ty {
            fn pick(broker: &Broker) -> Self {
                broker.$field.clone()
            }
        })*
    };
}

pick_field! {
    Arc<BrokerConfig> => config,
    Arc<str> => cluster_id,
    Arc<Storage> => storage,
    Arc<Groups> => groups,
    Arc<Shares> => shares,
    Arc<Txns> => txns,
    Arc<Admin> => admin,
    Arc<Access> => access,
    Arc<Backlog> => backlog,
    Arc<Metrics> => metrics,
    watch::Receiver<bool> => shutdown,
}

/// Nothing: handlers that answer from the request alone (ApiVersions).
impl Pick for () {
    fn pick(_: &Broker) -> Self {}
}

macro_rules! pick_tuple {
    ($($name:ident),+) => {
        impl<$($name: Pick),+> Pick for ($($name,)+) {
            fn pick(broker: &Broker) -> Self {
                ($($name::pick(broker),)+)
            }
        }
    };
}

pick_tuple!(A, B);
pick_tuple!(A, B, C);
pick_tuple!(A, B, C, D);
pick_tuple!(A, B, C, D, E);
