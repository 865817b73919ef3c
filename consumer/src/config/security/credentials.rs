//! SASL credentials from the properties: `sasl.mechanism`, and the user name and password from
//! a `sasl.jaas.config` (PlainLoginModule or ScramLoginModule) or from `sasl.username` and
//! `sasl.password`. The password prints as `[redacted]`, and no error quotes it.

use std::fmt;

use super::{security, SaslMechanism, SecurityProtocol};
use crate::config::{ConfigError, Reader};

/// A secret that prints as `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// SASL credentials and mechanism.
#[derive(Debug, Clone)]
pub(crate) struct SaslSettings {
    pub(crate) mechanism: SaslMechanism,
    pub(crate) username: String,
    pub(crate) password: Secret,
}

pub(super) struct SaslProperties<'a> {
    mechanism: Option<&'a str>,
    jaas: Option<&'a str>,
    username: Option<&'a str>,
    password: Option<&'a str>,
}

impl<'a> SaslProperties<'a> {
    pub(super) fn read(r: &mut Reader<'a>) -> SaslProperties<'a> {
        SaslProperties {
            mechanism: r.raw("sasl.mechanism").filter(|v| !v.is_empty()),
            jaas: r.raw("sasl.jaas.config").filter(|v| !v.is_empty()),
            username: r.raw("sasl.username").filter(|v| !v.is_empty()),
            // (Trimmed, as every value: a password with outer spaces goes in sasl.jaas.config,
            // quoted.)
            password: r.raw("sasl.password"),
        }
    }

    pub(super) fn build(self, protocol: SecurityProtocol) -> Result<SaslSettings, ConfigError> {
        let mechanism = match self.mechanism {
            None => {
                return Err(security(
                    "sasl.mechanism",
                    format!(
                        "{} needs a mechanism this client speaks: PLAIN, SCRAM-SHA-256 or \
                         SCRAM-SHA-512 (the Java client's default, GSSAPI, is not supported)",
                        protocol.name()
                    ),
                ))
            }
            Some(v) => SaslMechanism::from_name(v).ok_or_else(|| ConfigError::Invalid {
                name: "sasl.mechanism",
                value: v.to_string(),
                expected: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are \
                           not supported)",
            })?,
        };
        let (username, password) = match (self.jaas, self.username, self.password) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(security(
                    "sasl.jaas.config",
                    "set sasl.jaas.config or sasl.username and sasl.password, not both",
                ))
            }
            (Some(jaas), None, None) => parse_jaas(jaas)?,
            (None, Some(user), Some(password)) => (user.to_string(), password.to_string()),
            (None, Some(_), None) => {
                return Err(security(
                    "sasl.password",
                    "sasl.username needs sasl.password",
                ))
            }
            (None, None, Some(_)) => {
                return Err(security(
                    "sasl.username",
                    "sasl.password needs sasl.username",
                ))
            }
            (None, None, None) => {
                return Err(security(
                    "sasl.jaas.config",
                    format!(
                        "{} needs credentials: set sasl.jaas.config (e.g. \
                         org.apache.kafka.common.security.scram.ScramLoginModule required \
                         username=\"alice\" password=\"...\";) or sasl.username and \
                         sasl.password",
                        protocol.name()
                    ),
                ))
            }
        };
        Ok(SaslSettings {
            mechanism,
            username,
            password: Secret(password),
        })
    }
}

