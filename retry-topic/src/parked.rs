//! Which keys are parked, read from the outside: the records a group has not yet consumed from
//! a chain's retry topics are the key chains in flight (see `keyorder`), so any process can
//! list them (`lograil dlt parked`), not only the consumer holding them.

use std::collections::BTreeMap;

use consumer::{Admin, ClientConfig};

use crate::dlt::{read_topic, DltError};
use crate::headers;
use crate::keyorder::{KeyChains, ParkedKey};

/// Keys with records in `topic`'s retry topics not yet consumed by `group`.
///
/// The retry topics are every `<topic><retry_suffix>`, `<topic><retry_suffix>-<n>` and
/// `<topic><retry_suffix>-<n>-<m>` (the names of every [`SameIntervalTopicReuse`] and
/// [`TopicSuffixing`]), in the order of their numbers. A record is consumed when `group` (a
/// [`RetryingConsumer`] reads its retry topics in its own group) or Spring Kafka's group for
/// that topic has committed past it: Spring reads each retry topic in a group of its own, the
/// main group with the topic's suffix appended (`billing-retry`, `billing-retry-1000`).
///
/// [`SameIntervalTopicReuse`]: crate::SameIntervalTopicReuse
/// [`TopicSuffixing`]: crate::TopicSuffixing
/// [`RetryingConsumer`]: crate::RetryingConsumer
pub async fn parked_keys(
    client: &ClientConfig,
    topic: &str,
    group: &str,
    retry_suffix: &str,
) -> Result<Vec<ParkedKey>, DltError> {
    let mut admin = Admin::from_config(client).await?;
    let base = format!("{topic}{retry_suffix}");
    let mut stages: Vec<(Vec<u64>, String)> = admin
        .list_topics()
        .await?
        .into_iter()
        .filter_map(|t| Some((retry_numbers(&base, &t.name)?, t.name)))
        .collect();
    stages.sort();
    let committed = admin.committed_offsets(group).await?;
    let mut consumed: BTreeMap<(String, i32), i64> =
        committed.into_iter().filter(|(_, o)| *o >= 0).collect();
    for (_, name) in &stages {
        let spring_group = format!("{group}{}", &name[topic.len()..]);
        for ((t, p), o) in admin.committed_offsets(&spring_group).await? {
            if t == *name && o >= 0 {
                let at = consumed.entry((t, p)).or_insert(o);
                *at = (*at).max(o);
            }
        }
    }
    let mut chains = KeyChains::default();
    for (stage, (_, name)) in stages.iter().enumerate() {
        let since: BTreeMap<i32, i64> = consumed
            .iter()
            .filter(|((t, _), _)| t == name)
            .map(|((_, p), o)| (*p, *o))
            .collect();
        for record in read_topic(client, name, Some(&since)).await? {
            let Some(key) = &record.key else { continue };
            let reason = match headers::get(&record, headers::PARKED_BEHIND) {
                Some(_) => String::new(),
                None => {
                    let e = headers::exception(&record);
                    format!(
                        "{}: {}",
                        e.class.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    )
                }
            };
            let original = headers::get(&record, headers::ORIGINAL_OFFSET)
                .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
                .map_or(record.offset, i64::from_be_bytes);
            chains.found(
                record.partition,
                key,
                original,
                stage,
                record.timestamp,
                reason,
            );
        }
    }
    Ok(chains.parked())
}

/// The numbers after `base` in a retry topic's name: none for `base` itself, `[n]` for
/// `base-n`, `[n, m]` for `base-n-m`; `None` for any other topic.
fn retry_numbers(base: &str, name: &str) -> Option<Vec<u64>> {
    let rest = name.strip_prefix(base)?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let numbers: Vec<u64> = rest
        .strip_prefix('-')?
        .split('-')
        .map(|n| {
            n.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| n.parse().ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    (numbers.len() <= 2).then_some(numbers)
}

#[cfg(test)]
mod tests {
    use super::retry_numbers;

    #[test]
    fn retry_topics_of_every_naming_are_found() {
        let base = "orders-retry";
        assert_eq!(retry_numbers(base, "orders-retry"), Some(vec![]));
        assert_eq!(retry_numbers(base, "orders-retry-0"), Some(vec![0]));
        assert_eq!(retry_numbers(base, "orders-retry-1000"), Some(vec![1000]));
        assert_eq!(
            retry_numbers(base, "orders-retry-16000-2"),
            Some(vec![16000, 2])
        );
        for other in [
            "orders",
            "orders-dlt",
            "orders-retry-x",
            "orders-retry-",
            "orders-retry-1-2-3",
            "orders-retryer",
            "orders-retry-+1",
        ] {
            assert_eq!(retry_numbers(base, other), None, "{other}");
        }
    }
}
