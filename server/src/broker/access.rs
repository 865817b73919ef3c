//! The access facade: who a connection is (SASL settings, credentials) and what it may do
//! (the authorizer's ACLs).

use std::sync::Arc;

use crate::authorizer::Authorizer;
use crate::security::Security;

/// Authentication and authorization, together.
#[derive(Debug)]
pub struct Access {
    /// SASL settings and the credentials connections authenticate against.
    pub security: Security,
    /// What each request may do (`authorizer.class.name`; none: everything).
    pub authorizer: Arc<Authorizer>,
}
