//! The broker's authorizer (`authorizer.class.name`): Kafka's ACLs, decided by the `acl`
//! crate, kept in `<data-dir>/acls`. Without an authorizer configured, everything is allowed
//! and the ACL APIs answer SECURITY_DISABLED, as in Kafka.
//!
//! Persistence: the whole set as one JSON file replaced atomically (written to a temporary
//! file, fsynced, renamed: `log_core::io::replace_file`), as client quotas are kept, rather than
//! records in a `StateLog` topic as `__consumer_offsets` is. ACLs are few and rarely changed by
//! an operator, and read whole at start; one write per CreateAcls or DeleteAcls applies the
//! request all at once (Kafka applies it atomically too) with no replay, no rewrite of dead
//! records and no internal topic for Metadata to list and for ACLs to guard. A crash leaves the
//! old set or the new one, and a request is answered only once its set is on disk.
//!
//! The decision path: with no authorizer, [`Authorizer::authorize`] is one branch on a `None`
//! (no lock, no allocation), so Produce and Fetch cost what they did; with one, a read lock and
//! the `acl` crate's lookup (a hash lookup for the name and one for `*`, a scan of the
//! prefixed ACLs of the resource type), also without allocating.

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};

use acl::{AclBinding, AclBindingFilter, Acls, Operation, ResourceType, Settings};
use log_core::FileError;
use serde::{Deserialize, Serialize};

use crate::config::Authorization;
use crate::security::Principal;

const FILE: &str = "acls";
const FORMAT: u32 = 1;