const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// The user name and password of a `sasl.jaas.config` of one PlainLoginModule or
/// ScramLoginModule (either serves any of PLAIN and SCRAM, as in the Java client):
/// `<module> required username="alice" password="secret";`, values quoted (with `\` escapes)
/// or bare. Errors never quote the text (it holds the password).
fn parse_jaas(text: &str) -> Result<(String, String), ConfigError> {
    let err = |reason: &str| security("sasl.jaas.config", reason.to_string());
    let mut lexer = Lexer {
        rest: text.trim_start(),
    };
    let module = lexer.word();
    if module != PLAIN_MODULE && module != SCRAM_MODULE {
        return Err(security(
            "sasl.jaas.config",
            format!(
                "login module {module:?} is not supported: use {PLAIN_MODULE} or {SCRAM_MODULE}"
            ),
        ));
    }
    let flag = lexer.word();
    if !["required", "requisite", "sufficient", "optional"].contains(&flag) {
        return Err(err(
            "expected a control flag (required) after the login module's name",
        ));
    }
    let (mut username, mut password) = (None, None);
    loop {
        lexer.skip_space();
        if lexer.eat(';') {
            break;
        }
        if lexer.rest.is_empty() {
            return Err(err("the login module's options must end with ';'"));
        }
        let key = lexer.word().to_string();
        if key.is_empty() {
            return Err(err("expected an option name=value"));
        }
        lexer.skip_space();
        if !lexer.eat('=') {
            return Err(security(
                "sasl.jaas.config",
                format!("option {key:?} needs '=' and a value"),
            ));
        }
        lexer.skip_space();
        let value = lexer
            .value()
            .map_err(|reason| security("sasl.jaas.config", format!("option {key:?}: {reason}")))?;
        match key.as_str() {
            "username" => username = Some(value),
            "password" => password = Some(value),
            "tokenauth" if value.eq_ignore_ascii_case("true") => {
                return Err(err("delegation tokens (tokenauth=true) are not supported"))
            }
            // Other options (user_<name> of a broker's config, …) mean nothing to a client.
            _ => {}
        }
    }
    lexer.skip_space();
    if !lexer.rest.is_empty() {
        return Err(err(
            "holds more than one login module (one is allowed, ending with ';')",
        ));
    }
    match (username, password) {
        (Some(u), Some(p)) if !u.is_empty() => Ok((u, p)),
        _ => Err(err(
            "the login module needs username=\"...\" and password=\"...\"",
        )),
    }
}

struct Lexer<'a> {
    rest: &'a str,
}

impl<'a> Lexer<'a> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// A bare token: up to white space, `=` or `;`.
    fn word(&mut self) -> &'a str {
        self.skip_space();
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == ';')
            .unwrap_or(self.rest.len());
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        word
    }

    /// A quoted value (`"..."`, `\` escaping the next character) or a bare token.
    fn value(&mut self) -> Result<String, &'static str> {
        if !self.eat('"') {
            let word = self.word();
            if word.is_empty() {
                return Err("expected a value");
            }
            return Ok(word.to_string());
        }
        let mut out = String::new();
        let mut chars = self.rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &self.rest[i + 1..];
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, c)) => out.push(c),
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err("a quoted value is not closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_configs_parse_with_quotes_and_escapes() {
        let (u, p) = parse_jaas(
            "org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"alice\" password=\"s3c\\\"r;e t\\\\\";",
        )
        .unwrap();
        assert_eq!(u, "alice");
        assert_eq!(p, "s3c\"r;e t\\");
        let (u, p) = parse_jaas(
            "  org.apache.kafka.common.security.plain.PlainLoginModule   required\n username=bob \
             password = \"x\" ; ",
        )
        .unwrap();
        assert_eq!((u.as_str(), p.as_str()), ("bob", "x"));
    }

    #[test]
    fn bad_jaas_configs_are_refused_without_the_password() {
        let cases = [
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
            "org.apache.kafka.common.security.plain.PlainLoginModule username=\"a\" password=\"hunter2\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"hunter2\"",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"hunter2;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required password=\"hunter2\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"hunter2\"; \
             org.apache.kafka.common.security.plain.PlainLoginModule required username=\"b\" password=\"c\";",
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"hunter2\" tokenauth=true;",
        ];
        for case in cases {
            let e = parse_jaas(case).unwrap_err();
            let text = format!("{e} {e:?}");
            assert!(
                matches!(
                    e,
                    ConfigError::Security {
                        name: "sasl.jaas.config",
                        ..
                    }
                ),
                "{case}: {e:?}"
            );
            assert!(!text.contains("hunter2"), "{text}");
        }
    }

    #[test]
    fn secrets_do_not_print() {
        let s = SaslSettings {
            mechanism: SaslMechanism::Plain,
            username: "alice".into(),
            password: Secret("hunter2".into()),
        };
        let text = format!("{s:?}");
        assert!(
            text.contains("alice") && !text.contains("hunter2"),
            "{text}"
        );
    }
}
