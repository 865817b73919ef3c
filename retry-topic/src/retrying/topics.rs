//! The chain's topics: created with the main topic's partition count when missing.

use super::*;

/// Creates the chain's missing topics with the main topic's partition count; returns every
/// chain topic's partition count.
pub(super) async fn ensure_topics(
    client: &ClientConfig,
    config: &RetryConfig,
    topology: &Topology,
) -> Result<BTreeMap<String, i32>, RetryError> {
    let mut admin = Admin::from_config(client).await?;
    let main = match admin.describe_topic(&topology.main).await {
        Ok(t) if t.partitions > 0 => t.partitions,
        Ok(_) => return Err(RetryError::NoMainTopic(topology.main.clone())),
        Err(e) if is_unknown_topic(&e) => {
            return Err(RetryError::NoMainTopic(topology.main.clone()))
        }
        Err(e) => return Err(e.into()),
    };
    let mut counts = BTreeMap::from([(topology.main.clone(), main)]);
    let others = topology
        .stages
        .iter()
        .map(|s| s.topic.clone())
        .chain(std::iter::once(topology.dlt.clone()));
    for name in others {
        let count = match admin.describe_topic(&name).await {
            Ok(t) if t.partitions > 0 => t.partitions,
            Ok(_) | Err(_) => {
                let created = admin
                    .create(&NewTopic {
                        name: name.clone(),
                        partitions: main,
                        replication_factor: config.replication_factor,
                        configs: Vec::new(),
                    })
                    .await;
                match created {
                    Ok(()) => tracing::info!(topic = %name, partitions = main, "created"),
                    Err(e) if is_exists(&e) => {}
                    Err(e) => return Err(e.into()),
                }
                admin.describe_topic(&name).await?.partitions
            }
        };
        if config.key_ordering && count != main && name != topology.dlt {
            return Err(RetryError::PartitionCount {
                topic: name,
                found: count,
                expected: main,
            });
        }
        counts.insert(name, count);
    }
    Ok(counts)
}

fn is_unknown_topic(e: &consumer::AdminError) -> bool {
    matches!(e, consumer::AdminError::Call(c) if c.code() == Some(consumer::ErrorCode::UnknownTopicOrPartition))
}

fn is_exists(e: &consumer::AdminError) -> bool {
    matches!(e, consumer::AdminError::Call(c) if c.code() == Some(consumer::ErrorCode::TopicAlreadyExists))
}
