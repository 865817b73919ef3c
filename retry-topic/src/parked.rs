//! Which keys are parked, read from the outside: the records a group has not yet consumed from
//! a chain's retry topics are the key chains in flight (see `keyorder`), so any process can
//! list them (`lograil dlt parked`), not only the consumer holding them.

use std::collections::BTreeMap;

use consumer::{Admin, ClientConfig};

use crate::dlt::{read_topic, DltError};
use crate::headers;
use crate::keyorder::{KeyChains, ParkedKey};

/// Keys with records in the retry topics `<topic><retry_suffix>-*` not yet consumed by `group`.
pub async fn parked_keys(
    client: &ClientConfig,
    topic: &str,
    group: &str,
    retry_suffix: &str,
) -> Result<Vec<ParkedKey>, DltError> {
    let mut admin = Admin::from_config(client).await?;
    let prefix = format!("{topic}{retry_suffix}-");
    let mut stages: Vec<(u64, String)> = admin
        .list_topics()
        .await?
        .into_iter()
        .filter_map(|t| {
            let delay = t.name.strip_prefix(&prefix)?.parse::<u64>().ok()?;
            Some((delay, t.name))
        })
        .collect();
    stages.sort();
    let committed = admin.committed_offsets(group).await?;
    let mut chains = KeyChains::default();
    for (stage, (_, name)) in stages.iter().enumerate() {
        let since: BTreeMap<i32, i64> = committed
            .iter()
            .filter(|((t, _), o)| t == name && **o >= 0)
            .map(|((_, p), o)| (*p, *o))
            .collect();
        for record in read_topic(client, name, Some(&since)).await? {
            let Some(key) = &record.key else { continue };
            let reason = match headers::get(&record, headers::PARKED_BEHIND) {
                Some(_) => String::new(),
                None => {
                    let (class, message) = headers::exception(&record);
                    format!(
                        "{}: {}",
                        class.unwrap_or_default(),
                        message.unwrap_or_default()
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
