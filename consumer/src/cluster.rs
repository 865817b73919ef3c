//! What the client knows about the cluster: brokers, each partition's leader (with its leader
//! epoch), group coordinators, and one connection per broker.
//!
//! Metadata is a snapshot (`Arc<Metadata>`) replaced whole on every refresh. Refreshes are
//! single-flight: callers pass the version they saw, and a caller that finds a newer snapshot
//! uses it instead of asking again. A partition's leader epoch never goes backwards: a broker
//! that answers with an older epoch than the one cached (it has not caught up) is ignored for
//! that partition, as in the Java client (KIP-320).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, MetadataRequest, MetadataResponse, TopicName,
};

use uuid::Uuid;

use crate::config::NetConfig;
use crate::connection::BrokerConnection;
use crate::error::{CallError, ErrorCode, NetError};
use crate::util::{lock, text};

/// One partition as the last metadata showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionMeta {
    /// -1 while there is no leader.
    pub leader: i32,
    /// -1 when the broker does not say (lograil, old versions).
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicMeta {
    /// Set when the broker answered with an error for the topic (e.g. it does not exist).
    pub error: Option<ErrorCode>,
    /// The topic's id (nil from a broker without topic ids).
    pub id: Uuid,
    pub internal: bool,
    /// Indexed by partition id.
    pub partitions: Vec<PartitionMeta>,
}

/// A snapshot of the cluster.
#[derive(Debug, Clone, Default)]
pub(crate) struct Metadata {
    /// Incremented by every refresh.
    pub version: u64,
    pub refreshed: Option<Instant>,
    pub brokers: HashMap<i32, String>,
    pub controller: Option<i32>,
    pub topics: HashMap<String, TopicMeta>,
}

impl Metadata {
    /// The partition count of a topic the cluster knows (no error, at least one partition).
    pub(crate) fn partition_count(&self, topic: &str) -> Option<usize> {
        self.topics
            .get(topic)
            .filter(|t| t.error.is_none() && !t.partitions.is_empty())
            .map(|t| t.partitions.len())
    }

    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMeta> {
        let index = usize::try_from(partition).ok()?;
        self.topics.get(topic)?.partitions.get(index)
    }

    /// The name of the topic with id `id`.
    pub(crate) fn topic_name(&self, id: Uuid) -> Option<&str> {
        self.topics
            .iter()
            .find(|(_, t)| t.id == id && !id.is_nil())
            .map(|(name, _)| name.as_str())
    }

    /// The leader of a partition, if it has one.
    pub(crate) fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.partition(topic, partition)
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
    }
}

/// FindCoordinator's key types.
pub(crate) const GROUP_KEY: i8 = 0;
pub(crate) const TRANSACTION_KEY: i8 = 1;

type Slot = Arc<tokio::sync::Mutex<Option<Arc<BrokerConnection>>>>;

/// The cluster as one client sees it. Shared (`Arc`) by a client's tasks.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) net: NetConfig,
    metadata: Mutex<Arc<Metadata>>,
    /// Broker id → its connection (bootstrap addresses get ids -1, -2, …).
    slots: Mutex<HashMap<i32, Slot>>,
    refreshing: tokio::sync::Mutex<()>,
    /// Topics this client asks metadata for.
    interest: Mutex<BTreeSet<String>>,
    /// (FindCoordinator key type: 0 a group, 1 a transactional id, key) → coordinator broker id.
    coordinators: Mutex<HashMap<(i8, String), i32>>,
}

impl Cluster {
    /// Connects to the first reachable bootstrap server and learns the brokers.
    pub(crate) async fn connect(net: NetConfig) -> Result<Arc<Cluster>, NetError> {
        let cluster = Arc::new(Cluster {
            net,
            metadata: Mutex::new(Arc::new(Metadata::default())),
            slots: Mutex::new(HashMap::new()),
            refreshing: tokio::sync::Mutex::new(()),
            interest: Mutex::new(BTreeSet::new()),
            coordinators: Mutex::new(HashMap::new()),
        });
        match cluster.refresh(0).await {
            Ok(_) => Ok(cluster),
            Err(CallError::Net(e)) => Err(e),
            Err(CallError::Broker { .. }) => Err(NetError::NoBroker {
                bootstrap: cluster.net.bootstrap_servers.join(","),
            }),
        }
    }

    pub(crate) fn metadata(&self) -> Arc<Metadata> {
        lock(&self.metadata).clone()
    }

