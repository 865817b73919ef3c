//! SASL authentication of a new connection (KIP-152), after ApiVersions: SaslHandshake v1
//! names the mechanism, then SaslAuthenticate requests (the highest version both sides serve,
//! v0–2) carry the mechanism's messages: one for PLAIN, two for SCRAM (client-first, then
//! client-final, whose answer the client checks: the broker proves it knows the password too).
//!
//! A refusal is [`NetError::Authentication`], which is not retriable: the connection is
//! dropped and the error goes to the caller, never into a reconnect loop.

use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerConnection;
use crate::config::security::SaslSettings;
use crate::error::{ErrorCode, NetError};

/// Authenticates `connection` with `sasl`'s mechanism and credentials.
pub(crate) async fn authenticate(
    connection: &BrokerConnection,
    sasl: &SaslSettings,
) -> Result<(), NetError> {
    let mechanism = sasl.mechanism.name();
    let refused = |code: Option<ErrorCode>, message: String| NetError::Authentication {
        addr: connection.addr().to_string(),
        mechanism,
        code,
        message,
    };
    // v1: the mechanism's messages go in SaslAuthenticate requests (v0 would send them bare).
    let version = connection.version::<SaslHandshakeRequest>(1)?;
    if version < 1 {
        return Err(NetError::Unsupported {
            addr: connection.addr().to_string(),
            api: kafka_protocol::messages::ApiKey::SaslHandshake,
        });
    }
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let response: SaslHandshakeResponse = connection.call_at(&request, version).await?;
    if let Some(code) = ErrorCode::try_from_code(response.error_code) {
        let enabled: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(refused(
            Some(code),
            format!("the broker enables {}", enabled.join(", ")),
        ));
    }

    let version = connection.version::<SaslAuthenticateRequest>(2)?;
    let step = |bytes: Vec<u8>| async move {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let response: SaslAuthenticateResponse = connection.call_at(&request, version).await?;
        match ErrorCode::try_from_code(response.error_code) {
            None => Ok(response.auth_bytes),
            Some(code) => Err(refused(
                Some(code),
                response
                    .error_message
                    .map_or_else(|| code.to_string(), |m| m.to_string()),
            )),
        }
    };
    let password = sasl.password.0.as_str();
    match sasl.mechanism.scram() {
        None => {
            step(sasl::plain::encode(&sasl.username, password)).await?;
        }
        Some(hash) => {
            // The broker's part is checked: a wrong server signature means a broker that does
            // not know the password (or a man in the middle), and ends the exchange.
            let client_refused = |e: sasl::scram::ScramError| refused(None, e.to_string());
            let (mut exchange, client_first) =
                sasl::scram::ClientExchange::new(hash, &sasl.username, password);
            let server_first = step(client_first).await?;
            let client_final = exchange.respond(&server_first).map_err(client_refused)?;
            let server_final = step(client_final).await?;
            exchange.verify(&server_final).map_err(client_refused)?;
        }
    }
    Ok(())
}
