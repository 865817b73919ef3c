//! SCRAM credentials (KIP-554: set with AlterUserScramCredentials, listed with
//! DescribeUserScramCredentials), kept in `<data-dir>/scram-credentials`: JSON, written
//! atomically, readable by the broker's user only. Only what RFC 5802 has a server keep is
//! stored (salt, iterations, StoredKey, ServerKey), never a password; nothing of it is logged.
//! PLAIN users come from a file of `name=password` lines (`--sasl-plain-users-file`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use log_core::FileError;
use sasl::scram::{Credential, Hash};
use serde::{Deserialize, Serialize};

const FILE: &str = "scram-credentials";
const FORMAT: u32 = 1;

/// Why the credentials could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialsError {
    /// Reading, writing or restricting (chmod 600) a file failed.
    #[error(transparent)]
    File(#[from] FileError),
    /// `scram-credentials` is not JSON of this format (or could not be serialised).
    #[error("{path}: not a credentials file of this lograil: {reason}")]
    Corrupt {
        /// `<data-dir>/scram-credentials`.
        path: PathBuf,
        /// The JSON error, or the file's unknown format number.
        reason: String,
    },
    /// A line of the PLAIN users file that is not a comment, blank, or `name=password` with
    /// both sides non-empty.
    #[error("{path}:{line}: expected name=password")]
    PlainUsers {
        /// `--sasl-plain-users-file`.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
    },
}

#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    /// By user, then by mechanism.
    users: BTreeMap<String, Vec<Credential>>,
}

/// Every user's SCRAM credentials.
#[derive(Debug)]
pub struct ScramCredentials {
    dir: PathBuf,
    users: RwLock<BTreeMap<String, Vec<Credential>>>,
}

/// One change of AlterUserScramCredentials.
#[derive(Debug)]
pub enum Change {
    /// Gives the user this credential, replacing one of the same mechanism.
    Upsert(String, Credential),
    /// Removes the user's credential of this mechanism; the user goes with its last one.
    Delete(String, Hash),
}

impl ScramCredentials {
    /// Reads `<data_dir>/scram-credentials`, if there is one.
    pub fn open(data_dir: &Path) -> Result<ScramCredentials, CredentialsError> {
        let path = data_dir.join(FILE);
        let users = match std::fs::read(&path) {
            Ok(bytes) => {
                restrict(&path)?;
                let stored: Stored =
                    serde_json::from_slice(&bytes).map_err(|e| CredentialsError::Corrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                if stored.format != FORMAT {
                    return Err(CredentialsError::Corrupt {
                        path,
                        reason: format!("format {}", stored.format),
                    });
                }
                stored.users
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(FileError::new("read", path, e).into()),
        };
        Ok(ScramCredentials {
            dir: data_dir.to_path_buf(),
            users: RwLock::new(users),
        })
    }

    /// `user`'s credential for `hash`.
    pub fn get(&self, user: &str, hash: Hash) -> Option<Credential> {
        let users = self.users.read().unwrap_or_else(PoisonError::into_inner);
        users.get(user)?.iter().find(|c| c.hash == hash).cloned()
    }

    /// Every user with their mechanisms and iterations, for DescribeUserScramCredentials.
    pub fn describe(&self) -> BTreeMap<String, Vec<(Hash, u32)>> {
        let users = self.users.read().unwrap_or_else(PoisonError::into_inner);
        users
            .iter()
            .map(|(user, creds)| {
                let list = creds.iter().map(|c| (c.hash, c.iterations)).collect();
                (user.clone(), list)
            })
            .collect()
    }

    /// Applies `changes` and writes the file (blocking: an fsync). A deletion of a credential
    /// that does not exist is reported as `false` at its index, and changes nothing.
    pub fn alter(&self, changes: Vec<Change>) -> Result<Vec<bool>, CredentialsError> {
        let mut users = self.users.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = users.clone();
        let mut applied = Vec::with_capacity(changes.len());
        for change in changes {
            applied.push(match change {
                Change::Upsert(user, credential) => {
                    let list = next.entry(user).or_default();
                    list.retain(|c| c.hash != credential.hash);
                    list.push(credential);
                    true
                }
                Change::Delete(user, hash) => match next.get_mut(&user) {
                    Some(list) if list.iter().any(|c| c.hash == hash) => {
                        list.retain(|c| c.hash != hash);
                        if list.is_empty() {
                            next.remove(&user);
                        }
                        true
                    }
                    _ => false,
                },
            });
        }
        let stored = Stored {
            format: FORMAT,
            users: next,
        };
        let path = self.dir.join(FILE);
        let bytes = serde_json::to_vec(&stored).map_err(|e| CredentialsError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        log_core::io::replace_private_file(&self.dir, FILE, &bytes)?;
        *users = stored.users;
        Ok(applied)
    }
}

/// Makes a credentials file that other users may read or write the broker's user's alone
/// (0600), saying so: a file of an older lograil, or one copied in with the default mode.
fn restrict(path: &Path) -> Result<(), FileError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| FileError::new("stat", path, e))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| FileError::new("chmod", path, e))?;
            tracing::warn!(path = %path.display(), mode = format_args!("{:o}", mode & 0o777), "the SCRAM credentials file was readable by other users; its mode is now 600");
        }
    }
    Ok(())
}

/// PLAIN users and their passwords, from `name=password` lines (`#` comments).
#[derive(Default)]
pub struct PlainUsers(HashMap<String, String>);

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlainUsers({} users)", self.0.len())
    }
}

impl PlainUsers {
    /// Reads `--sasl-plain-users-file`: names are trimmed, passwords kept as written (the
    /// line's ends trimmed), and a later line of the same name wins.
    pub fn load(path: &Path) -> Result<PlainUsers, CredentialsError> {
        let text = std::fs::read_to_string(path).map_err(|e| FileError::new("read", path, e))?;
        let mut users = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, password) = line
                .split_once('=')
                .filter(|(name, password)| !name.trim().is_empty() && !password.is_empty())
                .ok_or_else(|| CredentialsError::PlainUsers {
                    path: path.to_path_buf(),
                    line: n + 1,
                })?;
            users.insert(name.trim().to_string(), password.to_string());
        }
        Ok(PlainUsers(users))
    }

    /// Whether `user` exists with `password` (compared in constant time).
    pub fn check(&self, user: &str, password: &str) -> bool {
        let Some(known) = self.0.get(user) else {
            return false;
        };
        let (a, b) = (known.as_bytes(), password.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_credentials_file_is_private_from_its_first_byte_and_made_so_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let credentials = ScramCredentials::open(dir.path()).unwrap();
        let alice = Credential::generate(Hash::Sha256, "secret", 4096);
        credentials
            .alter(vec![Change::Upsert("alice".into(), alice)])
            .unwrap();
        assert_eq!(mode(&path), 0o600);

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let reopened = ScramCredentials::open(dir.path()).unwrap();
        assert!(reopened.get("alice", Hash::Sha256).is_some());
        assert_eq!(mode(&path), 0o600, "made private at open");
    }
}