    /// Adds topics to those kept in the metadata.
    pub(crate) fn add_interest<'a>(&self, topics: impl IntoIterator<Item = &'a str>) -> bool {
        let mut interest = lock(&self.interest);
        let mut added = false;
        for t in topics {
            added |= interest.insert(t.to_string());
        }
        added
    }

    /// Refreshes the metadata of the topics of interest unless a refresh newer than
    /// `seen_version` already happened; returns the new snapshot.
    pub(crate) async fn refresh(&self, seen_version: u64) -> Result<Arc<Metadata>, CallError> {
        let _guard = self.refreshing.lock().await;
        let current = self.metadata();
        if current.version > seen_version {
            return Ok(current);
        }
        let topics: Vec<String> = lock(&self.interest).iter().cloned().collect();
        self.fetch_metadata(Some(topics), self.net.allow_auto_create_topics)
            .await
            .map(|(m, _)| m)
    }

    /// Asks any broker for the metadata of `topics` (`None`: every topic) and merges the answer
    /// into the snapshot.
    pub(crate) async fn fetch_metadata(
        &self,
        topics: Option<Vec<String>>,
        allow_auto_create: bool,
    ) -> Result<(Arc<Metadata>, MetadataResponse), CallError> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(text(t)))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(allow_auto_create);
        let connection = self.any_connection().await?;
        let response = match connection.call(&request, 12).await {
            Ok(r) => r,
            Err(e) => {
                connection.close();
                return Err(e.into());
            }
        };
        Ok((self.merge(&response), response))
    }

    fn merge(&self, response: &MetadataResponse) -> Arc<Metadata> {
        let mut slot = lock(&self.metadata);
        let mut next = Metadata::clone(&slot);
        next.version += 1;
        next.refreshed = Some(Instant::now());
        if !response.brokers.is_empty() {
            next.brokers = response
                .brokers
                .iter()
                .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
                .collect();
        }
        next.controller = Some(response.controller_id.0).filter(|c| *c >= 0);
        for topic in &response.topics {
            let Some(name) = topic.name.as_ref().map(|n| n.0.to_string()) else {
                continue;
            };
            let error = ErrorCode::try_from_code(topic.error_code);
            let mut partitions: Vec<PartitionMeta> = Vec::new();
            let mut sorted: Vec<_> = topic.partitions.iter().collect();
            sorted.sort_by_key(|p| p.partition_index);
            let old = next.topics.get(&name);
            for p in sorted {
                let fresh = PartitionMeta {
                    leader: if p.error_code == ErrorCode::LeaderNotAvailable.code() {
                        -1
                    } else {
                        p.leader_id.0
                    },
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                };
                let kept = old
                    .and_then(|t| t.partitions.get(partitions.len()))
                    .filter(|o| o.leader_epoch >= 0 && fresh.leader_epoch >= 0)
                    .filter(|o| fresh.leader_epoch < o.leader_epoch)
                    .cloned();
                partitions.push(kept.unwrap_or(fresh));
            }
            // Partial answers (a topic being created) keep what was known.
            if error.is_some() && partitions.is_empty() {
                if let Some(known) = old.filter(|_| error == Some(ErrorCode::LeaderNotAvailable)) {
                    partitions = known.partitions.clone();
                }
            }
            next.topics.insert(
                name,
                TopicMeta {
                    error,
                    id: topic.topic_id,
                    internal: topic.is_internal,
                    partitions,
                },
            );
        }
        let next = Arc::new(next);
        *slot = next.clone();
        next
    }

    fn slot(&self, node: i32) -> Slot {
        lock(&self.slots).entry(node).or_default().clone()
    }

    fn address(&self, node: i32) -> Option<String> {
        if node < 0 {
            let index = usize::try_from(-(i64::from(node)) - 1).ok()?;
            return self.net.bootstrap_servers.get(index).cloned();
        }
        self.metadata().brokers.get(&node).cloned()
    }

    /// The connection to broker `node`, opened if needed.
    pub(crate) async fn connection(&self, node: i32) -> Result<Arc<BrokerConnection>, NetError> {
        let slot = self.slot(node);
        let mut guard = slot.lock().await;
        if let Some(c) = guard.as_ref().filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let addr = self.address(node).ok_or_else(|| NetError::NoBroker {
            bootstrap: format!("broker {node} is not in the metadata"),
        })?;
        let connection = Arc::new(BrokerConnection::connect(&addr, &self.net).await?);
        *guard = Some(connection.clone());
        Ok(connection)
    }

    /// The connection to `node` if one is open and alive (no waiting).
    pub(crate) fn live_connection(&self, node: i32) -> Option<Arc<BrokerConnection>> {
        let slot = self.slot(node);
        let guard = slot.try_lock().ok()?;
        guard.as_ref().filter(|c| c.is_alive()).cloned()
    }

    /// An existing live connection if there is one, else the first broker (metadata brokers in
    /// random order, then the bootstrap servers) that accepts one.
    pub(crate) async fn any_connection(&self) -> Result<Arc<BrokerConnection>, NetError> {
        let mut brokers: Vec<i32> = self.metadata().brokers.keys().copied().collect();
        fastrand::shuffle(&mut brokers);
        for node in &brokers {
            let slot = self.slot(*node);
            let live = slot.try_lock().ok().and_then(|g| g.clone());
            if let Some(c) = live.filter(|c| c.is_alive()) {
                return Ok(c);
            }
        }
        let bootstrap = (1..=self.net.bootstrap_servers.len())
            .filter_map(|i| i32::try_from(i).ok())
            .map(|i| -i);
        let mut last = None;
        for node in brokers.into_iter().chain(bootstrap) {
            match self.connection(node).await {
                Ok(c) => return Ok(c),
                // A TLS or authentication failure: the other brokers would refuse us too.
                Err(e) if !e.is_retriable() => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| NetError::NoBroker {
            bootstrap: self.net.bootstrap_servers.join(","),
        }))
    }

    /// The connection to the controller (KRaft answers with any broker; lograil with itself),
    /// or any broker if the metadata names none.
    pub(crate) async fn controller_connection(&self) -> Result<Arc<BrokerConnection>, NetError> {
        match self.metadata().controller {
            Some(node) => match self.connection(node).await {
                Ok(c) => Ok(c),
                Err(_) => self.any_connection().await,
            },
            None => self.any_connection().await,
        }
    }

    /// The coordinator of `group`: cached, or asked with FindCoordinator.
    pub(crate) async fn coordinator(
        &self,
        group: &str,
    ) -> Result<(i32, Arc<BrokerConnection>), CallError> {
        self.coordinator_of(GROUP_KEY, group).await
    }

    /// The coordinator of `key` (`GROUP_KEY`: a group; `TRANSACTION_KEY`: a transactional id):
    /// cached, or asked with FindCoordinator.
    pub(crate) async fn coordinator_of(
        &self,
        key_type: i8,
        key: &str,
    ) -> Result<(i32, Arc<BrokerConnection>), CallError> {
        let group = key;
        let cache_key = (key_type, key.to_string());
        let cached = lock(&self.coordinators).get(&cache_key).copied();
        let node = match cached {
            Some(node) => node,
            None => {
                let request = FindCoordinatorRequest::default()
                    .with_key(text(group))
                    .with_key_type(key_type);
                let connection = self.any_connection().await?;
                let response = connection.call(&request, 3).await?;
                if let Some(code) = ErrorCode::try_from_code(response.error_code) {
                    return Err(CallError::Broker {
                        api: ApiKey::FindCoordinator,
                        resource: match key_type {
                            TRANSACTION_KEY => format!("transactional id {group}"),
                            _ => format!("group {group}"),
                        },
                        code,
                        message: response.error_message.map(|m| m.to_string()),
                    });
                }
                let node = response.node_id.0;
                self.learn_broker(
                    node,
                    format!("{}:{}", response.host.as_str(), response.port),
                );
                lock(&self.coordinators).insert(cache_key.clone(), node);
                node
            }
        };
        match self.connection(node).await {
            Ok(c) => Ok((node, c)),
            Err(e) => {
                lock(&self.coordinators).remove(&cache_key);
                Err(e.into())
            }
        }
    }

    /// After NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection: look it up again.
    pub(crate) fn forget_coordinator(&self, group: &str) {
        self.forget_coordinator_of(GROUP_KEY, group);
    }

    /// As [`Cluster::forget_coordinator`], for any key type.
    pub(crate) fn forget_coordinator_of(&self, key_type: i8, key: &str) {
        lock(&self.coordinators).remove(&(key_type, key.to_string()));
    }

    /// Adds a broker address learnt outside Metadata (FindCoordinator answers with one).
    fn learn_broker(&self, node: i32, addr: String) {
        let mut slot = lock(&self.metadata);
        if slot.brokers.get(&node) != Some(&addr) {
            let mut next = Metadata::clone(&slot);
            next.brokers.insert(node, addr);
            *slot = Arc::new(next);
        }
    }
}
