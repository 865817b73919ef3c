//! Kafka's names of error codes, the label values of `lograil_response_errors_total` (each
//! handler lists the codes its response carries: `handlers::Handler::each_error`).

/// Kafka's name of an error code, as its tools and metrics spell it (`UNKNOWN_TOPIC_OR_PARTITION`);
/// the number for a code kafka-protocol does not know.
pub fn error_name(code: i16) -> String {
    match kafka_protocol::error::ResponseError::try_from_code(code) {
        Some(kafka_protocol::error::ResponseError::Unknown(_)) | None => code.to_string(),
        Some(error) => {
            let camel = error.to_string();
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(2), "CORRUPT_MESSAGE");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(9999), "9999");
    }
}
