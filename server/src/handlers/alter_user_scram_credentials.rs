//! AlterUserScramCredentials, version 0 (KIP-554): adds, replaces and deletes users' SCRAM
//! credentials (what `kafka-configs --alter --entity-type users --add-config
//! 'SCRAM-SHA-256=[password=…]'` sends: the client salts and iterates the password itself).
//! Each user's changes succeed or fail together, with Kafka's errors: UNSUPPORTED_SASL_MECHANISM,
//! UNACCEPTABLE_CREDENTIAL (empty name, iterations outside 4096–16384, an empty salt or
//! salted password), DUPLICATE_RESOURCE (a user named twice in one request, as Kafka refuses it even for two
//! mechanisms),
//! RESOURCE_NOT_FOUND (deleting a credential that does not exist). Written to the data dir
//! before the answer. Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//! for every user named.

use std::collections::BTreeMap;
use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use sasl::scram::{Credential, Hash, MAX_ITERATIONS, MIN_ITERATIONS};

use super::Handler;
use super::RequestContext;
use crate::broker::Access;
use crate::security::credentials::Change;

/// A user's change (one per request), or why it is refused.
type UserChange = Result<Change, (ResponseError, String)>;

/// Why a user's change was not made, if it was not.
type Refusal = Option<(ResponseError, String)>;

impl Handler for AlterUserScramCredentialsRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = Arc<Access>;

    async fn handle(
        access: Self::Needs,
        request: AlterUserScramCredentialsRequest,
        ctx: &RequestContext,
    ) -> AlterUserScramCredentialsResponse {
        if !ctx.authorize_cluster(Operation::Alter) {
            return refuse_unauthorized(&request);
        }
        let users = changes_by_user(&request);
        let results = apply_changes(&access, users).await;
        let results = results
            .into_iter()
            .map(|(user, outcome)| {
                let result = AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user));
                match outcome {
                    None => result,
                    Some((error, message)) => result
                        .with_error_code(error.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                }
            })
            .collect();
        AlterUserScramCredentialsResponse::default().with_results(results)
    }

    fn throttle_time_ms(response: &mut AlterUserScramCredentialsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &AlterUserScramCredentialsResponse, f: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|u| f(u.error_code));
    }
}

/// CLUSTER_AUTHORIZATION_FAILED for every user the request names, each once, by name.
fn refuse_unauthorized(
    request: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut users: Vec<&StrBytes> = request.deletions.iter().map(|d| &d.name).collect();
    users.extend(request.upsertions.iter().map(|u| &u.name));
    users.sort();
    users.dedup();
    let results = users
        .into_iter()
        .map(|user| {
            AlterUserScramCredentialsResult::default()
                .with_user(user.clone())
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// Each user's change (deletions, then upsertions), checked; a user named twice is refused.
fn changes_by_user(request: &AlterUserScramCredentialsRequest) -> BTreeMap<String, UserChange> {
    let mut users: BTreeMap<String, UserChange> = BTreeMap::new();
    let mut add = |user: &str, change: UserChange| {
        // Kafka's rule: one change per user in a request.
        if let Some(entry) = users.get_mut(user) {
            *entry = Err((
                ResponseError::DuplicateResource,
                "A user credential cannot be altered twice in the same request".into(),
            ));
            return;
        }
        users.insert(user.to_string(), change);
    };
    for deletion in &request.deletions {
        let change = checked(&deletion.name, deletion.mechanism)
            .map(|hash| Change::Delete(deletion.name.to_string(), hash));
        add(&deletion.name, change);
    }
    for upsertion in &request.upsertions {
        add(&upsertion.name, upsert(upsertion));
    }
    users
}

/// The credential an upsertion sets, if its mechanism, iterations, salt and salted password
/// are acceptable.
fn upsert(upsertion: &ScramCredentialUpsertion) -> UserChange {
    let hash = checked(&upsertion.name, upsertion.mechanism)?;
    let iterations = u32::try_from(upsertion.iterations).unwrap_or(0);
    if iterations < MIN_ITERATIONS {
        return Err(unacceptable(format!(
            "too few iterations ({}; at least {MIN_ITERATIONS})",
            upsertion.iterations
        )));
    }
    if iterations > MAX_ITERATIONS {
        return Err(unacceptable(format!(
            "too many iterations ({}; at most {MAX_ITERATIONS})",
            upsertion.iterations
        )));
    }
    if upsertion.salt.is_empty() || upsertion.salted_password.len() != hash.output_len() {
        return Err(unacceptable(
            "an empty salt or a salted password of the wrong length".into(),
        ));
    }
    Ok(Change::Upsert(
        upsertion.name.to_string(),
        Credential::from_salted_password(
            hash,
            &upsertion.salted_password,
            upsertion.salt.to_vec(),
            iterations,
        ),
    ))
}

/// Writes the acceptable changes (all together, to the data dir) and gives each user, in
/// name order, its error if any.
async fn apply_changes(
    access: &Arc<Access>,
    users: BTreeMap<String, UserChange>,
) -> Vec<(String, Refusal)> {
    let mut results = Vec::with_capacity(users.len());
    let mut changes = Vec::new();
    // The index in `results` of each change's user.
    let mut owners = Vec::new();
    for (user, outcome) in users {
        match outcome {
            Ok(change) => {
                owners.push(results.len());
                changes.push(change);
                results.push((user, None));
            }
            Err(refused) => results.push((user, Some(refused))),
        }
    }
    if !changes.is_empty() {
        let owner = access.clone();
        let applied = crate::blocking::spawn(move || owner.security.scram.alter(changes)).await;
        let failed = match applied {
            Ok(Ok(applied)) => {
                for (&at, applied) in owners.iter().zip(applied) {
                    if !applied {
                        results[at].1 = Some((
                            ResponseError::ResourceNotFound,
                            "Attempt to delete a user credential that does not exist".into(),
                        ));
                    }
                }
                None
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "writing SCRAM credentials failed");
                Some("the credentials could not be written")
            }
            Err(e) => {
                tracing::error!(error = %e, "SCRAM credentials task failed");
                Some("internal error")
            }
        };
        if let Some(message) = failed {
            for &at in &owners {
                results[at].1 = Some((ResponseError::UnknownServerError, message.into()));
            }
        }
    }
    results
}

/// The mechanism of a change, if the user name and mechanism are acceptable.
fn checked(user: &str, mechanism: i8) -> Result<Hash, (ResponseError, String)> {
    if user.is_empty() {
        return Err(unacceptable("the user name is empty".into()));
    }
    Hash::from_code(mechanism).ok_or_else(|| {
        (
            ResponseError::UnsupportedSaslMechanism,
            format!("unknown SCRAM mechanism {mechanism} (1: SCRAM-SHA-256, 2: SCRAM-SHA-512)"),
        )
    })
}

fn unacceptable(message: String) -> (ResponseError, String) {
    (ResponseError::UnacceptableCredential, message)
}
