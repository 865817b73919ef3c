//! A request whose handler's blocking task fails still gets its answer: a Kafka error, never a
//! missing response (a client would wait for that correlation id forever).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{self as m, ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

use super::request::{handle, Session};
use super::{Handler, APIS};
use crate::blocking::FAIL_TASKS;
use crate::broker::{Broker, Pick};
use crate::config::BrokerConfig;

const UNKNOWN_SERVER_ERROR: i16 = -1;

fn broker(dir: &std::path::Path) -> Arc<Broker> {
    let config = BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // The broker's shutdown signal stays open for the test's length.
    std::mem::forget(stop);
    let metrics = Arc::new(crate::metrics::Metrics::new(&APIS));
    let broker = Arc::new(Broker::open(config, stopped, metrics).unwrap());
    broker
        .admin()
        .create_topic("t", 2, broker.storage().topic_defaults())
        .unwrap();
    broker
}

/// `request` through the broker's request path in `version`, with every blocking task its
/// handler starts made to fail; the decoded response.
async fn failing<R>(broker: &Arc<Broker>, version: i16, request: R) -> R::Response
where
    R: Request + Handler,
    R::Response: Send,
{
    let key = ApiKey::try_from(R::KEY).unwrap();
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("test")))
        .encode(&mut frame, key.request_header_version(version))
        .unwrap();
    request.encode(&mut frame, version).unwrap();
    let mut session = Session::new(
        "127.0.0.1:1".parse().unwrap(),
        Arc::new(crate::security::Listener::plaintext(
            "127.0.0.1:9092".parse().unwrap(),
        )),
        crate::security::Principal::anonymous(),
    );
    let handled = FAIL_TASKS
        .scope(true, handle(broker, frame.freeze(), &mut session))
        .await;
    let mut bytes: Bytes = handled
        .expect("answered, not closed")
        .expect("a response")
        .to_bytes();
    let len = bytes.get_i32();
    assert_eq!(usize::try_from(len).unwrap(), bytes.len());
    let header = ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 7);
    R::Response::decode(&mut bytes, version).unwrap()
}

fn topic_name(name: &'static str) -> m::TopicName {
    StrBytes::from_static_str(name).into()
}

#[tokio::test]
async fn a_produce_whose_append_task_fails_answers_unknown_server_error() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    // Over 64 KiB: appended on the blocking pool.
    let value = vec![b'x'; 100 * 1024];
    let batch = log_core::batch::build(&[(None, Some(&value[..]), log_core::now_ms())]);
    let request = m::ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![m::produce_request::TopicProduceData::default()
            .with_name(topic_name("t"))
            .with_partition_data(
                (0..2)
                    .map(|index| {
                        m::produce_request::PartitionProduceData::default()
                            .with_index(index)
                            .with_records(Some(batch.clone()))
                    })
                    .collect(),
            )]);
    let response = failing(&broker, 9, request).await;
    let codes: Vec<i16> = response
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![UNKNOWN_SERVER_ERROR; 2]);
}

#[tokio::test]
async fn a_share_acknowledge_whose_task_fails_answers_unknown_server_error() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let topic_id = broker.storage().log.topic("t").unwrap().id();
    // A member with a share session (epoch 0 opens it).
    let member = StrBytes::from_static_str("member-1");
    let heartbeat = m::ShareGroupHeartbeatRequest::default()
        .with_group_id(StrBytes::from_static_str("g").into())
        .with_member_id(member.clone())
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![topic_name("t")]));
    let ctx = super::RequestContext {
        version: 1,
        client_id: "test".into(),
        peer: "127.0.0.1:1".parse().unwrap(),
        principal: crate::security::Principal::anonymous(),
        listener: Arc::new(crate::security::Listener::plaintext(
            "127.0.0.1:9092".parse().unwrap(),
        )),
        sasl: Default::default(),
        authorizer: broker.access().authorizer.clone(),
    };
    let joined = m::ShareGroupHeartbeatRequest::handle(Pick::pick(&broker), heartbeat, &ctx).await;
    assert_eq!(joined.error_code, 0);
    let fetch = m::ShareFetchRequest::default()
        .with_group_id(Some(StrBytes::from_static_str("g").into()))
        .with_member_id(Some(member.clone()))
        .with_share_session_epoch(0)
        .with_max_wait_ms(0)
        .with_topics(vec![m::share_fetch_request::FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![
                m::share_fetch_request::FetchPartition::default().with_partition_index(0),
            ])]);
    let opened = m::ShareFetchRequest::handle(Pick::pick(&broker), fetch, &ctx).await;
    assert_eq!(opened.error_code, 0);
    let acknowledge = m::ShareAcknowledgeRequest::default()
        .with_group_id(Some(StrBytes::from_static_str("g").into()))
        .with_member_id(Some(member))
        .with_share_session_epoch(1)
        .with_topics(vec![
            m::share_acknowledge_request::AcknowledgeTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![
                    m::share_acknowledge_request::AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(vec![
                            m::share_acknowledge_request::AcknowledgementBatch::default()
                                .with_first_offset(0)
                                .with_last_offset(0)
                                .with_acknowledge_types(vec![1]),
                        ]),
                ]),
        ]);
    let response = failing(&broker, 1, acknowledge).await;
    assert_eq!(response.error_code, UNKNOWN_SERVER_ERROR);
}

