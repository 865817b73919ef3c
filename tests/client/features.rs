//! Feature levels (KIP-584) as ApiVersions reports them, lograil beside Kafka 4.4: the levels
//! Kafka 4.4 finalizes by default for what lograil serves (`group.version=1`,
//! `share.version=2`, `streams.version=1`, `transaction.version=2`), which tell the Java client
//! to run KIP-848 groups, streams groups and transaction version 2; a v3 answer leaves out
//! features whose minimum is 0.

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use test_support::cluster::TestCluster;
use test_support::wire::{call, connect};

fn api_versions(bootstrap: &str, version: i16) -> ApiVersionsResponse {
    let addr = bootstrap.split(',').next().unwrap();
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("lograil-tests"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    call(&mut connect(addr), ApiKey::ApiVersions, version, &request)
}

#[tokio::test]
async fn apiversions_finalizes_the_feature_levels_kafka_4_4_runs_at() {
    let cluster = TestCluster::start();
    let v4 = api_versions(cluster.plain_bootstrap(), 4);
    assert_eq!(v4.error_code, 0);
    assert!(v4.finalized_features_epoch >= 0);
    let finalized = |name: &str| {
        v4.finalized_features
            .iter()
            .find(|f| f.name.as_str() == name)
            .map(|f| (f.min_version_level, f.max_version_level))
    };
    assert_eq!(finalized("group.version"), Some((1, 1)));
    assert_eq!(finalized("share.version"), Some((2, 2)));
    assert_eq!(finalized("transaction.version"), Some((2, 2)));
    assert_eq!(finalized("streams.version"), Some((1, 1)));
    let supported = |name: &str| {
        v4.supported_features
            .iter()
            .find(|f| f.name.as_str() == name)
            .map(|f| (f.min_version, f.max_version))
    };
    assert_eq!(supported("transaction.version"), Some((0, 2)));
    assert_eq!(supported("group.version"), Some((0, 1)));
    // What transaction version 2 sends: EndTxn v5, Produce v12, TxnOffsetCommit v5.
    let max = |key: ApiKey| {
        v4.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| k.max_version)
            .unwrap_or(-1)
    };
    assert!(max(ApiKey::EndTxn) >= 5);
    assert!(max(ApiKey::Produce) >= 12);
    assert!(max(ApiKey::TxnOffsetCommit) >= 5);
    // Streams groups (KIP-1071).
    assert!(max(ApiKey::StreamsGroupHeartbeat) >= 0);
    assert!(max(ApiKey::StreamsGroupDescribe) >= 0);
    // KAFKA-17492: before v4 a supported feature whose minimum is 0 is left out.
    let v3 = api_versions(cluster.plain_bootstrap(), 3);
    assert!(
        v3.supported_features.iter().all(|f| f.min_version > 0),
        "{:?}",
        v3.supported_features
    );
    assert_eq!(v3.finalized_features.len(), v4.finalized_features.len());
}