/// Why the ACLs could not be read at start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file is there but is not JSON of this format, or holds a binding CreateAcls would
    /// refuse.
    #[error("{path}: {reason}; fix or remove the file")]
    Corrupt {
        /// `<data-dir>/acls`.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is there but could not be read.
    #[error(transparent)]
    Io(#[from] FileError),
}

/// The file's form.
#[derive(Debug, Serialize, Deserialize)]
struct StoredFile {
    format: u32,
    acls: Vec<AclBinding>,
}

/// Whether requests are authorized, and by what.
#[derive(Debug)]
pub struct Authorizer {
    /// `None`: no authorizer configured (everything is allowed).
    enabled: Option<Box<Enabled>>,
}

#[derive(Debug)]
struct Enabled {
    dir: PathBuf,
    decider: RwLock<acl::Authorizer>,
    /// Serialises changes (set, then file).
    alter: Mutex<()>,
}

impl Authorizer {
    /// No authorizer: everything is allowed.
    pub fn disabled() -> Authorizer {
        Authorizer { enabled: None }
    }

    /// The authorizer `config` asks for, with the ACLs of `<data_dir>/acls` if it is enabled.
    /// A file that cannot be read as ACLs is an error naming it, not an empty set.
    pub fn open(data_dir: &Path, config: &Authorization) -> Result<Authorizer, LoadError> {
        if !config.enabled {
            return Ok(Authorizer::disabled());
        }
        let path = data_dir.join(FILE);
        let acls = match fs::read_to_string(&path) {
            Ok(text) => {
                let corrupt = |reason: String| LoadError::Corrupt {
                    path: path.clone(),
                    reason,
                };
                let file: StoredFile =
                    serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
                if file.format != FORMAT {
                    return Err(corrupt(format!(
                        "format {} (this lograil reads format {FORMAT})",
                        file.format
                    )));
                }
                for binding in &file.acls {
                    binding
                        .validate()
                        .map_err(|e| corrupt(format!("{binding}: {e}")))?;
                }
                Acls::from_bindings(file.acls)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Acls::default(),
            Err(e) => return Err(FileError::new("read", path, e).into()),
        };
        let settings = Settings {
            super_users: config.super_users.clone(),
            allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
        };
        tracing::info!(
            acls = acls.len(),
            super_users = settings.super_users.len(),
            allow_everyone_if_no_acl_found = settings.allow_everyone_if_no_acl_found,
            "authorizer enabled"
        );
        Ok(Authorizer {
            enabled: Some(Box::new(Enabled {
                dir: data_dir.to_path_buf(),
                decider: RwLock::new(acl::Authorizer::new(settings, acls)),
                alter: Mutex::new(()),
            })),
        })
    }

    /// Whether an authorizer is configured.
    pub fn is_enabled(&self) -> bool {
        self.enabled.is_some()
    }

    /// Whether `principal` from `host` may do `operation` on the resource. Always, without an
    /// authorizer.
    #[inline]
    pub fn authorize(
        &self,
        principal: &Principal,
        host: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        match &self.enabled {
            None => true,
            Some(enabled) => enabled.read().authorize(
                principal.as_str(),
                host.to_canonical(),
                operation,
                resource_type,
                name,
            ),
        }
    }

    /// Whether `principal` may do `operation` on some resource of `resource_type` (KIP-679).
    pub fn authorize_by_resource_type(
        &self,
        principal: &Principal,
        host: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        self.enabled.as_ref().is_none_or(|enabled| {
            enabled.read().authorize_by_resource_type(
                principal.as_str(),
                host.to_canonical(),
                operation,
                resource_type,
            )
        })
    }

    /// KIP-430's authorized operations on the resource: without an authorizer, every
    /// operation of its type, as Kafka answers.
    pub fn authorized_operations(
        &self,
        principal: &Principal,
        host: IpAddr,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        match &self.enabled {
            None => resource_type.all_operations(),
            Some(enabled) => enabled.read().authorized_operations(
                principal.as_str(),
                host.to_canonical(),
                resource_type,
                name,
            ),
        }
    }

    /// The ACLs `filter` matches (none without an authorizer).
    pub fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.enabled
            .as_ref()
            .map_or_else(Vec::new, |e| e.read().acls().matching(filter))
    }

    /// Adds `bindings` (those already there stay once), durably, all in one write. Blocking
    /// file work. Without an authorizer, nothing.
    pub fn create(&self, bindings: Vec<AclBinding>) -> Result<(), FileError> {
        let Some(enabled) = &self.enabled else {
            return Ok(());
        };
        enabled
            .change(|acls| {
                let mut changed = false;
                for binding in bindings {
                    changed |= acls.insert(binding);
                }
                changed.then_some(())
            })
            .map(Option::unwrap_or_default)
    }

    /// Deletes what each filter matches, durably, all in one write; per filter, what it
    /// deleted. Blocking file work. Without an authorizer, nothing.
    pub fn delete(&self, filters: &[AclBindingFilter]) -> Result<Vec<Vec<AclBinding>>, FileError> {
        let Some(enabled) = &self.enabled else {
            return Ok(vec![Vec::new(); filters.len()]);
        };
        enabled
            .change(|acls| {
                let deleted: Vec<Vec<AclBinding>> =
                    filters.iter().map(|f| acls.remove_matching(f)).collect();
                Some(deleted).filter(|d| d.iter().any(|d| !d.is_empty()))
            })
            .map(|deleted| deleted.unwrap_or_else(|| vec![Vec::new(); filters.len()]))
    }
}

impl Enabled {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, acl::Authorizer> {
        self.decider.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `edit` to a copy of the set; if it returns `Some`, the copy is written and then
    /// installed. Requests are decided on the old set until the new one is on disk.
    fn change<R>(&self, edit: impl FnOnce(&mut Acls) -> Option<R>) -> Result<Option<R>, FileError> {
        let _serial = self.alter.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = self.read().clone();
        let Some(result) = edit(next.acls_mut()) else {
            return Ok(None);
        };
        let file = StoredFile {
            format: FORMAT,
            acls: next.acls().bindings(),
        };
        let text = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
        log_core::io::replace_file(&self.dir, FILE, text.as_bytes())?;
        *self.decider.write().unwrap_or_else(PoisonError::into_inner) = next;
        Ok(Some(result))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(super_users: &str) -> Authorization {
        let mut config = Authorization::default();
        config.set_class("acl").unwrap();
        config.set_super_users(super_users).unwrap();
        config
    }

    fn binding(name: &str) -> AclBinding {
        AclBinding::from_codes((2, name, 3), ("User:alice", "*", 3, 3)).unwrap()
    }

    fn alice() -> Principal {
        Principal::user("alice")
    }

    fn here() -> IpAddr {
        "127.0.0.1".parse().unwrap()
    }

    #[test]
    fn without_an_authorizer_everything_is_allowed_and_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let authorizer = Authorizer::open(dir.path(), &Authorization::default()).unwrap();
        assert!(!authorizer.is_enabled());
        assert!(authorizer.authorize(&alice(), here(), Operation::Write, ResourceType::Topic, "t"));
        assert_eq!(
            authorizer.authorized_operations(&alice(), here(), ResourceType::Group, "g"),
            ResourceType::Group.all_operations()
        );
        authorizer.create(vec![binding("t")]).unwrap();
        assert!(!dir.path().join(FILE).exists());
    }

    #[test]
    fn acls_survive_reopening_and_deletes_too() {
        let dir = tempfile::tempdir().unwrap();
        let authorizer = Authorizer::open(dir.path(), &config("")).unwrap();
        assert!(!authorizer.authorize(&alice(), here(), Operation::Read, ResourceType::Topic, "t"));
        authorizer
            .create(vec![binding("t"), binding("u"), binding("t")])
            .unwrap();
        assert!(authorizer.authorize(&alice(), here(), Operation::Read, ResourceType::Topic, "t"));
        drop(authorizer);

        let reopened = Authorizer::open(dir.path(), &config("")).unwrap();
        assert_eq!(
            reopened.describe(&AclBindingFilter::ANY),
            vec![binding("t"), binding("u")]
        );
        let only_t = AclBindingFilter {
            name: Some("t".into()),
            ..AclBindingFilter::ANY
        };
        let deleted = reopened.delete(&[only_t.clone(), only_t]).unwrap();
        assert_eq!(deleted, vec![vec![binding("t")], vec![]]);
        drop(reopened);

        let again = Authorizer::open(dir.path(), &config("")).unwrap();
        assert_eq!(again.describe(&AclBindingFilter::ANY), vec![binding("u")]);
        assert!(!again.authorize(&alice(), here(), Operation::Read, ResourceType::Topic, "t"));
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE), "{not json").unwrap();
        let err = Authorizer::open(dir.path(), &config("")).unwrap_err();
        assert!(err.to_string().contains("acls"), "{err}");
        let invalid = r#"{"format":1,"acls":[{"pattern":{"resource_type":"CLUSTER","name":"c","pattern_type":"LITERAL"},"entry":{"principal":"User:a","host":"*","operation":"READ","permission":"ALLOW"}}]}"#;
        fs::write(dir.path().join(FILE), invalid).unwrap();
        let err = Authorizer::open(dir.path(), &config("")).unwrap_err();
        assert!(err.to_string().contains("kafka-cluster"), "{err}");
    }

    #[test]
    fn super_users_and_mapped_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let authorizer = Authorizer::open(dir.path(), &config("User:alice")).unwrap();
        assert!(authorizer.authorize(
            &alice(),
            here(),
            Operation::Alter,
            ResourceType::Cluster,
            "kafka-cluster"
        ));
        let restricted =
            AclBinding::from_codes((2, "t", 3), ("User:bob", "10.1.2.3", 3, 3)).unwrap();
        authorizer.create(vec![restricted]).unwrap();
        let bob = Principal::user("bob");
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert!(authorizer.authorize(&bob, mapped, Operation::Read, ResourceType::Topic, "t"));
    }
}