#[tokio::test]
async fn a_list_offsets_by_time_whose_task_fails_answers_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let request = m::ListOffsetsRequest::default().with_topics(vec![
        m::list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(
                (0..2)
                    .map(|index| {
                        m::list_offsets_request::ListOffsetsPartition::default()
                            .with_partition_index(index)
                            .with_timestamp(1_000)
                    })
                    .collect(),
            ),
    ]);
    let response = failing(&broker, 7, request).await;
    let codes: Vec<i16> = response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![UNKNOWN_SERVER_ERROR; 2]);
}

#[tokio::test]
async fn a_create_topics_whose_task_fails_answers_each_topic() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let request = m::CreateTopicsRequest::default().with_topics(vec![
        m::create_topics_request::CreatableTopic::default()
            .with_name(topic_name("new"))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let response = failing(&broker, 5, request).await;
    assert_eq!(response.topics.len(), 1);
    assert_eq!(response.topics[0].error_code, UNKNOWN_SERVER_ERROR);
    assert!(broker.storage().log.topic("new").is_none());
}

#[tokio::test]
async fn acl_changes_whose_task_fails_answer_each_creation_and_filter() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..BrokerConfig::default()
    };
    config.authorization.set_class("acl").unwrap();
    config
        .authorization
        .set_super_users("User:ANONYMOUS")
        .unwrap();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let metrics = Arc::new(crate::metrics::Metrics::new(&APIS));
    let broker = Arc::new(Broker::open(config, stopped, metrics).unwrap());
    let creation = m::create_acls_request::AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_static_str("t"))
        .with_resource_pattern_type(3)
        .with_principal(StrBytes::from_static_str("User:alice"))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(3)
        .with_permission_type(3);
    let request = m::CreateAclsRequest::default().with_creations(vec![creation.clone(), creation]);
    let response = failing(&broker, 3, request).await;
    let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [UNKNOWN_SERVER_ERROR; 2]);
    assert!(broker
        .access()
        .authorizer
        .describe(&acl::AclBindingFilter::ANY)
        .is_empty());
    let any = m::delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let response = failing(
        &broker,
        3,
        m::DeleteAclsRequest::default().with_filters(vec![any]),
    )
    .await;
    assert_eq!(response.filter_results.len(), 1);
    assert_eq!(response.filter_results[0].error_code, UNKNOWN_SERVER_ERROR);
}

#[test]
fn the_produce_response_lists_each_partition_error() {
    let response = m::ProduceResponse::default().with_responses(vec![
        m::produce_response::TopicProduceResponse::default().with_partition_responses(vec![
            m::produce_response::PartitionProduceResponse::default().with_error_code(3),
            m::produce_response::PartitionProduceResponse::default(),
            m::produce_response::PartitionProduceResponse::default()
                .with_error_code(ResponseError::CorruptMessage.code()),
        ]),
    ]);
    let mut codes = Vec::new();
    m::ProduceRequest::each_error(&response, &mut |c| codes.push(c));
    assert_eq!(codes, vec![3, 0, 2]);
}
