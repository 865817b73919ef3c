//! Kafka's regular expressions in requests (KIP-848's `subscribed_topic_regex`,
//! ListTransactions' `transactional_id_pattern`): Kafka compiles them with RE2J and asks
//! `matches()`, a match of the whole name; the `regex` crate speaks RE2's syntax too.

/// `source` compiled to match whole names only, or why it is not a regular expression.
pub(super) fn whole(source: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{source})$"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_pattern_matches_whole_names_only() {
        let p = whole("orders-.*").unwrap();
        assert!(p.is_match("orders-eu"));
        assert!(!p.is_match("old-orders-eu"));
        let alternatives = whole("a|b").unwrap();
        assert!(alternatives.is_match("a") && !alternatives.is_match("ab"));
        assert!(whole("w(.*").is_err());
    }
}
