//! Java `.properties` text into a [`ClientConfig`], as Kafka's tools read `--command-config`
//! and `--producer.config` files: `key=value`, `key: value` or `key value` lines, `#` and `!`
//! comment lines, a `\` at the end of a line continuing it, `\t \n \r \f \uXXXX` escapes, and
//! `\` before any other character standing for that character.

use std::path::Path;

use super::{ClientConfig, ConfigError};

impl ClientConfig {
    /// The properties of a Java `.properties` text (a later line replaces an earlier one).
    pub fn from_properties(text: &str) -> Result<ClientConfig, ConfigError> {
        let mut config = ClientConfig::new();
        for (line, logical) in logical_lines(text) {
            let (key, value) = split(&logical);
            let bad = |reason: &str| ConfigError::Properties {
                line,
                reason: reason.to_string(),
            };
            let key = unescape(key).map_err(bad)?;
            let value = unescape(value).map_err(bad)?;
            config.set(key, value);
        }
        Ok(config)
    }

    /// [`ClientConfig::from_properties`] of a file.
    pub fn from_properties_file(path: impl AsRef<Path>) -> Result<ClientConfig, ConfigError> {
        let path = path.as_ref();
        let failed = |reason: String| ConfigError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
        ClientConfig::from_properties(&text).map_err(|e| failed(e.to_string()))
    }

    /// Sets every property of `other` (its values replace these).
    pub fn merge(&mut self, other: &ClientConfig) -> &mut ClientConfig {
        for (k, v) in other.iter() {
            self.set(k, v);
        }
        self
    }
}

/// The logical lines (continuations joined, comments and blank lines dropped), each with the
/// number of the line it starts on, escapes still in.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_start_matches([' ', '\t', '\u{c}']);
        let continued = current.is_some();
        if !continued && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        // An odd number of trailing backslashes continues the line.
        let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
        let (body, more) = if trailing % 2 == 1 {
            (&line[..line.len() - 1], true)
        } else {
            (line, false)
        };
        let entry = current.get_or_insert_with(|| (i + 1, String::new()));
        entry.1.push_str(body);
        if !more {
            out.extend(current.take());
        }
    }
    out.extend(current);
    out
}

/// The key (up to the first unescaped `=`, `:` or white space) and the value (after white space,
/// one optional `=` or `:`, and white space).
fn split(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || c.is_whitespace() {
            end = i;
            break;
        }
    }
    let key = &line[..end];
    let mut rest = line[end..].trim_start_matches([' ', '\t', '\u{c}']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\u{c}']);
    }
    (key, rest)
}

fn unescape(s: &str) -> Result<String, &'static str> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .ok_or("a \\u escape needs four hex digits")?;
                out.push(char::from_u32(code).ok_or("a \\u escape names no character")?);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_properties_syntax() {
        let text = "# a comment\n\
                    ! another\n\
                    \n\
                    security.protocol=SASL_SSL\n\
                    sasl.mechanism : SCRAM-SHA-512\n\
                    client.id lograil\\u0021\n\
                    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n\
                    \x20   required username=\"alice\" password=\"a=b:c\";\n\
                    key\\=with\\:colon = v\n\
                    empty=\n\
                    tab=a\\tb\\\\\n";
        let c = ClientConfig::from_properties(text).unwrap();
        assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(c.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(c.get("client.id"), Some("lograil!"));
        assert_eq!(
            c.get("sasl.jaas.config"),
            Some(
                "org.apache.kafka.common.security.scram.ScramLoginModule required \
                 username=\"alice\" password=\"a=b:c\";"
            )
        );
        assert_eq!(c.get("key=with:colon"), Some("v"));
        assert_eq!(c.get("empty"), Some(""));
        assert_eq!(c.get("tab"), Some("a\tb\\"));
        assert_eq!(c.iter().count(), 7);
    }

    #[test]
    fn bad_escapes_name_the_line() {
        let e = ClientConfig::from_properties("a=1\nb=\\u12\n").unwrap_err();
        assert!(
            matches!(e, ConfigError::Properties { line: 2, .. }),
            "{e:?}"
        );
        let e = ClientConfig::from_properties_file("/nonexistent/client.properties").unwrap_err();
        assert!(
            e.to_string().contains("/nonexistent/client.properties"),
            "{e}"
        );
    }
}
